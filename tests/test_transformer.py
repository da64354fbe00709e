"""core.models.transformer: the fine-tuning loop, progress, cancel, batching and the batch
predictor."""

from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification, pipeline

from core.metrics import evaluate_predictions
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import (
    BACKBONE_DEFAULTS,
    MINILM,
    OTHER_BACKBONE_DEFAULTS,
    TINY,
    TrainConfig,
)
from core.models.transformer.head import MeanPoolForSequenceClassification
from core.models.transformer.inference import NeuralClassifier, predict_labels
from core.models.transformer.loop import (
    FitInputs,
    class_weight_tensor,
    fit_classifier,
    length_grouped_batches,
    make_optimizer,
)
from core.models.transformer.training import fine_tune, train_models
from core.progress import Progress
from tests.conftest import make_dataset, separable_rows

MIXED_TEXTS = [
    "upi payment failed",
    "card stolen fraud charge since yesterday no reply very bad service kindly help sir",
    "loan",
    "my upi refund pending merchant please help",
    "emi tenure loan statement foreclosure interest rate customer care very bad",
    "atm card skimmed",
    "kyc",
]


def quick_config(backbone, **overrides) -> TrainConfig:
    """Settings that make the tiny random BERT learn the separable set in a few steps."""
    options = dict(
        backbone=str(backbone), epochs=4, lr=1e-2, batch_size=6, max_length=32,
        warmup_ratio=0.1, patience=10, device="cpu", seed=0,
    )  # fmt: skip
    options.update(overrides)
    return TrainConfig(**options)


@pytest.fixture(scope="module")
def split():
    texts, labels = separable_rows(12)
    val_texts, val_labels = separable_rows(3)
    return make_dataset(texts, labels), make_dataset(val_texts[::-1], val_labels[::-1])


@pytest.fixture(scope="module")
def trained(tiny_bert_dir, split):
    progress: list[Progress] = []
    result = train_models(*split, quick_config(tiny_bert_dir), on_progress=progress.append)
    return result, progress


def test_loss_falls_and_beats_chance_on_separable_data(trained):
    result, _ = trained
    losses = [record.train_loss for record in result.history]
    assert len(losses) == 4
    assert losses[-1] < 0.3 * losses[0]
    assert result.neural_report.accuracy >= 0.9
    assert result.bow_report.accuracy >= 0.9
    assert not result.cancelled and result.device == "cpu" and result.train_seconds > 0
    assert 1 <= result.best_epoch <= 4
    assert result.neural.classes_.tolist() == ["Card Fraud", "Loan Query", "UPI Dispute"]


def test_progress_reports_every_step_in_order(trained):
    _, progress = trained
    total = progress[0].total
    assert total == 4 * 6  # 36 rows / batch 6 = 6 steps per epoch
    assert [p.done for p in progress] == list(range(1, total + 1))
    assert {p.phase for p in progress} == {"train"}
    metrics = [p.detail for p in progress]
    assert [m.epoch for m in metrics] == sorted(m.epoch for m in metrics)
    assert metrics[4].val_accuracy is None  # no epoch finished yet
    assert metrics[5].val_accuracy is not None and metrics[5].epoch == 1
    assert all(np.isfinite(m.loss) for m in metrics)


def test_best_epoch_weights_are_the_ones_kept(trained, split):
    result, _ = trained
    best = result.history[result.best_epoch - 1]
    assert best.val_macro_f1 == max(r.val_macro_f1 for r in result.history)
    assert result.neural_report.macro_f1 == pytest.approx(best.val_macro_f1)


def test_max_steps_stops_early(tiny_bert_dir, split):
    steps: list[int] = []
    config = quick_config(tiny_bert_dir, max_steps=3)
    result = train_models(*split, config, on_progress=lambda p: steps.append(p.done))
    assert steps == [1, 2, 3]
    assert len(result.history) == 1  # the stopped epoch is still evaluated
    assert result.neural is not None


