"""The recipe "auto" (core.models.transformer.recipe): the rule, and `train_models` following it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from core.models.transformer.recipe import (
    FULL_MIN_ROWS_PER_DESK,
    choose_recipe,
    median_rows_per_desk,
    only_full,
    try_full,
)
from tests.conftest import make_dataset, separable_rows


def test_the_median_desk_decides_whether_full_fine_tuning_is_tried():
    labels = ["a"] * 3 + ["b"] * 20 + ["c"] * 40
    assert median_rows_per_desk(labels) == 20
    assert try_full(FULL_MIN_ROWS_PER_DESK) and not try_full(FULL_MIN_ROWS_PER_DESK - 1)


def test_the_better_validation_decision_wins_and_ties_go_to_full():
    assert choose_recipe(40, {QUICK: 0.91, FULL: 0.90}).chosen == QUICK
    tie = choose_recipe(40, {QUICK: 0.90, FULL: 0.90})
    assert tie.chosen == FULL and "90.0%" in tie.reason
    few = choose_recipe(4, {QUICK: 0.5})
    assert few.chosen == QUICK and f"fewer than the {FULL_MIN_ROWS_PER_DESK}" in few.reason


def test_backbones_without_a_pretrained_mean_pooled_encoder_are_only_fine_tuned():
    assert only_full(TrainConfig(backbone="tiny", recipe=AUTO)) is not None
    assert only_full(TrainConfig(pooling="cls", recipe=AUTO)) is not None
    assert only_full(TrainConfig(recipe=AUTO)) is None


def _auto(backbone: Path, per_desk: int):
    from core.models.transformer.training import train_models

    data = make_dataset(*separable_rows(per_desk))
    config = TrainConfig(backbone=str(backbone), recipe=AUTO, lr=1e-2, batch_size=8,
                         max_length=32, max_steps=2, device="cpu")  # fmt: skip
    return train_models(data, data, config)


def test_few_rows_per_desk_train_the_quick_recipe_only(tiny_bert_dir: Path):
    result = _auto(tiny_bert_dir, per_desk=4)
    assert result.config.recipe == QUICK
    assert result.recipe_choice["chosen"] == QUICK
    assert set(result.recipe_choice["validation_accuracy"]) == {QUICK}
    assert result.detector.method == "knn+msp"  # the quick recipe's unknown-desk score


def test_enough_rows_per_desk_try_both_and_keep_the_better(tiny_bert_dir: Path):
    result = _auto(tiny_bert_dir, per_desk=FULL_MIN_ROWS_PER_DESK)
    accuracy = result.recipe_choice["validation_accuracy"]
    assert set(accuracy) == {QUICK, FULL}
    better = FULL if accuracy[FULL] >= accuracy[QUICK] else QUICK
    assert result.config.recipe == result.recipe_choice["chosen"] == better
    assert result.decision_report.accuracy == pytest.approx(accuracy[better])
