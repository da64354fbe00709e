"""Charts and shown tables of the routing board (core.board.board.Board): open complaints by desk
and status, ages against each desk's turnaround time, load by desk and day, and the whole board
as one picture for slides. Every chart counts in pandas first, so its data is a few rows per desk
and day however large the file (the PNG/SVG exporter refuses charts with too many rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import altair as alt
import pandas as pd

from core.board.board import AtRisk, Board
from core.board.tat import TatTable

STATUSES = ("breached", "due in 24 h", "on time", "no time")  # Board.items["status"] values
STATUS_COLOURS = ("#d62728", "#ff7f0e", "#2ca02c", "#a0a0a0")  # red, amber, green, grey
MIN_AGE_BIN_HOURS = 24  # one day per bar of the age histogram ...
MAX_AGE_BINS = 60  # ... widened to whole days when older complaints would need more bars
# Desk colours: none red, amber or green, which mean breached, due and on time on the board.
DESK_COLOURS = ("#4c78a8", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#1f3b73",
                "#c5b0d5", "#7f7f7f", "#9ecae1")  # fmt: skip
BOARD_WIDTH = 560  # the one-picture board's width in pixels: a slide's half, legible


@dataclass(frozen=True)
class BoardTotals:
    """The board's headline numbers: every desk together."""

    open: int
    breached: int
    due_24h: int
    unsure: int | None  # None when the file has no needs_review column
    no_time: int


def board_totals(board: Board) -> BoardTotals:
    """The sums over the board's desks (open counts open complaints, not closed rows)."""
    desks = board.desks
    unsure = [d.unsure for d in desks if d.unsure is not None]
    return BoardTotals(
        open=sum(d.open for d in desks), breached=sum(d.breached for d in desks),
        due_24h=sum(d.due_24h for d in desks), unsure=sum(unsure) if unsure else None,
        no_time=board.no_time,
    )  # fmt: skip


def as_of_text(board: Board) -> str:
    """The time the ages are measured at, in the TAT file's time zone: "02 Jun 2025 14:05 IST"."""
    local = board.as_of.astimezone(ZoneInfo(board.tat.timezone))
    return local.strftime("%d %b %Y %H:%M %Z")


def local_time_text(moment: pd.Timestamp, timezone: str) -> str:
    """`moment` as "2025-06-02 14:05 +05:30" in `timezone`; "" when there is no time."""
    if pd.isna(moment):
        return ""
    return pd.Timestamp(moment).tz_convert(timezone).strftime("%Y-%m-%d %H:%M %z")


def desk_frame(board: Board) -> pd.DataFrame:
    """One row per desk, as the page shows and exports it: open, unsure (count and share of
    open; empty when the file has no needs_review column), breached, due in 24 h, TAT hours,
    no time, median and 90th-percentile age in hours, and the TAT's source."""
    rows = [
        {
            "desk": d.desk,
            "open": d.open,
            "unsure": d.unsure,
            "unsure share": None if d.unsure is None or d.open == 0 else d.unsure / d.open,
            "breached": d.breached,
            "due in 24 h": d.due_24h,
            "TAT (h)": d.tat_hours,
            "no time": d.no_time,
            "median age (h)": d.age_p50_hours,
            "p90 age (h)": d.age_p90_hours,
            "TAT source": d.tat_source,
        }
        for d in board.desks
    ]
    return pd.DataFrame(rows, columns=list(_DESK_COLUMNS))


_DESK_COLUMNS = ("desk", "open", "unsure", "unsure share", "breached", "due in 24 h", "TAT (h)",
                 "no time", "median age (h)", "p90 age (h)", "TAT source")  # fmt: skip


def at_risk_frame(board: Board, at_risk: Sequence[AtRisk] | None = None) -> pd.DataFrame:
    """The at-risk complaints (`at_risk`, default the board's list of all desks), most urgent
    first: spreadsheet row, desk, received time (text, in the TAT file's time zone), hours left
    (negative: breached), confidence, needs review, text."""
    rows = [
        {
            "row": a.row,
            "desk": a.desk,
            "received at": local_time_text(pd.Timestamp(a.received_at), board.tat.timezone),
            "hours left": round(a.hours_left, 1),
            "confidence": a.confidence,
            "needs review": a.needs_review,
            "text": a.text,
        }
        for a in (board.at_risk if at_risk is None else at_risk)
    ]
    return pd.DataFrame(rows, columns=list(_AT_RISK_COLUMNS))


