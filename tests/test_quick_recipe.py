"""The quick recipe: frozen encoder, embeddings once, a fitted linear head saved as a mean-pooled
model folder that loads and classifies like any other."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from core.access import OPERATOR
from core.data.privacy import mask_texts
from core.models.device import Runtime
from core.models.registry import list_models, load_model, save_model
from core.models.transformer.config import MINILM, QUICK_BACKBONE_ENV, TrainConfig, quick_backbone
from core.models.transformer.quick import embed_texts, fit_linear_head
from core.models.transformer.training import train_models
from tests.conftest import make_dataset, separable_rows


def quick(backbone, **overrides) -> TrainConfig:
    options = dict(backbone=str(backbone), recipe="quick", max_length=32, device="cpu")
    return TrainConfig(**{**options, **overrides})


@pytest.fixture(scope="module")
def split():
    texts, labels = separable_rows(10)
    val_texts, val_labels = separable_rows(3)
    return make_dataset(texts, labels), make_dataset(val_texts, val_labels)


@pytest.fixture(scope="module")
def quick_result(tiny_bert_dir, split):
    progress = []
    result = train_models(*split, quick(tiny_bert_dir), on_progress=progress.append)
    return result, progress


def test_the_head_is_the_fitted_regression_and_the_encoder_is_untouched(
    tiny_bert_dir, split, quick_result
):
    result, _ = quick_result
    model = result.neural.model
    from core.models.transformer.backbone import load_backbone

    fresh, _ = load_backbone(quick(tiny_bert_dir), result.neural.classes_)
    for (name, before), after in zip(
        fresh.encoder.state_dict().items(), model.encoder.state_dict().values(), strict=True
    ):
        assert torch.equal(before, after), name  # the encoder stayed frozen
    texts = list(split[1].texts)
    features = embed_texts(
        model, result.neural.tokenizer, mask_texts(texts), max_length=32,
        runtime=Runtime.resolve("cpu", "fp32"),
    )  # fmt: skip
    logits = features @ model.classifier.weight.detach().numpy().T
    logits += model.classifier.bias.detach().numpy()
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    classifier = result.neural
    np.testing.assert_allclose(
        _fp32(classifier).predict_proba(texts), expected, rtol=1e-4, atol=1e-5
    )
    assert result.head_strength in (0.3, 1.0, 3.0, 10.0, 30.0)
    assert len(result.history) == 1 and result.best_epoch == 1
    assert result.history[0].val_accuracy == result.neural_report.accuracy


def test_progress_counts_embedded_rows_then_reports_the_head(split, quick_result):
    _, progress = quick_result
    rows = len(split[0]) + len(split[1])
    embed = [p for p in progress if p.phase == "embed"]
    assert [p.done for p in embed] == sorted(p.done for p in embed)
    assert embed[-1].done == rows and all(p.total == rows for p in progress)
    assert progress[-1].phase == "head" and progress[-1].detail.val_macro_f1 is not None


def test_a_saved_quick_model_loads_and_predicts_the_same(quick_result, split, tmp_path):
    result, _ = quick_result
    folder = save_model(result, tmp_path, "quick-one", actor=OPERATOR)
    loaded = load_model(folder)
    texts = list(split[1].texts)
    np.testing.assert_allclose(
        _fp32(loaded.neural).predict_proba(texts),
        _fp32(result.neural).predict_proba(texts), atol=1e-6,
    )  # fmt: skip
    assert loaded.card["recipe"] == "quick" and loaded.card["head_strength"] > 0
    assert [s.recipe for s in list_models(tmp_path)] == ["quick"]


def test_a_cancelled_quick_run_returns_no_model(tiny_bert_dir, split):
    cancel = threading.Event()
    cancel.set()
    result = train_models(*split, quick(tiny_bert_dir), cancel=cancel)
    assert result.cancelled and result.neural is None


def test_a_binary_head_gives_the_regressions_probabilities():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(60, 5))
    labels = (features[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(int)
    head = fit_linear_head(
        features, labels, features[:20], labels[:20], n_classes=2, class_weights=False,
        strengths=(1.0,),
    )  # fmt: skip
    logits = head.logits(features)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    reference = LogisticRegression(C=1.0, max_iter=1000).fit(features, labels)
    np.testing.assert_allclose(probs, reference.predict_proba(features), atol=1e-4)


def test_validation_chooses_the_strength():
    rng = np.random.default_rng(1)
    features = rng.normal(size=(90, 4))
    labels = features[:, :3].argmax(1)
    val = rng.normal(size=(30, 4))
    head = fit_linear_head(
        features, labels, val, val[:, :3].argmax(1), n_classes=3, strengths=(1e-4, 10.0)
    )
    assert head.strength == 10.0 and head.val_accuracy > 0.8  # 1e-4 barely separates


def _fp32(classifier):
    """The same classifier in fp32 ("auto" picks bf16 on CPUs with bf16 units)."""
    from core.models.transformer.inference import NeuralClassifier

    return NeuralClassifier(
        classifier.model, classifier.tokenizer, classifier.classes_,
        max_length=classifier.max_length, precision="fp32",
    )  # fmt: skip


@pytest.mark.parametrize("recipe", ["full", "quick"])
def test_the_duration_estimate_counts_every_pass_the_run_makes(tiny_bert_dir, split, recipe):
    from core.models.transformer.estimate import estimate_duration

    train, val = split  # 30 and 9 rows
    config = quick(tiny_bert_dir, recipe=recipe, epochs=3, batch_size=8)
    estimate = estimate_duration(train, val, config)
    # quick: one embedding batch, then the report's validation batch; full: 4 steps an epoch
    # and one validation batch, 3 epochs, then the report's validation batch
    expected = 1 + 1 if recipe == "quick" else 4 * 3 + 1 * 3 + 1
    assert estimate.passes == expected and estimate.recipe == recipe
    assert min(estimate.load_s, estimate.epoch_s, estimate.rest_s) > 0
    if recipe == "full":
        longer = estimate.for_budget(6, None)
        assert longer.passes == 4 * 6 + 6 + 1
        fixed = estimate.load_s + estimate.rest_s + estimate.report_s  # whatever the epochs
        assert longer.seconds - fixed == pytest.approx(2 * (estimate.seconds - fixed))
    capped = estimate_duration(
        train, val, quick(tiny_bert_dir, recipe="full", batch_size=8, max_steps=2)
    )
    assert capped.passes == 2 + 1 + 1  # two steps, one epoch's validation, the report


def test_the_auto_estimate_adds_the_full_run_only_where_the_data_call_for_it(tiny_bert_dir, split):
    from core.models.transformer.estimate import estimate_duration

    train, val = split  # 10 rows a desk: too few for the full fine-tune
    few = estimate_duration(train, val, quick(tiny_bert_dir, recipe="auto", batch_size=8))
    assert few.recipe == "quick" and few.passes == 1 + 1
    many = make_dataset(*separable_rows(16))  # 16 rows a desk: quick, then full
    both = estimate_duration(many, val, quick(tiny_bert_dir, recipe="auto", epochs=1,
                                               batch_size=8))  # fmt: skip
    assert both.recipe == "full" and both.passes == 6 + 1 + 1  # 48 rows, batches of 8
    full_alone = estimate_duration(many, val, quick(tiny_bert_dir, recipe="full", epochs=1,
                                                     batch_size=8))  # fmt: skip
    assert both.rest_s > full_alone.rest_s  # the quick run's seconds come on top


def test_the_estimate_reads_as_seconds_or_minutes():
    from core.models.transformer.estimate import DurationEstimate

    def text(seconds: float) -> str:
        return DurationEstimate("full", seconds, 0.0, 0.0, 0.0, 1, 0).text()

    assert (text(2), text(44), text(89), text(400)) == (
        "about 5 s",
        "about 45 s",
        "about 90 s",
        "about 7 min",
    )


def test_full_fine_tuning_can_start_from_the_quick_head(tiny_bert_dir, split):
    progress = []
    config = quick(tiny_bert_dir, recipe="full", head_init="probe", epochs=1, lr=1e-2)
    result = train_models(*split, config, on_progress=progress.append)
    phases = [p.phase for p in progress]
    assert phases.index("head") < phases.index("train")  # probe first, then every weight
    assert phases[-1] == "train" and result.best_epoch == 1 and not result.cancelled
    with pytest.raises(ValueError, match="probe"):
        TrainConfig(backbone="tiny", head_init="probe")


def test_the_first_quick_model_takes_the_operators_backbone_or_else_minilm():
    assert quick_backbone({}) == quick_backbone({QUICK_BACKBONE_ENV: " "}) == MINILM
    assert quick_backbone({QUICK_BACKBONE_ENV: "/srv/backbones/bert-small"}) == (
        "/srv/backbones/bert-small"
    )
