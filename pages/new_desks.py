"""New desks page: the complaints the model flags as fitting no desk, grouped into candidate
desks (core.analysis.discovery) from the live inbox over a period or from an uploaded file; a
reviewer names a candidate as a new desk, assigns it to a known one, or dismisses it, and the
kept members' verdicts go into the next retraining (core.review.new_desks). Viewers may look;
finding candidates reads every flagged complaint with the model, so it is a reviewer's job."""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from core.access import Permission
from core.data.limits import DataError
from core.tasks.discovery import DEFAULT_PERIOD
from ui.auth import allowed, current_actor
from ui.jobs import render_unfinished
from ui.new_desks import (
    NEW_DESKS_RUN,
    NewDesksRun,
    describe_discovery,
    render_candidate,
    render_summary,
    start_file_run,
    start_inbox_run,
)
from ui.safe import md_escape
from ui.uploads import pick_text_column, read_upload
from ui.widgets import render_reviewer, require_model, require_store

INBOX, FILE = "The live inbox (complaints from the intake API)", "A complaint file"

st.title("New desks")
st.caption(
    "Complaints the model says fit none of its desks, grouped by how alike they read. Name a "
    "group as a new desk (its complaints become labelled rows for the next retraining), assign "
    "it to a desk, or dismiss it."
)
actor = current_actor()
model = require_model()
require_store()


def render_start() -> None:
    source = st.radio("Look in", [INBOX, FILE], key="new_desks.source", horizontal=True)
    min_size = st.number_input("Smallest group", min_value=2, max_value=500, value=10,
                               key="new_desks.min_size")  # fmt: skip
    if source == INBOX:
        since = st.date_input("Received since", datetime.now(UTC).date() - DEFAULT_PERIOD,
                              key="new_desks.since")  # fmt: skip
        if st.button("Find candidate desks", key="new_desks.start", type="primary"):
            start_inbox_run(model, since, int(min_size))
        return
    upload = st.file_uploader(
        "Complaints (CSV, TSV, XLSX or Parquet)", type=["csv", "tsv", "xlsx", "parquet"],
        key="new_desks.upload",
    )  # fmt: skip
    if upload is None:
        return
    try:
        table = read_upload(upload).table
    except DataError as exc:
        st.error(md_escape(exc))
        return
    text_col = pick_text_column(table, key=f"new_desks.col.{upload.name}")
    if st.button(f"Find candidate desks in {len(table):,} complaints", key="new_desks.start",
                 type="primary", disabled=text_col is None):  # fmt: skip
        start_file_run(model, table, text_col, upload.name, int(min_size))


def render_run(session: NewDesksRun) -> None:
    snapshot = session.job.snapshot()
    cancelled = "The search was cancelled."
    if render_unfinished(session.job, snapshot, describe=describe_discovery,
                         key="new_desks.cancel", cancelled=cancelled):  # fmt: skip
        return
    run = snapshot.result
    if run is None:
        st.info("This search is no longer kept on the server; run it again.")
        return
    render_summary(run)
    reviewer = render_reviewer("new_desks", prompt="Your name (saved with each decision)",
                               actor=actor)  # fmt: skip
    desks = [str(d) for d in model.card["labels"]]
    for candidate in run.discovery.candidates:
        render_candidate(session, run, candidate, desks=desks, reviewer=reviewer, actor=actor)


if allowed(actor, Permission.DECIDE, "Finding candidate desks"):
    render_start()
session: NewDesksRun | None = st.session_state.get(NEW_DESKS_RUN)
if session is not None:
    render_run(session)
