"""The New desks page's features: starting a discovery on the inbox or on an uploaded file (a
job of the queue), and one candidate desk with its words, examples, members and the reviewer's
decision (core.review.new_desks). Page-private session keys: NEW_DESKS_RUN and the widgets'
"new_desks.*" keys."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from core.analysis.discovery import Candidate, DiscoveryConfig
from core.errors import UserError
from core.jobs import Job
from core.models.registry import LoadedModel
from core.review.new_desks import ASSIGN, DISMISS, NAME, CandidateDecision, decide_candidate
from core.tasks.discovery import (
    DiscoveryRun,
    discover_in_file,
    discover_in_inbox,
    since_moment,
    start_discovery,
)
from ui.jobs import JobProgress, counted, describe_job, get_job_queue, job_requester
from ui.safe import md_escape
from ui.state import get_store
from ui.widgets import shown_text

NEW_DESKS_RUN = "new_desks.run"
CHOICES = {
    NAME: "Name it as a new desk",
    ASSIGN: "Assign it to a desk the model knows",
    DISMISS: "Dismiss it (not a desk)",
}
MEMBER_CHARS = 80  # of each member's text in the list a reviewer takes members out of


@dataclass
class NewDesksRun:
    """This session's discovery: the job, what it read, and the decisions taken so far."""

    job: Job[DiscoveryRun | None]
    source: str
    decided: dict[str, str] = field(default_factory=dict)  # candidate id -> what was done


def start_inbox_run(model: LoadedModel, since_day, min_size: int) -> None:
    since = since_moment(datetime.combine(since_day, datetime.min.time(), UTC).isoformat())
    config = DiscoveryConfig.from_env(min_size=min_size)
    work = functools.partial(_inbox_work, model, get_store().path, since, config)
    _start(work, f"the inbox since {since}")


def _inbox_work(model, store_path, since, config, *, on_progress, cancel):
    from core.review.store import Store

    # The queue's worker reads the store with a connection of its own (the shared one is the
    # pages'); read-only: discovery changes nothing.
    with Store.open(store_path, read_only=True) as store:
        return discover_in_inbox(store, model, since=since, config=config,
                                 on_progress=on_progress, cancel=cancel)  # fmt: skip


def start_file_run(model: LoadedModel, table: pd.DataFrame, text_col: str, name: str,
                   min_size: int) -> None:  # fmt: skip
    config = DiscoveryConfig.from_env(min_size=min_size)
    work = functools.partial(discover_in_file, model, table[text_col].tolist(), source=name,
                             config=config)  # fmt: skip
    _start(work, name)


def _start(work, source: str) -> None:
    try:
        job = start_discovery(work, title=f"Find candidate desks in {source}",
                              queue=get_job_queue(), requester=job_requester())  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    st.session_state[NEW_DESKS_RUN] = NewDesksRun(job, source)


def describe_discovery(job: Job) -> JobProgress | None:
    """Complaints read by the model so far and the time left; None once the job has ended."""
    return describe_job(job, lambda snap, eta: f"{counted(snap.latest)} complaints read{eta}")


def render_summary(run: DiscoveryRun) -> None:
    found = run.discovery
    st.markdown(
        f"**{run.flagged:,}** of {run.total:,} complaints in {md_escape(run.source)} fit no desk "
        f"of {md_escape(run.model)}: **{len(found.candidates)}** candidate desks, "
        f"{len(found.unclustered):,} complaints unlike any other (left out)."
    )


def render_candidate(
    session: NewDesksRun, run: DiscoveryRun, candidate: Candidate, *, desks: list[str],
    reviewer: str | None, actor,
) -> None:  # fmt: skip
    """One candidate: its words, nearest desk, examples, members and the decision form."""
    done = session.decided.get(candidate.id)
    title = f"{candidate.id} · {candidate.size} complaints · {', '.join(candidate.words[:4])}"
    with st.expander(md_escape(title) + (" · decided" if done else ""), expanded=not done):
        st.caption("Distinctive words: " + md_escape(", ".join(candidate.words)))
        if candidate.nearest_desk is not None:
            st.caption(f"Nearest desk the model knows: {md_escape(candidate.nearest_desk)} "
                       f"(cosine distance {candidate.nearest_distance:.2f})")  # fmt: skip
        for text in run.discovery.example_texts(candidate):
            st.text(shown_text(text))
        if done:
            st.success(md_escape(done))
            return
        if reviewer is None:
            st.caption("Give your name above to decide.")
            return
        render_decision(session, run, candidate, desks=desks, reviewer=reviewer, actor=actor)


def render_decision(
    session: NewDesksRun, run: DiscoveryRun, candidate: Candidate, *, desks: list[str],
    reviewer: str, actor,
) -> None:  # fmt: skip
    key = f"new_desks.{candidate.id}"
    labels = {i: _member_label(run, i) for i in candidate.members}
    with st.form(f"{key}.form"):
        removed = st.multiselect("Take out complaints that do not belong", list(labels),
                                 format_func=labels.get, key=f"{key}.removed")  # fmt: skip
        kind = st.radio("Decision", list(CHOICES), format_func=CHOICES.get, key=f"{key}.kind")
        name = st.text_input("New desk's name", key=f"{key}.name", max_chars=64)
        known = st.selectbox("Desk to assign it to", desks, key=f"{key}.desk")
        if not st.form_submit_button("Record the decision"):
            return
    desk = name if kind == NAME else known if kind == ASSIGN else None
    decision = CandidateDecision(candidate.id, kind, desk, tuple(removed))
    try:
        record = decide_candidate(get_store(), run, decision, known_desks=desks,
                                  reviewer=reviewer, actor=actor)  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    session.decided[candidate.id] = _outcome(kind, record)
    st.rerun()


def _outcome(kind: str, record) -> str:
    if kind == DISMISS:
        return "Dismissed."
    skipped = f" ({record.skipped} already had a reviewer's desk)" if record.skipped else ""
    return f"{len(record.decided)} complaints now have the desk {record.desk}{skipped}."


def _member_label(run: DiscoveryRun, position: int) -> str:
    member = run.members[position]
    where = f"row {member.row}" if member.row is not None else f"#{member.complaint_id}"
    text = " ".join(shown_text(member.text).split())
    return f"{where}: {text[:MEMBER_CHARS]}"
