"""Tests for core.analysis.audit_fine_tune (the per-fold transformer fit, one progress of a whole
audit) and core.tasks.audit (the audit as a task of the queue).

Models are the tiny random BERT of tests/conftest.py (built from a config, never downloaded) and
the from-scratch "tiny" backbone, on a separable toy set: seconds, not minutes.
"""

from __future__ import annotations

import threading

import pytest

from core.access import Permission
from core.analysis.audit import MODEL, AuditConfig, plant_label_flips, run_audit
from core.analysis.audit_fine_tune import (
    EMBED_SHARE,
    FINE_TUNE_AUDIT,
    _AuditMeter,
    fine_tune_audit_config,
    fine_tune_fit,
    train_config_from_card,
)
from core.jobs import JobStatus
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import NeuralClassifier
from core.progress import Progress
from core.tasks.audit import finished_audit, start_audit
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


def test_fine_tune_audit_finds_planted_flips(noisy):
    """The from-scratch tiny backbone, 4 epochs per fold: measured 8 or 9 of the 9 flips found
    with no false flag; the test asks for recall >= 2/3 and precision >= 0.6."""
    data, planted = noisy
    steps: list[Progress] = []
    train_config = TrainConfig(
        backbone="tiny", epochs=4, lr=1e-2, batch_size=6, max_length=32, patience=10, device="cpu"
    )
    fit = fine_tune_fit(train_config, on_progress=steps.append)
    result = run_audit(data, fine_tune_audit_config(AuditConfig(folds=3)), fit=fit)
    assert (result.model, result.folds, result.cancelled) == (FINE_TUNE_AUDIT, 3, False)
    flagged = {x.index for x in result.issues if MODEL in x.kinds}
    hits = len(flagged & planted)
    assert len(planted) == 9 and hits >= 6
    assert hits / len(flagged) >= 0.6  # random flagging: 0.1
    assert steps and steps[-1].done == steps[-1].total and steps[-1].phase == "train"


def test_each_fold_fine_tunes_a_fresh_model_on_its_training_rows_only(tiny_bert_dir, noisy):
    data, _ = noisy
    fit = fine_tune_fit(quick_config(tiny_bert_dir, max_steps=2))
    first, second = data.subset(range(0, 45)), data.subset(range(45, 90))
    model_a, model_b = fit(first), fit(second)
    assert isinstance(model_a, NeuralClassifier) and model_a.model is not model_b.model
    assert model_a.classes_.tolist() == sorted(set(first.labels))
    assert model_a.predict_proba(["upi payment failed"]).shape == (1, len(model_a.classes_))


def test_the_tiny_backbone_fits_per_fold_too(noisy):
    data, _ = noisy
    config = TrainConfig(backbone="tiny", lr=3e-3, batch_size=8, max_steps=3, device="cpu")
    result = run_audit(data, AuditConfig(folds=2, model=FINE_TUNE_AUDIT), fit=fine_tune_fit(config))
    assert result.pred_probs.shape == (90, 3) and not result.cancelled


def test_cancel_during_a_fold_stops_after_that_fit(tiny_bert_dir, noisy):
    data, _ = noisy
    cancel = threading.Event()
    stop_at_step_two = lambda p: cancel.set() if p.done == 2 else None  # noqa: E731
    fit = fine_tune_fit(quick_config(tiny_bert_dir), on_progress=stop_at_step_two, cancel=cancel)
    result = run_audit(data, AuditConfig(folds=3, model=FINE_TUNE_AUDIT), fit=fit, cancel=cancel)
    assert result.cancelled and result.issues == () and result.pred_probs is None


def test_train_config_from_card_keeps_known_fields_only():
    card = {"train_config": {"backbone": "tiny", "epochs": 7, "lr": 0.003, "from_the_future": 1}}
    config = train_config_from_card(card)
    assert (config.backbone, config.epochs, config.lr) == ("tiny", 7, 0.003)
    with pytest.raises(ValueError, match="no train_config"):
        train_config_from_card({"labels": ["A", "B"]})
    with pytest.raises(ValueError, match="epochs"):
        train_config_from_card({"train_config": {"epochs": 0}})


