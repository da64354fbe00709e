"""Who reads word order, trained: the bag of words, the tiny transformer with and without
positions, and the LSTM, trained on one split that holds out whole word-order twin groups, scored
on those unseen twins, and timed per complaint as the complaint grows.

The seed chapter's argument made measurable: an LSTM reads order too, but in n sequential steps,
while attention reads every pair of words at once.

Decision: the split holds out *whole* twin groups (seeded), for the test rows and again for the
validation rows, so no model ever trained on a twin of a text it is scored on; the other rows
are split stratified by desk. Every model trains on the same training rows through the shared
loop (`train_models`) with its backbone's defaults, and the validation rows only pick each
model's best epoch.

Decision (timing): the forward pass alone, batch of one (a person waiting for one complaint),
fp32, on the device the models trained on, the median of `repeats` runs after one warm-up, at
torch's thread count as the caller set it. Inputs are synthetic: exactly n in-vocabulary token ids
(the tokenizer's most frequent words, cycled), so both models see the same n. The tiny
transformer is timed on a copy whose sinusoidal table covers the longest length (the table is a
formula, not a weight, so the copy holds exactly the trained weights); the LSTM has no length
limit and is timed as trained.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import train_test_split
from torch import nn

from core.checks import check_fraction, check_int
from core.data.dataset import TWIN_SLICE, Dataset, slice_names
from core.errors import UserError
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.tiny.model import TinyTransformerForSequenceClassification
from core.models.tiny.tokenizer import CLS_ID, UNK_ID
from core.models.transformer.config import LSTM, TINY, TrainConfig
from core.models.transformer.training import train_models
from core.progress import Progress, ProgressCallback, is_cancelled

GROUP_COLUMN = "twin_group"
BOW, TINY_ON, TINY_OFF, LSTM_MODEL = (
    "bag of words", "tiny transformer, positions on", "tiny transformer, positions off", "LSTM",
)  # fmt: skip
ORDER_MODELS = (BOW, TINY_ON, TINY_OFF, LSTM_MODEL)
TIMED = (TINY_ON, LSTM_MODEL)  # the two the timing compares: attention against recurrence
PHASE = "models"
MAX_TIMED_LENGTH = 4096  # tokens: a timing run is bounded by construction


@dataclass(frozen=True)
class OrderModelsConfig:
    """The split, the training budget and the timing of one comparison."""

    seed: int = 0  # the split's groups and rows, and every model's weights
    test_share: float = 0.25  # of the twin groups (whole) and of the other rows
    val_share: float = 0.2  # of the rest, drawn the same way; picks each model's best epoch
    # None: each backbone's own (BACKBONE_DEFAULTS); a number caps every model (tests: 1).
    epochs: int | None = None
    max_steps: int | None = None  # optimiser steps per model (None: no cap)
    device: str = "auto"  # where the models train and are timed
    lengths: tuple[int, ...] = (16, 32, 64, 128, 256)  # tokens per timed complaint
    repeats: int = 5  # timed passes per (model, length); the median is kept

    def __post_init__(self) -> None:
        check_int("seed", self.seed, minimum=0)
        check_fraction("test_share", self.test_share, low=0.0, high=0.5)
        check_fraction("val_share", self.val_share, low=0.0, high=0.5)
        if self.epochs is not None:
            check_int("epochs", self.epochs, minimum=1)
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, minimum=1)
        check_int("repeats", self.repeats, minimum=1)
        if not self.lengths or any(
            isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TIMED_LENGTH
            for n in self.lengths
        ):
            raise UserError(f"lengths must be token counts in 1..{MAX_TIMED_LENGTH}")


@dataclass(frozen=True)
class OrderModelScore:
    """One model on the held-out rows: accuracy on all test rows and on the held-out twins."""

    name: str
    accuracy: float
    twin_accuracy: float
    twin_rows: int
    train_seconds: float
    # Largest difference of one desk's probability between two members of one held-out twin
    # group: 0 (to float noise) for a model that cannot see order.
    twin_spread: float = 0.0


@dataclass(frozen=True)
class OrderModelTiming:
    """Forward-pass time per complaint: columns model, tokens, ms_per_complaint."""

    table: pd.DataFrame
    device: str = "cpu"
    repeats: int = 1

    def ratio(self, model: str, reference: str) -> pd.Series:
        """ms of `model` over ms of `reference` at each length (index: tokens)."""
        wide = self.table.pivot(index="tokens", columns="model", values="ms_per_complaint")
        return wide[model] / wide[reference]


@dataclass(frozen=True)
class OrderModels:
    """The four models' scores on one split, and the timing of the two that read order."""

    scores: tuple[OrderModelScore, ...]
    timing: OrderModelTiming
    split: str
    test_rows: int
    twin_groups_held_out: int
    train_rows: int = 0
    val_rows: int = 0

    def score(self, name: str) -> OrderModelScore:
        """The score of model `name` (one of ORDER_MODELS)."""
        return next(s for s in self.scores if s.name == name)

    def table(self) -> pd.DataFrame:
        """One row per model: name, accuracy, twin_accuracy, twin_rows, train_seconds, ..."""
        return pd.DataFrame([s.__dict__ for s in self.scores])


