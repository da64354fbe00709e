"""The Data page's bag of words as a task of the server's queue: its fit grows with the
data set (up to 500,000 rows), so it is long work on the shared CPUs (reviewers and admins)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from core.access import Permission
from core.analysis.bag_of_words_eval import BagOfWordsEvaluation, evaluate_bow
from core.data.dataset import Dataset
from core.jobs import Job, JobQueue, Requester
from core.models.bag_of_words import BagOfWordsConfig
from core.progress import Progress, ProgressCallback, check_cancel

FIT_PHASE = "fit"


@dataclass(frozen=True)
class BagOfWordsRun:
    """A queued bag-of-words evaluation and what it was started on (to tell a stale one apart)."""

    job: Job[BagOfWordsEvaluation]
    dataset_fingerprint: str
    config: BagOfWordsConfig
    val_fraction: float

    def cancel(self) -> None:
        self.job.cancel()


def evaluate_bow_task(
    dataset: Dataset,
    config: BagOfWordsConfig,
    val_fraction: float,
    *,
    on_progress: ProgressCallback,
    cancel: threading.Event,
) -> BagOfWordsEvaluation:
    """`evaluate_bow` as a task: one step (a fit cannot stop half way), cancel checked
    before it starts."""
    check_cancel(cancel)
    on_progress(Progress(0, 1, FIT_PHASE, f"{len(dataset):,} rows"))
    _, evaluation = evaluate_bow(
        dataset, config=config, val_fraction=val_fraction, seed=config.seed
    )
    on_progress(Progress(1, 1, FIT_PHASE))
    return evaluation


def start_bow(
    dataset: Dataset,
    config: BagOfWordsConfig,
    *,
    val_fraction: float,
    queue: JobQueue,
    requester: Requester,
) -> BagOfWordsRun:
    """Queue `evaluate_bow_task` on the CPU lane (reviewers and admins); poll
    `run.job.snapshot()`, stop with `run.cancel()`."""
    job = queue.start(
        evaluate_bow_task, dataset, config, val_fraction, requester=requester,
        title=f"Bag of words on {len(dataset):,} rows", kind="bow",
        permission=Permission.RUN_JOBS, lane=queue.heavy_lane("cpu"),
    )  # fmt: skip
    return BagOfWordsRun(job, dataset.fingerprint, config, val_fraction)
