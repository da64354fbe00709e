"""The routing decision of a saved model: the transformer's and the bag of words' probabilities,
each calibrated by a temperature, mixed with a weight chosen on the validation rows
(`choose_blend`). A model saved before blends existed routes on the transformer alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.checks import check_fraction, check_positive
from core.errors import UserError
from core.models.classifier import Prediction

# Who decides, as `decided_by` spells it in the card, the JSON and the classify columns (a
# contract: the neural model is "transformer" there, ARCHITECTURE.md "Glossary").
NEURAL, BAG_OF_WORDS, BLEND = "transformer", "bag of words", "blend"
# The transformer's share, searched in tenths: finer steps would fit a few hundred validation
# rows' noise, and each step must move at least a handful of answers to be worth saying.
WEIGHTS = tuple(i / 10 for i in range(11))
# Softmax temperatures tried when calibrating one model on the validation rows (0.1 sharpens
# ten-fold, 10 flattens ten-fold); log-spaced because their effect is multiplicative.
TEMPERATURES = tuple(float(t) for t in np.geomspace(0.1, 10.0, 41))
_FLOOR = 1e-12  # keeps log(0) out of the calibration of a model that is sure and wrong
# A mix must get at least this share of the validation rows more right than the transformer
# alone. Mixing in an order-blind model costs word order (on the demo data a mix 2 rows better
# of 480 got one word-order twin wrong that the transformer got right), and every call then
# depends on two models that reviewers must read: one complaint in a hundred is worth that
# (BENCHMARKS.md, "Engine v2": kept on the CFPB sample at +5 points, not on the demo data at
# +0.4 or BANKING77 at +0.1).
MIN_GAIN = 0.01
# ...and at least this many rows: one or two rows more of a few dozen is a coin's toss, not a
# pattern. (Added when the demo data at 10 rows a desk, 10 validation rows, kept a mix that
# fixed one of them and lost 2.7 points on the test rows; seen there, so those test figures do
# not vouch for the rule: BENCHMARKS.md, "The right recipe for the data at hand".)
MIN_GAIN_ROWS = 3


@dataclass(frozen=True)
class Blend:
    """How the two models' probabilities become the decision.

    decision = w * softmax(log p_transformer / T_t) + (1 - w) * softmax(log p_bow / T_b)
    with w = `transformer_weight`. The default, w = 1 and both temperatures 1, is the
    transformer's own probabilities: the decision of every model saved before blends.
    """

    neural_weight: float = 1.0
    neural_temperature: float = 1.0
    bow_temperature: float = 1.0

    def __post_init__(self) -> None:
        check_fraction("transformer_weight", self.neural_weight, low=-1e-12, high=1.0)
        check_positive("transformer_temperature", self.neural_temperature)
        check_positive("bow_temperature", self.bow_temperature)

    @property
    def decided_by(self) -> str:
        """Which model makes the call: "transformer", "bag of words" or "blend"."""
        if self.neural_weight >= 1.0:
            return NEURAL
        return BAG_OF_WORDS if self.neural_weight <= 0.0 else BLEND

    def describe(self) -> str:
        """One line for the pages: who decides, with the shares when both do."""
        if self.decided_by != BLEND:
            return f"the {self.decided_by} alone"
        share = round(100 * self.neural_weight)
        return f"a blend of {share}% transformer and {100 - share}% bag of words"

    def combine(self, neural_probs: np.ndarray, bow_probs: np.ndarray) -> np.ndarray:
        """The decision's probabilities (n, k) from both models' (n, k), columns alike."""
        neural_probs, bow_probs = np.asarray(neural_probs), np.asarray(bow_probs)
        if neural_probs.shape != bow_probs.shape:
            raise UserError(
                f"both models must score the same texts and labels: {neural_probs.shape} "
                f"against {bow_probs.shape}"
            )
        if self.decided_by == NEURAL:  # exactly the transformer's own numbers
            return neural_probs
        if self.decided_by == BAG_OF_WORDS:
            return bow_probs
        weight = self.neural_weight
        return weight * tempered(neural_probs, self.neural_temperature) + (1 - weight) * tempered(
            bow_probs, self.bow_temperature
        )

    def decide(self, neural: Prediction, bow: Prediction) -> Prediction:
        """The decision for one text from both models' predictions of it."""
        classes = list(neural.probabilities)
        pred_probs = self.combine(
            np.array([[neural.probabilities[c] for c in classes]]),
            np.array([[bow.probabilities[c] for c in classes]]),
        )
        return Prediction.of(classes, pred_probs[0])

    def to_json(self) -> dict[str, Any]:
        """The card's `blend` and `train --json`'s: keys named as before the rename (a contract)."""
        saved = {key: getattr(self, field) for key, field in CARD_KEYS.items()}
        return {**saved, "decided_by": self.decided_by}

    @classmethod
    def from_card(cls, card: dict[str, Any]) -> Blend:
        """The blend a card was saved with; the transformer alone for older cards."""
        saved = card.get("blend")
        if saved is None:
            return NEURAL_ONLY
        if not isinstance(saved, dict):
            raise UserError("the card's blend is damaged; save the model again")
        return cls(**{field: float(saved[key]) for key, field in CARD_KEYS.items() if key in saved})


