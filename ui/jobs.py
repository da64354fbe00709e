"""The one progress fragment every page shows for its background job (training, classifying,
scanning, auditing): a progress bar with text and ETA, a Cancel button, and a full rerun of the
page once the job has ended. Pages say what to show through a small `describe` callable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import streamlit as st

from core.jobs import JobStatus


class Cancellable(Protocol):
    """What the fragment needs of a job besides `describe`: a way to ask it to stop."""

    def cancel(self) -> None: ...


J = TypeVar("J", bound=Cancellable)


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


def counted_progress(job: Any, text: Callable[[int, int, str, Any], str]) -> JobProgress | None:
    """The progress of a core.jobs.BackgroundJob whose progress values count `done` of `total`
    with an `eta_s`: the bar at done/total, labelled `text(done, total, eta_text, latest)`
    (`latest` is None before the first report); None once the job has ended."""
    snapshot = job.snapshot()
    if snapshot.status is not JobStatus.RUNNING:
        return None
    latest = snapshot.latest
    done, total = (latest.done, latest.total) if latest else (0, 1)
    eta = eta_text(latest.eta_s if latest else None)
    return JobProgress(done / max(total, 1), text(done, total, eta, latest))
