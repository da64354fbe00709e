"""Routing board page: each desk's open complaints against the regulator's clock (turnaround
times from the TAT file, core.board.tat), the complaints most at risk first, and what routing the
unsure ones differently would change. Everything is counted in core.board; this page only draws.
Viewers may read it; routing the data set with a model is a job (reviewers and admins).

While the intake API's inbox holds open complaints, the board of that live inbox is the one shown
first; it redraws itself every LIVE_REFRESH_S seconds (a fragment), measured at the minute of
each redraw, so arrivals, verdicts and resolutions show without a click."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.board.board import AtRisk, Board, BoardConfig
from core.board.tat import TatTable, load_tat, tat_path
from core.charts.board import (
    age_chart,
    as_of_text,
    at_risk_frame,
    board_chart,
    board_totals,
    desk_frame,
    tat_frame,
    what_if_frame,
)
from core.data.limits import DataError
from core.errors import UserError
from core.jobs import Job, JobStatus
from ui.auth import allowed, current_actor
from ui.board import (
    ROUTED_RUN,
    BoardInput,
    RoutedRun,
    as_of_param,
    boarded,
    classified_table,
    classify_page_file,
    dataset_input,
    finished_file,
    live_inbox_input,
    local_as_utc,
    now_to_the_minute,
    open_inbox_count,
    routed_run,
    start_routing,
)
from ui.datasets import require_dataset
from ui.downloads import render_table_downloads
from ui.figures import show_chart
from ui.jobs import JobProgress, counted, describe_job, render_unfinished
from ui.safe import md_escape
from ui.state import ActiveDataset, open_in_explain
from ui.uploads import read_upload
from ui.widgets import require_model, require_store, shown_frame

LIVE_INBOX = "The live inbox (complaints from the intake API)"
AS_ROUTED = "The active data set, as routed in its desk column"
BY_MODEL = "The active data set, routed by the model"
CLASSIFIED = "The file classified on Classify"
UPLOADED = "An uploaded classified file"
TAT_ENV_SHOWN = md_escape("GRIEVANCE_LENS_TAT")
SOURCE_KEY = "board.source"
LIVE_REFRESH_S = 10.0  # seconds between redraws of the live inbox's board


def require_tat() -> TatTable:
    """The TAT file in use; a one-line error naming what to fix, and the page stops, when it
    cannot be read."""
    try:
        return load_tat()
    except UserError as exc:
        st.error(md_escape(exc))
        st.caption(f"TAT file: {md_escape(tat_path())} (set {TAT_ENV_SHOWN} to use another)")
        st.stop()


def render_tat(tat: TatTable) -> None:
    with st.expander(f"Turnaround times in use ({len(tat.desks)} desks named)"):
        st.dataframe(tat_frame(tat), hide_index=True, width="stretch")
        st.caption(
            f"From {md_escape(tat.path)}; operators change it by pointing {TAT_ENV_SHOWN} "
            f"at another TOML file. Naive received times are read in {md_escape(tat.timezone)}. "
            f"What-if delays: {tat.reroute_hours:g} h at the wrong desk, {tat.triage_hours:g} h "
            "for people first."
        )


def choose_source() -> str:
    """What the board is of, as the radio says: the live inbox first while it holds open
    complaints (until this session picks another), else the active data set."""
    if SOURCE_KEY not in st.session_state:
        st.session_state[SOURCE_KEY] = LIVE_INBOX if open_inbox_count() else AS_ROUTED
    options = [LIVE_INBOX, AS_ROUTED, BY_MODEL, CLASSIFIED, UPLOADED]
    return st.radio("Board of", options, key=SOURCE_KEY)


def render_source(actor: Actor, source: str) -> BoardInput | None:
    """The table to draw the board from, as `source` says; None (with the reason shown) until
    there is one."""
    if source == UPLOADED:
        return uploaded_input()
    if source == CLASSIFIED:
        return classified_input()
    active = require_dataset("board")
    if active is None:
        return None
    if source == AS_ROUTED:
        return dataset_input(active)
    return routed_input(actor, active)


def uploaded_input() -> BoardInput | None:
    upload = st.file_uploader(
        "A classified file (CSV, TSV, XLSX or Parquet) with a desk or predicted_label column",
        type=["csv", "tsv", "xlsx", "parquet"], key="board.upload",
    )  # fmt: skip
    if upload is None:
        return None
    try:
        read = read_upload(upload)
    except DataError as exc:
        st.error(md_escape(exc))
        return None
    return BoardInput(read.name, read.table, f"upload:{read.key}")


def classified_input() -> BoardInput | None:
    found = classify_page_file()
    if found is None:
        st.info("No file has been classified on Classify in this session.")
        st.page_link("pages/classify.py", label="Open Classify", icon=":material/alt_route:")
        return None
    name, classified = found
    return BoardInput(name, classified_table(classified), f"classified:{classified.path}")


def describe_routing(job: Job) -> JobProgress | None:
    return describe_job(job, lambda snapshot, eta: f"{counted(snapshot.latest)} complaints{eta}")


def routed_input(actor: Actor, active: ActiveDataset) -> BoardInput | None:
    """The active data set classified by this session's model (the live one by default), a
    job kept per (model, data set); the data set's own desks then serve as the reviewed desks."""
    if not allowed(actor, Permission.RUN_JOBS, "Routing the data set with the model"):
        return None
    model = require_model()
    run = routed_run(model, active)
    if run is None:
        start = f"Route {len(active.dataset):,} complaints with {md_escape(model.path.name)}"
        if not st.button(start, key="board.route", type="primary"):
            return None
        try:
            run = start_routing(model, active)
        except UserError as exc:
            st.error(md_escape(exc))
            return None
    return routed_result(run, active)


