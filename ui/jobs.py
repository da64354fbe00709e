"""The server's one job queue as pages reach it, and the one progress fragment every page shows
for its background job (training, classifying, scanning, auditing): a progress bar with text
and ETA (or the job's place in the queue), a Cancel button, and a full rerun of the page once
the job has ended. Pages say what to show through a small `describe` callable."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.jobs import JobQueue, JobSnapshot, JobStatus, QueueConfig, Requester
from core.memo import ByteBoundedCache
from core.progress import Progress
from ui.auth import current_actor
from ui.safe import md_escape


@st.cache_resource(show_spinner=False, on_release=JobQueue.shutdown)
def get_job_queue() -> JobQueue:
    """The process-wide queue (one per server, shared by every session), created on first use;
    shut down (jobs cancelled, scratch files deleted) when Streamlit drops it from its cache.

    torch's thread count is fixed here, once, before any job runs: a job never changes it."""
    import torch

    from core.models.device import available_cpus, configure_cpu_threads

    configure_cpu_threads()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return JobQueue(
        QueueConfig.from_env(), cpus=available_cpus(), gpus=gpus, session_alive=_session_alive
    )


def _session_alive(session_id: str) -> bool:
    """Whether the browser session is still open; always true where no server runs (AppTest)."""
    return not runtime.exists() or runtime.get_instance().is_active_session(session_id)


def job_requester() -> Requester:
    """This session's user and browser session, for a job it asks the queue for."""
    ctx = get_script_run_ctx()
    return Requester(current_actor(), ctx.session_id if ctx is not None else None)


def run_short(work: Callable[[threading.Event], R], *, title: str, kind: str) -> R:
    """`work(cancel)` on the queue's short lane (what a person waits for: one explanation, one
    complaint classified), so a few run at a time however many sessions ask, one per user, and
    never behind a training. `work` checks `cancel` between its steps: past SHORT_TIMEOUT_S it is
    cancelled and the worker freed. Raises UserError when it fails or times out."""
    queue = get_job_queue()
    return queue.call(
        work, requester=job_requester(), title=title, kind=kind, timeout_s=SHORT_TIMEOUT_S
    )


def run_short_cached(
    cache: ByteBoundedCache,
    key: Hashable,
    work: Callable[[threading.Event], R],
    *,
    title: str,
    kind: str,
    spinner: str | None = None,
) -> R:
    """`run_short(work)` kept in `cache` (bounded by bytes) under `key`, which names everything
    the result depends on: a rerun of the page (any click) costs a look-up, not a model call."""

    def run() -> R:
        if spinner is None:
            return run_short(work, title=title, kind=kind)
        with st.spinner(spinner):
            return run_short(work, title=title, kind=kind)

    return cache.get_or_compute(key, run)


def idle_progress(snapshot: JobSnapshot) -> JobProgress | None:
    """What a job that is not running shows: its place in the queue while queued, nothing (None)
    once it has ended. Callers describe a running job themselves."""
    return queued_progress(snapshot) if snapshot.status is JobStatus.QUEUED else None


def queued_progress(snapshot: JobSnapshot) -> JobProgress:
    """What a queued job shows: its place in the queue and, when known, when it should start."""
    position, eta = snapshot.position, snapshot.start_eta_s
    when = "" if eta is None else f", starts in about {eta:.0f} s" if eta >= 1 else ", starting"
    place = f"number {position} in the queue" if position else "queued"
    return JobProgress(0.0, f"Waiting for the jobs ahead: {place}{when} (see Jobs).")


class Cancellable(Protocol):
    """What the fragment needs of a job besides `describe`: a way to ask it to stop."""

    def cancel(self) -> None: ...


J = TypeVar("J", bound=Cancellable)
R = TypeVar("R")
SHORT_TIMEOUT_S = 60.0  # one explanation takes about a second; a minute means something is wrong


@dataclass(frozen=True)
class JobProgress:
    """What the fragment shows of a running job at one poll."""

    fraction: float  # in [0, 1], for st.progress
    text: str
    details: Callable[[], None] | None = None  # draws more under the bar (e.g. training curves)


def eta_text(eta_s: float | None) -> str:
    """The text " · about N s left", or "" while the ETA is unknown."""
    return f" · about {eta_s:.0f} s left" if eta_s is not None else ""


def render_job_progress(
    job: J,
    *,
    describe: Callable[[J], JobProgress | None],
    key: str,
    every: float,
    cancel_label: str = "Cancel",
    on_cancel: Callable[[], None] | None = None,
) -> None:
    """Poll `describe(job)` every `every` seconds in a fragment and show its progress.

    `describe` returns None once the job is no longer running: the whole page then reruns to show
    the outcome. The Cancel button (widget key `key`) calls `job.cancel()`, then `on_cancel()`.
    """
    st.fragment(_render_progress, run_every=every)(job, describe, key, cancel_label, on_cancel)


def render_unfinished(
    job: J,
    snapshot: JobSnapshot,
    *,
    describe: Callable[[J], JobProgress | None],
    key: str,
    cancelled: str,
    every: float = 0.5,
) -> bool:
    """Where `job` stands when it has no result to show: its progress while it runs, its error
    once it failed, `cancelled` once it was cancelled; True when one of those was said. False:
    it is done, and the caller shows its result."""
    if snapshot.status.active:
        render_job_progress(job, describe=describe, key=key, every=every)
    elif snapshot.status is JobStatus.FAILED:
        st.error(md_escape(snapshot.error))
    elif snapshot.status is JobStatus.CANCELLED:
        st.info(cancelled)
    else:
        return False
    return True


def _render_progress(
    job: J,
    describe: Callable[[J], JobProgress | None],
    key: str,
    cancel_label: str,
    on_cancel: Callable[[], None] | None,
) -> None:
    progress = describe(job)
    if progress is None:
        st.rerun()  # the job has ended: the whole page now shows its outcome
    st.progress(progress.fraction, text=progress.text)
    if progress.details is not None:
        progress.details()
    if st.button(cancel_label, key=key):
        job.cancel()
        if on_cancel is not None:
            on_cancel()


def counted(latest: Progress | None) -> str:
    """ "done of total" of a progress value, e.g. "1,024 of 3,000" ("0 of 0" before any)."""
    done, total = (latest.done, latest.total) if latest is not None else (0, 0)
    return f"{done:,.0f} of {total:,.0f}"


def describe_job(job: Any, text: Callable[[JobSnapshot, str], str]) -> JobProgress | None:
    """The progress of a core.jobs.Job (or anything with its `snapshot()`): the bar at the
    latest Progress's fraction, labelled `text(snapshot, eta_text)` (`snapshot.latest` is None
    before the first report; the ETA is the queue's); its place while queued; None once it has
    ended. One snapshot per poll."""
    snapshot = job.snapshot()
    if snapshot.status is not JobStatus.RUNNING:
        return idle_progress(snapshot)
    latest = snapshot.latest
    fraction = latest.fraction if latest is not None else 0.0
    return JobProgress(fraction, text(snapshot, eta_text(snapshot.eta_s)))
