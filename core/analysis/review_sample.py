"""The Explain page's classified sample: labelled rows with both models' answers, misclassified
rows first, and the background job that builds it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.access import Permission
from core.analysis.probe_scan import (
    ProgressCallback,
    ProgressCounter,
    ScanConfig,
    ScanProgress,
    predict_both,
    sample_positions,
    twin_groups,
)
from core.jobs import BackgroundJob, JobQueue, Requester
from core.models.classifier import Prediction, device_name, shared_classes

_REVIEW_COLUMNS = (
    "position", "row", "desk", "transformer", "transformer confidence", "bag of words",
    "bag-of-words confidence", "wrong", "text",
)  # fmt: skip
_WRONG_ORDER = {"both": 0, "transformer": 1, "bag of words": 2, "": 3}  # misclassified first


def review_rows(
    transformer: Any,
    baseline: Any,
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
    classes = shared_classes(transformer, baseline)
    texts, labels = list(dataset.texts), list(dataset.labels)
    config = ScanConfig(max_rows=max_rows, seed=seed, batch_size=batch_size)
    groups = twin_groups(texts, labels, dataset.rows)
    positions = sorted(set(sample_positions(len(texts), groups, config)) | set(include))
    sample = [texts[p] for p in positions]
    progress = ProgressCounter(2 * len(sample), on_progress)
    progress.add(0, "classify (transformer)")
    outputs = predict_both((transformer, baseline), sample, config, progress, "classify", cancel)
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


@dataclass(frozen=True)
class ReviewRun:
    """A background `review_rows` job and what it was started on."""

    job: BackgroundJob[ScanProgress, pd.DataFrame | None]
    model_path: str
    dataset_fingerprint: str
    max_rows: int
    include: tuple[int, ...]


def start_review(
    transformer: Any,
    baseline: Any,
    dataset: Any,
    *,
    max_rows: int,
    include: Sequence[int] = (),
    model_path: str,
    dataset_fingerprint: str,
    queue: JobQueue,
    requester: Requester,
) -> ReviewRun:
    """Run `review_rows` as a job of `queue`; poll `run.job.snapshot()`, stop with `cancel()`.
    Every role may: it is what the Explain page reads, and `max_rows` bounds it."""
    include = tuple(include)
    job = queue.start(
        review_rows, transformer, baseline, dataset, max_rows=max_rows, include=include,
        requester=requester, title=f"Classify a sample of {max_rows:,} rows for Explain",
        kind="review", permission=Permission.READ,
        lane=queue.heavy_lane(device_name(transformer)),
    )  # fmt: skip
    return ReviewRun(job, model_path, dataset_fingerprint, max_rows, include)
