"""Train the bag of words on a seeded stratified split and evaluate it, overall and on
the slices a data set marks (the demo data's `slice` column: `twin` rows are where a bag of
words is provably capped)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.data.dataset import Dataset, split_dataset
from core.metrics import EvalReport, evaluate_predictions
from core.models.bag_of_words import BagOfWordsClassifier, BagOfWordsConfig
from core.models.evaluation import slice_reports


@dataclass(frozen=True)
class BagOfWordsEvaluation:
    """A fitted bag of words with its validation metrics; `slices` maps slice name to its report."""

    config: BagOfWordsConfig
    val_fraction: float
    seed: int
    train_size: int
    val_size: int
    report: EvalReport
    slices: dict[str, EvalReport]
    train_seconds: float
    dataset_fingerprint: str


def evaluate_bow(
    dataset: Dataset,
    *,
    config: BagOfWordsConfig = BagOfWordsConfig(),
    val_fraction: float = 0.2,
    seed: int = 0,
) -> tuple[BagOfWordsClassifier, BagOfWordsEvaluation]:
    """Fit the bag of words on the training part of a stratified split, evaluate on the rest."""
    train, val = split_dataset(dataset, val_fraction=val_fraction, seed=seed)
    started = time.perf_counter()
    model = BagOfWordsClassifier(config).fit(train.texts, train.labels)
    train_seconds = time.perf_counter() - started
    y_pred = model.predict(val.texts)
    labels = dataset.classes
    evaluation = BagOfWordsEvaluation(
        config=config,
        val_fraction=val_fraction,
        seed=seed,
        train_size=len(train),
        val_size=len(val),
        report=evaluate_predictions(list(val.labels), y_pred, labels=labels),
        slices=slice_reports(val, y_pred, labels=labels),
        train_seconds=train_seconds,
        dataset_fingerprint=dataset.fingerprint,
    )
    return model, evaluation
