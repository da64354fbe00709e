"""The fine-tuning loop: AdamW with warmup and linear decay (transformers' schedule),
length-grouped dynamic batches, gradient clipping, class weights, early stopping on validation
macro-F1 (scored in eval mode), progress and cancel."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

from core.data.dataset import Dataset
from core.metrics import evaluate_predictions
from core.models.device import autocast
from core.models.transformer.config import FROM_SCRATCH, TRAIN_PHASE, TrainConfig
from core.models.transformer.inference import NeuralClassifier, encode_batch
from core.progress import Progress, ProgressCallback

GRAD_CLIP_NORM = 1.0  # the usual BERT fine-tuning clip; tames the first steps of a fresh head
MEGABATCH = 50  # length-grouping window, in batches: big enough to group, small enough to mix


@dataclass(frozen=True)
class StepMetrics:
    """What a training step's `Progress.detail` carries for the curves: the mean training loss
    of the epoch so far and the latest epoch's validation figures (None before the first)."""

    epoch: int  # 1-based
    loss: float  # NaN while the quick recipe embeds
    val_accuracy: float | None
    val_macro_f1: float | None


@dataclass(frozen=True)
class EpochRecord:
    """What one epoch achieved: mean training loss and validation figures."""

    epoch: int
    train_loss: float
    val_accuracy: float
    val_macro_f1: float


