"""Audit with a saved model's transformer settings: a per-fold fine-tuning `fit`, and
`run_chosen_audit`, which runs any audit (bag of words, embedding, fine-tune) with one progress
per optimiser step, text embedded or fold, and cancel (core.tasks.audit queues it).

The audit never reuses a saved model's weights: they saw every row, so their predictions on the
training rows say nothing about label errors. It fine-tunes afresh on each fold's training rows
with the same `TrainConfig`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.analysis.audit import AuditConfig, AuditResult, FitModel, run_audit
from core.analysis.audit_embedding import (
    EMBEDDING_AUDIT,
    embedding_audit_config,
    embedding_train_config,
    run_embedding_audit,
)
from core.data.dataset import Dataset, split_dataset
from core.errors import UserError
from core.models.transformer.config import QUICK, TrainConfig
from core.progress import Progress, ProgressCallback

if TYPE_CHECKING:  # torch and transformers load only once a fine-tune audit runs
    from core.models.transformer.inference import NeuralClassifier

FINE_TUNE_AUDIT = "transformer"  # AuditConfig.model of an audit that fine-tunes per fold
AUDIT_PHASE = "audit"  # the Progress phase of a whole audit, counted in folds
# Share of a embedding audit's time spent embedding (the folds' head fits are the rest): measured on
# 3000 demo rows with MiniLM on a CPU, 88 of 105 s (BENCHMARKS.md); it only paces the bar.
EMBED_SHARE = 0.85


def fine_tune_fit(
    config: TrainConfig,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> FitModel:
    """A `fit(train)` for `run_audit` that fine-tunes `config.backbone` on a fold's rows.

    Each fold holds out a stratified `config.val_fraction` of its training rows for early
    stopping (the audited fold itself is never looked at), seeds with `config.seed`, and reports
    every optimiser step to `on_progress`. A set `cancel` stops the fine-tuning at the next step;
    `run_audit` then returns a cancelled result.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")

    from core.models.transformer.training import fine_tune

    def fit(train: Dataset) -> NeuralClassifier:
        fold_train, fold_val = split_dataset(
            train, val_fraction=config.val_fraction, seed=config.seed
        )
        neural, _ = fine_tune(fold_train, fold_val, config, on_progress=on_progress, cancel=cancel)
        return neural

    return fit


def train_config_from_card(card: Mapping[str, Any]) -> TrainConfig:
    """The `TrainConfig` a saved model was trained with (its card's "train_config").

    Keys this version does not know are ignored, so cards of newer versions still audit.
    """
    saved = card.get("train_config") if isinstance(card, Mapping) else None
    if not isinstance(saved, Mapping):
        raise UserError("the model card has no train_config; save the model again with Train")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in saved.items() if k in known})


def model_audit_settings(
    card: Mapping[str, Any], config: AuditConfig
) -> tuple[AuditConfig, TrainConfig]:
    """How to audit with a saved model's settings: a quick model (frozen encoder and a fitted
    head) gets the embedding audit, over its own backbone and max_length (embeddings once,
    seconds to minutes); a fine-tuned one by fine-tuning its settings on each fold (hours)."""
    train_config = train_config_from_card(card)
    if train_config.recipe == QUICK:
        embedding = embedding_train_config(
            train_config.backbone, max_length=train_config.max_length, device=train_config.device
        )
        return embedding_audit_config(config), embedding
    return fine_tune_audit_config(config), train_config


def fine_tune_audit_config(config: AuditConfig) -> AuditConfig:
    """`config` naming the fine-tune audit (its model name, in results and cache keys)."""
    return dataclasses.replace(config, model=FINE_TUNE_AUDIT)


def run_chosen_audit(
    dataset: Dataset,
    config: AuditConfig,
    train_config: TrainConfig | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> AuditResult:
    """Run whichever audit `config` and `train_config` name: the bag of words (no
    `train_config`), the embedding audit (`config.model` "quick") or the fine-tune audit, reporting
    one `Progress` in folds (phase "audit": folds done plus the share of the current fold or of
    the embedding, with a line saying which as its `detail`)."""
    meter = _AuditMeter(
        config.folds, embedding=config.model == EMBEDDING_AUDIT, on_progress=on_progress
    )
    if config.model == EMBEDDING_AUDIT and train_config is not None:
        return run_embedding_audit(
            dataset, config, train_config, on_embed=meter.on_embed, on_progress=meter.on_fold,
            cancel=cancel,
        )  # fmt: skip
    fit = None
    if train_config is not None:
        fit = fine_tune_fit(train_config, on_progress=meter.on_step, cancel=cancel)
    return run_audit(dataset, config, fit=fit, on_progress=meter.on_fold, cancel=cancel)


class _AuditMeter:
    """Folds, optimiser steps and texts embedded as one Progress of the whole audit, counted in
    folds: a embedding audit's embedding counts for EMBED_SHARE of its time, its folds for the rest;
    a fine-tune audit's fold advances with its optimiser steps."""

    def __init__(
        self, folds: int, *, embedding: bool, on_progress: ProgressCallback | None
    ) -> None:
        self.folds, self.embedding, self.on_progress = folds, embedding, on_progress
        self.fold = 0  # folds finished

    def on_fold(self, progress: Progress) -> None:
        self.fold = int(progress.done)
        self._report(0.0, f"Fold {min(self.fold + 1, self.folds)} of {self.folds}")

    def on_step(self, progress: Progress) -> None:
        fold = f"Fold {self.fold + 1} of {self.folds}"
        self._report(progress.fraction, f"{fold}, step {progress.done:.0f} of {progress.total:.0f}")

    def on_embed(self, progress: Progress) -> None:
        text = f"Embedding text {progress.done:,.0f} of {progress.total:,.0f}"
        self._report(progress.fraction, text, embedding=True)

    def _report(self, within: float, text: str, *, embedding: bool = False) -> None:
        """`within`: the share done of the current fold (or of the embedding)."""
        if self.on_progress is None:
            return
        if not self.embedding:
            done = self.fold + within
        elif embedding:
            done = EMBED_SHARE * self.folds * within
        else:
            done = self.folds * (
                EMBED_SHARE + (1 - EMBED_SHARE) * (self.fold + within) / self.folds
            )
        self.on_progress(Progress(done, self.folds, AUDIT_PHASE, text))
