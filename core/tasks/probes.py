"""The data set's word-order scan and the Explain page's classified sample as tasks of the
server's queue, on the heavy lane of the model's device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.access import Permission
from core.analysis.probe_scan import ScanConfig, ScanResult, scan_dataset
from core.analysis.review_sample import review_rows
from core.jobs import Job, JobQueue, Requester
from core.models.classifier import device_name


@dataclass(frozen=True)
class ScanRun:
    """A queued data set scan and what it was started on (to tell a stale one apart)."""

    job: Job[ScanResult]
    config: ScanConfig
    model_path: str
    dataset_fingerprint: str

    def cancel(self) -> None:
        self.job.cancel()


def start_scan(
    neural: Any,
    bow: Any,
    dataset: Any,
    config: ScanConfig,
    *,
    model_path: str,
    dataset_fingerprint: str,
    queue: JobQueue,
    requester: Requester,
) -> ScanRun:
    """Queue `scan_dataset` (reviewers and admins); poll `run.job.snapshot()`, stop with
    `run.job.cancel()`."""
    job = queue.start(
        scan_dataset, neural, bow, dataset, config, requester=requester,
        title=f"Order scan of {len(dataset):,} rows", kind="scan",
        permission=Permission.RUN_JOBS, lane=queue.heavy_lane(device_name(neural)),
    )  # fmt: skip
    return ScanRun(job, config, model_path, dataset_fingerprint)


@dataclass(frozen=True)
class ReviewRun:
    """A queued `review_rows` task and what it was started on."""

    job: Job[pd.DataFrame | None]
    model_path: str
    dataset_fingerprint: str
    max_rows: int
    include: tuple[int, ...]

    def cancel(self) -> None:
        self.job.cancel()


def start_review(
    neural: Any,
    bow: Any,
    dataset: Any,
    *,
    max_rows: int,
    include: Sequence[int] = (),
    model_path: str,
    dataset_fingerprint: str,
    queue: JobQueue,
    requester: Requester,
) -> ReviewRun:
    """Queue `review_rows` (reviewers and admins: long work on the shared CPUs, as the README's
    role table says). Poll `run.job.snapshot()`."""
    include = tuple(include)
    job = queue.start(
        review_rows, neural, bow, dataset, max_rows=max_rows, include=include,
        requester=requester, title=f"Classify a sample of {max_rows:,} rows for Explain",
        kind="review", permission=Permission.RUN_JOBS,
        lane=queue.heavy_lane(device_name(neural)),
    )  # fmt: skip
    return ReviewRun(job, model_path, dataset_fingerprint, max_rows, include)
