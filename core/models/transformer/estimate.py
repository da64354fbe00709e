"""How long a training will take, from a few timed steps on this machine and the data's size.

The cost of a forward (and backward) pass grows with the padded word pieces of its batch, so a
few passes over batches of different lengths are timed, a line `seconds = a + b * word pieces`
is fitted through them, and the line is summed over every batch the training will run: the
fine-tuning steps of every epoch and each epoch's validation pass (full recipe), or the
embedding batches of both splits (quick recipe). Loading the backbone is timed as it happens;
the bag of words and the quick recipe's head are timed on a sample and scaled by rows.

The figure assumes the machine stays as busy as it was while timing, and that no early stop
cuts the epochs short: a full run that stops early takes less.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from core.data.dataset import Dataset
from core.data.privacy import mask_texts
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.device import Runtime, resolve_device
from core.models.seeding import job_generator, seeded_dropout
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from core.models.transformer.inference import DEFAULT_BATCH_SIZE, NeuralClassifier
from core.models.transformer.loop import (
    class_weight_tensor,
    length_grouped_batches,
    make_optimizer,
    train_step,
    training_precision,
)
from core.models.transformer.quick import EMBED_BATCH, HEAD_STRENGTHS, embed_texts, fit_linear_head
from core.models.transformer.recipe import median_rows_per_desk, only_full, try_full
from core.progress import check_cancel
from core.text import cut_for_tokens

TIMED_PASSES = 3  # timed batches, short to long, after one untimed warm-up pass
BOW_SAMPLE = 400  # rows the bag of words is timed on
HEAD_SAMPLE = 2000  # rows of the synthetic problem the quick head is timed on


@dataclass(frozen=True)
class DurationEstimate:
    """The expected wall time of one training, and what it is made of (seconds).

    The per-epoch parts let `for_budget` rescale it to other epochs or a step limit without
    timing again (nothing else in a run's cost depends on them).
    """

    recipe: str
    load_s: float  # loading the backbone
    epoch_s: float  # one epoch's training steps (full) or embedding both splits (quick)
    validation_s: float  # one validation pass (full; 0 for quick, whose head is scored at once)
    rest_s: float  # the bag of words, and the quick head
    steps_per_epoch: int  # training steps (full) or embedding batches (quick) of one epoch
    validation_passes: int  # batches of one validation pass
    # The reports at the end: the transformer on the validation rows once more (both recipes).
    report_s: float = 0.0
    report_passes: int = 0
    epochs: int = 1
    max_steps: int | None = None

    @property
    def steps(self) -> int:
        """Training steps (full) or embedding batches (quick) the run makes."""
        total = self.steps_per_epoch * self.epochs
        return min(total, self.max_steps) if self.max_steps else total

    @property
    def epochs_run(self) -> int:
        return math.ceil(self.steps / self.steps_per_epoch)

    @property
    def passes(self) -> int:
        """Forward passes the run makes: steps, and each epoch's validation batches."""
        return self.steps + self.validation_passes * self.epochs_run + self.report_passes

    @property
    def seconds(self) -> float:
        steps_s = self.epoch_s * self.steps / self.steps_per_epoch
        validation_s = self.validation_s * self.epochs_run + self.report_s
        return self.load_s + steps_s + validation_s + self.rest_s

    def for_budget(self, epochs: int, max_steps: int | None) -> DurationEstimate:
        """The same run with another number of epochs or step limit (full recipe)."""
        if self.recipe == QUICK:
            return self
        return replace(self, epochs=epochs, max_steps=max_steps)

    def text(self) -> str:
        """E.g. "about 45 s" or "about 7 min"."""
        if self.seconds < 90:
            return f"about {max(5, round(self.seconds / 5) * 5):.0f} s"
        return f"about {self.seconds / 60:.0f} min"


@dataclass(frozen=True)
class _CostLine:
    """seconds = intercept + slope * padded word pieces, fitted through timed passes."""

    intercept: float
    slope: float

    @classmethod
    def fit(cls, timed: Sequence[tuple[int, float]]) -> _CostLine:
        """The line through (padded word pieces, seconds) pairs; the mean rate when the
        batches were all alike or timing noise tilts the line downwards."""
        pieces = np.asarray([p for p, _ in timed], float)
        seconds = np.asarray([s for _, s in timed], float)
        mean_rate = cls(0.0, float(seconds.sum() / pieces.sum()))
        if len(set(pieces.tolist())) < 2:
            return mean_rate
        slope, intercept = np.polyfit(pieces, seconds, 1)
        return cls(max(0.0, float(intercept)), float(slope)) if slope > 0 else mean_rate

    def total(self, pieces: Sequence[int]) -> float:
        return float(sum(self.intercept + self.slope * p for p in pieces))


def estimate_duration(
    train: Dataset, val: Dataset, config: TrainConfig, *, cancel: threading.Event | None = None
) -> DurationEstimate:
    """Time a few passes of `config`'s training on `train` and `val` and scale to all of it.

    Costs a few seconds: the backbone is loaded and a handful of batches run (training steps
    on a throwaway copy for "full"). Raises UserError for what training itself would refuse,
    core.progress.Cancelled when `cancel` is set once the backbone is loaded.
    """
    from core.models.transformer.training import check_split

    if config.recipe == AUTO:
        return _estimate_auto(train, val, config, cancel)
    classes = check_split(train, val)
    device = resolve_device(config.device)
    train_texts, val_texts = mask_texts(list(train.texts)), mask_texts(list(val.texts))
    started = time.perf_counter()
    model, tokenizer = load_backbone(config, classes, texts=train_texts)
    model.to(device)
    load_s = time.perf_counter() - started
    check_cancel(cancel)
    pieces = _piece_counter(tokenizer, config.max_length)
    if config.recipe == QUICK:
        parts = _quick_costs(model, tokenizer, train, train_texts, val_texts, config, pieces,
                             device)  # fmt: skip
    else:
        parts = _full_costs(model, tokenizer, train, train_texts, val_texts, config, classes,
                            pieces, device)  # fmt: skip
    estimate = replace(parts, load_s=load_s, rest_s=parts.rest_s + _bow_seconds(train))
    return estimate.for_budget(config.epochs, config.max_steps)


def _estimate_auto(
    train: Dataset, val: Dataset, config: TrainConfig, cancel: threading.Event | None
) -> DurationEstimate:
    """The recipe "auto" runs the quick recipe, then the full one where the data call for it
    (core.models.transformer.recipe): the sum of both estimates."""
    if only_full(config) is not None:
        return estimate_duration(train, val, replace(config, recipe=FULL), cancel=cancel)
    quick = estimate_duration(train, val, replace(config, recipe=QUICK), cancel=cancel)
    if not try_full(median_rows_per_desk(train.labels)):
        return quick
    full = estimate_duration(train, val, replace(config, recipe=FULL), cancel=cancel)
    return replace(full, rest_s=full.rest_s + quick.seconds)


def _piece_counter(tokenizer, max_length: int) -> Callable[[Sequence[str]], list[int]]:
    """Word pieces of each text as the model receives them (special tokens in, cut at
    `max_length`)."""

    def count(texts: Sequence[str]) -> list[int]:
        cut = [cut_for_tokens(t, max_length) for t in texts]
        ids = tokenizer(cut, truncation=True, max_length=max_length, return_tensors=None)
        ids = ids["input_ids"]
        return [len(row) for row in ids]

    return count


def _padded(lengths: np.ndarray, batches: Sequence[np.ndarray]) -> list[int]:
    """Padded word pieces of each batch: rows times its longest row."""
    return [len(rows) * int(lengths[rows].max()) for rows in batches]


def _sorted_batches(n: int, lengths: np.ndarray, size: int) -> list[np.ndarray]:
    order = np.argsort(lengths, kind="stable")
    return [order[i : i + size] for i in range(0, n, size)]


def _timed_picks(padded: Sequence[int]) -> list[int]:
    """Indices of a median batch (warm-up) then TIMED_PASSES batches from short to long."""
    order = np.argsort(padded, kind="stable")
    spots = [0.5, *np.linspace(0.1, 0.9, TIMED_PASSES)]
    return [int(order[min(len(order) - 1, int(q * len(order)))]) for q in spots]


def _timed_passes(run: Callable[[int], None], padded: Sequence[int]) -> list[tuple[int, float]]:
    """(padded word pieces, seconds) of TIMED_PASSES batches, short to long, after a warm-up
    pass; each batch runs twice and its second run is timed: the first run of a new shape
    also prepares its kernels, which a whole run pays once per shape, not once per batch."""
    picks = _timed_picks(padded)
    run(picks[0])  # allocations, lazy initialisation, the optimiser's state
    timed = []
    for pick in picks[1:]:
        run(pick)
        started = time.perf_counter()
        run(pick)
        timed.append((padded[pick], time.perf_counter() - started))
    return timed


def _full_costs(model, tokenizer, train, train_texts, val_texts, config, classes, pieces, device):
    """Seconds and passes of every training step and validation pass of a full run."""
    train_lengths = np.asarray(pieces(train_texts))
    batches = length_grouped_batches(
        [len(t) for t in train.texts], config.batch_size, np.random.default_rng([config.seed, 1])
    )
    padded = _padded(train_lengths, batches)
    label_ids = {label: i for i, label in enumerate(classes)}
    targets_all = np.asarray([label_ids[y] for y in train.labels])
    weights = class_weight_tensor(targets_all, len(classes)).to(device)
    optimizer = make_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
    precision = training_precision(config, Runtime.resolve(device).precision)  # as the loop
    model.train()

    def step(pick: int) -> None:
        rows = batches[pick]
        targets = torch.as_tensor(targets_all[rows], device=device)
        train_step(model, tokenizer, [train_texts[r] for r in rows], targets, weights,
                   optimizer, config, device, precision=precision)  # fmt: skip

    with seeded_dropout(model, job_generator(config.seed, device)):  # as the real run does
        timed = _timed_passes(step, padded)
    val_s, val_passes = _inference_costs(model, tokenizer, val_texts, classes, config, pieces,
                                         device, DEFAULT_BATCH_SIZE)  # fmt: skip
    # The epochs' batches differ in order only: each epoch costs what epoch one costs.
    return DurationEstimate(
        recipe=config.recipe, load_s=0.0, epoch_s=_CostLine.fit(timed).total(padded),
        validation_s=val_s, rest_s=0.0, steps_per_epoch=len(batches),
        validation_passes=val_passes, report_s=val_s, report_passes=val_passes,
    )  # fmt: skip


def _inference_costs(model, tokenizer, texts, classes, config, pieces, device, size):
    """Seconds and passes of one length-sorted inference pass over `texts`."""
    lengths = np.asarray(pieces(texts))
    batches = _sorted_batches(len(texts), lengths, size)
    padded = _padded(lengths, batches)
    # The precision a training's validation uses: "auto" (bf16 on CUDA and on CPUs with bf16
    # units, fp32 elsewhere).
    classifier = NeuralClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device,
        truncation=config.truncation,
    )  # fmt: skip

    def predict(pick: int) -> None:
        with torch.inference_mode():
            classifier._batch_proba([texts[r] for r in batches[pick]])

    timed = _timed_passes(predict, padded)
    return _CostLine.fit(timed).total(padded), len(batches)


