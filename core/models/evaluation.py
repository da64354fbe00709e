"""Evaluating a classifier on a data set: the metrics of core.metrics on every row and on each
slice the data set marks (the demo's word-order "twin" rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.data.dataset import Dataset, slice_names, slice_rows
from core.errors import UserError
from core.metrics import (
    EvalReport,
    argmax_labels,
    evaluate_predictions,
    evaluate_proba,
    model_labels,
)
from core.models.classifier import ProbabilisticClassifier


def evaluate_model(
    model: ProbabilisticClassifier, texts: Sequence[str], labels: Sequence[str]
) -> EvalReport:
    """Evaluate any model with `classes_` and `predict_proba(texts)` against gold `labels`."""
    if len(texts) != len(labels):
        raise UserError(f"got {len(texts)} texts but {len(labels)} labels; give one per text")
    classes = [str(c) for c in model.classes_]
    return evaluate_proba(labels, model.predict_proba(texts), classes)


def slice_reports(
    dataset: Dataset, y_pred: Sequence[str], *, labels: Sequence[str]
) -> dict[str, EvalReport]:
    """One report per slice the data set marks in its `slice` column (e.g. the demo's "twin"
    rows, where a bag of words is provably capped); empty when it marks none.

    `y_pred` (n,) are the predictions for every row of `dataset`, in order.
    """
    truth, pred = list(dataset.labels), list(y_pred)
    reports = {}
    for name in sorted(set(slice_names(dataset)) - {""}):
        rows = slice_rows(dataset, name)
        picked = [truth[i] for i in rows], [pred[i] for i in rows]
        reports[name] = evaluate_predictions(*picked, labels=labels)
    return reports


def evaluate_with_slices(
    model: ProbabilisticClassifier, dataset: Dataset
) -> tuple[EvalReport, dict[str, EvalReport]]:
    """`evaluate_model` on all of `dataset` and `slice_reports` on its slices, predicting once."""
    classes = [str(c) for c in model.classes_]
    return reports_with_slices(model.predict_proba(list(dataset.texts)), classes, dataset)


def reports_with_slices(
    pred_probs: np.ndarray, classes: Sequence[str], dataset: Dataset
) -> tuple[EvalReport, dict[str, EvalReport]]:
    """The report of `pred_probs` (n, k; columns in `classes` order) on every row of `dataset`
    and on each slice it marks."""
    pred_probs = np.asarray(pred_probs)
    labels = model_labels(classes, dataset.labels)
    report = evaluate_proba(list(dataset.labels), pred_probs, classes, labels=labels)
    slices = slice_reports(dataset, argmax_labels(pred_probs, classes), labels=labels)
    return report, slices
