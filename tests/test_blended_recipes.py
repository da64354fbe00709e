"""The recipe "auto" as one model of three members (core.models.transformer.training
.blend_recipes): the frozen-encoder head saved beside the fine-tuned transformer, routed by its
own serving graph, and the same choices, bit for bit, from the same seed and data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from core.models.blend import BAG_OF_WORDS, FROZEN, NEURAL, Blend
from core.models.card import FILES_KEY, file_digest, read_card
from core.models.classify import classification_columns, classify_one
from core.models.graph import FP32, FROZEN_FILES
from core.models.registry import FROZEN_KEY, load_model
from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from tests.conftest import THREE_MEMBERS, make_dataset, separable_rows

TEXTS = ["the upi payment failed twice", "my card was charged by a stranger", "kyc papers"]


def _config(backbone: Path, recipe: str) -> TrainConfig:
    return TrainConfig(backbone=str(backbone), recipe=recipe, lr=1e-2, batch_size=8,
                       max_length=32, max_steps=2, device="cpu", seed=3)  # fmt: skip


@pytest.fixture(scope="module")
def three_members(both_recipes, three_member_model_dir: Path):
    """The saved three-member model (tests.conftest.three_member_model_dir) and what it was
    saved from: the fine-tuned run with the quick run's head as its frozen encoder."""
    full, quick, _ = both_recipes
    result = replace(full, frozen=quick.neural, frozen_head_strength=quick.head_strength,
                     blend=Blend(**THREE_MEMBERS))  # fmt: skip
    return result, three_member_model_dir


def test_the_frozen_head_is_saved_pinned_and_given_its_own_serving_graph(three_members):
    result, folder = three_members
    card = read_card(folder)
    saved = card[FROZEN_KEY]
    assert saved["weights"] == FROZEN_FILES.weights
    assert saved["head_strength"] == result.frozen_head_strength
    assert card["blend"]["shares"] == {NEURAL: 0.4, FROZEN: 0.4, BAG_OF_WORDS: pytest.approx(0.2)}
    graphs = [FROZEN_FILES.graphs[p] for p in saved["serving"]["graphs"]]
    for name in (FROZEN_FILES.weights, *graphs):
        assert card[FILES_KEY][name] == file_digest(folder / name)
    assert saved["serving"]["checks"][FP32]["max_prob_diff"] < 1e-4


def test_the_loaded_frozen_head_gives_the_trained_heads_probabilities(three_members):
    result, folder = three_members
    loaded = load_model(folder, device="cpu", precision="fp32")
    assert loaded.frozen is not None and loaded.routing["runtime"] == "onnxruntime"
    saved, trained = loaded.frozen.neural.model.state_dict(), result.frozen.model.state_dict()
    assert saved.keys() == trained.keys()
    assert all(torch.equal(saved[k], trained[k].to("cpu")) for k in saved)
    expected = loaded.frozen.neural.predict_proba(TEXTS)  # torch fp32, as the graph was checked
    np.testing.assert_allclose(loaded.frozen_probs(TEXTS), expected, atol=1e-4)
    # and the fine-tuned transformer is not the frozen head
    assert not np.allclose(loaded.scorer.predict_proba(TEXTS), expected, atol=1e-3)


def test_classify_routes_by_all_three_members(three_members):
    _, folder = three_members
    loaded = load_model(folder, device="cpu", precision="fp32")
    one = classify_one(loaded, TEXTS[0])
    shown = {name: np.array([list(p.values())]) for name, p in one.probabilities.items()}
    decision = loaded.blend.combine(shown["transformer"], shown["bag of words"], shown[FROZEN])
    assert one.row["predicted_label"] == loaded.classes[int(decision.argmax())]
    np.testing.assert_allclose(shown["decision"], decision, atol=1e-12)
    seen = []
    table = classification_columns(loaded, TEXTS, on_progress=seen.append)
    assert table.loc[0, "predicted_label"] == one.row["predicted_label"]
    assert table.loc[0, "confidence"] == pytest.approx(one.row["confidence"])
    assert seen[-1].done == seen[-1].total == 2 * len(TEXTS)  # two encoder passes counted


def test_explain_json_gives_each_members_answer_and_the_decision_of_all_three(three_members):
    import json

    from core.models.classifier import Prediction
    from tests.helpers import run_cli

    _, folder = three_members
    result = run_cli("explain", "--model", str(folder), TEXTS[1], "--steps", "2", "--json")
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    loaded = load_model(folder)
    frozen = loaded.frozen_prediction(TEXTS[1])
    assert said["frozen_encoder"]["label"] == frozen.label
    assert said["decision"]["carried_by"] == [NEURAL, FROZEN]
    assert said["decision"]["shares"] == loaded.blend.shares
    neural = Prediction(said["transformer"]["label"], said["transformer"]["probabilities"])
    bow = Prediction(said["bow"]["label"], said["bow"]["probabilities"])
    assert said["decision"]["label"] == loaded.blend.decide(neural, bow, frozen).label


def test_a_frozen_weights_file_that_does_not_fit_is_refused(three_members, tmp_path: Path):
    _, folder = three_members
    import shutil

    from core.models.card import folder_digests

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    torch.manual_seed(0)
    from safetensors.torch import save_file

    save_file({"classifier.weight": torch.zeros(2, 2)}, str(copy / FROZEN_FILES.weights))
    card = read_card(copy)
    card[FILES_KEY] = folder_digests(copy)
    (copy / "card.json").write_text(__import__("json").dumps(card), encoding="utf-8")
    with pytest.raises(ValueError, match="disagrees with its weights|does not fit"):
        load_model(copy, device="cpu", precision="fp32")


def test_blend_recipes_keeps_the_members_that_pay_and_needs_no_new_predictions(both_recipes):
    from core.models.transformer.training import blend_recipes

    full, quick, val = both_recipes
    blended = blend_recipes(full, quick, val, rows_per_desk=16)
    shares = blended.blend.shares
    choice = blended.recipe_choice
    # the saved model is the fine-tuned run's exactly where that run takes part
    assert (blended.neural is full.neural) == (blended.config.recipe == FULL)
    assert (blended.config.recipe == FULL) == (choice["chosen"] == FULL)
    assert (blended.frozen is not None) == (FROZEN in shares)
    assert set(choice["validation_accuracy"]) == {FULL, QUICK, "bag of words", AUTO}
    assert blended.decision_report.accuracy == pytest.approx(choice["validation_accuracy"][AUTO])


def _state(result) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in result.neural.model.state_dict().items()}


def test_the_same_seed_and_data_give_the_same_model_and_choices_bit_for_bit(tiny_bert_dir: Path):
    from core.models.transformer.training import train_models

    train, val = make_dataset(*separable_rows(16)), make_dataset(*separable_rows(6))
    runs = [train_models(train, val, _config(tiny_bert_dir, AUTO)) for _ in range(2)]
    first, second = runs
    assert first.blend == second.blend
    timeless = [{k: v for k, v in r.recipe_choice.items() if k != "train_seconds"} for r in runs]
    assert timeless[0] == timeless[1]  # each recipe's seconds are a clock's, not a choice
    assert first.review == second.review
    assert first.head_strength == second.head_strength
    assert (first.frozen is None) == (second.frozen is None)
    one, two = _state(first), _state(second)
    assert one.keys() == two.keys()
    assert all(torch.equal(one[k], two[k]) for k in one)  # bit for bit, not merely close
    np.testing.assert_array_equal(first.detector.reference, second.detector.reference)
    np.testing.assert_array_equal(first.bow.predict_proba(TEXTS), second.bow.predict_proba(TEXTS))