def _quick_costs(model, tokenizer, train, train_texts, val_texts, config, pieces, device):
    """Seconds and passes of embedding both splits, and seconds of fitting the head."""
    texts = train_texts + val_texts
    lengths = np.asarray(pieces(texts))
    batches = _sorted_batches(len(texts), lengths, EMBED_BATCH)
    padded = _padded(lengths, batches)
    runtime = Runtime.resolve(device)  # quick_fit's, so the estimate times the same passes

    def embed(pick: int) -> None:
        embed_texts(model, tokenizer, [texts[r] for r in batches[pick]],
                    max_length=config.max_length, runtime=runtime,
                    truncation=config.truncation)  # fmt: skip

    timed = _timed_passes(embed, padded)
    head_s = _head_seconds(len(train), model.classifier.in_features, len(set(train.labels)),
                           config)  # fmt: skip
    line = _CostLine.fit(timed)
    val_lengths = lengths[len(train_texts) :]
    val_padded = _padded(val_lengths, _sorted_batches(len(val_texts), val_lengths, EMBED_BATCH))
    return DurationEstimate(
        recipe=config.recipe, load_s=0.0, epoch_s=line.total(padded),
        validation_s=0.0, rest_s=head_s, steps_per_epoch=len(batches), validation_passes=0,
        report_s=line.total(val_padded), report_passes=len(val_padded),
    )  # fmt: skip


