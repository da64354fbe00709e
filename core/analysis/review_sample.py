"""The Explain page's classified sample: labelled rows with both models' answers, misclassified
rows first (core.tasks.probes builds it as a task)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pandas as pd

from core.analysis.probe_scan import (
    ProgressCounter,
    ScanConfig,
    predict_both,
    sample_positions,
    twin_groups,
)
from core.models.classifier import Prediction, shared_classes
from core.progress import ProgressCallback

_REVIEW_COLUMNS = (
    "position", "row", "desk", "transformer", "transformer confidence", "bag of words",
    "bag-of-words confidence", "wrong", "text",
)  # fmt: skip
_WRONG_ORDER = {"both": 0, "transformer": 1, "bag of words": 2, "": 3}  # misclassified first


def review_rows(
    neural: Any,
    bow: Any,
    dataset: Any,
    *,
    max_rows: int = 60,
    seed: int = 0,
    include: Sequence[int] = (),
    batch_size: int = 16,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> pd.DataFrame | None:
    """A sample of labelled rows with both models' answers, misclassified rows first.

    Twin-group rows are sampled first (as in the scan); positions in `include` are always kept.
    Columns: position, row, desk, transformer, transformer confidence, bag of words,
    bag-of-words confidence, wrong ("both", "transformer", "bag of words" or ""), text.
    Returns None when `cancel` is set before the end.
    """
    classes = shared_classes(neural, bow)
    texts, labels = list(dataset.texts), list(dataset.labels)
    config = ScanConfig(max_rows=max_rows, seed=seed, batch_size=batch_size)
    groups = twin_groups(texts, labels, dataset.rows)
    positions = sorted(set(sample_positions(len(texts), groups, config)) | set(include))
    sample = [texts[p] for p in positions]
    progress = ProgressCounter(2 * len(sample), on_progress)
    progress.add(0, "classify (transformer)")
    outputs = predict_both((neural, bow), sample, config, progress, "classify", cancel)
    if outputs is None:
        return None
    records = [
        _review_record(p, dataset.rows[p], labels[p], texts[p], classes, t, b)
        for p, t, b in zip(positions, *outputs, strict=True)
    ]
    return _misclassified_first(pd.DataFrame(records, columns=list(_REVIEW_COLUMNS)))


def _misclassified_first(frame: pd.DataFrame) -> pd.DataFrame:
    order = frame["wrong"].map(_WRONG_ORDER)
    return (
        frame.assign(_order=order)
        .sort_values(["_order", "transformer confidence"], ascending=[True, False], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )


def _review_record(position, row, label, text, classes, t_probs, b_probs) -> dict[str, Any]:
    t, b = Prediction.of(classes, t_probs), Prediction.of(classes, b_probs)
    wrong = {(False, False): "both", (False, True): "transformer", (True, False): "bag of words"}
    return dict(
        zip(
            _REVIEW_COLUMNS,
            (position, row, label, t.label, t.confidence, b.label, b.confidence,
             wrong.get((t.label == label, b.label == label), ""), text),
            strict=True,
        )
    )  # fmt: skip