_AT_RISK_COLUMNS = ("row", "desk", "received at", "hours left", "confidence", "needs review",
                    "text")  # fmt: skip


def what_if_frame(board: Board) -> pd.DataFrame:
    """The what-if scenarios as rows (scenario, changed desk, breaches, avoided, caused); empty
    when the board has no what-if."""
    scenarios = board.what_if.scenarios if board.what_if is not None else ()
    rows = [
        {
            "scenario": s.name,
            "changed desk": s.changed_desk,
            "breaches": s.breached,
            "avoided": s.avoided,
            "caused": s.caused,
        }
        for s in scenarios
    ]
    return pd.DataFrame(rows, columns=["scenario", "changed desk", "breaches", "avoided", "caused"])


def tat_frame(tat: TatTable) -> pd.DataFrame:
    """The turnaround times in use: one row per named desk, then the default for the others."""
    rows = [{"desk": d.desk, "hours": d.hours, "source": d.source} for d in tat.desks]
    rows.append({"desk": "(any other desk)", "hours": tat.default_hours,
                 "source": tat.default_source})  # fmt: skip
    return pd.DataFrame(rows, columns=["desk", "hours", "source"])


def desk_order(board: Board) -> list[str]:
    """The desks in the board's order (its per-desk table's), for every chart's axis and legend."""
    return [d.desk for d in board.desks]


def load_by_day_frame(board: Board) -> pd.DataFrame:
    """Complaints received per local day (in the TAT file's time zone) and desk: columns day
    (ISO date), desk, complaints. Rows without a time are not in it (Board.no_time counts them)."""
    items = board.items
    timed = items[items["received_at"].notna()]
    if timed.empty:
        return pd.DataFrame({"day": [], "desk": [], "complaints": []})
    local = pd.to_datetime(timed["received_at"], utc=True).dt.tz_convert(board.tat.timezone)
    days = local.dt.strftime("%Y-%m-%d").rename("day")
    counts = timed.groupby([days, timed["desk"].rename("desk")]).size()
    return counts.rename("complaints").reset_index()


def load_by_day_chart(board: Board) -> alt.Chart:
    """Stacked bars: complaints received per day, one colour per desk, oldest day on the left."""
    # Days are calendar dates in the TAT file's zone, drawn as UTC dates so a viewer's own time
    # zone never moves a bar to the day before.
    day = alt.X("day:T", timeUnit="utcyearmonthdate", title=None,
                axis=alt.Axis(format="%a %d %b", labelAngle=-45))  # fmt: skip
    return (
        alt.Chart(load_by_day_frame(board), title="Complaints received per day, by desk")
        .mark_bar()
        .encode(
            x=day,
            y=alt.Y("sum(complaints):Q", title="complaints"),
            color=alt.Color(
                "desk:N",
                title="desk",
                sort=desk_order(board),
                scale=alt.Scale(range=list(DESK_COLOURS)),
            ),
            tooltip=[
                alt.Tooltip("day:T", timeUnit="utcyearmonthdate", title="day", format="%a %d %b"),
                alt.Tooltip("desk:N"),
                alt.Tooltip("sum(complaints):Q", title="complaints"),
            ],
        )
    )


def status_frame(board: Board) -> pd.DataFrame:
    """Open complaints per desk and status (breached, due in 24 h, on time, no time): columns
    desk, status, complaints, rank (the status's place in STATUSES, for the stacking order)."""
    counts = board.items.groupby(["desk", "status"]).size().rename("complaints").reset_index()
    counts["rank"] = counts["status"].map({s: i for i, s in enumerate(STATUSES)})
    return counts[counts["complaints"] > 0].reset_index(drop=True)