@dataclass(frozen=True)
class FitOutcome:
    """The loop's result: best epoch's weights are loaded into the model when not cancelled."""

    history: tuple[EpochRecord, ...]
    best_epoch: int  # 0 when no epoch finished
    steps: int
    cancelled: bool
    head_strength: float | None = None  # quick recipe: the logistic regression's chosen C
    # quick recipe: the training rows' embeddings it fitted the head on (the unknown-desk
    # score reuses them instead of embedding the rows again)
    train_features: np.ndarray | None = None


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffled batches of row indices whose lengths are similar.

    Rows are shuffled, cut into windows of `MEGABATCH * batch_size`, sorted by length inside
    each window, cut into batches, and the batches shuffled: little padding, random order.
    """
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths))
    window = MEGABATCH * batch_size
    batches: list[np.ndarray] = []
    for start in range(0, len(order), window):
        chunk = order[start : start + window]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def make_optimizer(model: nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: biases and LayerNorm weights (1-D) are exempt."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


def class_weight_tensor(labels: Sequence[int], n_classes: int) -> torch.Tensor:
    """Inverse-frequency weights n / (k * count_c), shape (n_classes,); mean weight per row 1."""
    counts = np.bincount(np.asarray(labels), minlength=n_classes).astype(np.float64)
    weights = len(labels) / (n_classes * np.maximum(counts, 1.0))
    return torch.tensor(weights, dtype=torch.float32)


@dataclass
class _LoopState:
    """Mutable bookkeeping of one fit: best weights, counters, figures."""

    started: float
    total_steps: int
    step: int = 0
    best_f1: float = -1.0
    best_epoch: int = 0
    best_state: dict[str, torch.Tensor] | None = None
    stale_epochs: int = 0
    val_accuracy: float | None = None
    val_macro_f1: float | None = None


@dataclass(frozen=True)
class FitInputs:
    """What a recipe's fit works on (`fit_classifier`, the quick recipe's `quick_fit`): a
    backbone with a fresh head for `classes` (in column order) and its tokenizer, both (masked)
    splits, the settings, and the device it runs on."""

    model: nn.Module
    tokenizer: Any
    train: Dataset
    val: Dataset
    config: TrainConfig
    classes: Sequence[str]
    device: torch.device


def fit_classifier(
    inputs: FitInputs,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> FitOutcome:
    """Fine-tune `inputs.model` on `inputs.train`, keep the epoch with the best validation
    macro-F1.

    Works with any model whose forward takes `input_ids` and `attention_mask` and returns
    `.logits` (batch, n_classes). The loss is computed here (optionally class-weighted), so the
    model's own loss is never used. Cancelling returns `cancelled=True` and leaves the model
    in an unspecified state.
    """
    model, tokenizer, classes, device = (inputs.model, inputs.tokenizer, inputs.classes,
                                          inputs.device)  # fmt: skip
    train, val, config = inputs.train, inputs.val, inputs.config
    label2id = {label: i for i, label in enumerate(classes)}
    y = np.asarray([label2id[label] for label in train.labels])
    weights = class_weight_tensor(y, len(classes)).to(device) if config.class_weights else None
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total = steps_per_epoch * config.epochs
    total = min(total, config.max_steps) if config.max_steps else total
    optimizer = make_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=int(total * config.warmup_ratio), num_training_steps=total
    )
    state = _LoopState(started=time.perf_counter(), total_steps=total)
    # Validation predicts with the runtime the saved model gets when loaded on this device
    # (precision "auto", as load_model resolves it), so the best epoch is chosen on the
    # answers the model will give; the training steps keep their own rule (train_step).
    predictor = NeuralClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device,
        truncation=config.truncation,
    )  # fmt: skip
    # The training steps run in the precision the runtime rule picks for this device (bf16
    # autocast on CUDA and on CPUs with bf16 matrix units, else fp32; GRIEVANCE_LENS_PRECISION
    # overrides): on an AMX Xeon an epoch took 12.2 s against 15.6 s in fp32 (BENCHMARKS.md,
    # "Engine v3"); more epochs fit in the same minutes.
    # Models learned from scratch keep fp32: their defaults were measured so.
    precision = training_precision(config, predictor.runtime.precision)
    history: list[EpochRecord] = []
    model.train()
    lengths = [len(t) for t in train.texts]  # characters: a free, close proxy of word pieces
    for epoch in range(1, config.epochs + 1):
        rng = np.random.default_rng([config.seed, epoch])
        batches = length_grouped_batches(lengths, config.batch_size, rng)
        batches = batches[: total - state.step]
        losses: list[float] = []
        for i, rows in enumerate(batches):
            if cancel is not None and cancel.is_set():
                return FitOutcome(tuple(history), state.best_epoch, state.step, True)
            texts = [train.texts[r] for r in rows]
            targets = torch.as_tensor(y[rows], device=device)
            loss = train_step(model, tokenizer, texts, targets, weights, optimizer, config,
                              device, precision=precision)  # fmt: skip
            losses.append(loss)
            scheduler.step()
            state.step += 1
            if i == len(batches) - 1:
                history.append(_end_epoch(predictor, val, epoch, losses, state, config, model))
            _report(on_progress, state, epoch, float(np.mean(losses)))
        if state.step >= total or state.stale_epochs >= config.patience:
            break
    if state.best_state is not None:
        model.load_state_dict(state.best_state)
    model.eval()
    return FitOutcome(tuple(history), state.best_epoch, state.step, False)


def training_precision(config: TrainConfig, runtime_precision: str) -> str:
    """The precision of the training steps: the runtime's for a pretrained backbone, fp32 for
    the models learned from scratch (tiny transformer, LSTM)."""
    return "fp32" if config.backbone in FROM_SCRATCH else runtime_precision


def train_step(
    model: nn.Module,
    tokenizer: Any,
    texts: list[str],
    targets: torch.Tensor,
    weights: torch.Tensor | None,
    optimizer: torch.optim.Optimizer,
    config: TrainConfig,
    device: torch.device,
    *,
    precision: str = "fp32",
) -> float:
    """One optimiser step on one batch, under bf16 autocast when `precision` is "bf16" (master
    weights, gradients and the optimiser stay fp32); returns the batch loss."""
    batch = encode_batch(tokenizer, texts, config.max_length, device, config.truncation)
    with autocast(device, precision):
        logits = model(**batch).logits
    loss = nn.functional.cross_entropy(
        logits.float(), targets, weight=weights, label_smoothing=config.label_smoothing
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP_NORM)
    optimizer.step()
    return float(loss.detach())


def _end_epoch(
    predictor: NeuralClassifier,
    val: Dataset,
    epoch: int,
    losses: list[float],
    state: _LoopState,
    config: TrainConfig,
    model: nn.Module,
) -> EpochRecord:
    """Score the validation split in eval mode (dropout off: the best epoch, early stopping
    and the curves must not depend on noise); keep a CPU copy of the weights when macro-F1
    improved."""
    model.eval()
    try:
        predicted = predictor.predict(val.texts)
    finally:
        model.train()
    report = evaluate_predictions(list(val.labels), predicted, labels=list(predictor.classes_))
    state.val_accuracy, state.val_macro_f1 = report.accuracy, report.macro_f1
    if report.macro_f1 > state.best_f1:
        state.best_f1, state.best_epoch, state.stale_epochs = report.macro_f1, epoch, 0
        state.best_state = {
            k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
        }
    else:
        state.stale_epochs += 1
    return EpochRecord(epoch, float(np.mean(losses)), report.accuracy, report.macro_f1)


def _report(
    on_progress: ProgressCallback | None, state: _LoopState, epoch: int, loss: float
) -> None:
    if on_progress is None:
        return
    metrics = StepMetrics(epoch, loss, state.val_accuracy, state.val_macro_f1)
    on_progress(Progress(state.step, state.total_steps, TRAIN_PHASE, metrics))
