"""Which predictions go to a person, and why: the "unknown desk" score (how unlike every desk the
model knows a complaint is) and the review policy (the thresholds, chosen on validation rows
and saved with the model).

The score is a distance in the model's own embedding space: the input of its classification
layer, which the fine-tuning shaped to separate the desks (the quick recipe's frozen sentence
embedding). Four measures are fitted on the training rows' embeddings:
- "mahalanobis": the smallest Mahalanobis distance to a desk's mean, one covariance shared by
  all desks (Lee et al. 2018; Podolskiy et al. 2021 found it the strongest unknown-intent
  detector for fine-tuned encoders);
- "knn": the cosine distance to the k-th nearest training complaint (Sun et al. 2022);
- "knn+msp": that distance, in units of the validation complaints' median distance, plus the
  rank of the model's own doubt (1 - its top softmax probability) among theirs: two signals that
  fail on different complaints.
- "knn+mahalanobis+msp" (COMBINED): the kNN distance (k = 2), the Mahalanobis distance of the
  unit-length embedding and the doubt, each standardised on the validation complaints and summed
  with fixed weights: one score for every recipe, measured but not shipped (it lost to knn+msp
  on BANKING77 and to mahalanobis on the demo data's full recipe).
`bench/bench_unknown.py` measures them against the softmax's own confidence (maximum softmax
probability after temperature scaling, energy, max-logit) on desks held out of training
(BENCHMARKS.md, "Complaints that fit no desk"); each recipe gets the winner on its validation
rows (`detector_for`): fine-tuning shapes the embedding around the desks, which suits
Mahalanobis, while the frozen encoder's embedding does not.

The raw distance means nothing to a reader, so the score shown is its rank among the validation
complaints (desks the model knows, never trained on): 0.97 = less like any desk than 97% of
them. A complaint farther than every validation complaint scores 1.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserError

MAHALANOBIS, KNN, KNN_MSP = "mahalanobis", "knn", "knn+msp"
COMBINED = "knn+mahalanobis+msp"
DETECTORS = (MAHALANOBIS, KNN, KNN_MSP, COMBINED)
# The highest validation AUROC on held-out desks in bench/bench_unknown.py, per recipe. Quick:
# knn+msp (demo 0.881, CFPB sample 0.681, BANKING77 0.911; COMBINED 0.885, 0.711, 0.908). Full:
# Mahalanobis (demo, 2 desks, 0.934; COMBINED 0.915). COMBINED, one score for both, did not win
# where it counts (BANKING77, demo full): measured and kept, shipped to neither (#40).
DETECTOR = KNN_MSP  # the quick recipe's, and the default of `fit_detector`
FINE_TUNED_DETECTOR = MAHALANOBIS
KNN_K = 3  # "knn", "knn+msp": the best k of 1, 3, 5, 10, 20, 50 on validation rows (bench_unknown)
# COMBINED's weights of its three parts, each standardised on the validation rows: kNN distance
# (k = COMBINED_K), Mahalanobis distance of the unit-length embedding, doubt. Chosen on validation
# rows with desks held out (bench_unknown: demo, CFPB sample and BANKING77 quick, demo full): k of
# 1, 2, 3, raw or unit-length embedding, weights on a 0.1 grid; the highest mean AUROC, near-ties
# (within 0.001) to the smallest loss on any data set against the best weights for it.
COMBINED_WEIGHTS = (0.5, 0.2, 0.3)
COMBINED_K = 2
# Training rows the detector is fitted on at most (drawn seeded): covariance and neighbours are
# stable long before this, and the extra embedding pass of a full fine-tune stays short.
MAX_REFERENCE_ROWS = 20_000
UNKNOWN_FILE = "unknown.npz"
# Review policy. A known-desk complaint is flagged as an unknown desk this often (the score's
# threshold is its 1 - UNKNOWN_SHARE rank among validation complaints)...
UNKNOWN_SHARE = 0.05
# ...and all flags together (unsure or unknown) reach at most this share of validation rows.
MAX_FLAGGED_SHARE = 0.10
# "Unsure": the confidence below which the validation complaints were right no more often than
# this (a coin's odds between two desks): those gain most from a person's look.
FLAGGED_RIGHT_RATE = 0.5
# Reasons in `review_reason` (the classify contract): empty when routed without a person.
BLANK, UNKNOWN, UNSURE = "blank", "unknown desk", "unsure"
REASON_TEXT = {
    BLANK: "the complaint is empty",
    UNKNOWN: "looks like none of the desks",
    UNSURE: "unsure between two desks",
}


@dataclass(frozen=True)
class UnknownDeskDetector:
    """A fitted unknown-desk score over embeddings (n, d), and for "knn+msp" and COMBINED the
    model's own probabilities (n, k); see the module docstring."""

    method: str
    # (k, d) each desk's mean training embedding (COMBINED: of the unit-length embeddings)
    means: np.ndarray
    precision: np.ndarray  # (d, d) inverse of the shared, shrunk covariance (of the same)
    neighbours: np.ndarray  # (n, d) unit-length training embeddings ("knn"...), float16
    reference: np.ndarray  # (m,) sorted raw distances of the validation rows
    # "knn+msp": the validation rows' sorted kNN distances and doubts, which rank each part
    knn_reference: np.ndarray = field(default_factory=lambda: np.zeros(0))
    doubt_reference: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # COMBINED: the mean and standard deviation of each part on the validation rows, (3,) each
    part_centre: np.ndarray = field(default_factory=lambda: np.zeros(0))
    part_scale: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def distances(self, features: np.ndarray, probs: np.ndarray | None = None) -> np.ndarray:
        """The raw distance of each row of `features` (n, d): larger is less like any desk.
        "knn+msp" and COMBINED also need the model's probabilities of the rows (n, k)."""
        features = np.asarray(features, dtype=np.float64)
        if self.method == COMBINED:
            standard = (self.parts(features, probs) - self.part_centre) / self.part_scale
            return standard @ np.asarray(COMBINED_WEIGHTS)
        if self.method == MAHALANOBIS:
            return mahalanobis_distances(features, self.means, self.precision)
        near = knn_distances(features, self.neighbours_fp32, KNN_K)
        if self.method == KNN:
            return near
        if probs is None:
            raise ValueError("the knn+msp score needs the model's probabilities")
        return knn_msp(near, doubt(probs), self.knn_reference, self.doubt_reference)

    def parts(self, features: np.ndarray, probs: np.ndarray | None) -> np.ndarray:
        """COMBINED's three raw parts of each row, (n, 3): kNN distance, Mahalanobis distance
        of the unit-length embedding (its square root: the squared one's long tail would
        outweigh the other parts), doubt."""
        if probs is None:
            raise ValueError(f"the {self.method} score needs the model's probabilities")
        near = knn_distances(features, self.neighbours_fp32, COMBINED_K)
        far = mahalanobis_distances(unit_rows(features), self.means, self.precision)
        return np.column_stack([near, np.sqrt(far), doubt(probs)])

    def scores(self, features: np.ndarray, probs: np.ndarray | None = None) -> np.ndarray:
        """The unknown-desk score in 0..1 of each row: its distance's rank among the validation
        rows' distances."""
        return rank_in(self.distances(features, probs), self.reference)

    @functools.cached_property
    def neighbours_fp32(self) -> np.ndarray:
        """The kNN rows in float32, converted once: converting them per call cost 6 ms of a
        single complaint's 14 ms routing on BANKING77 (8,002 rows; bench_serving, #39)."""
        return self.neighbours.astype(np.float32)

    def nbytes(self) -> int:
        """The memory its arrays hold (the kNN score keeps up to MAX_REFERENCE_ROWS embeddings,
        and their float32 copy once it has scored)."""
        arrays = (self.means, self.precision, self.neighbours, self.reference,
                  self.knn_reference, self.doubt_reference, self.part_centre,
                  self.part_scale)  # fmt: skip
        fp32 = self.neighbours.size * 4 if self.neighbours.dtype != np.float32 else 0
        return sum(a.nbytes for a in arrays) + fp32

    def save(self, folder: Path) -> None:
        np.savez(
            folder / UNKNOWN_FILE, means=self.means, precision=self.precision,
            neighbours=self.neighbours, reference=self.reference,
            knn_reference=self.knn_reference, doubt_reference=self.doubt_reference,
            part_centre=self.part_centre, part_scale=self.part_scale,
            method=np.array(self.method),
        )  # fmt: skip

    @classmethod
    def load(cls, folder: Path, *, n_classes: int) -> UnknownDeskDetector:
        """The detector saved in `folder`; UserError when its arrays do not fit together."""
        with np.load(folder / UNKNOWN_FILE, allow_pickle=False) as saved:
            arrays = {key: saved[key] for key in saved.files}
        method = str(arrays.pop("method", ""))
        try:
            detector = cls(method=method, **arrays)
        except TypeError as err:  # a missing or unknown array
            raise UserError(
                f"{folder.name}: {UNKNOWN_FILE} is damaged; save the model again"
            ) from err
        if method not in DETECTORS or not _shapes_fit(detector, n_classes):
            raise UserError(f"{folder.name}: {UNKNOWN_FILE} is damaged; save the model again")
        return detector