# ------------------------------------------------------------------------------ the split


def twin_groups(data: Dataset) -> np.ndarray:
    """The twin group id of every row, -1 for rows outside the twin slice, shape (n,)."""
    groups = pd.to_numeric(data.extra[GROUP_COLUMN], errors="coerce").fillna(-1).astype(int)
    is_twin = np.asarray(slice_names(data)) == TWIN_SLICE
    return np.where(is_twin, groups.to_numpy(), -1)


def group_split(data: Dataset, share: float, seed: int) -> tuple[Dataset, Dataset]:
    """(rest, held out): a seeded `share` of the twin groups, whole, plus a `share` of the
    other rows, stratified by desk when every desk has two rows to split."""
    groups = twin_groups(data)
    ids = np.unique(groups[groups >= 0])
    held_groups = set(np.random.default_rng(seed).permutation(ids)[: round(len(ids) * share)])
    others = np.flatnonzero(groups < 0)
    desks = [data.labels[i] for i in others]
    stratify = desks if min(pd.Series(desks).value_counts(), default=0) >= 2 else None
    _, held_others = train_test_split(others, test_size=share, random_state=seed, stratify=stratify)
    held = set(held_others.tolist()) | {i for i, g in enumerate(groups) if g in held_groups}
    rest = [i for i in range(len(data)) if i not in held]
    return data.subset(rest), data.subset(sorted(held))


def _check_twins(dataset: Dataset) -> None:
    missing = {GROUP_COLUMN, "slice"} - set(dataset.extra.columns)
    if missing:
        raise UserError(
            f"the data set has no {' or '.join(sorted(missing))} column; compare the models on "
            "the demo data, whose word-order twins are marked"
        )
    if not (twin_groups(dataset) >= 0).any():
        raise UserError("the data set marks no word-order twin groups; use the demo data")


def split_for_order_models(dataset: Dataset, config: OrderModelsConfig) -> tuple[Dataset, ...]:
    """(train, val, test): whole twin groups held out for test, then for validation."""
    _check_twins(dataset)
    rest, test = group_split(dataset, config.test_share, config.seed)
    train, val = group_split(rest, config.val_share, config.seed)
    return train, val, test


# ------------------------------------------------------------------------------ scoring


def score_order_model(
    name: str, pred_probs: np.ndarray, classes: Sequence[str], test: Dataset, seconds: float
) -> OrderModelScore:
    """Accuracy of `pred_probs` (n_test, n_classes) on all test rows and on its twin rows."""
    predicted = np.asarray(classes)[pred_probs.argmax(axis=1)]
    truth = np.asarray(test.labels)
    groups = twin_groups(test)
    twins = groups >= 0
    spread = max(
        (float(np.ptp(pred_probs[groups == g], axis=0).max()) for g in np.unique(groups[twins])),
        default=0.0,
    )
    return OrderModelScore(
        name, float((predicted == truth).mean()), float((predicted[twins] == truth[twins]).mean()),
        int(twins.sum()), round(seconds, 3), spread,
    )  # fmt: skip


# ------------------------------------------------------------------------------ the models


def _train_config(backbone: str, positions: bool, config: OrderModelsConfig) -> TrainConfig:
    budget = {"epochs": config.epochs} if config.epochs is not None else {}
    return TrainConfig(
        backbone=backbone, positional_encoding=positions, seed=config.seed,
        device=config.device, max_steps=config.max_steps, **budget,
    )  # fmt: skip


_NEURAL = ((TINY_ON, TINY, True), (TINY_OFF, TINY, False), (LSTM_MODEL, LSTM, True))


