"""The live monitor's report, from complaints counted in groups (core.intake.monitor reads them
from the inbox; bench/bench_drift.py replays a stream without a store): complaints per day (UTC,
by when the bank received them) by channel and by routed desk, the shares sent to people and
fitting no desk, the confidence distribution and a drift figure per ISO week against the live
model's validation rows (core.monitor.drift, the card's `validation_profile`), and the routing
latency. Only complaints the baseline model routed count toward drift; a card without a profile
(saved before it) means no baseline: the counts are shown, the comparisons skipped and said so.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from core.errors import UserError
from core.models.flagging import UNKNOWN
from core.models.profile import CONFIDENCE_EDGES, ValidationProfile, confidence_bins
from core.monitor.drift import DriftRule, DriftWarning, WeekCounts, WeekDrift, judge_week

MONITOR_WEEKS = 8  # the default window: this ISO week and the seven before it
# Callers name channels freely (up to 50 characters): the most frequent are named, the rest
# counted together, so a table, a chart or a Prometheus label set stays small.
MAX_CHANNELS = 12
OTHER_CHANNELS, NO_CHANNEL = "other channels", "(none)"


@dataclass(frozen=True)
class Baseline:
    """The model drift is measured for, and its validation profile (None: why in `missing`)."""

    model: str | None  # None: no model is live
    digest: str
    profile: ValidationProfile | None
    missing: str = ""

    def to_json(self) -> dict[str, Any]:
        p = self.profile
        return {
            "model": self.model, "validation_rows": None if p is None else p.rows,
            "review_share": None if p is None else p.review_share,
            "unknown_share": None if p is None else p.unknown_share, "missing": self.missing,
        }  # fmt: skip


def card_baseline(name: str, digest: str, card: dict[str, Any]) -> Baseline:
    """The baseline of a loaded model (its name, card digest and card)."""
    try:
        profile = ValidationProfile.from_card(card)
    except UserError as exc:
        return Baseline(name, digest, None, f"{name}: {exc}")
    if profile is None:
        missing = (
            f"the live model {name} was saved before validation profiles, so drift cannot be "
            "measured; retrain it (Train page, or `retrain`) and promote the new model"
        )
        return Baseline(name, digest, None, missing)
    return Baseline(name, digest, profile)


@dataclass(frozen=True)
class RoutedGroup:
    """How many complaints of one day share a channel, desk, reason and confidence bin."""

    day: str  # "2026-05-04" (UTC)
    channel: str
    desk: str
    reason: str  # review_reason: "", "unsure", "unknown desk", "blank"
    review: bool  # sent to people
    on_baseline: bool  # routed by the baseline model (its card digest)
    bin: int  # confidence bin of the baseline's edges
    count: int


def baseline_edges(baseline: Baseline) -> tuple[float, ...]:
    """The confidence bins complaints are counted on: the baseline's, else the default ones."""
    return baseline.profile.confidence_edges if baseline.profile else CONFIDENCE_EDGES


def group_rows(
    days: Sequence[str],
    channels: Sequence[str],
    desks: Sequence[str],
    reasons: Sequence[str],
    on_baseline: Sequence[bool],
    confidence: Sequence[float],
    edges: Sequence[float] = CONFIDENCE_EDGES,
) -> tuple[RoutedGroup, ...]:
    """Routed complaints given one per row (all of length n) as `read_groups` groups them: for
    a stream replayed without a store (bench/bench_drift.py) and for tests."""
    bins = confidence_bins(np.asarray(confidence, dtype=float), edges)
    keys = zip(days, channels, desks, reasons, on_baseline, bins.tolist(), strict=True)
    counted = Counter((d, c, k, r, bool(b), int(i)) for d, c, k, r, b, i in keys)
    return tuple(
        RoutedGroup(d, c, k, r, r != "", b, i, n) for (d, c, k, r, b, i), n in counted.items()
    )


