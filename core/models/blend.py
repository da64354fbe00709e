"""The routing decision of a saved model: its members' probabilities, each calibrated by a
temperature, mixed with shares chosen on the validation rows (`choose_blend`).

The members are the transformer (fine-tuned, or the quick recipe's frozen encoder with a fitted
head), the bag of words, and, where the recipe "auto" trained both recipes, the frozen-encoder
head beside the fine-tuned transformer ("frozen encoder"). A model saved before blends existed
routes on the transformer alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.checks import check_fraction, check_positive
from core.errors import UserError
from core.models.classifier import Prediction
from core.numeric import clearly_more_right

# Who decides, as `decided_by` spells it in the card, the JSON and the classify columns (a
# contract: the neural model is "transformer" there, ARCHITECTURE.md "Glossary").
NEURAL, BAG_OF_WORDS, BLEND = "transformer", "bag of words", "blend"
# The third member's name on the pages and in the card's shares.
FROZEN = "frozen encoder"
# Shares are searched in tenths: finer steps would fit a few hundred validation rows' noise.
STEPS = 10
# Softmax temperatures tried when calibrating one model on the validation rows (0.1 sharpens
# ten-fold, 10 flattens ten-fold); log-spaced because their effect is multiplicative.
TEMPERATURES = tuple(float(t) for t in np.geomspace(0.1, 10.0, 41))
_FLOOR = 1e-12  # keeps log(0) out of the calibration of a model that is sure and wrong


@dataclass(frozen=True)
class Blend:
    """How the members' probabilities become the decision.

    decision = w_t * softmax(log p_transformer / T_t) + w_f * softmax(log p_frozen / T_f)
               + (1 - w_t - w_f) * softmax(log p_bow / T_b)
    with w_t = `neural_weight` and w_f = `frozen_weight`. The default, w_t = 1, is the
    transformer's own probabilities: the decision of every model saved before blends. The frozen
    encoder only ever joins a fine-tuned transformer (alone, it is the quick recipe's model).
    """

    neural_weight: float = 1.0
    neural_temperature: float = 1.0
    bow_temperature: float = 1.0
    frozen_weight: float = 0.0
    frozen_temperature: float = 1.0

    def __post_init__(self) -> None:
        check_fraction("transformer_weight", self.neural_weight, low=-1e-12, high=1.0)
        check_fraction("frozen_weight", self.frozen_weight, low=-1e-12, high=1.0)
        check_positive("transformer_temperature", self.neural_temperature)
        check_positive("bow_temperature", self.bow_temperature)
        check_positive("frozen_temperature", self.frozen_temperature)
        if self.neural_weight + self.frozen_weight > 1.0 + 1e-9:
            raise UserError("the blend's shares add up to more than 1; save the model again")
        if self.frozen_weight > 0 and self.neural_weight <= 0:
            raise UserError("a frozen encoder joins a fine-tuned transformer, never decides alone")

    @property
    def bow_weight(self) -> float:
        return max(0.0, 1.0 - self.neural_weight - self.frozen_weight)

    @property
    def shares(self) -> dict[str, float]:
        """Each member that takes part, with its share of the decision (summing to 1)."""
        found = {NEURAL: self.neural_weight, FROZEN: self.frozen_weight,
                 BAG_OF_WORDS: self.bow_weight}  # fmt: skip
        return {name: share for name, share in found.items() if share > 1e-9}

    @property
    def carrying(self) -> tuple[str, ...]:
        """The members that carry the decision: the fewest, largest share first, that hold at
        least half of it (Explain shows their word attributions)."""
        found: list[str] = []
        for name, _share in sorted(self.shares.items(), key=lambda item: -item[1]):
            found.append(name)
            if sum(self.shares[n] for n in found) >= 0.5 - 1e-9:
                break
        return tuple(found)

    @property
    def needs_frozen(self) -> bool:
        """Whether the decision reads the frozen encoder's probabilities."""
        return FROZEN in self.shares

    @property
    def decided_by(self) -> str:
        """Which model makes the call: "transformer", "bag of words" or "blend"."""
        shares = self.shares
        if len(shares) > 1:
            return BLEND
        return NEURAL if NEURAL in shares else BAG_OF_WORDS

    def describe(self) -> str:
        """One line for the pages: who decides, with the shares when several do."""
        if self.decided_by != BLEND:
            return f"the {self.decided_by} alone"
        parts = [f"{share}% {name}" for name, share in _percentages(self.shares).items()]
        return "a blend of " + (" and ".join(parts) if len(parts) == 2
                                else f"{', '.join(parts[:-1])} and {parts[-1]}")  # fmt: skip

    def combine(
        self,
        neural_probs: np.ndarray,
        bow_probs: np.ndarray,
        frozen_probs: np.ndarray | None = None,
    ) -> np.ndarray:
        """The decision's probabilities (n, k) from the members' (n, k), columns alike."""
        given = {NEURAL: np.asarray(neural_probs), BAG_OF_WORDS: np.asarray(bow_probs)}
        if frozen_probs is not None:
            given[FROZEN] = np.asarray(frozen_probs)
        shapes = {probs.shape for probs in given.values()}
        if len(shapes) > 1:
            raise UserError(
                f"the models must score the same texts and labels: {sorted(shapes)} differ"
            )
        if self.needs_frozen and FROZEN not in given:
            raise UserError("this blend needs the frozen encoder's probabilities")
        if self.decided_by == NEURAL:  # exactly the transformer's own numbers
            return given[NEURAL]
        if self.decided_by == BAG_OF_WORDS:
            return given[BAG_OF_WORDS]
        temperature = {NEURAL: self.neural_temperature, FROZEN: self.frozen_temperature,
                       BAG_OF_WORDS: self.bow_temperature}  # fmt: skip
        return sum(
            share * tempered(given[name], temperature[name]) for name, share in self.shares.items()
        )

    def decide(
        self, neural: Prediction, bow: Prediction, frozen: Prediction | None = None
    ) -> Prediction:
        """The decision for one text from the members' predictions of it."""
        classes = list(neural.probabilities)

        def row(prediction: Prediction | None) -> np.ndarray | None:
            if prediction is None:
                return None
            return np.array([[prediction.probabilities[c] for c in classes]])

        pred_probs = self.combine(row(neural), row(bow), row(frozen))
        return Prediction.of(classes, pred_probs[0])

    def to_json(self) -> dict[str, Any]:
        """The card's `blend` and `train --json`'s: keys named as before the rename (a contract)."""
        saved = {key: getattr(self, field) for key, field in CARD_KEYS.items()}
        return {**saved, "decided_by": self.decided_by, "shares": self.shares}

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
    "frozen_weight": "frozen_weight",
    "frozen_temperature": "frozen_temperature",
}