def test_cancel_stops_at_the_next_step_and_returns_no_model(tiny_bert_dir, split, tmp_path):
    cancel = threading.Event()
    steps: list[int] = []

    def on_progress(p: Progress) -> None:
        steps.append(p.done)
        if p.done == 2:
            cancel.set()

    result = train_models(
        *split, quick_config(tiny_bert_dir), on_progress=on_progress, cancel=cancel
    )
    assert result.cancelled and steps == [1, 2]
    assert result.neural is None and result.bow is None
    assert result.neural_report is None


def test_class_weights_are_inverse_frequency():
    weights = class_weight_tensor([0, 0, 0, 1], 2)
    assert weights.tolist() == pytest.approx([4 / 6, 2.0])
    assert class_weight_tensor([0, 1, 2], 3).tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_class_weighted_training_runs_on_imbalanced_data(tiny_bert_dir):
    texts, labels = separable_rows(8)
    keep = [i for i, label in enumerate(labels) if label != "Loan Query" or i % 4 == 0]
    train = make_dataset([texts[i] for i in keep], [labels[i] for i in keep])
    config = quick_config(tiny_bert_dir, class_weights=True, max_steps=4)
    result = train_models(train, train, config)
    assert result.neural.predict_proba(["loan emi"]).shape == (1, 3)


def test_predict_proba_restores_order_and_matches_one_by_one(trained):
    classifier = trained[0].neural
    batched = classifier.predict_proba(MIXED_TEXTS, batch_size=3)
    single = np.vstack([classifier.predict_proba([t]) for t in MIXED_TEXTS])
    assert batched.shape == (len(MIXED_TEXTS), 3)
    np.testing.assert_allclose(batched, single, atol=1e-5)
    np.testing.assert_allclose(batched.sum(axis=1), 1.0, atol=1e-6)
    assert classifier.predict_proba([]).shape == (0, 3)
    with pytest.raises(ValueError, match="not one string"):
        classifier.predict_proba("upi payment failed")


def test_predict_labels_flags_low_confidence(trained):
    classifier = trained[0].neural
    sure = predict_labels(classifier, ["upi payment failed"], review_threshold=0.0)[0]
    assert sure.label == "UPI Dispute" and not sure.needs_review
    assert sum(sure.probabilities.values()) == pytest.approx(1.0)
    unsure = predict_labels(classifier, ["upi payment failed"], review_threshold=1.0)[0]
    assert unsure.needs_review


def test_twin_slice_is_reported_when_marked(tiny_bert_dir, split):
    train, val = split
    slices = ["twin" if i % 2 else "regular" for i in range(len(val))]
    val = make_dataset(list(val.texts), list(val.labels), extra=pd.DataFrame({"slice": slices}))
    result = train_models(train, val, quick_config(tiny_bert_dir, max_steps=2))
    assert result.neural_twin_report.n == len(val) // 2
    assert result.bow_twin_report.n == len(val) // 2
    plain = train_models(train, split[1], quick_config(tiny_bert_dir, max_steps=1))
    assert plain.neural_twin_report is None


def test_length_grouped_batches_cover_every_row_once_and_group_lengths():
    lengths = np.random.default_rng(0).integers(1, 500, size=1000)
    batches = length_grouped_batches(lengths, 10, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    spread = np.mean([np.ptp(lengths[b]) for b in batches])
    assert spread < 0.2 * np.ptp(lengths)  # random batches would spread over ~90% of the range
    again = length_grouped_batches(lengths, 10, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))


def test_optimizer_exempts_biases_and_layernorm_from_decay():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    groups = make_optimizer(model, lr=1e-3, weight_decay=0.01).param_groups
    assert [len(g["params"]) for g in groups] == [1, 3]
    assert [g["weight_decay"] for g in groups] == [0.01, 0.0]


