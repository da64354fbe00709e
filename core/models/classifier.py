"""What every classifier here meets and returns: the `ProbabilisticClassifier` protocol (the
bag of words and the transformer both fit it) and `Prediction`, a label with its
probabilities."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from core.errors import UserError

# A desk decision below 60% confidence goes to a person: on the demo data this flags the
# ambiguous complaints without burying reviewers (the page lets analysts move it).
DEFAULT_REVIEW_THRESHOLD = 0.6


class ProbabilisticClassifier(Protocol):
    """Sorted `classes_` and `predict_proba(texts)` returning (n, n_classes) probabilities."""

    classes_: np.ndarray

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Prediction:
    """One model's answer for one text: the top label, every label's probability, and whether a
    human should look (the top probability is below the review threshold)."""

    label: str
    probabilities: dict[str, float]
    needs_review: bool = False

    @classmethod
    def of(
        cls, classes: Sequence[str], pred_probs: np.ndarray, *, review_threshold: float = 0.0
    ) -> Prediction:
        """From class names (k,) and one row of probabilities (k,)."""
        names = [str(c) for c in classes]
        top = int(np.argmax(pred_probs))
        probabilities = {c: float(p) for c, p in zip(names, pred_probs, strict=True)}
        return cls(names[top], probabilities, probabilities[names[top]] < review_threshold)

    @property
    def confidence(self) -> float:
        return self.probabilities[self.label]

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "probabilities": dict(self.probabilities)}


def shared_classes(neural: Any, bow: Any) -> list[str]:
    """The labels both models share, in column order; UserError when they disagree."""
    classes = [str(c) for c in neural.classes_]
    if classes != [str(c) for c in bow.classes_]:
        raise UserError(
            f"the neural model's desks {classes} differ from the bag of words' "
            f"{[str(c) for c in bow.classes_]}; load both from one saved model"
        )
    return classes


def device_name(model: Any) -> str:
    """Where a classifier computes, as a device name for core.jobs.JobQueue.heavy_lane: its
    torch device's type ("cuda", "cpu"); "cpu" for models without one (the bag of words)."""
    device = getattr(model, "device", None)
    return str(getattr(device, "type", "cpu"))


CHUNK = 256  # texts per prediction between cancel checks: prompt to stop, big enough to batch


def predict_in_batches(
    model: Any,
    texts: Sequence[str],
    *,
    chunk: int = CHUNK,
    on_rows: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
) -> np.ndarray | None:
    """`model.predict_proba(texts)`, (n, k) in input order, a chunk at a time: `cancel` is checked
    before each chunk (None is returned once it is set) and `on_rows(done)` hears how many texts
    are done after each. The one loop every long prediction goes through.

    The chunks are cut from all of `texts` sorted by length, so each of the model's batches
    holds texts of about one length and pads little: chunks of the input order would mix short
    and long texts in every batch.
    """

    def predict(chunk_texts: list[str]) -> tuple[np.ndarray]:
        return (model.predict_proba(chunk_texts),)

    found = _in_batches(predict, texts, chunk=chunk, on_rows=on_rows, cancel=cancel)
    if found is None:
        return None
    return np.zeros((0, len(model.classes_))) if not found else found[0]


def predict_with_features_in_batches(
    model: Any,
    texts: Sequence[str],
    *,
    chunk: int = CHUNK,
    on_rows: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
    batch_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """`predict_in_batches` for `model.predict_proba_and_features` (a NeuralClassifier):
    probabilities (n, k) and embeddings (n, d) in input order; None when cancelled.
    `batch_size`: texts per forward pass (None: the model's default)."""
    predict = model.predict_proba_and_features
    if batch_size is not None:
        predict = functools.partial(predict, batch_size=batch_size)
    found = _in_batches(predict, texts, chunk=chunk, on_rows=on_rows, cancel=cancel)
    if found is None:
        return None
    if not found:
        return np.zeros((0, len(model.classes_))), np.zeros((0, 0), dtype=np.float32)
    return found[0], found[1]


def _in_batches(
    predict: Callable[[list[str]], tuple[np.ndarray, ...]],
    texts: Sequence[str],
    *,
    chunk: int,
    on_rows: Callable[[int], None] | None,
    cancel: threading.Event | None,
) -> list[np.ndarray] | None:
    """The arrays `predict` returns (a tuple: probabilities first, n rows each) for all of
    `texts`, gathered in input order; [] for no texts, None when cancelled."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    gathered: list[np.ndarray] = []
    for start in range(0, len(texts), chunk):
        if cancel is not None and cancel.is_set():
            return None
        rows = order[start : start + chunk]
        parts = predict([texts[i] for i in rows])
        if not gathered:  # probabilities first, always float64 (as every caller had them)
            kinds = [np.float64] + [p.dtype for p in parts[1:]]
            gathered = [
                np.empty((len(texts), p.shape[1]), dtype=k)
                for p, k in zip(parts, kinds, strict=True)
            ]
        for into, part in zip(gathered, parts, strict=True):
            into[rows] = part
        if on_rows is not None:
            on_rows(start + len(rows))
    return gathered
