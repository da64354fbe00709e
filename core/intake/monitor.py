"""The live monitor's counts read from the review store: the inbox's complaints grouped by day,
channel, desk, reason and confidence bin (one indexed range read of `received_at`), the routing
time of each batch from its `intake.accepted` trail event, and the team's live model as the
baseline. The report itself is core.monitor.report's, the same for the Monitor page,
`python -m core monitor`, the intake API's /metrics and /v1/ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.errors import UserError
from core.intake.inbox import inbox_time
from core.monitor.drift import DriftRule
from core.monitor.report import (
    Baseline,
    MonitorReport,
    RoutedGroup,
    RoutingLatency,
    baseline_edges,
    build_report,
    card_baseline,
    default_since,
    latency_of,
)
from core.review.store import Store

__all__ = ["live_baseline", "read_groups", "read_latency", "read_monitor"]

ACCEPTED = "intake.accepted"  # the trail event of a stored batch (core.intake.inbox)
# Groups (day, channel, desk, reason, bin...) one report reads: far above a year of five
# desks and a dozen channels; past it the window is refused, never cut.
MAX_GROUPS = 200_000
MAX_LATENCY_BATCHES = 100_000  # the newest batches whose routing time is read


def live_baseline(store: Store, models_root: str | Path) -> Baseline:
    """The team's live model as a baseline (torch-free: the card is read as JSON)."""
    from core.models.card import read_card_and_digest
    from core.review.live import checked_live_folder, live_model

    live = live_model(store)
    if live is None:
        return Baseline(None, "", None, "no model is live yet, so there is nothing to compare with")
    try:
        card, digest = read_card_and_digest(checked_live_folder(live, models_root))
    except UserError as exc:
        return Baseline(live.name, live.digest, None, str(exc))
    return card_baseline(live.name, digest, card)


def _bin_sql(edges: Sequence[float]) -> tuple[str, list[float]]:
    """SQL for the bin of `confidence`, as core.models.profile.confidence_bins counts it."""
    inner = list(edges[1:-1])
    cases = " ".join(f"WHEN confidence >= ? THEN {i + 1}" for i in reversed(range(len(inner))))
    return f"CASE {cases} ELSE 0 END", list(reversed(inner))


def read_groups(store: Store, since: datetime, baseline: Baseline) -> tuple[RoutedGroup, ...]:
    """The inbox's complaints received from `since` on, grouped (one indexed range read).
    UserError when the window holds more than MAX_GROUPS groups."""
    bins, params = _bin_sql(baseline_edges(baseline))
    rows = store.query(
        "SELECT substr(received_at, 1, 10), channel, desk, review_reason, needs_review,"
        f" model_digest = ?, {bins}, count(*) FROM inbox WHERE received_at >= ?"
        " GROUP BY 1, 2, 3, 4, 5, 6, 7 LIMIT ?",
        (baseline.digest, *params, inbox_time(since), MAX_GROUPS + 1),
    )
    if len(rows) > MAX_GROUPS:
        raise UserError(
            f"the monitor reads at most {MAX_GROUPS:,} groups of complaints; start later "
            f"than {since:%Y-%m-%d} (--since, or the page's start date)"
        )
    return tuple(
        RoutedGroup(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5]), int(r[6]), int(r[7]))
        for r in rows
    )


def read_latency(store: Store, since: datetime) -> RoutingLatency | None:
    """The routing time of the batches stored from `since` on (their `intake.accepted` events;
    batches stored before the time was recorded are left out)."""
    rows = store.query(
        "SELECT json_extract(details, '$.route_ms'), json_array_length(details, '$.complaints')"
        " FROM trail WHERE action = ? AND created_at >= ?"
        " AND json_extract(details, '$.route_ms') IS NOT NULL ORDER BY id DESC LIMIT ?",
        (ACCEPTED, since.astimezone(UTC).isoformat(timespec="microseconds"), MAX_LATENCY_BATCHES),
    )
    return latency_of((r[0], r[1]) for r in rows)


def read_monitor(
    store: Store,
    baseline: Baseline,
    *,
    since: datetime | None = None,
    now: datetime | None = None,
    rule: DriftRule = DriftRule(),
) -> MonitorReport:
    """The monitor's report of the complaints received from `since` (default: the last
    MONITOR_WEEKS ISO weeks) to `now`, against `baseline`."""
    now = now or datetime.now(UTC)
    since = since or default_since(now)
    groups = read_groups(store, since, baseline)
    return build_report(groups, baseline, read_latency(store, since), since=since, now=now,
                        rule=rule)  # fmt: skip
