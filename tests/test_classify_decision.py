"""The routing decision in core.models.classify: the model's blend decides, each model's own
answer stays beside it, and the review flag follows the decision's confidence."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.models.blend import BLEND, NEURAL_ONLY, Blend
from core.models.classify import classification_columns, classify_one
from core.models.registry import load_model
from tests.helpers import TINY_TEXTS

THRESHOLD = 0.5
TEXTS = [*TINY_TEXTS[:6], ""]


@pytest.fixture(scope="module")
def loaded(tiny_model_dir):
    return load_model(tiny_model_dir)


@pytest.mark.parametrize("blend", [NEURAL_ONLY, Blend(0.0), Blend(0.4, 2.0, 0.5)])
def test_the_decision_is_the_blend_and_each_model_keeps_its_own_answer(loaded, blend):
    model = replace(loaded, blend=blend)
    columns = classification_columns(model, TEXTS, review_threshold=THRESHOLD)
    classes = [str(c) for c in loaded.neural.classes_]
    neural = loaded.neural.predict_proba(TEXTS)
    bow = loaded.bow.predict_proba(TEXTS)
    expected = blend.combine(neural, bow)
    decided = columns[[f"prob_{c}" for c in classes]].to_numpy()
    np.testing.assert_allclose(decided, expected, rtol=1e-5, atol=1e-6)
    assert columns["predicted_label"].tolist() == [classes[i] for i in expected.argmax(1)]
    assert columns["transformer_label"].tolist() == [classes[i] for i in neural.argmax(1)]
    assert columns["bow_label"].tolist() == [classes[i] for i in bow.argmax(1)]
    np.testing.assert_allclose(columns["confidence"], expected.max(1), rtol=1e-5)
    np.testing.assert_allclose(columns["transformer_confidence"], neural.max(1), rtol=1e-5)
    assert set(columns["decided_by"]) == {blend.decided_by}
    unsure = (expected.max(1) < THRESHOLD).tolist()
    assert columns["needs_review"].tolist()[:-1] == unsure[:-1]
    assert columns["needs_review"].iloc[-1]  # an empty text always goes to a person


def test_one_complaint_shows_the_decision_only_when_it_mixes_both(loaded):
    text = TINY_TEXTS[0]
    alone = classify_one(replace(loaded, blend=NEURAL_ONLY), text, review_threshold=0.5)
    assert set(alone.probabilities) == {"transformer", "bag of words"}
    assert alone.row["predicted_label"] == alone.row["transformer_label"]
    mixed = classify_one(replace(loaded, blend=Blend(0.5)), text, review_threshold=0.5)
    assert set(mixed.probabilities) == {"transformer", "bag of words", "decision"}
    expected = Blend(0.5).combine(
        np.array([list(mixed.probabilities["transformer"].values())]),
        np.array([list(mixed.probabilities["bag of words"].values())]),
    )[0]
    np.testing.assert_allclose(list(mixed.probabilities["decision"].values()), expected)
    assert mixed.row["decided_by"] == BLEND
    with pytest.raises(ValueError, match="review threshold"):
        classify_one(loaded, text, review_threshold=1.5)
