"""The drift figures of the live monitor: how far a week of routed complaints has moved from the
live model's validation rows (core.models.profile), and the rule at which the monitor warns.

The figure is the population stability index, PSI = sum_i (a_i - e_i) * ln(a_i / e_i), over the
desk mix and over the confidence bins, where e_i is the validation rows' share of bin i and a_i
the week's. Each bin's count gets `smoothing` added before shares are taken, so a bin empty on
one side gives a large but finite term. The usual reading: below 0.1 stable, 0.1 to 0.2 a
moderate shift, above 0.2 a significant one; the monitor warns above `psi_threshold` (0.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.errors import UserError
from core.models.profile import ValidationProfile

DESK_MIX, CONFIDENCE, UNKNOWN_DESK = "desk_mix", "confidence", "unknown_desk"
MEASURE = "population stability index"


@dataclass(frozen=True)
class DriftRule:
    """When the monitor warns about a week (the defaults are the shipped rule)."""

    psi_threshold: float = 0.2  # PSI above it: a significant shift (the usual rule of thumb)
    # A week with fewer complaints of the live model is shown but not judged: on a few dozen
    # complaints PSI is mostly sampling noise (bench/bench_drift.py counts false alarms).
    min_complaints: int = 200
    # Unknown desk: the week's share at least this many times the validation rows' share...
    unknown_factor: float = 2.0
    min_unknown: int = 10  # ...and at least this many such complaints (1 of 3 is no signal)
    smoothing: float = 0.5  # added to each bin's count before shares are taken (see above)

    def __post_init__(self) -> None:
        if not (self.psi_threshold > 0 and self.unknown_factor > 1 and self.smoothing > 0):
            raise UserError(
                "a drift rule needs psi_threshold > 0, unknown_factor > 1, smoothing > 0"
            )
        if self.min_complaints < 1 or self.min_unknown < 1:
            raise UserError("a drift rule needs min_complaints and min_unknown of at least 1")

    def describe(self) -> str:
        """One line for the pages and the command line."""
        return (
            f"warns when a week of at least {self.min_complaints} complaints has a {MEASURE} "
            f"(PSI) above {self.psi_threshold:g} against the validation rows, for the desk mix or "
            f"for confidence, or when its unknown-desk share is at least "
            f"{self.unknown_factor:g} times the validation rows' (and {self.min_unknown} or more)"
        )

    def to_json(self) -> dict[str, Any]:
        return {"measure": MEASURE, **asdict(self), "rule": self.describe()}


def smoothed_shares(counts: Sequence[float], smoothing: float) -> np.ndarray:
    """Each bin's share after adding `smoothing` to every count. Shape (k,), sums to 1."""
    padded = np.asarray(counts, dtype=float) + smoothing
    return padded / padded.sum()


def psi(expected: Sequence[float], actual: Sequence[float], *, smoothing: float = 0.5) -> float:
    """The population stability index of `actual` counts against `expected` counts, bin by bin
    (both shape (k,)); 0 when the shares agree, symmetric in its two arguments."""
    if len(expected) != len(actual) or len(expected) < 2:
        raise ValueError("PSI needs two count vectors of the same length, at least 2 bins")
    e = smoothed_shares(expected, smoothing)
    a = smoothed_shares(actual, smoothing)
    return float(np.sum((a - e) * np.log(a / e)))


@dataclass(frozen=True)
class WeekCounts:
    """One ISO week of complaints routed by the baseline model (the live one)."""

    week: str  # "2026-W19"
    start: str  # its Monday, "2026-05-04" (UTC days)
    complaints: int
    desk_counts: Mapping[str, int]
    confidence_counts: tuple[int, ...]  # on the profile's bins
    unknown: int  # review_reason "unknown desk"
    review: int  # sent to people, for any reason


@dataclass(frozen=True)
class DriftWarning:
    """One warning: which figure, of which week, its value and the threshold it passed."""

    kind: str  # DESK_MIX, CONFIDENCE or UNKNOWN_DESK
    week: str
    value: float
    threshold: float
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WeekDrift:
    """A week's figures against the validation rows (None: no baseline to compare with)."""

    counts: WeekCounts
    desk_psi: float | None
    confidence_psi: float | None
    judged: bool  # a baseline, and it and the week both hold the rule's min_complaints
    warnings: tuple[DriftWarning, ...] = field(default=())

    @property
    def unknown_share(self) -> float:
        return self.counts.unknown / self.counts.complaints if self.counts.complaints else 0.0

    @property
    def review_share(self) -> float:
        return self.counts.review / self.counts.complaints if self.counts.complaints else 0.0

    def to_json(self) -> dict[str, Any]:
        c = self.counts
        return {
            "week": c.week, "start": c.start, "complaints": c.complaints,
            "desk_counts": dict(c.desk_counts), "desk_psi": _rounded(self.desk_psi),
            "confidence_psi": _rounded(self.confidence_psi), "unknown_share": self.unknown_share,
            "review_share": self.review_share, "judged": self.judged,
            "warnings": [w.to_json() for w in self.warnings],
        }  # fmt: skip


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def judge_week(counts: WeekCounts, profile: ValidationProfile | None, rule: DriftRule) -> WeekDrift:
    """`counts` measured against `profile` by `rule`: both PSI figures (None without a profile)
    and the warnings they give when the week has complaints enough to be judged."""
    if profile is None:
        return WeekDrift(counts, None, None, False)
    # Both sides are samples: a small validation set makes PSI noisy however long the week.
    judged = min(counts.complaints, profile.rows) >= rule.min_complaints
    desks = sorted(set(profile.desk_counts) | set(counts.desk_counts))
    expected = [profile.desk_counts.get(d, 0) for d in desks]
    desk_psi = psi(
        expected, [counts.desk_counts.get(d, 0) for d in desks], smoothing=rule.smoothing
    )
    confidence_psi = psi(
        profile.confidence_counts, counts.confidence_counts, smoothing=rule.smoothing
    )
    warnings: list[DriftWarning] = []
    if judged:
        warnings += _psi_warning(DESK_MIX, "desk mix", counts.week, desk_psi, rule)
        warnings += _psi_warning(CONFIDENCE, "confidence", counts.week, confidence_psi, rule)
        warnings += _unknown_warning(counts, profile, rule)
    return WeekDrift(counts, desk_psi, confidence_psi, judged, tuple(warnings))


def _psi_warning(
    kind: str, what: str, week: str, value: float, rule: DriftRule
) -> list[DriftWarning]:
    if value <= rule.psi_threshold:
        return []
    message = (
        f"{week}: the {what} has drifted from the live model's validation rows (PSI "
        f"{value:.2f} > {rule.psi_threshold:g}); check what arrives and consider retraining"
    )
    return [DriftWarning(kind, week, value, rule.psi_threshold, message)]


def _unknown_warning(
    counts: WeekCounts, profile: ValidationProfile, rule: DriftRule
) -> list[DriftWarning]:
    if profile.unknown_share is None or counts.unknown < rule.min_unknown:
        return []
    share = counts.unknown / counts.complaints
    threshold = rule.unknown_factor * profile.unknown_share
    if share < threshold:
        return []
    message = (
        f"{counts.week}: {share:.1%} of complaints fit no desk ({counts.unknown:,} of "
        f"{counts.complaints:,}), at least {rule.unknown_factor:g} times the validation rows' "
        f"{profile.unknown_share:.1%}; a new kind of complaint may be arriving"
    )
    return [DriftWarning(UNKNOWN_DESK, counts.week, share, threshold, message)]
