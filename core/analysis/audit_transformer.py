"""Audit with a saved model's transformer settings: a per-fold fine-tuning `fit`, and a job that
runs any audit (bag of words, quick, transformer) in a worker thread (core.jobs) with progress per
optimiser step or text embedded, ETA and cancel.

The audit never reuses a saved model's weights: they saw every row, so their predictions on the
training rows say nothing about label errors. It fine-tunes afresh on each fold's training rows
with the same `TrainConfig`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

from core.access import Permission
from core.analysis.audit import AuditConfig, AuditProgress, AuditResult, FitModel, run_audit
from core.analysis.audit_quick import (
    QUICK_AUDIT,
    EmbedProgress,
    quick_audit_config,
    quick_train_config,
    run_quick_audit,
)
from core.data.dataset import Dataset, split_dataset
from core.jobs import BackgroundJob, JobQueue, JobSnapshot, JobStatus, Requester
from core.models.transformer.config import QUICK, TrainConfig

if TYPE_CHECKING:  # torch and transformers load only once a transformer audit runs
    from core.models.transformer.inference import TransformerClassifier
    from core.models.transformer.loop import TrainProgress

TRANSFORMER = "transformer"  # AuditConfig.model of an audit that fine-tunes per fold
StepCallback = Callable[["TrainProgress"], None]
JobState = Literal["queued", "running", "done", "cancelled", "failed"]
# per fold, per optimiser step (transformer audit), per batch of texts embedded (quick audit)
AuditEvent = Union[AuditProgress, "TrainProgress", EmbedProgress]
# Share of a quick audit's time spent embedding (the folds' head fits are the rest): measured on
# 3000 demo rows with MiniLM on a CPU, 88 of 105 s (BENCHMARKS.md); it only paces the bar.
EMBED_SHARE = 0.85


def transformer_fit(
    config: TrainConfig,
    *,
    on_progress: StepCallback | None = None,
    cancel: threading.Event | None = None,
) -> FitModel:
    """A `fit(train)` for `run_audit` that fine-tunes `config.backbone` on a fold's rows.

    Each fold holds out a stratified `config.val_fraction` of its training rows for early
    stopping (the audited fold itself is never looked at), seeds with `config.seed`, and reports
    every optimiser step to `on_progress`. A set `cancel` stops the fine-tuning at the next step;
    `run_audit` then returns a cancelled result.
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")

    from core.models.transformer.training import fine_tune

    def fit(train: Dataset) -> TransformerClassifier:
        fold_train, fold_val = split_dataset(
            train, val_fraction=config.val_fraction, seed=config.seed
        )
        transformer, _ = fine_tune(
            fold_train, fold_val, config, on_progress=on_progress, cancel=cancel
        )
        return transformer

    return fit


def train_config_from_card(card: Mapping[str, Any]) -> TrainConfig:
    """The `TrainConfig` a saved model was trained with (its card's "train_config").

    Keys this version does not know are ignored, so cards of newer versions still audit.
    """
    saved = card.get("train_config") if isinstance(card, Mapping) else None
    if not isinstance(saved, Mapping):
        raise ValueError("the model card has no train_config; save the model again with Train")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in saved.items() if k in known})


def model_audit_settings(
    card: Mapping[str, Any], config: AuditConfig
) -> tuple[AuditConfig, TrainConfig]:
    """How to audit with a saved model's settings: a quick model (frozen encoder and a fitted
    head) is audited the quick way, over its own backbone and max_length (embeddings once,
    seconds to minutes); a fine-tuned one by fine-tuning its settings on each fold (hours)."""
    train_config = train_config_from_card(card)
    if train_config.recipe == QUICK:
        quick = quick_train_config(train_config.backbone, max_length=train_config.max_length,
                                   device=train_config.device)  # fmt: skip
        return quick_audit_config(config), quick
    return transformer_audit_config(config), train_config


def transformer_audit_config(config: AuditConfig) -> AuditConfig:
    """`config` naming the transformer audit (its model name, in results and cache keys)."""
    return dataclasses.replace(config, model=TRANSFORMER)


@dataclass(frozen=True)
class AuditStatus:
    """A snapshot of an audit job, safe to read from the UI thread."""

    state: JobState
    fraction: float  # share of the work done, in [0, 1]
    fold: int  # folds finished
    folds: int
    step: int  # optimiser steps done in the current fold (0 for the bag-of-words audit)
    total_steps: int  # optimiser steps of the current fold (0 when unknown)
    elapsed_s: float
    eta_s: float | None  # None until the first progress report
    result: AuditResult | None  # set when state is "done" or "cancelled"
    error: str | None  # set when state is "failed"
    texts: int = 0  # quick audit: distinct texts embedded so far
    total_texts: int = 0  # quick audit: distinct texts to embed (0 until embedding starts)
    position: int | None = None  # while queued: 1-based place in the server's queue
    start_eta_s: float | None = None  # while queued: seconds until it should start, if known