@dataclass(frozen=True)
class RoutingLatency:
    """How long the API's model took to route a batch, over the window's batches."""

    batches: int
    complaints: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    per_complaint_ms: float  # all routing time over all complaints routed

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def latency_of(samples: Iterable[tuple[float, int]]) -> RoutingLatency | None:
    """Percentiles of (routing milliseconds, complaints) per batch; None without a batch."""
    pairs = [(float(ms), int(n)) for ms, n in samples if ms is not None and n]
    if not pairs:
        return None
    ms = np.array([p[0] for p in pairs])
    complaints = sum(p[1] for p in pairs)
    p50, p95, p99 = (float(np.percentile(ms, q)) for q in (50, 95, 99))
    return RoutingLatency(len(pairs), complaints, p50, p95, p99, float(ms.sum()) / complaints)


@dataclass(frozen=True)
class DayCounts:
    """One day's complaints (every model's), by channel and by routed desk."""

    day: str
    complaints: int
    by_channel: dict[str, int]
    by_desk: dict[str, int]
    review: int
    unknown: int

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day, "complaints": self.complaints, "by_channel": self.by_channel,
            "by_desk": self.by_desk, "review_share": self.review / self.complaints,
            "unknown_share": self.unknown / self.complaints,
        }  # fmt: skip


@dataclass(frozen=True)
class MonitorReport:
    """The monitor's figures for a window; `warnings` are those of `current`, the newest week
    judged (this ISO week, or the last one while this one has too few complaints)."""

    since: str
    as_of: str
    baseline: Baseline
    rule: DriftRule
    complaints: int
    review: int
    unknown: int
    days: tuple[DayCounts, ...]
    confidence_counts: tuple[int, ...]  # the baseline model's complaints, on its bins
    weeks: tuple[WeekDrift, ...]
    current: WeekDrift | None
    latency: RoutingLatency | None
    warnings: tuple[DriftWarning, ...] = field(default=())

    @property
    def confidence_edges(self) -> tuple[float, ...]:
        return baseline_edges(self.baseline)

    @property
    def review_share(self) -> float:
        return self.review / self.complaints if self.complaints else 0.0

    @property
    def unknown_share(self) -> float:
        return self.unknown / self.complaints if self.complaints else 0.0

    def to_json(self) -> dict[str, Any]:
        """The `monitor --json` document (README, "Live intake")."""
        profile = self.baseline.profile
        return {
            "since": self.since, "as_of": self.as_of, "baseline": self.baseline.to_json(),
            "rule": self.rule.to_json(), "complaints": self.complaints,
            "review_share": self.review_share, "unknown_share": self.unknown_share,
            "days": [d.to_json() for d in self.days],
            "confidence": {
                "edges": list(self.confidence_edges), "live": list(self.confidence_counts),
                "validation": None if profile is None else list(profile.confidence_counts),
            },
            "weeks": [w.to_json() for w in self.weeks],
            "current_week": None if self.current is None else self.current.counts.week,
            "latency": None if self.latency is None else self.latency.to_json(),
            "warnings": [w.message for w in self.warnings],
        }  # fmt: skip


def default_since(now: datetime) -> datetime:
    """Monday 00:00 UTC of the ISO week MONITOR_WEEKS - 1 weeks before `now`'s."""
    today = now.astimezone(UTC).date()
    monday = today - timedelta(days=today.weekday() + 7 * (MONITOR_WEEKS - 1))
    return datetime(monday.year, monday.month, monday.day, tzinfo=UTC)


def build_report(
    groups: Sequence[RoutedGroup],
    baseline: Baseline,
    latency: RoutingLatency | None,
    *,
    since: datetime,
    now: datetime,
    rule: DriftRule = DriftRule(),
) -> MonitorReport:
    """The report of `groups` (as `read_groups` or `group_rows` give them)."""
    bins = len(baseline_edges(baseline)) - 1
    on_baseline = [g for g in groups if g.on_baseline]
    confidence = np.zeros(bins, dtype=int)
    for g in on_baseline:
        confidence[g.bin] += g.count
    weeks = tuple(judge_week(c, baseline.profile, rule) for c in _week_counts(on_baseline, bins))
    current = _current_week(weeks, now)
    return MonitorReport(
        since=since.astimezone(UTC).isoformat(timespec="seconds"),
        as_of=now.astimezone(UTC).isoformat(timespec="seconds"), baseline=baseline, rule=rule,
        complaints=sum(g.count for g in groups), review=sum(g.count for g in groups if g.review),
        unknown=sum(g.count for g in groups if g.reason == UNKNOWN), days=_day_counts(groups),
        confidence_counts=tuple(int(n) for n in confidence), weeks=weeks, current=current,
        latency=latency, warnings=() if current is None else current.warnings,
    )  # fmt: skip