def _head_seconds(rows: int, hidden: int, classes: int, config: TrainConfig) -> float:
    """The head's fit timed on a synthetic problem of the same shape (rows up to HEAD_SAMPLE,
    `hidden` features, `classes` separable blobs), scaled by rows: a logistic regression's cost
    grows with rows once its fixed costs are paid, and a small real sample may lack classes."""
    rng = np.random.default_rng(0)
    n = min(rows, HEAD_SAMPLE)
    labels = np.arange(n) % classes
    centres = rng.normal(size=(classes, hidden)).astype(np.float32)
    features = centres[labels] + rng.normal(size=(n, hidden)).astype(np.float32)
    fit_linear_head(features, labels, features, labels, n_classes=classes, strengths=(1.0,))
    started = time.perf_counter()  # after a warm-up fit: first calls load and compile
    fit_linear_head(features, labels, features, labels, n_classes=classes,
                    class_weights=config.class_weights, strengths=HEAD_STRENGTHS)  # fmt: skip
    return (time.perf_counter() - started) * rows / n


def _bow_seconds(train: Dataset) -> float:
    """The bag of words fitted on a sample, scaled by rows."""
    rows = min(len(train), BOW_SAMPLE)
    picked = np.linspace(0, len(train) - 1, rows).astype(int)
    texts = [train.texts[i] for i in picked]
    labels = [train.labels[i] for i in picked]
    if len(set(labels)) < 2:
        return 0.0
    BagOfWordsClassifier().fit(texts[:50], labels[:50]) if len(set(labels[:50])) > 1 else None
    started = time.perf_counter()  # after a warm-up fit: first calls load and compile
    BagOfWordsClassifier().fit(texts, labels)
    return (time.perf_counter() - started) * len(train) / rows
