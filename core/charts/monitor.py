"""Charts and shown tables of the live monitor (core.monitor.report.MonitorReport): complaints per
day by channel and by desk, the shares sent to people and fitting no desk per day against the
validation rows', the confidence distribution against the validation rows', and the weekly drift
figures with the threshold the monitor warns at. Each takes the report and counts nothing that
is not in it; the data are a few rows per day or week."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.monitor.report import MonitorReport

WIDTH = 560
THRESHOLD_COLOUR = "#d62728"  # the warning line: red, as a breach is on the board
SERIES_COLOURS = ("#4c78a8", "#f58518")  # live complaints, validation rows


def daily_frame(report: MonitorReport, by: str) -> pd.DataFrame:
    """Long table of complaints per day and channel (`by="channel"`) or routed desk ("desk")."""
    attribute = {"channel": "by_channel", "desk": "by_desk"}[by]
    rows = [
        {"day": pd.Timestamp(d.day), by: name, "complaints": n}
        for d in report.days
        for name, n in getattr(d, attribute).items()
    ]
    return pd.DataFrame(rows, columns=["day", by, "complaints"])


def daily_chart(report: MonitorReport, by: str) -> alt.Chart:
    """Stacked bars of complaints per day, coloured by channel or by desk."""
    return (
        alt.Chart(daily_frame(report, by), title=f"Complaints per day by {by} (UTC)")
        .mark_bar()
        .encode(
            x=alt.X("yearmonthdate(day):T", title="day"),
            y=alt.Y("sum(complaints):Q", title="complaints"),
            color=alt.Color(f"{by}:N", title=by),
            tooltip=[alt.Tooltip("yearmonthdate(day):T", title="day"), f"{by}:N", "complaints:Q"],
        )
        .properties(width=WIDTH, height=220)
    )


def shares_frame(report: MonitorReport) -> pd.DataFrame:
    """Per day: the share sent to people and the share fitting no desk."""
    rows = []
    for d in report.days:
        rows.append({"day": pd.Timestamp(d.day), "share": "sent to people",
                     "value": d.review / d.complaints})  # fmt: skip
        rows.append({"day": pd.Timestamp(d.day), "share": "fits no desk",
                     "value": d.unknown / d.complaints})  # fmt: skip
    return pd.DataFrame(rows, columns=["day", "share", "value"])


def shares_chart(report: MonitorReport) -> alt.LayerChart | alt.Chart:
    """Both shares per day, with the validation rows' shares as dashed rules."""
    title = "Sent to people and fitting no desk, per day"
    lines = (
        alt.Chart(shares_frame(report))
        .mark_line(point=True)
        .encode(
            x=alt.X("yearmonthdate(day):T", title="day"),
            y=alt.Y("value:Q", title="share of the day's complaints", axis=alt.Axis(format="%")),
            color=alt.Color("share:N", title=None),
            tooltip=["share:N", alt.Tooltip("value:Q", format=".1%")],
        )
    )
    profile = report.baseline.profile
    if profile is None:
        return lines.properties(title=title, width=WIDTH, height=220)
    marks = [{"share": "sent to people", "value": profile.review_share}]
    if profile.unknown_share is not None:
        marks.append({"share": "fits no desk", "value": profile.unknown_share})
    rules = (
        alt.Chart(pd.DataFrame(marks))
        .mark_rule(strokeDash=[4, 4])
        .encode(y="value:Q", color=alt.Color("share:N", title=None))
    )
    return alt.layer(lines, rules).properties(title=title, width=WIDTH, height=220)


def confidence_frame(report: MonitorReport) -> pd.DataFrame:
    """Share of complaints per confidence bin: the live model's complaints of the window, and
    its validation rows when its card has them."""
    edges = report.confidence_edges
    labels = [f"{lo:.2f}–{hi:.2f}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    series = {"complaints": report.confidence_counts}
    if report.baseline.profile is not None:
        series["validation rows"] = report.baseline.profile.confidence_counts
    rows = []
    for name, counts in series.items():
        total = sum(counts)
        for order, (label, n) in enumerate(zip(labels, counts, strict=True)):
            share = n / total if total else 0.0
            rows.append({"confidence": label, "order": order, "rows": name, "share": share})
    return pd.DataFrame(rows, columns=["confidence", "order", "rows", "share"])


def confidence_chart(report: MonitorReport) -> alt.Chart:
    """Grouped bars: each confidence bin's share, complaints beside validation rows."""
    frame = confidence_frame(report)
    order = frame.drop_duplicates("confidence").sort_values("order")["confidence"].tolist()
    return (
        alt.Chart(frame, title="Confidence against the validation rows")
        .mark_bar()
        .encode(
            x=alt.X("confidence:N", sort=order, title="the decision's confidence"),
            xOffset=alt.XOffset("rows:N"),
            y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="share"),
            color=alt.Color(
                "rows:N", title=None, scale=alt.Scale(range=list(SERIES_COLOURS))
            ),  # fmt: skip
            tooltip=["rows:N", "confidence:N", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=WIDTH, height=220)
    )


def weeks_frame(report: MonitorReport) -> pd.DataFrame:
    """One row per ISO week, as the page shows and exports it."""
    rows = [
        {
            "week": w.counts.week,
            "from": w.counts.start,
            "complaints": w.counts.complaints,
            "desk mix PSI": w.desk_psi,
            "confidence PSI": w.confidence_psi,
            "fits no desk": w.unknown_share,
            "sent to people": w.review_share,
            "judged": "yes" if w.judged else "too few",
            "warnings": "; ".join(x.kind.replace("_", " ") for x in w.warnings),
        }  # fmt: skip
        for w in report.weeks
    ]
    columns = ["week", "from", "complaints", "desk mix PSI", "confidence PSI", "fits no desk",
               "sent to people", "judged", "warnings"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def drift_chart(report: MonitorReport) -> alt.LayerChart:
    """Each week's PSI of the desk mix and of confidence, and the threshold as a red rule."""
    rows = [
        {"week": w.counts.week, "figure": name, "PSI": value, "judged": w.judged}
        for w in report.weeks
        for name, value in (("desk mix", w.desk_psi), ("confidence", w.confidence_psi))
        if value is not None
    ]
    frame = pd.DataFrame(rows, columns=["week", "figure", "PSI", "judged"])
    lines = (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("week:O", title="ISO week"),
            y=alt.Y("PSI:Q", title="PSI against the validation rows"),
            color=alt.Color("figure:N", title=None),
            tooltip=["week:O", "figure:N", alt.Tooltip("PSI:Q", format=".3f"), "judged:N"],
        )
    )
    threshold = pd.DataFrame({"PSI": [report.rule.psi_threshold]})
    rule = (
        alt.Chart(threshold).mark_rule(color=THRESHOLD_COLOUR, strokeDash=[6, 3]).encode(y="PSI:Q")
    )
    title = "Drift per week (population stability index)"
    return alt.layer(lines, rule).properties(title=title, width=WIDTH, height=220)