def _iso_week(day: str) -> tuple[str, str]:
    """("2026-W19", its Monday "2026-05-04") of a UTC day."""
    when = date.fromisoformat(day)
    year, week, weekday = when.isocalendar()
    return f"{year}-W{week:02d}", (when - timedelta(days=weekday - 1)).isoformat()


def _week_counts(groups: Sequence[RoutedGroup], bins: int) -> list[WeekCounts]:
    by_week: dict[tuple[str, str], list[RoutedGroup]] = defaultdict(list)
    for g in groups:
        by_week[_iso_week(g.day)].append(g)
    weeks = []
    for (week, start), members in sorted(by_week.items(), key=lambda item: item[0][1]):
        desks: Counter[str] = Counter()
        confidence = np.zeros(bins, dtype=int)
        for g in members:
            desks[g.desk] += g.count
            confidence[g.bin] += g.count
        weeks.append(WeekCounts(
            week, start, sum(desks.values()), dict(sorted(desks.items())),
            tuple(int(n) for n in confidence),
            sum(g.count for g in members if g.reason == UNKNOWN),
            sum(g.count for g in members if g.review),
        ))  # fmt: skip
    return weeks


def _current_week(weeks: Sequence[WeekDrift], now: datetime) -> WeekDrift | None:
    """The week of `now` when it is judged, else the week before when that one is: a warning
    lasts into the first days of the next week, and never longer."""
    this_monday = _iso_week(now.astimezone(UTC).date().isoformat())[1]
    last_monday = (date.fromisoformat(this_monday) - timedelta(days=7)).isoformat()
    by_start = {w.counts.start: w for w in weeks}
    for start in (this_monday, last_monday):
        week = by_start.get(start)
        if week is not None and week.judged:
            return week
    return None


def _day_counts(groups: Sequence[RoutedGroup]) -> tuple[DayCounts, ...]:
    named = _named_channels(groups)
    by_day: dict[str, list[RoutedGroup]] = defaultdict(list)
    for g in groups:
        by_day[g.day].append(g)
    days = []
    for day in sorted(by_day):
        channels: Counter[str] = Counter()
        desks: Counter[str] = Counter()
        for g in by_day[day]:
            channels[named(g.channel)] += g.count
            desks[g.desk] += g.count
        members = by_day[day]
        days.append(DayCounts(
            day, sum(desks.values()), dict(sorted(channels.items())), dict(sorted(desks.items())),
            sum(g.count for g in members if g.review),
            sum(g.count for g in members if g.reason == UNKNOWN),
        ))  # fmt: skip
    return tuple(days)


def _named_channels(groups: Sequence[RoutedGroup]) -> Callable[[str], str]:
    """How a channel is shown: itself when among the MAX_CHANNELS most frequent of the window,
    NO_CHANNEL when the caller gave none, else OTHER_CHANNELS."""
    totals: Counter[str] = Counter()
    for g in groups:
        totals[g.channel] += g.count
    kept = {c for c, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CHANNELS]}

    def named(channel: str) -> str:
        if channel not in kept:
            return OTHER_CHANNELS
        return channel or NO_CHANNEL

    return named


class MonitorCache:
    """The newest report, kept `ttl_s` seconds per key (the API's probes and scrapes come every
    few seconds; the report reads the window's complaints)."""

    def __init__(self, ttl_s: float = 30.0) -> None:
        self._ttl = ttl_s
        self._kept: tuple[Any, float, MonitorReport] | None = None
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], MonitorReport]) -> MonitorReport:
        with self._lock:
            kept = self._kept
            if kept is not None and kept[0] == key and time.monotonic() - kept[1] < self._ttl:
                return kept[2]
            report = build()
            self._kept = (key, time.monotonic(), report)
            return report