def knn_msp(
    near: np.ndarray, doubts: np.ndarray, near_reference: np.ndarray, doubt_reference: np.ndarray
) -> np.ndarray:
    """The "knn+msp" distance: the kNN distance in units of the validation complaints' median
    one, plus the rank of the model's doubt among theirs (0..1). The distance is not ranked: a
    rank stops at 1, so a complaint far beyond every validation one (spam, another language)
    that the head happens to be sure of would look like the known desks again."""
    return near / max(float(np.median(near_reference)), 1e-12) + rank_in(doubts, doubt_reference)


def doubt(probs: np.ndarray) -> np.ndarray:
    """1 - the top probability of each row: the model's own doubt."""
    return 1.0 - np.asarray(probs, dtype=np.float64).max(axis=1)


def _shapes_fit(detector: UnknownDeskDetector, n_classes: int) -> bool:
    means, precision = detector.means, detector.precision
    width = means.shape[-1] if means.ndim == 2 else -1
    has_precision = detector.method in (MAHALANOBIS, COMBINED)
    return (
        means.shape == (n_classes, width)
        and precision.shape == ((width, width) if has_precision else (0, 0))
        and detector.neighbours.ndim == 2
        and detector.neighbours.shape[1] in (0, width)
        and all(_sorted_vector(r) for r in (detector.reference, detector.knn_reference,
                                             detector.doubt_reference))
        and len(detector.reference) > 0
        and (detector.method != KNN_MSP or min(len(detector.knn_reference),
                                               len(detector.doubt_reference)) > 0)
        and _parts_fit(detector)
    )  # fmt: skip