def routed_result(run: RoutedRun, active: ActiveDataset) -> BoardInput | None:
    snapshot = run.job.snapshot()
    if render_unfinished(run.job, snapshot, describe=describe_routing, key="board.cancel",
                         cancelled="The routing was cancelled; route again."):  # fmt: skip
        if snapshot.status is JobStatus.CANCELLED:
            st.session_state.pop(ROUTED_RUN, None)  # the next run offers the button again
        return None
    classified = finished_file(run)
    if classified is None or not classified.path.is_file():
        st.info("The routing is no longer kept on the server; route again.")
        st.session_state.pop(ROUTED_RUN, None)
        return None
    st.caption("Routed with the model's own review policy (unsure, or like none of its desks).")
    name, key = f"{active.name} routed by the model", f"routed:{classified.path}"
    table = classified_table(classified)
    return BoardInput(name, table, key, active.dataset.rows, from_dataset=True)


def render_as_of(tat: TatTable) -> datetime:
    """The time ages are measured at: the picked one, else `?as_of=`, else now (to the minute)."""
    picked = st.datetime_input(
        f"Measure ages at (in {md_escape(tat.timezone)}; empty: now)", value=None,
        key="board.as_of", format="YYYY-MM-DD", width=360,
    )  # fmt: skip
    if picked is not None:
        return local_as_utc(picked, tat.timezone)
    try:
        return as_of_param(tat.timezone) or now_to_the_minute()
    except ValueError as exc:  # not a time, or outside the years the board reads
        st.warning(f"{md_escape(exc)}; ages are measured now.")
        return now_to_the_minute()


def render_headline(board: Board) -> None:
    totals = board_totals(board)
    cols = st.columns(5)
    cols[0].metric("Open", f"{totals.open:,}")
    cols[1].metric("Breached", f"{totals.breached:,}")
    cols[2].metric("Due within 24 h", f"{totals.due_24h:,}")
    unsure = "n/a" if totals.unsure is None else f"{totals.unsure:,}"
    cols[3].metric("Unsure (needs review)", unsure)
    cols[4].metric("No received time", f"{totals.no_time:,}")
    if board.closed:
        st.caption(f"{board.closed:,} rows whose status reads closed or resolved are not counted.")


