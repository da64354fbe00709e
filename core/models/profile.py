"""What a model's routing looked like on its validation rows (the card's `validation_profile`):
the decision's confidence on fixed bins, the desk mix it predicted, and the shares it flagged as
"unknown desk" and sent to people. The monitor (core.monitor) measures live weeks
against it; a card saved before it has none, and the monitor then says there is no baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserError
from core.models.flagging import UNKNOWN

# Bins of the decision's confidence, fixed so that every model's profile and every live week
# are counted alike. Finer near 1: a good model puts most complaints there, and drift shows
# first as mass leaving the top bins.
CONFIDENCE_EDGES: tuple[float, ...] = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
PROFILE_KEY = "validation_profile"


def confidence_bins(
    confidence: np.ndarray, edges: Sequence[float] = CONFIDENCE_EDGES
) -> np.ndarray:
    """The bin of each confidence, 0..len(edges)-2 (bin i holds edges[i] <= c < edges[i+1]; the
    last bin also holds c == 1). Shape (n,) of ints."""
    inner = np.asarray(edges[1:-1], dtype=float)
    return np.searchsorted(inner, np.asarray(confidence, dtype=float), side="right")


def confidence_counts(
    confidence: np.ndarray, edges: Sequence[float] = CONFIDENCE_EDGES
) -> tuple[int, ...]:
    """How many of `confidence` fall in each bin of `edges`."""
    bins = confidence_bins(confidence, edges)
    return tuple(int(n) for n in np.bincount(bins, minlength=len(edges) - 1))


@dataclass(frozen=True)
class ValidationProfile:
    """A model's routing on its validation rows, as counts (so a comparison knows how many)."""

    rows: int
    confidence_edges: tuple[float, ...]
    confidence_counts: tuple[int, ...]  # one per bin of confidence_edges
    desk_counts: dict[str, int]  # predicted desk -> validation rows routed there
    unknown_share: float | None  # flagged "unknown desk"; None: the model has no such score
    review_share: float  # sent to people, for any reason

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows, "confidence_edges": list(self.confidence_edges),
            "confidence_counts": list(self.confidence_counts), "desk_counts": self.desk_counts,
            "unknown_desk_share": self.unknown_share, "review_share": self.review_share,
        }  # fmt: skip

    @classmethod
    def from_card(cls, card: dict[str, Any]) -> ValidationProfile | None:
        """The profile a card was saved with; None for a card saved before profiles. UserError
        when it is there but damaged."""
        saved = card.get(PROFILE_KEY)
        if saved is None:
            return None
        try:
            profile = cls(
                int(saved["rows"]),
                tuple(float(e) for e in saved["confidence_edges"]),
                tuple(int(n) for n in saved["confidence_counts"]),
                {str(k): int(v) for k, v in dict(saved["desk_counts"]).items()},
                None if saved["unknown_desk_share"] is None else float(saved["unknown_desk_share"]),
                float(saved["review_share"]),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise UserError(
                "the card's validation profile is damaged; save the model again"
            ) from err
        if len(profile.confidence_counts) != len(profile.confidence_edges) - 1 or profile.rows < 1:
            raise UserError("the card's validation profile is damaged; save the model again")
        return profile


def validation_profile(
    decision_probs: np.ndarray,
    classes: Sequence[str],
    reasons: np.ndarray,
    *,
    has_unknown_score: bool,
) -> ValidationProfile:
    """The profile of the decision's probabilities on the validation rows, `decision_probs`
    (n, n_classes), with the review reason the model's policy gives each row (n,)."""
    probs = np.asarray(decision_probs, dtype=float)
    picked = probs.argmax(axis=1)
    counts = np.bincount(picked, minlength=len(classes))
    reasons = np.asarray(reasons).astype(str)
    unknown = float(np.mean(reasons == UNKNOWN)) if has_unknown_score else None
    return ValidationProfile(
        rows=len(probs),
        confidence_edges=CONFIDENCE_EDGES,
        confidence_counts=confidence_counts(probs.max(axis=1)),
        desk_counts={str(c): int(n) for c, n in zip(classes, counts, strict=True)},
        unknown_share=unknown,
        review_share=float(np.mean(reasons != "")),
    )
