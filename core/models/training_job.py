"""A training as a job of the server's queue: it trains both models, then saves them to the
models folder itself, so a training outlives the browser tab that started it (a closed tab, a
dropped connection) and its result is never only in one session's memory."""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass
from pathlib import Path

from core.access import Actor, Permission
from core.data.dataset import Dataset, split_dataset
from core.jobs import BackgroundJob, JobQueue, Requester
from core.models.card import model_folder
from core.models.registry import save_model
from core.models.transformer.config import TrainConfig, backbone_label
from core.models.transformer.estimate import DurationEstimate, estimate_duration
from core.models.transformer.loop import ProgressCallback, TrainProgress
from core.models.transformer.training import TrainResult, train_models

MAX_NAME_TRIES = 20  # "name", "name-2", ... when another training took the name meanwhile


@dataclass(frozen=True)
class SavedTraining:
    """What a training job returns: the run and the folder it was saved to (None if cancelled)."""

    result: TrainResult
    folder: Path | None

    @property
    def cancelled(self) -> bool:
        return self.result.cancelled


@dataclass(frozen=True)
class TrainingRun:
    """A queued training job and what it was started on."""

    job: BackgroundJob[TrainProgress, SavedTraining]
    config: TrainConfig
    dataset_name: str
    dataset_fingerprint: str
    model_name: str


def check_new_model_name(models_root: str | Path, name: str) -> str:
    """`name` stripped, when it is a valid model name not taken yet; raises ValueError if not."""
    name = name.strip()
    if model_folder(models_root, name).exists():
        raise ValueError(f"a model named {name!r} already exists; choose another name")
    return name


def train_and_save(
    train: Dataset,
    val: Dataset,
    config: TrainConfig,
    *,
    models_root: str | Path,
    model_name: str,
    data_fingerprint: str,
    actor: Actor,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> SavedTraining:
    """`train_models`, then save as `model_name` (or `model_name-2`, ... if it was taken
    meanwhile)."""
    result = train_models(train, val, config, on_progress=on_progress, cancel=cancel)
    if result.cancelled:
        return SavedTraining(result, None)
    name = model_name
    for candidate in [name, *(f"{name}-{i}" for i in range(2, MAX_NAME_TRIES + 1))]:
        if model_folder(models_root, candidate).exists():
            continue
        try:
            folder = save_model(
                result, models_root, candidate, actor=actor, data_fingerprint=data_fingerprint
            )
        except OSError as exc:  # renaming onto a folder another job saved meanwhile
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue
        return SavedTraining(result, folder)
    raise ValueError(f"models {name!r} to {name}-{MAX_NAME_TRIES} all exist; rename some of them")


def estimate_training(dataset: Dataset, config: TrainConfig) -> DurationEstimate:
    """How long `start_training(dataset, config, ...)` would take on this machine now: the same
    split, a few timed passes (core.models.transformer.estimate). Takes a few seconds."""
    train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
    return estimate_duration(train, val, config)


def start_training(
    dataset: Dataset,
    config: TrainConfig,
    *,
    dataset_name: str,
    models_root: str | Path,
    model_name: str,
    queue: JobQueue,
    requester: Requester,
) -> TrainingRun:
    """Split `dataset` by `config.val_fraction` and `config.seed`, then queue the training
    (admins only); it saves itself as `model_name` when done and keeps running when the
    session that started it ends. Poll `run.job.snapshot()`; `run.job.cancel()` stops it."""
    name = check_new_model_name(models_root, model_name)
    train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
    job = queue.start(
        train_and_save, train, val, config, models_root=models_root, model_name=name,
        data_fingerprint=dataset.fingerprint, actor=requester.actor, requester=requester,
        title=f"Train {backbone_label(config.backbone)} on {dataset_name} as {name}",
        kind="train", permission=Permission.TRAIN, lane=queue.heavy_lane(config.device),
        keep_after_session=True, tokens_per_batch=config.batch_size * config.max_length,
    )  # fmt: skip
    return TrainingRun(job, config, dataset_name, dataset.fingerprint, name)