def _parts_fit(detector: UnknownDeskDetector) -> bool:
    """COMBINED has a positive scale per part and neighbours; the others no parts at all."""
    centre, scale = detector.part_centre, detector.part_scale
    if detector.method != COMBINED:
        return len(centre) == len(scale) == 0
    return (centre.shape == scale.shape == (len(COMBINED_WEIGHTS),)
            and bool(np.all(scale > 0)) and len(detector.neighbours) > 0)  # fmt: skip


def _sorted_vector(values: np.ndarray) -> bool:
    return values.ndim == 1 and bool(np.all(np.diff(values) >= 0))


def mahalanobis_distances(
    features: np.ndarray, means: np.ndarray, precision: np.ndarray
) -> np.ndarray:
    """min over desks c of (x - mu_c)' P (x - mu_c), for each row x of `features` (n, d)."""
    projected = features @ precision  # (n, d)
    own = np.einsum("nd,nd->n", projected, features)  # x' P x
    cross = projected @ means.T  # x' P mu_c, (n, k)
    centre = np.einsum("kd,kd->k", means @ precision, means)  # mu_c' P mu_c
    return np.maximum(own[:, None] - 2 * cross + centre[None, :], 0.0).min(axis=1)


def unit_rows(features: np.ndarray) -> np.ndarray:
    """Each row of `features` (n, d) scaled to length 1 (a zero row stays zero)."""
    return features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)


def knn_distances(features: np.ndarray, neighbours: np.ndarray, k: int) -> np.ndarray:
    """1 - cosine similarity to the k-th nearest row of `neighbours` (unit rows), per row."""
    unit = unit_rows(features).astype(np.float32)
    k = min(k, len(neighbours))
    out = np.empty(len(unit))
    for start in range(0, len(unit), 1024):  # (1024, n) similarities at a time
        similar = unit[start : start + 1024] @ neighbours.T
        out[start : start + 1024] = 1.0 - np.partition(similar, -k, axis=1)[:, -k]
    return out