NEURAL_ONLY = Blend()


def _percentages(shares: Mapping[str, float]) -> dict[str, int]:
    """Whole percentages that add up to 100 (the last member takes the rounding)."""
    names = list(shares)
    found = {name: round(100 * shares[name]) for name in names[:-1]}
    found[names[-1]] = 100 - sum(found.values())
    return found


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


@dataclass(frozen=True)
class Mix:
    """Members chosen on validation rows: each one's share (summing to 1) and temperature, and
    the validation rows the mix gets right."""

    shares: dict[str, float]
    temperatures: dict[str, float]
    right: np.ndarray  # (n,) bool
    log_loss: float = float("nan")  # of the calibrated mix on those rows

    @property
    def accuracy(self) -> float:
        return float(self.right.mean())


def choose_mix(
    member_probs: Mapping[str, np.ndarray],
    label_ids: np.ndarray,
    allowed: Any = None,
) -> Mix:
    """The simplest mix of members whose validation accuracy is not clearly below the best mix.

    `member_probs`: name -> (n, k) validation probabilities, in order of preference (the first
    reads word order best). Every non-empty set of members (`allowed(names)` says which may
    decide together) gets its shares in tenths (`_best_shares`). Then the sets are taken
    simplest first (fewer members; among as many, the lower validation log-loss, then the
    preferred) and the first whose rows right are not `clearly_more_right` beaten by the best
    set's is chosen: a member joins only when it clearly pays, which keeps the choice the same
    from one retraining to the next. Equal sizes go by log-loss, not by preference alone, so
    that a member better on every measure but not "clearly" on a hundred rows (the CFPB
    sample's bag of words against its quick head) does not lose to the preferred one on one
    retraining and win on the next."""
    names = list(member_probs)
    temperatures = {n: calibrated_temperature(member_probs[n], label_ids) for n in names}
    calibrated = {n: tempered(member_probs[n], temperatures[n]) for n in names}
    candidates = []
    for size in range(1, len(names) + 1):
        same_size = [_best_shares(members, calibrated, label_ids)
                     for members in itertools.combinations(names, size)
                     if allowed is None or allowed(members)]  # fmt: skip
        candidates += sorted(same_size, key=lambda mix: round(mix.log_loss, 9))  # stable
    best = max(candidates, key=lambda mix: int(mix.right.sum()))  # first of equals: simplest
    chosen = next(mix for mix in candidates if not clearly_more_right(best.right, mix.right))
    temperatures = {n: temperatures[n] for n in chosen.shares}
    return Mix(chosen.shares, temperatures, chosen.right, chosen.log_loss)


