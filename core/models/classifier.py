"""What every classifier here meets and returns: the `ProbabilisticClassifier` protocol (the
bag-of-words baseline and the transformer both fit it) and `Prediction`, a label with its
probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

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


def shared_classes(transformer: Any, baseline: Any) -> list[str]:
    """The labels both models share, in column order; ValueError when they disagree."""
    classes = [str(c) for c in transformer.classes_]
    if classes != [str(c) for c in baseline.classes_]:
        raise ValueError(
            f"the transformer's desks {classes} differ from the baseline's "
            f"{[str(c) for c in baseline.classes_]}; load both from one saved model"
        )
    return classes


def device_name(model: Any) -> str:
    """Where a classifier computes, as a device name for core.jobs.JobQueue.heavy_lane: its
    torch device's type ("cuda", "cpu"); "cpu" for models without one (the bag of words)."""
    device = getattr(model, "device", None)
    return str(getattr(device, "type", "cpu"))
