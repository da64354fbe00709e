"""Jobs page: everything the server's one queue holds (queued, running, finished), who asked for
it, where it stands and how long it took; owners (and admins, for anyone's) cancel from here."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.access import Permission
from core.errors import UserError
from core.jobs import JobInfo, JobStatus, Lane
from ui.auth import current_actor
from ui.jobs import get_job_queue
from ui.safe import md_escape

REFRESH_S = 2.0


def jobs_frame(infos: list[JobInfo]) -> pd.DataFrame:
    """One row per job, as shown (times in seconds; ETA: to the end, or to the start if queued)."""
    return pd.DataFrame(
        {
            "id": [i.id for i in infos],
            "job": [i.title for i in infos],
            "owner": [i.owner for i in infos],
            "state": [i.status.value + (" (cancelling)" if i.cancel_requested and
                      i.status.active else "") for i in infos],
            "place in queue": [i.position for i in infos],
            "lane": [i.lane.value for i in infos],
            "submitted (UTC)": [i.submitted_at.strftime("%H:%M:%S") for i in infos],
            "waited s": [round(i.waited_s, 1) for i in infos],
            "ran s": [round(i.run_s, 1) for i in infos],
            "ETA s": [round(i.eta_s) if i.eta_s is not None else None for i in infos],
            "error": [i.error or "" for i in infos],
        }
    )  # fmt: skip


def render_table() -> None:
    """The jobs, refreshed every few seconds; heavy jobs only unless asked (short ones are many)."""
    queue = get_job_queue()
    infos = queue.jobs(seen_by=current_actor())
    if not st.session_state.get("jobs.show_short"):
        infos = [i for i in infos if i.lane is not Lane.SHORT]
    active = [i for i in infos if i.status.active]
    finished = [i for i in infos if not i.status.active][::-1]  # newest first
    cols = st.columns(3)
    cols[0].metric("Running", sum(i.status is JobStatus.RUNNING for i in active))
    cols[1].metric("Queued", sum(i.status is JobStatus.QUEUED for i in active))
    cols[2].metric("Workers for heavy jobs", queue.workers(Lane.CPU) + queue.workers(Lane.GPU))
    st.markdown("**Queued and running**")
    if active:
        st.dataframe(jobs_frame(active), hide_index=True, width="stretch")
    else:
        st.caption("Nothing is queued or running.")
    st.markdown("**Finished** (the latest, newest first)")
    st.dataframe(jobs_frame(finished), hide_index=True, width="stretch", height=260)


def render_cancel() -> None:
    actor = current_actor()
    queue = get_job_queue()
    mine = [
        i for i in queue.jobs(seen_by=actor)
        if i.status.active and (i.owner == actor.user or actor.can(Permission.CANCEL_ANY_JOB))
    ]  # fmt: skip
    if not mine:
        return
    labels = {i.id: f"{i.id}: {i.title} ({i.owner}, {i.status.value})" for i in mine}
    with st.form("jobs.cancel_form"):
        job_id = st.selectbox("Job", list(labels), format_func=labels.get, key="jobs.pick")
        submitted = st.form_submit_button("Cancel this job")
    if submitted:
        try:
            queue.cancel(int(job_id), actor=actor)
        except UserError as exc:
            st.error(md_escape(exc))
            return
        st.toast(f"Job {job_id} is being cancelled.")


st.title("Jobs")
st.write(
    "Long work runs on one queue for the whole server, a few jobs at a time, so that nobody's "
    "training slows everyone down. Explanations and single complaints take a lane of their own."
)
st.toggle("Show explanations and single complaints too", key="jobs.show_short")
st.fragment(render_table, run_every=REFRESH_S)()
render_cancel()
