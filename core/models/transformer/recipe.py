"""The recipe "auto": which of the two recipes a data set gets, and why, so that a user need not
know that a full fine-tune of a small encoder falls apart with ten or so examples per desk while
a frozen encoder with a fitted head holds up (Casanueva et al. 2020; BENCHMARKS.md, "The right
recipe for the data at hand").

The rule: the quick recipe first (a minute); the full fine-tune as well when the median desk has
at least FULL_MIN_ROWS_PER_DESK training rows; then one model whose decision blends the members
the validation rows choose: the fine-tuned transformer, the quick recipe's frozen-encoder head
and the bag of words (core.models.transformer.training.blend_recipes; each member joins only
where it clearly pays, and the fine-tuned model, which reads word order, is preferred). A
backbone without a pretrained encoder (tiny, LSTM) or a [CLS]-pooled one can only be
fine-tuned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from core.models.transformer.config import FROM_SCRATCH, FULL, QUICK, TrainConfig

# Below this many training rows for the median desk the full fine-tune is not tried. Set from
# the published record (full fine-tunes of small encoders fall apart near ten examples a class,
# frozen encoders with a linear head hold up: Casanueva et al. 2020), before measuring; the
# data-size table (bench/bench_recipes.py, BENCHMARKS.md "The right recipe for the data at
# hand") shows what it saves: at 8 training rows a desk the full fine-tune's test accuracy was
# below the quick recipe's on every data set measured there.
FULL_MIN_ROWS_PER_DESK = 16


@dataclass(frozen=True)
class RecipeChoice:
    """Which recipe "auto" chose, and why; saved in the model card as "recipe_choice"."""

    chosen: str  # "quick" or "full"
    reason: str  # one sentence for the Train page, the card and `train --json`
    rows_per_desk: float  # the median desk's training rows
    validation_accuracy: dict[str, float]  # recipe -> its decision's accuracy, those tried
    # recipe -> seconds its training took, where "auto" trained both (cards before: absent)
    train_seconds: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def median_rows_per_desk(labels: Sequence[str]) -> float:
    """The median number of training rows over the desks."""
    return float(np.median(list(Counter(map(str, labels)).values())))


def only_full(config: TrainConfig) -> str | None:
    """Why `config` can only be fine-tuned (no pretrained mean-pooled encoder); None when both
    recipes can train it."""
    if config.backbone in FROM_SCRATCH:
        return "the backbone starts from random weights, so only the full recipe can train it"
    if config.pooling != "mean" or config.head_init == "probe":
        return "its pooling or head settings belong to the full recipe"
    return None


def try_full(rows_per_desk: float) -> bool:
    """Whether the full fine-tune is worth trying beside the quick recipe."""
    return rows_per_desk >= FULL_MIN_ROWS_PER_DESK


def quick_only(rows_per_desk: float, accuracy: float) -> RecipeChoice:
    """The recipe "auto" where the desks have too few rows for a full fine-tune: the quick
    recipe, whose decision got `accuracy` of the validation rows right."""
    reason = (
        f"quick: {rows_per_desk:g} training rows for the median desk, fewer than the "
        f"{FULL_MIN_ROWS_PER_DESK} below which a full fine-tune falls behind a frozen encoder"
    )
    return RecipeChoice(QUICK, reason, rows_per_desk, {QUICK: accuracy})


# How `blended_choice` names each member alone in the card's validation accuracies.
ALONE_NAMES = {FULL: "full", QUICK: "quick", "bag of words": "bag of words"}


def blended_choice(
    rows_per_desk: float,
    described: str,
    decision_accuracy: float,
    alone: dict[str, float],
    *,
    chosen: str,
    train_seconds: dict[str, float] | None = None,
) -> RecipeChoice:
    """The recipe "auto" after both recipes trained: the saved model is `chosen` ("full" when
    the fine-tuned transformer takes part in the decision, else "quick"), deciding by the blend
    `described`. `alone`: each member's validation accuracy on its own ("full", "quick", "bag of
    words"); the decision's is kept under "auto"."""
    others = ", ".join(f"{name} alone {accuracy:.1%}" for name, accuracy in alone.items())
    reason = (
        f"{described}: right on {decision_accuracy:.1%} of the validation rows ({others}); a "
        "member joins only when it gets clearly more rows right"
    )
    accuracy = {**{ALONE_NAMES.get(k, k): v for k, v in alone.items()}, "auto": decision_accuracy}
    return RecipeChoice(chosen, reason, rows_per_desk, accuracy, train_seconds)