class AuditJob:
    """One audit running in a worker thread (core.jobs.BackgroundJob) that makes no UI calls;
    poll `status()`.

    Build it, then start its thread with `begin()`; `cancel()` asks it to stop
    at the next optimiser step, batch of texts or fold. Progress is the share of folds done plus,
    for the transformer audit, the share of the current fold's optimiser steps; for the quick
    audit the embedding counts for EMBED_SHARE of the work and the folds for the rest.
    """

    def __init__(
        self,
        dataset: Dataset,
        config: AuditConfig,
        *,
        train_config: TrainConfig | None = None,
        key: str = "",
    ) -> None:
        self.key = key  # the caller's cache key (e.g. core.analysis.audit.audit_cache_key)
        self.config = config
        self.fingerprint = dataset.fingerprint
        self._dataset = dataset
        self._train_config = train_config
        self._lock = threading.Lock()
        self._fold, self._step, self._total_steps = 0, 0, 0
        self._texts, self._total_texts = 0, 0
        self._eta: float | None = None
        self._cached: AuditResult | None = None  # set by finished(): no thread at all
        self._job: BackgroundJob[AuditEvent, AuditResult] = BackgroundJob(
            self._work, name="grievance-lens-audit"
        )

    def begin(self, queue: JobQueue, requester: Requester) -> AuditJob:
        """Queue the audit (once) on `queue` for `requester` and return the job;
        `train_config` set at creation makes it the transformer audit, or the quick audit when
        `config.model` is "quick" (heavy lane of `train_config.device` either way)."""
        train = self._train_config
        device = train.device if train is not None else "cpu"
        ticket = requester.ticket(
            f"Label audit ({self.config.model}, {self.config.folds} folds) of "
            f"{len(self._dataset):,} rows",
            "audit",
            lane=queue.heavy_lane(device),
        )
        tokens = self._tokens_per_batch()
        queue.submit(
            self._job, ticket, actor=requester.actor, permission=Permission.RUN_JOBS,
            tokens_per_batch=tokens,
        )  # fmt: skip
        return self

    def _tokens_per_batch(self) -> int | None:
        train = self._train_config
        if train is None:
            return None
        if self.config.model == QUICK_AUDIT:
            from core.models.transformer.quick import EMBED_BATCH

            return EMBED_BATCH * train.max_length
        return train.batch_size * train.max_length

    @classmethod
    def finished(cls, dataset: Dataset, result: AuditResult, *, key: str = "") -> AuditJob:
        """A job that is already done with `result` (e.g. from a cache); starts no thread."""
        if result.fingerprint != dataset.fingerprint:
            raise ValueError("the cached audit result belongs to another data set; run it again")
        job = cls(dataset, AuditConfig(folds=result.folds, model=result.model), key=key)
        job._cached, job._fold = result, result.folds
        return job

    def cancel(self) -> None:
        """Ask the audit to stop; `status().state` becomes "cancelled" soon after."""
        self._job.cancel()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (up to `timeout` seconds); True when it has finished."""
        if self._cached is None:
            self._job.wait(timeout)
        return self.status().state not in ("queued", "running")

    def status(self) -> AuditStatus:
        """The current state, progress and (when finished) the result."""
        snapshot = self._snapshot()
        state = snapshot.status.value
        with self._lock:
            folds = self.config.folds
            fraction = 1.0 if state == "done" else min(1.0, self._fraction())
            return AuditStatus(
                state=state,
                fraction=fraction,
                fold=self._fold,
                folds=folds,
                step=self._step,
                total_steps=self._total_steps,
                elapsed_s=snapshot.elapsed_s,
                eta_s=self._eta,
                result=snapshot.result,
                error=snapshot.error,
                texts=self._texts,
                total_texts=self._total_texts,
                position=snapshot.position,
                start_eta_s=snapshot.start_eta_s,
            )

    def _fraction(self) -> float:
        """The share of the work done (under the lock)."""
        folds = self.config.folds
        if self.config.model == QUICK_AUDIT:
            embedded = self._texts / self._total_texts if self._total_texts else 0.0
            return EMBED_SHARE * embedded + (1 - EMBED_SHARE) * self._fold / folds
        within = self._step / self._total_steps if self._total_steps else 0.0
        return (self._fold + within) / folds

    def _snapshot(self) -> JobSnapshot[AuditEvent, AuditResult]:
        if self._cached is None:
            return self._job.snapshot()
        state = "cancelled" if self._cached.cancelled else "done"
        return JobSnapshot(JobStatus(state), None, (), self._cached, None, 0.0)

    def _work(
        self, *, on_progress: Callable[[AuditEvent], None], cancel: threading.Event
    ) -> AuditResult:
        """The worker: run the audit, counting folds and steps for `status()`."""

        def on_fold(progress: AuditProgress) -> None:
            self._on_fold(progress)
            on_progress(progress)

        if self.config.model == QUICK_AUDIT and self._train_config is not None:
            return run_quick_audit(
                self._dataset, self.config, self._train_config, on_embed=self._on_embed,
                on_progress=on_fold, cancel=cancel,
            )  # fmt: skip
        fit = None
        if self._train_config is not None:
            fit = transformer_fit(self._train_config, on_progress=self._on_step, cancel=cancel)
        return run_audit(self._dataset, self.config, fit=fit, on_progress=on_fold, cancel=cancel)

    def _on_fold(self, progress: AuditProgress) -> None:
        with self._lock:
            self._fold, self._step, self._total_steps = progress.fold, 0, 0
            self._eta = progress.eta_s

    def _on_embed(self, progress: EmbedProgress) -> None:
        with self._lock:
            self._texts, self._total_texts = progress.texts, progress.total_texts
            embedding_s = progress.elapsed_s + progress.eta_s
            self._eta = progress.eta_s + embedding_s * (1 - EMBED_SHARE) / EMBED_SHARE

    def _on_step(self, progress: TrainProgress) -> None:
        with self._lock:
            self._step, self._total_steps = progress.step, progress.total_steps
            done = (self._fold + progress.step / progress.total_steps) / self.config.folds
            elapsed = self._job.snapshot().elapsed_s
            self._eta = elapsed / done * (1 - done) if done > 0 else None
