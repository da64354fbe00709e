"""A training that saves itself: it trains both models, then saves them to the models folder,
so a training run as a task (core.tasks.training) outlives the browser tab that started it and
its result is never only in one session's memory; and the estimate of how long one takes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from core.access import Actor
from core.data.dataset import Dataset, split_dataset
from core.errors import UserError
from core.models.card import model_name_free
from core.models.changes import ModelRecorder
from core.models.registry import ModelNameTaken, save_model
from core.models.transformer.config import TrainConfig
from core.models.transformer.estimate import DurationEstimate, estimate_duration
from core.models.transformer.training import TrainResult, train_models
from core.progress import ProgressCallback

MAX_NAME_TRIES = 20  # "name", "name-2", ... when another training took the name meanwhile


@dataclass(frozen=True)
class SavedTraining:
    """What a training job returns: the run, the folder it was saved to (None if cancelled)
    and the name it asked for, which another save may have taken meanwhile."""

    result: TrainResult
    folder: Path | None
    requested_name: str = ""  # empty: the folder's own name (nothing was asked for)

    @property
    def cancelled(self) -> bool:
        return self.result.cancelled

    @property
    def renamed_from(self) -> str | None:
        """The name asked for, when the model was saved under another one; None otherwise."""
        if self.folder is None or self.requested_name in ("", self.folder.name):
            return None
        return self.requested_name

    @property
    def rename_note(self) -> str | None:
        """One line for the page and the command line when the name was taken; None if not."""
        if self.renamed_from is None:
            return None
        return f"saved as {self.folder.name!r} because {self.renamed_from!r} was taken meanwhile"


def check_new_model_name(models_root: str | Path, name: str) -> str:
    """`name` stripped, when it is a valid model name not taken yet; raises UserError if not."""
    name = name.strip()
    if not model_name_free(models_root, name):
        raise UserError(f"a model named {name!r} already exists; choose another name")
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
    record: ModelRecorder | None = None,
) -> SavedTraining:
    """`train_models`, then save as `model_name` (or `model_name-2`, ... if it was taken
    meanwhile: see `SavedTraining.rename_note`), told to `record` (the trail) before it can
    be seen."""
    result = train_models(train, val, config, on_progress=on_progress, cancel=cancel)
    if result.cancelled:
        return SavedTraining(result, None, model_name)
    return save_under_free_name(
        result,
        models_root,
        model_name,
        actor=actor,
        data_fingerprint=data_fingerprint,
        record=record,
    )


def save_under_free_name(
    result: TrainResult,
    models_root: str | Path,
    model_name: str,
    *,
    actor: Actor,
    data_fingerprint: str | None = None,
    record: ModelRecorder | None = None,
) -> SavedTraining:
    """Save `result` as `model_name`, or as the first of `model_name-2`, `model_name-3`, ...
    that no other save has: hours of training are never lost to a name taken meanwhile. Each
    try is `save_model`'s exclusive claim, so a taken name costs no writing."""
    for candidate in _candidate_names(model_name):
        try:
            folder = save_model(
                result,
                models_root,
                candidate,
                actor=actor,
                data_fingerprint=data_fingerprint,
                record=record,
            )
        except ModelNameTaken:
            continue
        return SavedTraining(result, folder, model_name)
    raise UserError(
        f"models {model_name!r} to {model_name}-{MAX_NAME_TRIES} all exist; rename some of them"
    )


def _candidate_names(name: str) -> list[str]:
    """`name`, then `name-2` ... `name-MAX_NAME_TRIES`, cut to stay valid (64 characters)."""
    suffixes = [f"-{i}" for i in range(2, MAX_NAME_TRIES + 1)]
    return [name, *(f"{name[: 64 - len(suffix)]}{suffix}" for suffix in suffixes)]


def estimate_training(
    dataset: Dataset, config: TrainConfig, *, cancel: threading.Event | None = None
) -> DurationEstimate:
    """How long training `config` on `dataset` would take on this machine now: the same split,
    a few timed passes (core.models.transformer.estimate). Takes a few seconds."""
    train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
    return estimate_duration(train, val, config, cancel=cancel)
