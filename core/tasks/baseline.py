"""The Data page's bag-of-words baseline as a task of the server's queue: its fit grows with the
data set (up to 500,000 rows), so it is long work on the shared CPUs (reviewers and admins)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from core.access import Permission
from core.analysis.baseline_eval import BaselineEvaluation, evaluate_baseline
from core.data.dataset import Dataset
from core.jobs import Job, JobQueue, Requester
from core.models.baseline import BaselineConfig
from core.progress import Progress, ProgressCallback, check_cancel

FIT_PHASE = "fit"


@dataclass(frozen=True)
class BaselineRun:
    """A queued baseline evaluation and what it was started on (to tell a stale one apart)."""

    job: Job[BaselineEvaluation]
    dataset_fingerprint: str
    config: BaselineConfig
    val_fraction: float

    def cancel(self) -> None:
        self.job.cancel()


def evaluate_baseline_task(
    dataset: Dataset,
    config: BaselineConfig,
    val_fraction: float,
    *,
    on_progress: ProgressCallback,
    cancel: threading.Event,
) -> BaselineEvaluation:
    """`evaluate_baseline` as a task: one step (a fit cannot stop half way), cancel checked
    before it starts."""
    check_cancel(cancel)
    on_progress(Progress(0, 1, FIT_PHASE, f"{len(dataset):,} rows"))
    _, evaluation = evaluate_baseline(
        dataset, config=config, val_fraction=val_fraction, seed=config.seed
    )
    on_progress(Progress(1, 1, FIT_PHASE))
    return evaluation


def start_baseline(
    dataset: Dataset,
    config: BaselineConfig,
    *,
    val_fraction: float,
    queue: JobQueue,
    requester: Requester,
) -> BaselineRun:
    """Queue `evaluate_baseline_task` on the CPU lane (reviewers and admins); poll
    `run.job.snapshot()`, stop with `run.cancel()`."""
    job = queue.start(
        evaluate_baseline_task, dataset, config, val_fraction, requester=requester,
        title=f"Bag-of-words baseline on {len(dataset):,} rows", kind="baseline",
        permission=Permission.RUN_JOBS, lane=queue.heavy_lane("cpu"),
    )  # fmt: skip
    return BaselineRun(job, dataset.fingerprint, config, val_fraction)