def test_fine_tune_fit_needs_a_train_config():
    with pytest.raises(TypeError, match="TrainConfig"):
        fine_tune_fit({"backbone": "tiny"})


# ------------------------------------------------------------------------------ the job


def test_job_runs_the_fine_tune_audit_on_the_queue_with_step_progress(
    tiny_bert_dir, noisy, job_queue, requester
):
    data, _ = noisy
    config = fine_tune_audit_config(AuditConfig(folds=3))
    train_config = quick_config(tiny_bert_dir, max_steps=3)
    run = start_audit(data, config, train_config=train_config, key="k1", queue=job_queue,
                      requester=requester)  # fmt: skip
    snapshot = run.job.wait(300)
    assert snapshot.status is JobStatus.DONE and snapshot.error is None
    assert snapshot.result.model == FINE_TUNE_AUDIT and snapshot.elapsed_s > 0
    assert snapshot.latest == Progress(3, 3, "audit", "Fold 3 of 3")  # the whole audit, in folds
    assert (run.key, run.fingerprint) == ("k1", data.fingerprint)


def test_audit_progress_counts_steps_within_the_current_fold():
    seen: list[Progress] = []
    meter = _AuditMeter(4, embedding=False, on_progress=seen.append)
    meter.on_fold(Progress(1, 4, "fold"))
    meter.on_step(Progress(5, 10, "train"))
    assert seen[-1] == Progress(1.5, 4, "audit", "Fold 2 of 4, step 5 of 10")
    assert seen[-1].fraction == pytest.approx((1 + 0.5) / 4)


def test_an_embedding_audit_counts_embedding_as_most_of_its_time():
    seen: list[Progress] = []
    meter = _AuditMeter(4, embedding=True, on_progress=seen.append)
    meter.on_embed(Progress(45, 90, "embed"))
    assert seen[-1].fraction == pytest.approx(EMBED_SHARE / 2)
    assert seen[-1].detail == "Embedding text 45 of 90"
    meter.on_fold(Progress(2, 4, "fold"))
    assert seen[-1].fraction == pytest.approx(EMBED_SHARE + (1 - EMBED_SHARE) / 2)


def test_a_job_cancelled_before_it_starts_ends_cancelled(noisy, job_queue, requester):
    data, _ = noisy
    gate = threading.Event()
    blocker = job_queue.start(lambda **_: gate.wait(10), requester=requester, title="first",
                              kind="test", permission=Permission.RUN_JOBS)  # fmt: skip
    run = start_audit(data, AuditConfig(folds=3), queue=job_queue, requester=requester)
    run.cancel()  # still queued behind the first job
    gate.set()
    assert run.snapshot().status is JobStatus.CANCELLED
    assert blocker.wait(10).status is JobStatus.DONE


def test_a_failing_audit_reports_its_error_instead_of_hanging(noisy, job_queue, requester):
    data, _ = noisy
    run = start_audit(data.subset(range(4)), AuditConfig(folds=5), queue=job_queue,
                      requester=requester)  # fmt: skip
    snapshot = run.job.wait(60)
    assert snapshot.status is JobStatus.FAILED and "lower --folds" in snapshot.error
    assert snapshot.result is None


def test_a_finished_audit_serves_a_cached_result(noisy):
    data, _ = noisy
    result = run_audit(data, AuditConfig(folds=3))
    run = finished_audit(data, result, key="cached")
    snapshot = run.snapshot()
    assert (snapshot.status, snapshot.result, run.job) == (JobStatus.DONE, result, None)
    other = make_dataset(["a b", "c d", "e f", "g h"], ["A", "A", "B", "B"])
    with pytest.raises(ValueError, match="another data set"):
        finished_audit(other, result)
