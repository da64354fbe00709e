"""AppTest for ui.jobs.render_job_progress: the one progress fragment of background jobs."""

from __future__ import annotations

import tempfile

import pytest
from streamlit.testing.v1 import AppTest


class FakeJob:
    """A job the test steers: `poll()` walks through `states` (the last one stays), and the job
    remembers whether it was cancelled."""

    def __init__(self, states: tuple[str, ...] = ("running",)) -> None:
        self.states = list(states)
        self.polls = 0
        self.cancelled = False

    def poll(self) -> str:
        self.polls += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def cancel(self) -> None:
        self.cancelled = True


def progress_page() -> None:
    """A page that shows its job's progress while it runs, and "ended" afterwards."""
    import streamlit as st

    from ui.jobs import JobProgress, eta_text, render_job_progress

    def describe(job) -> JobProgress | None:
        if job.poll() == "ended":
            return None
        details = (lambda: st.caption("details")) if st.session_state.get("details") else None
        return JobProgress(0.25, f"1 of 4 steps{eta_text(30.0)}", details=details)

    job = st.session_state["job"]
    if job.poll() == "ended":
        st.text("ended")
    else:
        render_job_progress(
            job, describe=describe, key="test.cancel", every=0.5, cancel_label="Stop",
            on_cancel=lambda: st.toast("Stopping…"),
        )  # fmt: skip


def open_page(job: FakeJob, *, details: bool = False) -> AppTest:
    at = AppTest.from_function(progress_page, default_timeout=30)
    at.session_state["job"] = job
    at.session_state["details"] = details
    return at.run()


def test_a_running_job_shows_its_progress_and_a_cancel_button():
    at = open_page(FakeJob())
    assert not at.exception
    (bar,) = at.get("progress")
    assert bar.proto.text == "1 of 4 steps · about 30 s left" and bar.proto.value == 25
    assert at.button(key="test.cancel").label == "Stop"
    assert not at.caption


def test_details_are_drawn_under_the_bar():
    at = open_page(FakeJob(), details=True)
    assert [c.value for c in at.caption] == ["details"]


def test_cancel_asks_the_job_to_stop_and_says_so():
    job = FakeJob()
    at = open_page(job)
    at.button(key="test.cancel").click().run()
    assert not at.exception
    assert job.cancelled
    assert [t.value for t in at.toast] == ["Stopping…"]


def test_once_the_job_has_ended_the_whole_page_reruns():
    job = FakeJob(("running", "ended"))  # ends between the page's check and the fragment's poll
    at = open_page(job)
    assert not at.exception
    assert [t.value for t in at.text] == ["ended"] and not at.get("progress")
    assert job.polls == 3  # the page, the fragment, the page again


def test_a_job_not_running_shows_its_place_in_the_queue_or_nothing_once_ended():
    from core.jobs import JobSnapshot, JobStatus
    from ui.jobs import idle_progress

    def snapshot(status: JobStatus) -> JobSnapshot:
        return JobSnapshot(status, None, (), None, None, 0.0, position=2, start_eta_s=40.0)

    queued = idle_progress(snapshot(JobStatus.QUEUED))
    assert queued is not None and queued.fraction == 0.0
    assert "number 2 in the queue, starts in about 40 s" in queued.text
    for ended in (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED):
        assert idle_progress(snapshot(ended)) is None


def test_the_cached_queue_is_shut_down_when_streamlit_lets_it_go(tmp_path, monkeypatch):
    """Regression: the server's queue was never shut down, so its scratch folder and the
    classified complaints in it stayed on disk after the queue was gone."""
    from core.access import OPERATOR, Permission
    from core.errors import UserError
    from core.jobs import Task
    from ui.jobs import get_job_queue

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    get_job_queue.clear()  # a queue an earlier test cached would keep its folder elsewhere
    queue = get_job_queue()
    folder = queue.session_folder("tab-1")
    (folder / "classified.parquet").write_bytes(b"complaints")
    get_job_queue.clear()  # what Streamlit does when it drops the cached resource
    assert not folder.exists() and list(tmp_path.iterdir()) == []
    task = Task(work=lambda **_: None, title="t", kind="test", owner=OPERATOR.user)
    with pytest.raises(UserError, match="shut down"):
        queue.submit(task, actor=OPERATOR, permission=Permission.RUN_JOBS)
