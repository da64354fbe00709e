"""The Monitor page's parts: the start of the window, the report of the live model read from the
review store (core.intake.monitor), its warnings, headline figures, charts and weekly table. The
page calls these in order; nothing here counts (core.monitor does)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import streamlit as st

from core.charts.monitor import (
    confidence_chart,
    daily_chart,
    drift_chart,
    shares_chart,
    weeks_frame,
)
from core.errors import UserError
from ui.downloads import render_table_downloads
from ui.figures import show_chart
from ui.safe import md_escape

if TYPE_CHECKING:
    from core.monitor.report import MonitorReport
    from core.review.store import Store

SINCE_KEY = "monitor.since"


def render_since() -> datetime:
    """The first day the report counts (UTC): picked, else the default window's Monday."""
    from core.monitor.report import MONITOR_WEEKS, default_since

    first = default_since(datetime.now(UTC)).date()
    picked = st.date_input(
        f"Complaints received from (UTC; default: the last {MONITOR_WEEKS} ISO weeks)",
        value=first, min_value=date(1900, 1, 1), max_value=date(2199, 12, 31), key=SINCE_KEY,
        width=360,
    )  # fmt: skip
    return datetime(picked.year, picked.month, picked.day, tzinfo=UTC)


def monitor_report(store: Store, since: datetime) -> MonitorReport | None:
    """The live model's report from `since` (read afresh: the inbox grows while one looks);
    None, with the one line shown, when it cannot be built."""
    from core.intake.monitor import live_baseline, read_monitor
    from core.paths import models_dir

    try:
        return read_monitor(store, live_baseline(store, models_dir()), since=since)
    except UserError as exc:
        st.error(md_escape(exc))
        return None


def render_baseline(report: MonitorReport) -> None:
    base = report.baseline
    if base.profile is None:
        st.info(f"No baseline: {md_escape(base.missing)}. Counts are shown; drift is not.")
        return
    st.caption(
        f"Measured against the live model {md_escape(base.model)}'s "
        f"{base.profile.rows:,} validation rows. The rule: {md_escape(report.rule.describe())}."
    )


def render_warnings(report: MonitorReport) -> None:
    for warning in report.warnings:
        st.warning(md_escape(warning.message), icon=":material/warning:")
    if not report.warnings and report.current is not None:
        st.success(f"No warning for {report.current.counts.week}.", icon=":material/check:")


def _versus(share: float, validation: float | None) -> str | None:
    """ "+3.1 pts against validation" (None without a validation share)."""
    if validation is None:
        return None
    return f"{(share - validation) * 100:+.1f} pts against validation"


def render_headline(report: MonitorReport) -> None:
    profile = report.baseline.profile
    cols = st.columns(4)
    cols[0].metric("Complaints", f"{report.complaints:,}")
    cols[1].metric(
        "Sent to people", f"{report.review_share:.1%}",
        delta=_versus(report.review_share, profile and profile.review_share),
        delta_color="inverse",
    )  # fmt: skip
    cols[2].metric(
        "Fit no desk", f"{report.unknown_share:.1%}",
        delta=_versus(report.unknown_share, profile and profile.unknown_share),
        delta_color="inverse",
    )  # fmt: skip
    latency = report.latency
    shown = "n/a" if latency is None else f"{latency.p95_ms:,.0f} ms"
    cols[3].metric("Routing p95 (a batch)", shown)
    if latency is not None:
        st.caption(
            f"Routing: p50 {latency.p50_ms:,.1f} ms, p99 {latency.p99_ms:,.1f} ms per batch, "
            f"{latency.per_complaint_ms:,.1f} ms per complaint ({latency.batches:,} batches)."
        )


def render_days(report: MonitorReport) -> None:
    channel_tab, desk_tab, share_tab = st.tabs(["By channel", "By desk", "Shares"])
    show_chart(daily_chart(report, "channel"), stem="monitor-channels", key="monitor.channels",
               container=channel_tab)  # fmt: skip
    show_chart(daily_chart(report, "desk"), stem="monitor-desks", key="monitor.desks",
               container=desk_tab)  # fmt: skip
    show_chart(shares_chart(report), stem="monitor-shares", key="monitor.shares",
               container=share_tab)  # fmt: skip


def render_drift(report: MonitorReport) -> None:
    st.subheader("Drift against the validation rows")
    if report.baseline.profile is None:
        st.write("Not measured: the live model has no validation profile.")
    else:
        confidence_tab, weeks_tab = st.tabs(["Confidence", "Per week"])
        show_chart(confidence_chart(report), stem="monitor-confidence", key="monitor.confidence",
                   container=confidence_tab)  # fmt: skip
        show_chart(drift_chart(report), stem="monitor-drift", key="monitor.drift",
                   container=weeks_tab)  # fmt: skip
    frame = weeks_frame(report)
    st.dataframe(
        frame, hide_index=True, width="stretch",
        column_config={
            "desk mix PSI": st.column_config.NumberColumn(format="%.3f"),
            "confidence PSI": st.column_config.NumberColumn(format="%.3f"),
            "fits no desk": st.column_config.NumberColumn(format="percent"),
            "sent to people": st.column_config.NumberColumn(format="percent"),
        },
    )  # fmt: skip
    render_table_downloads(frame, "monitor-weeks", label="Download the weeks ({fmt})",
                           keys=("monitor.weeks_csv", "monitor.weeks_xlsx"))  # fmt: skip