def _best_shares(
    members: tuple[str, ...], calibrated: Mapping[str, np.ndarray], label_ids: np.ndarray
) -> Mix:
    """The members' shares: of those whose rows right are not clearly beaten by the most
    accurate shares', the lowest log-loss (smooth, so it moves little between retrainings)."""
    rows = np.arange(len(label_ids))
    tried = []
    for shares in _tenths(len(members)):
        mixed = sum(share * calibrated[name] for name, share in zip(members, shares, strict=True))
        loss = float(-np.mean(np.log(np.clip(mixed[rows, label_ids], _FLOOR, 1.0))))
        tried.append((round(loss, 9), shares, mixed.argmax(1) == label_ids))
    most_right = max(tried, key=lambda found: int(found[2].sum()))[2]
    eligible = [found for found in tried if not clearly_more_right(most_right, found[2])]
    loss, shares, right = min(eligible, key=lambda found: found[0])  # first of equals
    return Mix(dict(zip(members, shares, strict=True)), {}, right, loss)


def _tenths(size: int) -> list[tuple[float, ...]]:
    """Every way to give `size` members positive shares in tenths that sum to 1, the first
    member's largest share first (a tie in log-loss keeps the preferred member's larger share)."""
    found = [
        (*parts, STEPS - sum(parts))
        for parts in itertools.product(range(STEPS - 1, 0, -1), repeat=size - 1)
        if sum(parts) < STEPS
    ]
    return [tuple(part / STEPS for part in shares) for shares in found]


def choose_blend(
    neural_probs: np.ndarray,
    bow_probs: np.ndarray,
    labels: Sequence[str],
    classes: Sequence[str],
    frozen_probs: np.ndarray | None = None,
) -> Blend:
    """The blend of the transformer, the bag of words and (when given) the frozen encoder that
    the validation rows choose (`choose_mix`; the transformer is preferred, as it reads word
    order, and the order-blind bag of words last). Single members return their own
    probabilities, uncalibrated.

    Parameters
    ----------
    neural_probs, bow_probs, frozen_probs : (n, k) validation probabilities, columns in
        `classes` order
    labels : the n validation labels
    classes : the k class names
    """
    label_ids = _label_ids(labels, classes)
    members = {NEURAL: neural_probs}
    if frozen_probs is not None:
        members[FROZEN] = frozen_probs
    members[BAG_OF_WORDS] = bow_probs
    mix = choose_mix(members, label_ids, allowed=_representable)
    return blend_of(mix)


def _representable(members: tuple[str, ...]) -> bool:
    return FROZEN not in members or NEURAL in members


def blend_of(mix: Mix) -> Blend:
    """The Blend of a mix over the members NEURAL, FROZEN and BAG_OF_WORDS."""
    shares, temperatures = mix.shares, mix.temperatures
    if len(shares) == 1:
        return NEURAL_ONLY if NEURAL in shares else Blend(neural_weight=0.0)
    return Blend(
        neural_weight=shares.get(NEURAL, 0.0), frozen_weight=shares.get(FROZEN, 0.0),
        neural_temperature=temperatures.get(NEURAL, 1.0),
        bow_temperature=temperatures.get(BAG_OF_WORDS, 1.0),
        frozen_temperature=temperatures.get(FROZEN, 1.0),
    )  # fmt: skip


def _label_ids(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    index = {str(c): i for i, c in enumerate(classes)}
    if len(labels) == 0:
        raise UserError("choosing a blend needs validation rows; add data")
    unknown = sorted(set(map(str, labels)) - set(index))
    if unknown:
        raise UserError(f"validation labels {unknown} are not among the models' classes")
    return np.array([index[str(label)] for label in labels])
