"""Classification metrics over label lists and `pred_probs` arrays: reports, per-class figures
and confusion matrices. It sees only arrays and labels (the bottom layer: no data sets, no
models; core.models.evaluation applies it to them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from core.errors import UserError


@dataclass(frozen=True)
class ClassMetrics:
    """Precision, recall and F1 of one class, and how many true examples it has."""

    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class EvalReport:
    """Accuracy, macro F1, per-class metrics and the confusion matrix of one evaluation.

    `confusion[i][j]` counts examples whose true label is `labels[i]` and prediction `labels[j]`.
    """

    accuracy: float
    macro_f1: float
    per_class: dict[str, ClassMetrics]
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    n: int

    def to_json(self) -> dict:
        """A JSON-ready dict with keys accuracy, macro_f1, per_class, labels, confusion, n."""
        return {
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "per_class": {
                label: {
                    "precision": m.precision,
                    "recall": m.recall,
                    "f1": m.f1,
                    "support": m.support,
                }
                for label, m in self.per_class.items()
            },
            "labels": list(self.labels),
            "confusion": [list(row) for row in self.confusion],
            "n": self.n,
        }


def evaluate_predictions(
    y_true: Sequence[str], y_pred: Sequence[str], *, labels: Sequence[str] | None = None
) -> EvalReport:
    """Compare predicted with true labels.

    Parameters
    ----------
    y_true, y_pred : sequences of str, length n
    labels : the classes to report, in this order; default the sorted union of both sequences.
        A class never predicted gets precision 0 (zero_division=0).
    """
    y_true, y_pred = _check_label_list(y_true, "y_true"), _check_label_list(y_pred, "y_pred")
    if len(y_true) != len(y_pred):
        raise UserError(f"y_true has {len(y_true)} labels but y_pred {len(y_pred)}; align them")
    if not y_true:
        raise UserError("nothing to evaluate: y_true and y_pred are empty")
    labels = _resolve_labels(labels, y_true, y_pred)
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=list(labels), zero_division=0
    )
    per_class = {
        label: ClassMetrics(float(p), float(r), float(f), int(s))
        for label, p, r, f, s in zip(labels, precision, recall, f1, support, strict=True)
    }
    matrix = confusion_matrix(y_true, y_pred, labels=list(labels))
    return EvalReport(
        accuracy=float(np.mean(np.asarray(y_true) == np.asarray(y_pred))),
        macro_f1=float(np.mean(f1)),
        per_class=per_class,
        labels=labels,
        confusion=tuple(tuple(int(c) for c in row) for row in matrix),
        n=len(y_true),
    )


def evaluate_proba(
    y_true: Sequence[str],
    pred_probs: np.ndarray,
    classes: Sequence[str],
    *,
    labels: Sequence[str] | None = None,
) -> EvalReport:
    """Evaluate the argmax of `pred_probs` (n, n_classes), whose columns follow `classes`.

    `labels` defaults to the sorted union of `classes` and `y_true`, so every class of the model
    is reported even if it is never predicted.
    """
    classes = _check_label_list(classes, "classes")
    pred_probs = np.asarray(pred_probs)
    if pred_probs.ndim != 2 or pred_probs.shape[1] != len(classes):
        raise UserError(
            f"pred_probs must have shape (n, {len(classes)}) to match classes, "
            f"got {pred_probs.shape}"
        )
    if not np.isfinite(pred_probs).all():
        raise UserError("pred_probs contains NaN or infinite values; check the model's output")
    if len(set(classes)) != len(classes):
        raise UserError(f"classes must be distinct, got {classes}")
    if labels is None:
        labels = model_labels(classes, _check_label_list(y_true, "y_true"))
    return evaluate_predictions(y_true, argmax_labels(pred_probs, classes), labels=labels)


def argmax_labels(pred_probs: np.ndarray, classes: Sequence[str]) -> list[str]:
    """The label of each row's most probable column (`pred_probs` (n, k), columns `classes`)."""
    return [classes[i] for i in pred_probs.argmax(axis=1)]


def model_labels(classes: Sequence[str], y_true: Sequence[str]) -> list[str]:
    """Every class of the model, reported even if never predicted, and every true label."""
    return sorted(set(classes) | set(y_true))


def confusion_frame(report: EvalReport) -> pd.DataFrame:
    """The confusion matrix in long form: columns true, predicted, count (for Altair heatmaps)."""
    rows = [
        (true, predicted, count)
        for true, row in zip(report.labels, report.confusion, strict=True)
        for predicted, count in zip(report.labels, row, strict=True)
    ]
    frame = pd.DataFrame(rows, columns=["true", "predicted", "count"])
    return frame.astype({"count": "int64"})


def _check_label_list(values: Sequence[str], name: str) -> list[str]:
    if isinstance(values, str):
        raise UserError(f"{name} must be a list of labels, not one string")
    values = list(values)
    bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
    if bad is not None:
        raise UserError(f"{name}[{bad}] is {values[bad]!r}, not str; convert labels to strings")
    return [str(v) for v in values]


def _resolve_labels(
    labels: Sequence[str] | None, y_true: list[str], y_pred: list[str]
) -> tuple[str, ...]:
    if labels is None:
        return tuple(sorted(set(y_true) | set(y_pred)))
    labels = tuple(_check_label_list(labels, "labels"))
    if len(set(labels)) != len(labels) or not labels:
        raise UserError(f"labels must be a non-empty list of distinct strings, got {labels}")
    unknown = sorted((set(y_true) | set(y_pred)) - set(labels))
    if unknown:
        raise UserError(f"y_true/y_pred contain labels not in labels: {unknown}; add them")
    return labels