def without_empty_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as shown: columns the file gave nothing for (no needs_review, no confidence)
    left out rather than shown as a column of None; the downloads keep them."""
    return frame.dropna(axis="columns", how="all") if len(frame) else frame


def render_desks(board: Board) -> None:
    st.subheader("Desks")
    frame = desk_frame(board)
    st.dataframe(
        without_empty_columns(frame), hide_index=True, width="stretch",
        column_config={
            "unsure share": st.column_config.NumberColumn(format="percent"),
            "median age (h)": st.column_config.NumberColumn(format="%.1f"),
            "p90 age (h)": st.column_config.NumberColumn(format="%.1f"),
        },
    )  # fmt: skip
    render_table_downloads(frame, "routing-board-desks", label="Download the desks ({fmt})",
                           keys=("board.desks_csv", "board.desks_xlsx"))  # fmt: skip
    board_tab, age_tab = st.tabs(["Board", "Ages against the TAT"])
    show_chart(board_chart(board), stem="routing-board", key="board.chart", container=board_tab)
    show_chart(age_chart(board), stem="routing-board-ages", key="board.ages", container=age_tab,
               width="stretch")  # fmt: skip


ALL_DESKS = "All desks"


def chosen_at_risk(board: Board) -> tuple[tuple[AtRisk, ...], int]:
    """The at-risk list of the desk picked (each desk has its own, so a desk with a long clock
    is not crowded out by one with a short clock), and how many there are in all."""
    desk = st.selectbox(
        "At-risk complaints of", [ALL_DESKS, *(load.desk for load in board.desks)],
        key="board.risk_desk",
    )  # fmt: skip
    if desk == ALL_DESKS:
        return board.at_risk, board.at_risk_total
    load = next(load for load in board.desks if load.desk == desk)
    return board.at_risk_by_desk.get(desk, ()), load.breached + load.due_24h


def render_at_risk(board: Board, source: BoardInput, actor: Actor) -> None:
    st.subheader(f"Most at risk ({board.at_risk_total:,} breached or due within 24 h)")
    at_risk, total = chosen_at_risk(board)
    if not at_risk:
        st.write("No complaint here has breached or is due within 24 hours.")
        return
    if len(at_risk) < total:
        st.caption(
            f"The {len(at_risk):,} most urgent of {total:,} are listed; hours left below 0 "
            "have breached."
        )
    frame = at_risk_frame(board, at_risk)
    st.dataframe(
        shown_frame(without_empty_columns(frame)), hide_index=True, width="stretch", height=320,
        column_config={"text": st.column_config.TextColumn("text", width="large"),
                       "confidence": st.column_config.NumberColumn(format="%.2f")},
    )  # fmt: skip
    render_table_downloads(frame, "routing-board-at-risk", label="Download at risk ({fmt})",
                           keys=("board.risk_csv", "board.risk_xlsx"))  # fmt: skip
    render_explain_choice(at_risk, source, actor)


def render_explain_choice(at_risk: tuple[AtRisk, ...], source: BoardInput, actor: Actor) -> None:
    """Open one at-risk complaint on Explain: by its row of the active data set when the board
    is of it (and this user may classify the sample that picker needs), else by its text."""
    by_row = {a.row: a for a in at_risk}
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    row = left.selectbox(
        "Complaint to explain", list(by_row), key="board.explain_row",
        format_func=lambda r: f"row {r} · {by_row[r].desk} · {by_row[r].hours_left:+.1f} h left",
    )  # fmt: skip
    if not right.button("Explain it", key="board.explain", icon=":material/search:"):
        return
    by_picker = source.from_dataset and actor.can(Permission.RUN_JOBS)
    open_in_explain(row=row if by_picker else None, text=by_row[row].text)


def render_what_if(board: Board) -> None:
    st.subheader("What if the unsure ones were routed differently")
    what_if = board.what_if
    if what_if is None:
        st.write(
            f"Not for this file: {md_escape(board.what_if_missing)}. It needs a classified file "
            "(needs_review, and prob_<desk> columns or a reviewed desk column) with received "
            "times: route the data set with the model to get one."
        )
        return
    st.caption(f"Counted from {md_escape(what_if.basis)}. {md_escape(what_if.note)}")
    st.dataframe(
        what_if_frame(board), hide_index=True, width="stretch",
        column_config={c: st.column_config.NumberColumn(format="%.1f")
                       for c in ("breaches", "avoided", "caused")},
    )  # fmt: skip


def render_live_board(actor: Actor, tat: TatTable) -> None:
    """The board of the intake API's open complaints, read and measured afresh at each redraw
    (every LIVE_REFRESH_S seconds)."""
    source = live_inbox_input(require_store(), tat)
    if source is None:
        st.info(
            "No complaint from the intake API is open. The bank's systems post complaints with "
            "a token (an admin creates one on API tokens); they show here as they arrive."
        )
        return
    as_of = render_as_of(tat)
    try:
        board = boarded(source, tat, BoardConfig(as_of=as_of))
    except UserError as exc:
        st.error(md_escape(exc))
        return
    render_board(board, source, actor)


def render_board(board: Board, source: BoardInput, actor: Actor) -> None:
    st.caption(
        f"{md_escape(source.name)} · as of {as_of_text(board)} · desk column "
        f"{md_escape(board.desk_col)} · received time "
        f"{md_escape(board.received_col) if board.received_col else 'none'}"
    )
    for warning in board.warnings:
        st.warning(md_escape(warning))
    render_headline(board)
    render_desks(board)
    render_at_risk(board, source, actor)
    render_what_if(board)


st.title("Routing board")
st.write(
    "Each desk's open complaints against the regulator's clock: how many have breached their "
    "turnaround time, how many will within 24 hours, and which to pick up first."
)
actor = current_actor()
tat = require_tat()
render_tat(tat)
choice = choose_source()
if choice == LIVE_INBOX:
    st.fragment(render_live_board, run_every=LIVE_REFRESH_S)(actor, tat)
    st.stop()
source = render_source(actor, choice)
if source is None:
    st.stop()
as_of = render_as_of(tat)
try:
    board = boarded(source, tat, BoardConfig(as_of=as_of, desk_col=source.desk_col))
except UserError as exc:
    st.error(md_escape(exc))
    st.stop()
render_board(board, source, actor)
