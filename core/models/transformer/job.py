"""Start a fine-tuning run in the background on a seeded split of one data set."""

from __future__ import annotations

from dataclasses import dataclass

from core.data.dataset import Dataset, split_dataset
from core.jobs import BackgroundJob
from core.models.transformer.training import TrainConfig, TrainProgress, TrainResult, train_models


@dataclass(frozen=True)
class TrainingRun:
    """A background training job and what it was started on."""

    job: BackgroundJob[TrainProgress, TrainResult]
    config: TrainConfig
    dataset_name: str
    dataset_fingerprint: str


def start_training(dataset: Dataset, config: TrainConfig, *, dataset_name: str) -> TrainingRun:
    """Split `dataset` by `config.val_fraction` and `config.seed`, then train both models in a
    worker thread; poll `run.job.snapshot()` and call `run.job.cancel()` to stop."""
    train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)

    def work(*, on_progress, cancel) -> TrainResult:
        return train_models(train, val, config, on_progress=on_progress, cancel=cancel)

    job: BackgroundJob[TrainProgress, TrainResult] = BackgroundJob(work, name="train")
    return TrainingRun(job.start(), config, dataset_name, dataset.fingerprint)
