"""Trainings and training-time estimates as tasks of the server's queue: a training saves its
model itself and keeps running when the session that started it ends; an estimate runs on the
heavy lane (it loads a backbone and times training steps), never on the short lane."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.access import Permission
from core.data.dataset import Dataset, split_dataset
from core.jobs import Job, JobQueue, JobStatus, Requester
from core.models.training_job import (
    SavedTraining,
    check_new_model_name,
    estimate_training,
    train_and_save,
)
from core.models.transformer.config import TrainConfig, backbone_label
from core.models.transformer.estimate import DurationEstimate
from core.review.library import model_recorder
from core.review.store import Store

ESTIMATE_SECONDS = 300.0  # an estimate takes seconds; past this something is wrong: stop it


@dataclass(frozen=True)
class TrainingRun:
    """A queued training task and what it was started on."""

    job: Job[SavedTraining]
    config: TrainConfig
    dataset_name: str
    dataset_fingerprint: str
    model_name: str


def start_training(
    dataset: Dataset,
    config: TrainConfig,
    *,
    dataset_name: str,
    models_root: str | Path,
    model_name: str,
    queue: JobQueue,
    requester: Requester,
    store: Store,
    split: tuple[Dataset, Dataset] | None = None,
) -> TrainingRun:
    """Split `dataset` by `config.val_fraction` and `config.seed` (or take `split`, e.g. one
    inherited from the live model: core.data.dataset.split_inheriting), then queue the training
    (admins only); it saves itself as `model_name` when done and keeps running when the
    session that started it ends; the save is recorded in `store`'s trail. Poll
    `run.job.snapshot()`; `run.job.cancel()` stops it."""
    name = check_new_model_name(models_root, model_name)
    record = model_recorder(store, actor=requester.actor)  # a read-only trail refuses now
    train, val = split or split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
    job = queue.start(
        train_and_keep_reports, train, val, config, models_root=models_root, model_name=name,
        data_fingerprint=dataset.fingerprint, actor=requester.actor, record=record,
        requester=requester,
        title=f"Train {backbone_label(config.backbone)} on {dataset_name} as {name}",
        kind="train", permission=Permission.TRAIN, lane=queue.heavy_lane(config.device),
        keep_after_session=True, tokens_per_batch=config.batch_size * config.max_length,
    )  # fmt: skip
    return TrainingRun(job, config, dataset_name, dataset.fingerprint, name)


def train_and_keep_reports(*args: Any, **kwargs: Any) -> SavedTraining:
    """`train_and_save`, returning the run without its models: they are on disk now, and a
    finished task keeps only a summary (the reports, curves and the saved model's name)."""
    saved = train_and_save(*args, **kwargs)
    stripped = dataclasses.replace(saved.result, neural=None, bow=None)
    return dataclasses.replace(saved, result=stripped)


def start_estimate(
    dataset: Dataset, config: TrainConfig, *, queue: JobQueue, requester: Requester
) -> Job[DurationEstimate]:
    """Queue the estimate of how long training `config` on `dataset` takes here, on the heavy
    lane (where the training itself would run), for whoever may train."""
    task = requester.task(
        lambda *, on_progress, cancel: estimate_training(dataset, config, cancel=cancel),
        f"Estimate the training time of {backbone_label(config.backbone)}", "estimate",
        lane=queue.heavy_lane(config.device), max_seconds=ESTIMATE_SECONDS,
        tokens_per_batch=config.batch_size * config.max_length,
    )  # fmt: skip
    return queue.submit(task, actor=requester.actor, permission=Permission.TRAIN)


class EstimateBoard:
    """The server's training-time estimates by (data set, timing settings), shared by every
    session: timing again costs the shared CPUs seconds, so an estimate is reused while it
    runs and for `ttl_s` once done; a cancelled one (its session ended, or its settings were
    left) or one whose result the queue no longer keeps is started again."""

    def __init__(self, *, ttl_s: float = 600.0, max_entries: int = 32) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[float, Job[DurationEstimate]]] = {}

    def job(self, key: str, start: Callable[[], Job[DurationEstimate]]) -> Job[DurationEstimate]:
        """The estimate under `key`, started with `start()` when there is none to reuse."""
        with self._lock:
            now = time.monotonic()
            found = self._jobs.get(key)
            if found is not None and self._reusable(*found, now):
                return found[1]
            job = start()
            self._jobs[key] = (now, job)
            while len(self._jobs) > self.max_entries:
                del self._jobs[next(iter(self._jobs))]
            return job

    def _reusable(self, started: float, job: Job, now: float) -> bool:
        """Running, or done recently with its result still kept by the queue (it keeps only the
        newest finished jobs' results); a cancelled or failed-for-a-limit one is not."""
        snapshot = job.snapshot()
        if snapshot.status.active:
            return True
        fresh = now - started < self.ttl_s
        return fresh and snapshot.status is not JobStatus.CANCELLED and not snapshot.result_dropped