def status_chart(board: Board) -> alt.Chart:
    """Horizontal stacked bars per desk: breached (red), due within 24 h (amber), on time (green)
    and without a received time (grey): which desk is behind, at a glance."""
    return (
        alt.Chart(status_frame(board), title="Open complaints against the turnaround time")
        .mark_bar()
        .encode(
            x=alt.X("sum(complaints):Q", title="open complaints"),
            y=alt.Y("desk:N", title=None, sort=desk_order(board)),
            color=alt.Color(
                "status:N",
                title="status",
                scale=alt.Scale(domain=list(STATUSES), range=list(STATUS_COLOURS)),
            ),
            order=alt.Order("rank:Q"),
            tooltip=["desk:N", "status:N", alt.Tooltip("sum(complaints):Q", title="complaints")],
        )  # fmt: skip
    )


def age_bin_hours(max_age_hours: float) -> int:
    """The histogram's bar width: one day, or as many whole days as keep it to MAX_AGE_BINS."""
    days = math.ceil(max(max_age_hours, 0.0) / (24 * MAX_AGE_BINS))
    return max(MIN_AGE_BIN_HOURS, 24 * days)


def age_frame(board: Board) -> pd.DataFrame:
    """Open complaints per desk and age bin: columns desk, start, end (hours), complaints."""
    timed = board.items[board.items["age_hours"].notna()]
    if timed.empty:
        return pd.DataFrame({"desk": [], "start": [], "end": [], "complaints": []})
    width = age_bin_hours(float(timed["age_hours"].max()))
    start = (timed["age_hours"].clip(lower=0.0) // width * width).rename("start")
    counts = timed.groupby([timed["desk"].rename("desk"), start]).size()
    frame = counts.rename("complaints").reset_index()
    frame["end"] = frame["start"] + width
    return frame[["desk", "start", "end", "complaints"]]


def age_chart(board: Board) -> alt.LayerChart:
    """Per desk, a row of bars shaded by how many open complaints are that old (hours), with the
    desk's turnaround time marked by a red tick: complaints right of the tick have breached."""
    order = desk_order(board)
    y = alt.Y("desk:N", title=None, sort=order)
    bars = (
        alt.Chart(age_frame(board))
        .mark_rect()
        .encode(
            x=alt.X("start:Q", bin="binned", title="age (hours since received)"),
            x2="end:Q",
            y=y,
            color=alt.Color("complaints:Q", title="complaints", scale=alt.Scale(scheme="blues")),
            tooltip=[
                "desk:N",
                alt.Tooltip("start:Q", title="from (h)"),
                alt.Tooltip("end:Q", title="to (h)"),
                "complaints:Q",
            ],
        )  # fmt: skip
    )
    tat = pd.DataFrame({"desk": order, "TAT (h)": [d.tat_hours for d in board.desks]})
    ticks = (
        alt.Chart(tat)
        .mark_tick(color=STATUS_COLOURS[0], thickness=3)
        .encode(x="TAT (h):Q", y=y, tooltip=["desk:N", "TAT (h):Q"])
    )
    return alt.layer(bars, ticks, title="Age of open complaints; the tick is the desk's TAT")


def board_title(board: Board) -> alt.TitleParams:
    """The one-picture board's title: when, and the totals a slide's reader wants first."""
    totals = board_totals(board)
    subtitle = (f"{totals.open:,} open · {totals.breached:,} breached · {totals.due_24h:,} due "
                f"within 24 h · {totals.no_time:,} without a received time")  # fmt: skip
    return alt.TitleParams(f"Routing board as of {as_of_text(board)}", subtitle=subtitle,
                           fontSize=16, anchor="start")  # fmt: skip


def board_chart(board: Board) -> alt.VConcatChart:
    """The whole board as one picture for slides: the status bars per desk above the load per
    desk and day, under a title with the time and the totals."""
    return alt.vconcat(
        status_chart(board).properties(width=BOARD_WIDTH),
        load_by_day_chart(board).properties(width=BOARD_WIDTH, height=220),
        title=board_title(board),
    ).resolve_scale(color="independent")