def rank_in(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The share of `reference` (sorted) below each value, ties counted half: 0..1."""
    below = np.searchsorted(reference, values, side="left")
    upto = np.searchsorted(reference, values, side="right")
    return (below + upto) / (2.0 * len(reference))


def detector_for(recipe: str) -> str:
    """The unknown-desk score a model of `recipe` ("quick" or "full") gets."""
    return DETECTOR if recipe == "quick" else FINE_TUNED_DETECTOR


def fit_detector(
    features: np.ndarray,
    labels: Sequence[int],
    val_features: np.ndarray,
    *,
    n_classes: int,
    method: str = DETECTOR,
    val_probs: np.ndarray | None = None,
) -> UnknownDeskDetector:
    """Fit the unknown-desk score on training embeddings (n, d) with their class ids, and rank it
    on the validation embeddings (known desks the fit never saw); "knn+msp" and COMBINED also
    standardise by the model's validation probabilities `val_probs` (m, k)."""
    if method not in DETECTORS:
        raise UserError(f"the unknown-desk detector must be one of {DETECTORS}, got {method!r}")
    if method in (KNN_MSP, COMBINED) and val_probs is None:
        raise ValueError(f"the {method} score needs the validation rows' probabilities")
    features = np.asarray(features, dtype=np.float64)
    val_features = np.asarray(val_features, dtype=np.float64)
    labels = np.asarray(labels)
    # COMBINED's Gaussian is of unit-length embeddings: their length says more about a text's
    # wording than its desk (Mahalanobis, quick recipe, validation AUROC: BANKING77 0.78 raw,
    # 0.81 unit length; demo 0.71, 0.83).
    gaussian = unit_rows(features) if method == COMBINED else features
    means = np.stack([gaussian[labels == c].mean(axis=0) for c in range(n_classes)])
    precision = (
        np.linalg.pinv(shrunk_covariance(gaussian - means[labels]), hermitian=True)
        if method in (MAHALANOBIS, COMBINED)
        else np.zeros((0, 0))
    )
    neighbours = unit_rows(features) if method != MAHALANOBIS else features[:0]
    # Stored as saved (float32, neighbours float16), so a loaded detector ranks exactly as
    # this one did.
    detector = UnknownDeskDetector(method, means.astype(np.float32),
                                   precision.astype(np.float32), neighbours.astype(np.float16),
                                   np.zeros(1))  # fmt: skip
    detector = replace(detector, **_validation_parts(detector, val_features, val_probs))
    reference = np.sort(detector.distances(val_features, val_probs))
    return replace(detector, reference=reference)


def _validation_parts(
    detector: UnknownDeskDetector, val_features: np.ndarray, val_probs: np.ndarray | None
) -> dict[str, np.ndarray]:
    """What "knn+msp" and COMBINED put their parts on one scale with, from the validation
    rows: sorted values to rank in, or each part's mean and standard deviation."""
    if detector.method == KNN_MSP:
        assert val_probs is not None  # fit_detector checked
        near = knn_distances(val_features, detector.neighbours_fp32, KNN_K)
        return {"knn_reference": np.sort(near), "doubt_reference": np.sort(doubt(val_probs))}
    if detector.method == COMBINED:
        parts = detector.parts(val_features, val_probs)
        return {
            "part_centre": parts.mean(axis=0),
            "part_scale": np.maximum(parts.std(axis=0), 1e-12),
        }
    return {}


def shrunk_covariance(centred: np.ndarray) -> np.ndarray:
    """The Ledoit-Wolf shrunk covariance of rows already centred (each on its desk's mean):
    with a few hundred rows in 384 dimensions the sample covariance is singular, and the
    shrinkage towards a scaled identity is chosen from the data (Ledoit & Wolf 2004)."""
    n, d = centred.shape
    sample = centred.T @ centred / n
    scale = np.trace(sample) / d
    squared = centred**2
    # The estimate of how far the sample covariance strays from the truth, over its distance
    # to the target (sklearn.covariance.ledoit_wolf, without its block loop).
    spread = float(np.sum(squared.T @ squared) / n - np.sum(sample**2)) / n
    distance = float(np.sum(sample**2) - d * scale**2)
    shrinkage = 1.0 if distance <= 0 else min(spread / distance, 1.0)
    return (1 - shrinkage) * sample + shrinkage * scale * np.eye(d)


@dataclass(frozen=True)
class ReviewPolicy:
    """When a routed complaint goes to a person: its decision's confidence below
    `confidence_threshold` ("unsure"), its unknown-desk score above `unknown_threshold` ("unknown
    desk"), or no text at all ("blank"). Saved in the model card as "review"."""

    confidence_threshold: float
    unknown_threshold: float | None = None  # None: the model has no unknown-desk score
    rule: str = ""  # how the thresholds were chosen, for the card and the pages
    # shares flagged there, and how often the flagged and routed ones were right (None: no rows)
    validation: dict[str, float | None] = field(default_factory=dict)

    def reasons(
        self, confidence: np.ndarray, unknown_scores: np.ndarray, blank: np.ndarray
    ) -> np.ndarray:
        """Each row's `review_reason`: "blank", "unknown desk", "unsure" or "" (in that order
        of precedence: a complaint like no desk is not helped by its second-best desk)."""
        reasons = np.full(len(confidence), "", dtype=object)
        reasons[np.asarray(confidence) < self.confidence_threshold] = UNSURE
        if self.unknown_threshold is not None:
            reasons[np.asarray(unknown_scores) > self.unknown_threshold] = UNKNOWN
        reasons[np.asarray(blank, dtype=bool)] = BLANK
        return reasons

    def with_confidence(self, threshold: float | None) -> ReviewPolicy:
        """This policy with the user's own confidence threshold (None keeps the model's)."""
        if threshold is None or threshold == self.confidence_threshold:
            return self
        return ReviewPolicy(threshold, self.unknown_threshold, "set by hand", {})

    def describe(self) -> str:
        """One line for the pages."""
        text = f"unsure below {self.confidence_threshold:.0%} confidence"
        if self.unknown_threshold is not None:
            text += f"; unknown desk above a score of {self.unknown_threshold:.2f}"
        return text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_card(cls, card: dict[str, Any], *, fallback: float) -> ReviewPolicy:
        """The policy a card was saved with; a card from before policies flags by `fallback`
        confidence alone."""
        saved = card.get("review")
        if saved is None:
            return cls(fallback, None, "the fixed default of models saved before review policies")
        try:
            unknown = saved.get("unknown_threshold")
            return cls(
                float(saved["confidence_threshold"]),
                None if unknown is None else float(unknown),
                str(saved.get("rule", "")),
                {
                    str(k): None if v is None else float(v)
                    for k, v in dict(saved.get("validation", {})).items()
                },  # fmt: skip
            )
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise UserError("the card's review policy is damaged; save the model again") from err


def choose_policy(
    confidence: np.ndarray,
    right: np.ndarray,
    unknown_scores: np.ndarray | None,
) -> ReviewPolicy:
    """The review policy chosen on the validation rows' decision confidence, whether the decision
    was right, and their unknown-desk scores (None: no detector).

    The unknown threshold flags UNKNOWN_SHARE of them; the confidence threshold is the highest
    one below which they were right at most FLAGGED_RIGHT_RATE of the time, lowered until all
    flags together stay within MAX_FLAGGED_SHARE of the rows.
    """
    confidence, right = np.asarray(confidence, dtype=float), np.asarray(right, dtype=bool)
    if len(confidence) == 0:
        raise UserError("choosing a review policy needs validation rows; add data")
    unknown_threshold = None if unknown_scores is None else 1.0 - UNKNOWN_SHARE
    unknown = (
        np.zeros(len(confidence), dtype=bool)
        if unknown_scores is None
        else np.asarray(unknown_scores) > unknown_threshold
    )
    order = np.argsort(confidence, kind="stable")
    right_below = np.cumsum(right[order]) / np.arange(1, len(order) + 1)  # of the j lowest
    flagged_total = np.cumsum(~unknown[order]) + unknown.sum()  # flags when the j lowest are
    within = flagged_total <= MAX_FLAGGED_SHARE * len(order)
    allowed = (right_below <= FLAGGED_RIGHT_RATE) & within
    count = int(np.flatnonzero(allowed)[-1]) + 1 if allowed.any() else 0
    threshold = _between(confidence[order], count)
    unsure = confidence < threshold
    rule = (
        f"unsure: below the confidence under which validation complaints were right at most "
        f"{FLAGGED_RIGHT_RATE:.0%} of the time, with at most {MAX_FLAGGED_SHARE:.0%} of them "
        "flagged in all"
    )
    if unknown_threshold is not None:
        rule += f"; unknown desk: less like any desk than {1 - UNKNOWN_SHARE:.0%} of them"
    validation = {
        "unsure": float(unsure.mean()),
        "unknown": float(unknown.mean()),
        "flagged": float((unsure | unknown).mean()),
        "right_when_unsure": _share(right[unsure]),
        "right_when_routed": _share(right[~(unsure | unknown)]),
    }
    return ReviewPolicy(round(threshold, 4), unknown_threshold, rule, validation)


def _share(flags: np.ndarray) -> float | None:
    """The share of True among `flags`; None for none at all (JSON has no NaN)."""
    return float(flags.mean()) if len(flags) else None


def _between(sorted_confidence: np.ndarray, count: int) -> float:
    """A threshold that flags exactly the `count` lowest (midway to the next one)."""
    if count == 0:  # none of these rows: only what is less sure than any of them
        return float(sorted_confidence[0])
    if count == len(sorted_confidence):
        return float(sorted_confidence[-1]) + 1e-9
    return float(sorted_confidence[count - 1] + sorted_confidence[count]) / 2