# The card's keys for the blend's fields: the neural model is "transformer" there, as in every
# JSON document (ARCHITECTURE.md, "Glossary").
CARD_KEYS = {
    "transformer_weight": "neural_weight",
    "transformer_temperature": "neural_temperature",
    "bow_temperature": "bow_temperature",
}


NEURAL_ONLY = Blend()


def tempered(pred_probs: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T) row by row: T > 1 flattens, T < 1 sharpens, argmax unchanged."""
    logits = np.log(np.clip(pred_probs, _FLOOR, 1.0)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    exp = np.exp(logits)
    return exp / exp.sum(axis=1, keepdims=True)


def calibrated_temperature(pred_probs: np.ndarray, label_ids: np.ndarray) -> float:
    """The temperature of TEMPERATURES with the lowest log-loss on these rows (ties: nearest 1)."""
    rows = np.arange(len(label_ids))

    def log_loss(temperature: float) -> float:
        chosen = tempered(pred_probs, temperature)[rows, label_ids]
        return float(-np.mean(np.log(np.clip(chosen, _FLOOR, 1.0))))

    return min(TEMPERATURES, key=lambda t: (round(log_loss(t), 9), abs(np.log(t))))


def choose_blend(
    neural_probs: np.ndarray,
    bow_probs: np.ndarray,
    labels: Sequence[str],
    classes: Sequence[str],
) -> Blend:
    """The blend that gets the most validation rows right, kept only where it clearly pays.

    Each model is first calibrated on the rows (a temperature, so that a confident model does
    not drown a timid one), then the transformer's share is chosen from WEIGHTS; ties go to the
    larger share. The transformer reads word order and the bag of words cannot, so a mix is kept
    only when it gets at least MIN_GAIN of the rows, and MIN_GAIN_ROWS rows, more right than the
    transformer alone;
    otherwise, and at a share of 1, the transformer decides alone. A share of 0 is the bag of
    words alone. Both return their model's own probabilities, uncalibrated.

    Parameters
    ----------
    transformer_probs, bow_probs : (n, k) validation probabilities, columns in `classes` order
    labels : the n validation labels
    classes : the k class names
    """
    label_ids = _label_ids(labels, classes)
    temperatures = (calibrated_temperature(neural_probs, label_ids),
                    calibrated_temperature(bow_probs, label_ids))  # fmt: skip
    neural_right = neural_probs.argmax(1) == label_ids

    def right(weight: float) -> np.ndarray:
        blend = Blend(weight, *temperatures)
        return blend.combine(neural_probs, bow_probs).argmax(1) == label_ids

    weight = max(WEIGHTS, key=lambda w: (int(right(w).sum()), w))
    gain = int(right(weight).sum()) - int(neural_right.sum())
    if weight == 1.0 or gain < max(MIN_GAIN * len(label_ids), MIN_GAIN_ROWS):
        return NEURAL_ONLY
    return Blend(neural_weight=0.0) if weight == 0.0 else Blend(weight, *temperatures)


def _label_ids(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    index = {str(c): i for i, c in enumerate(classes)}
    if len(labels) == 0:
        raise UserError("choosing a blend needs validation rows; add data")
    unknown = sorted(set(map(str, labels)) - set(index))
    if unknown:
        raise UserError(f"validation labels {unknown} are not among the models' classes")
    return np.array([index[str(label)] for label in labels])
