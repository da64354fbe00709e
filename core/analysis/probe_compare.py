"""Both models on one complaint and its perturbations: probability shifts, flips and Jensen-Shannon
divergences from the original, and the "paid by card, not by UPI" demonstration. Models are
seen only through `classes_` / `predict_proba(texts) -> (n, n_classes)`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import entropy

from core.analysis.perturbations import ARGUMENT_SWAP, Perturbation, ProbeConfig, perturb
from core.checks import MAX_COMPLAINT_CHARS, check_complaint
from core.data.privacy import mask_personal_data
from core.models.classifier import Prediction, predict_in_batches, shared_classes
from core.models.transformer.truncation import HEAD, cut_text
from core.progress import Cancelled

# The "paid by card, not by UPI" demonstration: the desk follows the method named after "by",
# so a reader routes it to Card Fraud and the swapped text to UPI Dispute; the bags are equal.
DEMO_TEXT = "I paid ₹2,500 to Croma by card, not by UPI, and was charged twice."
DEMO_DESKS = {
    DEMO_TEXT: "Card Fraud",
    "I paid ₹2,500 to Croma by UPI, not by card, and was charged twice.": "UPI Dispute",
}


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits between rows of p and q, (n, k) each → (n,) in [0, 1].

    The mean of scipy's Kullback-Leibler divergences to the mixture m = (p + q) / 2. Not
    `scipy.spatial.distance.jensenshannon` squared: it takes the square root of a sum that
    rounding can leave a hair below zero, and returns NaN for nearly equal rows
    (scipy/scipy#20083), which perturbations that change nothing produce all the time.
    """
    p, q = np.atleast_2d(p).astype(np.float64), np.atleast_2d(q).astype(np.float64)
    m = (p + q) / 2
    kl_p, kl_q = entropy(p, m, base=2, axis=1), entropy(q, m, base=2, axis=1)
    return np.clip((kl_p + kl_q) / 2, 0.0, 1.0)


@dataclass(frozen=True)
class ProbeOutcome:
    """Both models on one perturbation, compared with their answer on the original."""

    perturbation: Perturbation
    neural: Prediction
    bow: Prediction
    neural_shift: float  # change in the probability of the original's predicted desk
    bow_shift: float
    neural_jsd: float  # Jensen-Shannon divergence (bits) from the original's distribution
    bow_jsd: float
    neural_flipped: bool  # the top desk differs from the original's
    bow_flipped: bool

    def to_json(self) -> dict[str, Any]:
        p = self.perturbation
        return {
            "kind": p.kind,
            "text": p.text,
            "bag_unchanged": p.bag_unchanged,
            "note": p.note,
            "transformer": self.neural.to_json(),
            "bow": self.bow.to_json(),
            "transformer_flipped": self.neural_flipped,
            "bow_flipped": self.bow_flipped,
            "transformer_shift": self.neural_shift,
            "bow_shift": self.bow_shift,
        }


@dataclass(frozen=True)
class ProbeResult:
    """One complaint, both models' answers, and their answers on every perturbation."""

    text: str
    neural: Prediction
    bow: Prediction
    outcomes: tuple[ProbeOutcome, ...]

    def to_json(self) -> dict[str, Any]:
        """The ARCHITECTURE.md `probe` document (and a few more keys per perturbation)."""
        return {
            "original": {
                "text": self.text,
                "transformer": self.neural.to_json(),
                "bow": self.bow.to_json(),
            },
            "perturbations": [o.to_json() for o in self.outcomes],
        }


# Texts per prediction between cancel checks: a probe has up to a hundred texts, each as long as
# the transformer reads.
PROBE_CHUNK = 16


def probed_part(neural: Any, text: str) -> str:
    """The part of `text` the probes perturb: what the transformer reads of it (its character
    cut, core.models.transformer.truncation), and never more than MAX_COMPLAINT_CHARS. Words
    past the cut cannot move the transformer, and perturbing them would only cost time."""
    max_length = getattr(neural, "max_length", None)
    if isinstance(max_length, int):
        text = cut_text(text, max_length, getattr(neural, "truncation", HEAD))
    return text[:MAX_COMPLAINT_CHARS]


def run_probes(
    neural: Any,
    bow: Any,
    text: str,
    config: ProbeConfig = ProbeConfig(),
    *,
    cancel: threading.Event | None = None,
) -> ProbeResult:
    """Perturb `text` and run both models (any `classes_` / `predict_proba`) on every version.

    `text` (at most MAX_COMPLAINT_CHARS characters) is masked first (core.data.privacy), as the
    models mask it: perturbing the text they read keeps "same bag of words" true for them (a
    shuffle never splits a card number). Then it is cut to what the transformer reads
    (`probed_part`); `ProbeResult.text` is that part. A set `cancel` stops it between batches
    of the models (core.progress.Cancelled)."""
    check_complaint(text, purpose="perturb")
    classes = shared_classes(neural, bow)
    text = probed_part(neural, mask_personal_data(text))
    perturbations = perturb(text, config)
    return _compare(classes, text, perturbations, neural, bow, cancel)


def _compare(
    classes: list[str],
    text: str,
    perturbations: list[Perturbation],
    neural: Any,
    bow: Any,
    cancel: threading.Event | None = None,
) -> ProbeResult:
    texts = [text] + [p.text for p in perturbations]
    t_probs, b_probs = (_predicted(model, texts, cancel) for model in (neural, bow))
    t0, b0 = Prediction.of(classes, t_probs[0]), Prediction.of(classes, b_probs[0])
    t_index, b_index = classes.index(t0.label), classes.index(b0.label)
    t_jsd, b_jsd = js_divergence(t_probs[1:], t_probs[:1]), js_divergence(b_probs[1:], b_probs[:1])
    outcomes = tuple(
        ProbeOutcome(
            perturbation=p,
            neural=Prediction.of(classes, t_probs[i + 1]),
            bow=Prediction.of(classes, b_probs[i + 1]),
            neural_shift=float(t_probs[i + 1, t_index] - t_probs[0, t_index]),
            bow_shift=float(b_probs[i + 1, b_index] - b_probs[0, b_index]),
            neural_jsd=float(t_jsd[i]),
            bow_jsd=float(b_jsd[i]),
            neural_flipped=int(t_probs[i + 1].argmax()) != t_index,
            bow_flipped=int(b_probs[i + 1].argmax()) != b_index,
        )
        for i, p in enumerate(perturbations)
    )
    return ProbeResult(text, t0, b0, outcomes)


def _predicted(model: Any, texts: list[str], cancel: threading.Event | None) -> np.ndarray:
    pred_probs = predict_in_batches(model, texts, chunk=PROBE_CHUNK, cancel=cancel)
    if pred_probs is None:
        raise Cancelled
    return pred_probs


def order_demo(neural: Any, bow: Any) -> ProbeResult:
    """The "paid by card, not by UPI" pair through both models (argument swaps only)."""
    classes = shared_classes(neural, bow)
    swaps = [p for p in perturb(DEMO_TEXT, ProbeConfig(n_shuffles=0, invariance=False))]
    swaps = [p for p in swaps if p.kind == ARGUMENT_SWAP]
    return _compare(classes, DEMO_TEXT, swaps, neural, bow)


def bow_is_order_blind(bow: Any) -> bool:
    """Whether the bag of words sees unigrams only (then equal bags give equal answers, always).

    A core.models.bag_of_words model with `ngram_max` > 1 also sees adjacent word pairs, so
    reordering can move it; unknown models are assumed to see order.
    """
    config = getattr(bow, "config", None)
    return getattr(config, "ngram_max", None) == 1
