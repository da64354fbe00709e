"""The recipe "auto" (core.models.transformer.recipe): the rule, and `train_models` following it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models.blend import FROZEN, NEURAL
from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from core.models.transformer.recipe import (
    FULL_MIN_ROWS_PER_DESK,
    median_rows_per_desk,
    only_full,
    quick_only,
    try_full,
)
from tests.conftest import make_dataset, separable_rows


def test_the_median_desk_decides_whether_full_fine_tuning_is_tried():
    labels = ["a"] * 3 + ["b"] * 20 + ["c"] * 40
    assert median_rows_per_desk(labels) == 20
    assert try_full(FULL_MIN_ROWS_PER_DESK) and not try_full(FULL_MIN_ROWS_PER_DESK - 1)


def test_too_few_rows_a_desk_say_why_only_the_quick_recipe_trained():
    few = quick_only(4, 0.5)
    assert few.chosen == QUICK and f"fewer than the {FULL_MIN_ROWS_PER_DESK}" in few.reason
    assert few.validation_accuracy == {QUICK: 0.5}


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


def test_enough_rows_per_desk_train_both_and_blend_the_members_that_pay(tiny_bert_dir: Path):
    result = _auto(tiny_bert_dir, per_desk=FULL_MIN_ROWS_PER_DESK)
    accuracy = result.recipe_choice["validation_accuracy"]
    assert set(accuracy) == {QUICK, FULL, "bag of words", AUTO}
    assert result.decision_report.accuracy == pytest.approx(accuracy[AUTO])
    assert accuracy[AUTO] >= max(accuracy[QUICK], accuracy[FULL], accuracy["bag of words"]) - 0.1
    shares = result.blend.shares
    assert result.config.recipe == result.recipe_choice["chosen"]
    # the frozen encoder only ever joins beside the fine-tuned model
    assert result.frozen is None or (result.config.recipe == FULL and NEURAL in shares)
    assert (result.frozen is not None) == (FROZEN in shares)
    assert result.blend.describe() in result.recipe_choice["reason"]
