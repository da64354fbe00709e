"""The routing board as the page reaches it: the table a board is built from (the intake API's
live inbox, the active data set, the data set routed by a model on the queue, the file classified
on Classify, or an upload), boards built on the short lane and kept per content and settings,
and the time ages are measured at. Session keys: "board.routed" holds this session's RoutedRun
(one at a time), "board.dataset_input" the active data set's table for the board,
"board.classified_table" the last classified file's table."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import pandas as pd
import streamlit as st

from core.board.board import Board, BoardConfig, build_board, dataset_table
from core.board.moments import parse_as_of
from core.board.tat import TatTable
from core.data.export import table_digest
from core.intake.inbox import open_complaints
from core.intake.queue import inbox_board_table, open_complaint_count
from core.jobs import Job, JobStatus
from core.memo import MB, ByteBoundedCache
from ui.jobs import get_job_queue, job_requester, run_short_cached
from ui.state import CLASSIFY_JOB, ActiveDataset, get_store

if TYPE_CHECKING:
    from core.models.registry import LoadedModel
    from core.review.store import Store
    from core.tasks.classify import ClassifiedFile

ROUTED_RUN = "board.routed"  # RoutedRun: the active data set classified for the board
DATASET_INPUT = "board.dataset_input"  # (ActiveDataset, BoardInput): its table, built once
CLASSIFIED_TABLE = "board.classified_table"  # (path, DataFrame): the last classified file read
AS_OF_PARAM = "as_of"  # `?as_of=2025-06-02T14:05+05:30`: a board measured at a fixed time
# A board holds one short row per complaint (items) and the at-risk texts: a 100,000-row file's
# board is about 30 MB, so a few boards of large files, or many of small ones, stay cached.
BOARDS = ByteBoundedCache(128 * MB, name="the board cache")


@dataclass(frozen=True)
class BoardInput:
    """The table a board is drawn from, and what the page needs to know about it."""

    name: str  # shown: where the table comes from
    table: pd.DataFrame
    key: str  # names the content, for the board cache
    rows: tuple[int, ...] | None = None  # spreadsheet rows of the table's rows (None: 2..n+1)
    desk_col: str | None = None  # the routed desk column when no predicted_label says it
    # True when `rows` are the active data set's: Explain can then open a row by `?row=N`.
    from_dataset: bool = False


@dataclass(frozen=True)
class RoutedRun:
    """The active data set being classified (or classified) for the board by one model."""

    model_key: str
    fingerprint: str  # the data set's (core.data.dataset.Dataset.fingerprint)
    job: Job[ClassifiedFile | None]
    # The finished job's file, kept once seen: the queue keeps only its newest results.
    classified: ClassifiedFile | None = None


def open_inbox_count() -> int:
    """How many complaints from the intake API are open, to choose the board shown first; 0
    when the review store cannot be opened or read (a file's board needs no store; the live
    inbox's board, when picked, says what is wrong with it)."""
    from core.errors import UserError

    try:
        return open_complaint_count(get_store())
    except (UserError, sqlite3.Error):
        return 0


def live_inbox_input(store: Store, tat: TatTable) -> BoardInput | None:
    """The intake API's open complaints as a board's table, each at its desk now (the
    reviewer's, else the live model's); None when none is open. Read afresh at each call."""
    records = open_complaints(store, tat=tat)
    if not records:
        return None
    table = inbox_board_table(records)
    name = f"The live inbox ({len(records):,} open complaints from the intake API)"
    return BoardInput(name, table, f"inbox:{table_digest(table)}")


def dataset_input(active: ActiveDataset) -> BoardInput:
    """The active data set as the board reads it: routed in its own desk (label) column. Built
    once per active data set of the session (the table and its digest cost a pass over every
    row), then kept beside that very object (DATASET_INPUT)."""
    kept = st.session_state.get(DATASET_INPUT)
    if kept is not None and kept[0] is active:
        return kept[1]
    table, rows = active_table(active)
    key = f"dataset:{table_digest(table)}"  # received times are not in the data set's fingerprint
    made = BoardInput(active.name, table, key, rows, active.report.label_col, from_dataset=True)
    st.session_state[DATASET_INPUT] = (active, made)
    return made


def active_table(active: ActiveDataset) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """`dataset_table` of the active data set, its columns under the names its file used."""
    report = active.report
    return dataset_table(active.dataset, text_col=report.text_col, label_col=report.label_col)


def routed_run(model: LoadedModel, active: ActiveDataset) -> RoutedRun | None:
    """This session's routing of `active` by `model`, when it is the one kept."""
    run: RoutedRun | None = st.session_state.get(ROUTED_RUN)
    if run is None or (run.model_key, run.fingerprint) != (model.key, active.dataset.fingerprint):
        return None
    return run


def start_routing(model: LoadedModel, active: ActiveDataset) -> RoutedRun:
    """Queue the classification of the active data set by `model` (reviewers and admins; a
    UserError says why when the queue refuses it); a previous run still going is cancelled."""
    from core.tasks.classify import classify_in_background

    table, _ = active_table(active)
    job = classify_in_background(
        model, table, text_col=active.report.text_col, review_threshold=None,
        queue=get_job_queue(), requester=job_requester(),
    )  # fmt: skip
    previous: RoutedRun | None = st.session_state.get(ROUTED_RUN)
    if previous is not None and previous.job.snapshot().status.active:
        previous.job.cancel()
    run = RoutedRun(model.key, active.dataset.fingerprint, job)
    st.session_state[ROUTED_RUN] = run
    return run


def finished_file(run: RoutedRun) -> ClassifiedFile | None:
    """The classified file of a finished `run` (remembered in the session); None otherwise."""
    if run.classified is not None:
        return run.classified
    snapshot = run.job.snapshot()
    if snapshot.status is not JobStatus.DONE or snapshot.result is None:
        return None
    st.session_state[ROUTED_RUN] = replace(run, classified=snapshot.result)
    return snapshot.result


def classified_table(classified: ClassifiedFile) -> pd.DataFrame:
    """The table of a classified file (the session's scratch file, written once), read once
    and kept for the reruns that follow."""
    kept = st.session_state.get(CLASSIFIED_TABLE)
    if kept is not None and kept[0] == classified.path:
        return kept[1]
    table = classified.read()
    st.session_state[CLASSIFIED_TABLE] = (classified.path, table)
    return table


def classify_page_file() -> tuple[str, ClassifiedFile] | None:
    """The file classified on the Classify page in this session, finished and still on the
    server, with its name; None otherwise."""
    run = st.session_state.get(CLASSIFY_JOB)  # pages/classify.py's ClassifyRun
    if run is None:
        return None
    classified = run.classified
    if classified is None:
        snapshot = run.job.snapshot()
        classified = snapshot.result if snapshot.status is JobStatus.DONE else None
    if classified is None or not classified.path.is_file():
        return None
    return run.file_name, classified


def boarded(source: BoardInput, tat: TatTable, config: BoardConfig) -> Board:
    """`build_board` of `source` on the short lane (its cost linear in the file's rows, its
    desks capped), kept per (content, TAT table, settings): a rerun of the page costs a
    look-up. The job's cancel reaches the build, so a board past the lane's time limit (or
    whose page gave up) frees its worker. Raises UserError."""
    return run_short_cached(
        BOARDS, (source.key, hash(source.rows), tat, config),
        lambda cancel: build_board(source.table, tat, config, rows=source.rows, cancel=cancel),
        title="Build the routing board", kind="board", spinner="Counting the board…",
    )  # fmt: skip


def now_to_the_minute() -> datetime:
    """Now (UTC), to the whole minute: the time shown is then exactly the time used."""
    return datetime.now(UTC).replace(second=0, microsecond=0)


def as_of_param(timezone: str) -> datetime | None:
    """The `?as_of=` time (ISO 8601; without an offset, in `timezone`), or None when absent.

    Raises ValueError (a UserError saying why) when it is not a time or lies outside the
    years the board reads (core.board.moments)."""
    raw = st.query_params.get(AS_OF_PARAM)
    if not raw:
        return None
    # A "+" written unencoded in a URL arrives as a space: "14:05 05:30" meant "14:05+05:30".
    moment = parse_as_of(raw.strip().replace(" ", "+"), "?as_of=")
    return moment if moment.tzinfo else moment.replace(tzinfo=ZoneInfo(timezone))


def local_as_utc(picked: datetime, timezone: str) -> datetime:
    """A wall-clock time picked on the page (naive) read in the TAT file's time zone."""
    return picked.replace(tzinfo=ZoneInfo(timezone)).astimezone(UTC)