def test_the_loop_warms_up_then_decays_the_learning_rate_to_zero(split):
    train, val = split
    seen: list[float] = []
    config = TrainConfig(backbone="tiny", epochs=2, batch_size=8, warmup_ratio=0.25)
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    with mock.patch.object(torch.optim.AdamW, "step", recording_step):
        fine_tune(train, val, config)
    peak = seen.index(max(seen))
    assert seen[0] < seen[peak] and 0 < peak < len(seen) - 1
    assert max(seen) == pytest.approx(config.lr)
    assert seen[: peak + 1] == sorted(seen[: peak + 1])
    assert seen[peak:] == sorted(seen[peak:], reverse=True) and seen[-1] < seen[peak] / 2


def test_validation_runs_in_eval_mode_and_training_goes_on_in_train_mode(tiny_bert_dir, split):
    """Dropout of 0.9 before the head: validation in train mode would score noise. Every forward
    pass without gradients (validation) must see dropout off, every training step dropout on,
    and the recorded validation figure must be what the kept weights score in eval mode."""
    train, val = split
    config = quick_config(tiny_bert_dir, classifier_dropout=0.9, epochs=2, patience=1)
    classes = sorted(set(train.labels))
    model, tokenizer = load_backbone(config, classes)
    seen: list[tuple[bool, bool]] = []  # (grad enabled, dropout in training mode)
    model.dropout.register_forward_pre_hook(
        lambda module, _: seen.append((torch.is_grad_enabled(), module.training))
    )
    outcome = fit_classifier(
        FitInputs(model, tokenizer, train, val, config, classes, torch.device("cpu"))
    )
    validation = [training for grad, training in seen if not grad]
    steps = [training for grad, training in seen if grad]
    assert len(validation) >= 2 and not any(validation)  # one pass or more per epoch
    assert len(steps) == outcome.steps and all(steps)  # back in train mode after validating
    kept = NeuralClassifier(model, tokenizer, classes, max_length=config.max_length)
    best = outcome.history[outcome.best_epoch - 1]
    again = evaluate_predictions(list(val.labels), kept.predict(val.texts), labels=classes)
    assert (again.accuracy, again.macro_f1) == (best.val_accuracy, best.val_macro_f1)


def test_each_backbone_resolves_its_own_learning_rate_and_epochs():
    for backbone in (MINILM, TINY):
        config = TrainConfig(backbone=backbone)
        assert (config.lr, config.epochs) == (
            BACKBONE_DEFAULTS[backbone].lr,
            BACKBONE_DEFAULTS[backbone].epochs,
        )
    assert TrainConfig(backbone="tiny").lr != TrainConfig(backbone="minilm").lr
    assert TrainConfig(backbone="some/bert-base").lr == OTHER_BACKBONE_DEFAULTS.lr
    assert TrainConfig(backbone="tiny", lr=3e-3, epochs=9).lr == 3e-3  # a choice wins


@pytest.mark.parametrize(
    "options, message",
    [({"recipe": "fast"}, "recipe"), ({"recipe": "quick", "backbone": "tiny"}, "pretrained"),
     ({"recipe": "quick", "pooling": "cls"}, "mean")],
)  # fmt: skip
def test_train_config_refuses_a_quick_recipe_it_cannot_run(options, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**options)


