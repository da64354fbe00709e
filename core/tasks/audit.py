"""A label audit as a task of the server's queue (the bag-of-words, embedding or fine-tune audit of
core.analysis), or an audit already finished (from the audit cache) behind the same interface,
so the Label audit page polls one thing either way; and the run record of a finished audit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.access import Actor, Permission
from core.analysis.audit import AuditConfig, AuditResult
from core.analysis.audit_embedding import EMBEDDING_AUDIT
from core.analysis.audit_fine_tune import run_chosen_audit
from core.data.dataset import Dataset
from core.errors import UserError
from core.jobs import Job, JobQueue, JobSnapshot, JobStatus, Requester
from core.models.transformer.config import TrainConfig

if TYPE_CHECKING:
    from core.review.store import Store

AUDIT_RUN_KIND = "audit"  # the kind of the review store's run record of an audit


@dataclass(frozen=True)
class AuditRun:
    """One audit of one data set: a queued job, or a result found in the cache (`job` None)."""

    key: str  # the caller's cache key (core.analysis.audit.audit_cache_key)
    fingerprint: str  # of the audited data set
    config: AuditConfig
    job: Job[AuditResult] | None = None
    cached: AuditResult | None = None

    def snapshot(self) -> JobSnapshot[AuditResult]:
        """The job's snapshot; a cached result reads as a job that is done."""
        if self.job is not None:
            return self.job.snapshot()
        status = JobStatus.CANCELLED if self.cached.cancelled else JobStatus.DONE
        return JobSnapshot(status, None, (), self.cached, None, 0.0)

    def wait(self, timeout: float | None = None) -> JobSnapshot[AuditResult]:
        """Block until the audit ends (or `timeout` passes); return the snapshot."""
        return self.job.wait(timeout) if self.job is not None else self.snapshot()

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()


def start_audit(
    dataset: Dataset,
    config: AuditConfig,
    *,
    train_config: TrainConfig | None = None,
    key: str = "",
    queue: JobQueue,
    requester: Requester,
) -> AuditRun:
    """Queue the audit for `requester` (reviewers and admins): the fine-tune audit when
    `train_config` is given, the embedding audit when `config.model` is "quick" too, else the bag of
    words; on the heavy lane of `train_config.device`."""
    device = train_config.device if train_config is not None else "cpu"
    task = requester.task(
        lambda *, on_progress, cancel: run_chosen_audit(
            dataset, config, train_config, on_progress=on_progress, cancel=cancel
        ),
        f"Label audit ({config.model}, {config.folds} folds) of {len(dataset):,} rows", "audit",
        lane=queue.heavy_lane(device), tokens_per_batch=_tokens_per_batch(config, train_config),
    )  # fmt: skip
    job = queue.submit(task, actor=requester.actor, permission=Permission.RUN_JOBS)
    return AuditRun(key, dataset.fingerprint, config, job=job)


def finished_audit(dataset: Dataset, result: AuditResult, *, key: str = "") -> AuditRun:
    """An audit already done with `result` (from a cache); starts nothing."""
    if result.fingerprint != dataset.fingerprint:
        raise UserError("the cached audit result belongs to another data set; run it again")
    config = AuditConfig(folds=result.folds, model=result.model)
    return AuditRun(key, dataset.fingerprint, config, cached=result)


def record_audit_run(store: Store, result: AuditResult, *, actor: Actor) -> int:
    """Record the finished audit `result` as one "audit" run in the review `store`, under `actor`
    (who needs RUN_JOBS); returns the run's id.

    The record names the audit's model, folds and data fingerprint, and counts its issues and
    seconds: the same record whether the app or the command line ran the audit. A cancelled
    audit is no run and is refused; a read-only store refuses the write (StoreError).
    """
    if result.cancelled:
        raise UserError("a cancelled audit is not recorded as a run: run the audit to the end")
    parameters = {"model": result.model, "folds": result.folds, "fingerprint": result.fingerprint}
    metrics = {"issues": len(result.issues), "seconds": round(result.seconds, 3)}
    return store.record_run(AUDIT_RUN_KIND, parameters=parameters, metrics=metrics, actor=actor)


def _tokens_per_batch(config: AuditConfig, train: TrainConfig | None) -> int | None:
    if train is None:
        return None
    if config.model == EMBEDDING_AUDIT:
        from core.models.transformer.quick import EMBED_BATCH

        return EMBED_BATCH * train.max_length
    return train.batch_size * train.max_length
