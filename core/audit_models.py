"""Audit with a saved model's transformer settings: a per-fold fine-tuning `fit`, and a job that
runs any audit in a worker thread with progress (per optimiser step), ETA and cancel.

The audit never reuses a saved model's weights: they saw every row, so their predictions on the
training rows say nothing about label errors. It fine-tunes afresh on each fold's training rows
with the same `TrainConfig`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.audit import AuditConfig, AuditProgress, AuditResult, FitModel, run_audit
from core.data import Dataset, split_dataset
from core.device import configure_cpu_threads, resolve_device, set_seed
from core.transformer import (
    TrainConfig,
    TrainProgress,
    TransformerClassifier,
    check_split,
    fit_classifier,
    load_backbone,
)

TRANSFORMER = "transformer"  # AuditConfig.model of an audit that fine-tunes per fold
StepCallback = Callable[[TrainProgress], None]
JobState = Literal["running", "done", "cancelled", "failed"]


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

    def fit(train: Dataset) -> TransformerClassifier:
        fold_train, fold_val = split_dataset(
            train, val_fraction=config.val_fraction, seed=config.seed
        )
        classes = check_split(fold_train, fold_val)
        device = resolve_device(config.device)
        if device.type == "cpu":
            configure_cpu_threads()
        set_seed(config.seed)
        model, tokenizer = load_backbone(config, classes, texts=fold_train.texts)
        model.to(device)
        fit_classifier(
            model, tokenizer, fold_train, fold_val, config,
            classes=classes, device=device, on_progress=on_progress, cancel=cancel,
        )  # fmt: skip
        return TransformerClassifier(
            model, tokenizer, classes, max_length=config.max_length, device=device
        )

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


class AuditJob:
    """One audit running in a worker thread that makes no UI calls; poll `status()`.

    Start with `AuditJob.start(...)` (or build it, then `begin()`); `cancel()` asks it to stop
    at the next optimiser step or fold. Progress is the share of folds done plus, for the transformer audit, the share of the
    current fold's optimiser steps.
    """

    def __init__(
        self,
        dataset: Dataset,
        config: AuditConfig,
        *,
        train_config: TrainConfig | None = None,
        key: str = "",
    ) -> None:
        self.key = key  # the caller's cache key (e.g. core.audit.audit_cache_key)
        self.config = config
        self.fingerprint = dataset.fingerprint
        self._dataset = dataset
        self._train_config = train_config
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._fold, self._step, self._total_steps = 0, 0, 0
        self._state: JobState = "running"
        self._result: AuditResult | None = None
        self._error: str | None = None
        self._eta: float | None = None
        self._thread = threading.Thread(target=self._run, name="grievance-lens-audit", daemon=True)

    @classmethod
    def start(
        cls,
        dataset: Dataset,
        config: AuditConfig,
        *,
        train_config: TrainConfig | None = None,
        key: str = "",
    ) -> AuditJob:
        """Create the job and start its thread. `train_config` set: the transformer audit."""
        return cls(dataset, config, train_config=train_config, key=key).begin()

    def begin(self) -> AuditJob:
        """Start the worker thread (once) and return the job."""
        self._thread.start()
        return self

    @classmethod
    def finished(cls, dataset: Dataset, result: AuditResult, *, key: str = "") -> AuditJob:
        """A job that is already done with `result` (e.g. from a cache); starts no thread."""
        if result.fingerprint != dataset.fingerprint:
            raise ValueError("the cached audit result belongs to another data set; run it again")
        config = AuditConfig(folds=result.folds, model=result.model)
        job = cls(dataset, config, key=key)
        job._result, job._fold = result, result.folds
        job._state = "cancelled" if result.cancelled else "done"
        return job

    def cancel(self) -> None:
        """Ask the audit to stop; `status().state` becomes "cancelled" soon after."""
        self._cancel.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (up to `timeout` seconds); True when it has finished."""
        if self._thread.ident is not None:  # never started: a finished() job
            self._thread.join(timeout)
        return self.status().state != "running"

    def status(self) -> AuditStatus:
        """The current state, progress and (when finished) the result."""
        with self._lock:
            folds = self.config.folds
            within = self._step / self._total_steps if self._total_steps else 0.0
            fraction = 1.0 if self._state == "done" else min(1.0, (self._fold + within) / folds)
            return AuditStatus(
                state=self._state,
                fraction=fraction,
                fold=self._fold,
                folds=folds,
                step=self._step,
                total_steps=self._total_steps,
                elapsed_s=time.perf_counter() - self._started,
                eta_s=self._eta,
                result=self._result,
                error=self._error,
            )

    def _run(self) -> None:
        fit = None
        if self._train_config is not None:
            fit = transformer_fit(
                self._train_config, on_progress=self._on_step, cancel=self._cancel
            )
        try:
            result = run_audit(
                self._dataset, self.config, fit=fit, on_progress=self._on_fold, cancel=self._cancel
            )
        # The thread's last line of defence: anything raised must reach the UI as a message,
        # or the page would wait for a job that died.
        except Exception as exc:
            with self._lock:
                self._state, self._error = "failed", " ".join(str(exc).split()) or repr(exc)
            return
        with self._lock:
            self._result = result
            self._state = "cancelled" if result.cancelled else "done"

    def _on_fold(self, progress: AuditProgress) -> None:
        with self._lock:
            self._fold, self._step, self._total_steps = progress.fold, 0, 0
            self._eta = progress.eta_s

    def _on_step(self, progress: TrainProgress) -> None:
        with self._lock:
            self._step, self._total_steps = progress.step, progress.total_steps
            done = (self._fold + progress.step / progress.total_steps) / self.config.folds
            elapsed = time.perf_counter() - self._started
            self._eta = elapsed / done * (1 - done) if done > 0 else None