@pytest.mark.parametrize(
    "field, value",
    [("pooling", "max"), ("epochs", 0), ("lr", 0.0), ("lr", float("nan")), ("batch_size", 1.5),
     ("device", "tpu"), ("max_steps", 0), ("val_fraction", 1.0), ("class_weights", 1),
     ("backbone", " ")],
)  # fmt: skip
def test_train_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_split_with_unseen_validation_label_is_refused(tiny_bert_dir, split):
    train, _ = split
    val = make_dataset(["kyc update"], ["KYC Update"])
    with pytest.raises(ValueError, match="never occur in the training split"):
        train_models(train, val, quick_config(tiny_bert_dir))


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_saved_folder_works_with_transformers_pipeline(
    tiny_bert_cls_model_dir, tiny_bert_result, tmp_path, pooling
):
    from core.models.registry import load_model

    # The session's tiny BERTs, trained a few steps by train_models with each pooling.
    if pooling == "cls":
        trained = load_model(tiny_bert_cls_model_dir).neural
    else:
        trained = tiny_bert_result.neural
    # fp32 like the pipeline: "auto" picks bf16 on a CPU with AMX or AVX512-BF16.
    classifier = NeuralClassifier(
        trained.model, trained.tokenizer, trained.classes_, max_length=trained.max_length,
        precision="fp32",
    )  # fmt: skip
    classifier.model.save_pretrained(tmp_path)
    classifier.tokenizer.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path, use_safetensors=True)
    assert isinstance(reloaded, MeanPoolForSequenceClassification) == (pooling == "mean")
    assert reloaded.config.id2label == {0: "Card Fraud", 1: "Loan Query", 2: "UPI Dispute"}
    classify = pipeline("text-classification", model=str(tmp_path), device="cpu", top_k=None)
    outputs = classify(MIXED_TEXTS)
    for output, row in zip(outputs, classifier.predict_proba(MIXED_TEXTS), strict=True):
        scores = {d["label"]: d["score"] for d in output}
        assert [scores[c] for c in classifier.classes_] == pytest.approx(row.tolist(), abs=1e-5)


def test_mean_pooling_returns_attentions(tiny_bert_result):
    model, tokenizer = tiny_bert_result.neural.model, tiny_bert_result.neural.tokenizer
    batch = tokenizer(["upi payment failed", "loan"], padding=True, return_tensors="pt")
    out = model(**batch, output_attentions=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 2, 5, 5)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 2, 5))


def test_tiny_backbone_trains_through_the_same_loop(split):
    config = TrainConfig(backbone="tiny", lr=3e-3, batch_size=8, max_steps=6, device="cpu")
    result = train_models(*split, config)
    assert result.neural.predict_proba(MIXED_TEXTS).shape == (len(MIXED_TEXTS), 3)
    assert result.history and np.isfinite(result.history[0].train_loss)


def test_classifier_moves_model_to_device_and_resolves_precision(trained):
    classifier = trained[0].neural
    again = NeuralClassifier(
        classifier.model, classifier.tokenizer, classifier.classes_, precision="fp32"
    )
    assert again.precision == "fp32" and again.device.type == "cpu"
    with pytest.raises(ValueError, match="precision"):
        NeuralClassifier(classifier.model, classifier.tokenizer, ["a"], precision="fp8")


@pytest.mark.slow
def test_bundled_minilm_learns_and_round_trips(minilm_path, tmp_path):
    from transformers import set_seed

    from core.access import OPERATOR
    from core.data.demo import DemoConfig, generate_demo_data
    from core.models.registry import load_model, save_model
    from core.models.transformer.backbone import load_backbone

    frame = generate_demo_data(DemoConfig(rows=50, seed=3))
    data = make_dataset(frame["text"].tolist(), frame["desk"].tolist())
    train, val = data.subset(range(40)), data.subset(range(40, 50))
    config = TrainConfig(
        epochs=1, batch_size=8, lr=5e-4, max_length=64, warmup_ratio=0.0, device="cpu"
    )
    assert config.backbone == "minilm" and str(minilm_path).endswith("model")
    set_seed(config.seed)
    untrained = NeuralClassifier(*load_backbone(config, train.classes), train.classes)
    result = train_models(train, val, config)
    assert _mean_loss(result.neural, train) < 0.9 * _mean_loss(untrained, train)

    folder = save_model(result, tmp_path, "minilm-demo", actor=OPERATOR)
    assert (folder / "model.safetensors").stat().st_size > 80e6  # the whole encoder is saved
    loaded = load_model(folder)
    texts = list(val.texts)
    np.testing.assert_array_equal(
        loaded.neural.predict_proba(texts), result.neural.predict_proba(texts)
    )


def _mean_loss(classifier: NeuralClassifier, data) -> float:
    pred_probs = classifier.predict_proba(list(data.texts))
    column = {label: i for i, label in enumerate(classifier.classes_)}
    picked = pred_probs[np.arange(len(data)), [column[label] for label in data.labels]]
    return float(-np.log(picked).mean())
