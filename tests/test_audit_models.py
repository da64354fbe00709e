"""Tests for core.analysis.audit_transformer: the per-fold transformer fit and the background
audit job.

Models are the tiny random BERT of tests/conftest.py (built from a config, never downloaded) and
the from-scratch "tiny" backbone, on a separable toy set: seconds, not minutes.
"""

from __future__ import annotations

import threading

import pytest

from core.analysis.audit import MODEL, AuditConfig, plant_label_flips, run_audit
from core.analysis.audit_transformer import (
    TRANSFORMER,
    AuditJob,
    train_config_from_card,
    transformer_audit_config,
    transformer_fit,
)
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import TransformerClassifier
from core.models.transformer.loop import TrainProgress
from tests.conftest import make_dataset, separable_rows


def quick_config(backbone, **overrides) -> TrainConfig:
    """Settings under which the tiny random BERT learns the separable set in a few steps."""
    options = dict(
        backbone=str(backbone), epochs=4, lr=1e-2, batch_size=6, max_length=32,
        patience=10, device="cpu", seed=0,
    )  # fmt: skip
    return TrainConfig(**{**options, **overrides})


@pytest.fixture(scope="module")
def noisy():
    """90 separable rows (30 per desk) with 9 labels flipped, and the flipped positions."""
    texts, labels = separable_rows(30)
    noisy_labels, flipped = plant_label_flips(labels, share=0.1, seed=2)
    return make_dataset(texts, list(noisy_labels)), set(flipped.tolist())


def test_transformer_audit_finds_planted_flips(noisy):
    """The from-scratch tiny backbone, 4 epochs per fold: measured 8 or 9 of the 9 flips found
    with no false flag; the test asks for recall >= 2/3 and precision >= 0.6."""
    data, planted = noisy
    steps: list[TrainProgress] = []
    train_config = TrainConfig(
        backbone="tiny", epochs=4, lr=1e-2, batch_size=6, max_length=32, patience=10, device="cpu"
    )
    fit = transformer_fit(train_config, on_progress=steps.append)
    result = run_audit(data, transformer_audit_config(AuditConfig(folds=3)), fit=fit)
    assert (result.model, result.folds, result.cancelled) == (TRANSFORMER, 3, False)
    flagged = {x.index for x in result.issues if MODEL in x.kinds}
    hits = len(flagged & planted)
    assert len(planted) == 9 and hits >= 6
    assert hits / len(flagged) >= 0.6  # random flagging: 0.1
    assert steps and steps[-1].step == steps[-1].total_steps


def test_each_fold_fine_tunes_a_fresh_model_on_its_training_rows_only(tiny_bert_dir, noisy):
    data, _ = noisy
    fit = transformer_fit(quick_config(tiny_bert_dir, max_steps=2))
    first, second = data.subset(range(0, 45)), data.subset(range(45, 90))
    model_a, model_b = fit(first), fit(second)
    assert isinstance(model_a, TransformerClassifier) and model_a.model is not model_b.model
    assert model_a.classes_.tolist() == sorted(set(first.labels))
    assert model_a.predict_proba(["upi payment failed"]).shape == (1, len(model_a.classes_))


def test_the_tiny_backbone_fits_per_fold_too(noisy):
    data, _ = noisy
    config = TrainConfig(backbone="tiny", lr=3e-3, batch_size=8, max_steps=3, device="cpu")
    result = run_audit(data, AuditConfig(folds=2, model=TRANSFORMER), fit=transformer_fit(config))
    assert result.pred_probs.shape == (90, 3) and not result.cancelled


def test_cancel_during_a_fold_stops_after_that_fit(tiny_bert_dir, noisy):
    data, _ = noisy
    cancel = threading.Event()
    stop_at_step_two = lambda p: cancel.set() if p.step == 2 else None  # noqa: E731
    fit = transformer_fit(quick_config(tiny_bert_dir), on_progress=stop_at_step_two, cancel=cancel)
    result = run_audit(data, AuditConfig(folds=3, model=TRANSFORMER), fit=fit, cancel=cancel)
    assert result.cancelled and result.issues == () and result.pred_probs is None


def test_train_config_from_card_keeps_known_fields_only():
    card = {"train_config": {"backbone": "tiny", "epochs": 7, "lr": 0.003, "from_the_future": 1}}
    config = train_config_from_card(card)
    assert (config.backbone, config.epochs, config.lr) == ("tiny", 7, 0.003)
    with pytest.raises(ValueError, match="no train_config"):
        train_config_from_card({"labels": ["A", "B"]})
    with pytest.raises(ValueError, match="epochs"):
        train_config_from_card({"train_config": {"epochs": 0}})


def test_transformer_fit_needs_a_train_config():
    with pytest.raises(ValueError, match="TrainConfig"):
        transformer_fit({"backbone": "tiny"})


# ------------------------------------------------------------------------------ the job


def test_job_runs_the_transformer_audit_in_a_thread_with_step_progress(
    tiny_bert_dir, noisy, job_queue, requester
):
    data, _ = noisy
    config = transformer_audit_config(AuditConfig(folds=3))
    train_config = quick_config(tiny_bert_dir, max_steps=3)
    job = AuditJob(data, config, train_config=train_config, key="k1").begin(job_queue, requester)
    assert job.join(timeout=300)
    status = job.status()
    assert (status.state, status.fraction, status.fold, status.folds) == ("done", 1.0, 3, 3)
    assert status.result.model == TRANSFORMER and status.error is None
    assert status.eta_s == 0 and status.elapsed_s > 0
    assert (job.key, job.fingerprint) == ("k1", data.fingerprint)


def test_job_progress_counts_steps_within_the_current_fold(noisy):
    data, _ = noisy
    job = AuditJob(data, AuditConfig(folds=4))
    job._on_fold(type("P", (), {"fold": 1, "eta_s": 9.0})())
    job._on_step(TrainProgress(5, 10, 1, 0.5, None, None, 1.0, 1.0))
    status = job.status()
    assert status.fraction == pytest.approx((1 + 0.5) / 4)
    assert (status.step, status.total_steps) == (5, 10) and status.state == "queued"  # not begun
    assert status.eta_s is not None  # from the running time, 0 for a job not begun


def test_a_job_cancelled_before_it_starts_ends_cancelled(noisy, job_queue, requester):
    data, _ = noisy
    job = AuditJob(data, AuditConfig(folds=3))
    job.cancel()
    assert job.begin(job_queue, requester).join(timeout=60)
    status = job.status()
    assert status.state == "cancelled" and status.result.cancelled


def test_a_failing_audit_reports_its_error_instead_of_hanging(noisy, job_queue, requester):
    data, _ = noisy
    job = AuditJob(data.subset(range(4)), AuditConfig(folds=5)).begin(job_queue, requester)
    assert job.join(timeout=60)
    status = job.status()
    assert status.state == "failed" and "lower --folds" in status.error and status.result is None


def test_a_finished_job_serves_a_cached_result(noisy):
    data, _ = noisy
    result = run_audit(data, AuditConfig(folds=3))
    job = AuditJob.finished(data, result, key="cached")
    assert job.join(timeout=0)
    status = job.status()
    assert (status.state, status.result, status.fraction) == ("done", result, 1.0)
    other = make_dataset(["a b", "c d", "e f", "g h"], ["A", "A", "B", "B"])
    with pytest.raises(ValueError, match="another data set"):
        AuditJob.finished(other, result)