def compare_order_models(
    dataset: Dataset,
    config: OrderModelsConfig = OrderModelsConfig(),
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> OrderModels | None:
    """Train the four models on one split that holds out whole twin groups; score and time them.

    Needs the demo data's `twin_group` and `slice` columns (UserError otherwise). Progress goes
    to `on_progress` in units of models (fractions while one trains, then the timing); a set
    `cancel` returns None.
    """
    train, val, test = split_for_order_models(dataset, config)
    report = _progress(on_progress, len(_NEURAL) + 2)
    scores, trained = [_bag_of_words(train, test)], {}
    for i, (name, backbone, positions) in enumerate(_NEURAL, start=1):
        result = train_models(
            train, val, _train_config(backbone, positions, config),
            on_progress=lambda p, i=i, name=name: report(i + p.fraction, name),
            cancel=cancel,
        )  # fmt: skip
        if result.cancelled or is_cancelled(cancel):
            return None
        model = result.neural
        probs = model.predict_proba(list(test.texts))
        scores.append(score_order_model(name, probs, model.classes_, test, result.train_seconds))
        trained[name] = (model.model, model.tokenizer)
    report(len(_NEURAL) + 1, "timing")
    timed = {name: trained[name] for name in TIMED}
    timing = time_per_complaint(timed, config.lengths, repeats=config.repeats, cancel=cancel)
    if timing is None:
        return None
    return OrderModels(
        tuple(scores), timing, _describe(train, val, test, config), len(test),
        len(np.unique(twin_groups(test)[twin_groups(test) >= 0])), len(train), len(val),
    )  # fmt: skip


def _bag_of_words(train: Dataset, test: Dataset) -> OrderModelScore:
    started = time.perf_counter()
    bow = BagOfWordsClassifier().fit(list(train.texts), list(train.labels))
    seconds = time.perf_counter() - started
    probs = bow.predict_proba(list(test.texts))
    return score_order_model(BOW, probs, [str(c) for c in bow.classes_], test, seconds)


def _progress(on_progress: ProgressCallback | None, total: int) -> Callable[[float, str], None]:
    def report(done: float, detail: str) -> None:
        if on_progress is not None:
            on_progress(Progress(done, total, PHASE, detail))

    return report


def _describe(train: Dataset, val: Dataset, test: Dataset, config: OrderModelsConfig) -> str:
    held = len(np.unique(twin_groups(test)[twin_groups(test) >= 0]))
    return (
        f"seed {config.seed}: {len(train)} training, {len(val)} validation and {len(test)} test "
        f"rows; {held} twin groups held out whole for test ({config.test_share:.0%} of the "
        f"groups), and {config.val_share:.0%} of the rest for validation"
    )


# ------------------------------------------------------------------------------ timing


def time_per_complaint(
    models: dict[str, tuple[nn.Module, Any]],
    lengths: Sequence[int],
    *,
    repeats: int = 5,
    cancel: threading.Event | None = None,
) -> OrderModelTiming | None:
    """Median forward time of one complaint of exactly n tokens, for each model and n in
    `lengths`: a OrderModelTiming whose table has one row per (model, length); None on cancel.

    `models` maps a model's name to its (model, tokenizer); models are timed in eval mode, fp32,
    on their own device (see the module docstring for the inputs and the tiny transformer's copy).
    """
    check_int("repeats", repeats, minimum=1)
    rows, device = [], "cpu"
    for name, (model, tokenizer) in models.items():
        timed = _timing_copy(model, max(lengths))
        device = str(timed.device)
        for n in lengths:
            if is_cancelled(cancel):
                return None
            ids = _synthetic_ids(tokenizer, n).to(timed.device)  # (1, n)
            rows.append({"model": name, "tokens": int(n),
                         "ms_per_complaint": _median_ms(timed, ids, repeats)})  # fmt: skip
    return OrderModelTiming(pd.DataFrame(rows, columns=["model", "tokens", "ms_per_complaint"]),
                        device, repeats)  # fmt: skip


def _timing_copy(model: nn.Module, longest: int) -> nn.Module:
    """The model ready to read `longest` tokens, in eval mode: a tiny transformer whose table
    is too short gets a copy with a longer one and the same weights."""
    if not isinstance(model, TinyTransformerForSequenceClassification):
        return model.eval()
    if model.config.max_length >= longest:
        return model.eval()
    copy = TinyTransformerForSequenceClassification(replace(model.config, max_length=longest))
    copy.load_state_dict(model.state_dict())
    return copy.to(model.device).eval()


def _synthetic_ids(tokenizer: Any, n: int) -> torch.Tensor:
    """(1, n) ids of in-vocabulary words (the most frequent, cycled); [CLS] first if used."""
    cls = bool(getattr(tokenizer, "add_cls", False))
    first = CLS_ID + 1 if cls else UNK_ID + 1  # the specials come first (core.models.tiny)
    words = list(range(first, len(tokenizer))) or [UNK_ID]
    ids = [words[i % len(words)] for i in range(n)]
    if cls:
        ids = [CLS_ID, *ids[: n - 1]]
    return torch.tensor([ids], dtype=torch.long)


def _median_ms(model: nn.Module, input_ids: torch.Tensor, repeats: int) -> float:
    mask = torch.ones_like(input_ids)
    seconds = []
    with torch.inference_mode():
        model(input_ids=input_ids, attention_mask=mask)  # warm-up: first-call allocations
        for _ in range(repeats):
            _sync(input_ids.device)
            started = time.perf_counter()
            model(input_ids=input_ids, attention_mask=mask)
            _sync(input_ids.device)
            seconds.append(time.perf_counter() - started)
    return 1000.0 * statistics.median(seconds)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
