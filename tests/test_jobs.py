"""One job on its own (core.jobs.Job): result, progress history, cancel, errors, the queue's
ETA from the work's Progress values."""

import logging
import threading

from core.errors import UserError
from core.eta import eta_seconds
from core.jobs import MAX_HISTORY, Job, JobStatus, Task
from core.progress import Cancelled, Progress


def run(work) -> Job:
    return Job(Task(work=work, title="test", kind="test", owner="tester")).start()


def test_result_and_progress_history_while_running_only_the_last_after():
    gate = threading.Event()

    def work(*, on_progress, cancel):
        for step in range(1, 4):
            on_progress(Progress(step, 3, "train"))
        gate.wait(10)
        return "trained"

    job = run(work)
    for _ in range(1000):
        if job.snapshot().latest is not None and job.snapshot().latest.done == 3:
            break
        threading.Event().wait(0.01)  # polling a worker thread's state, not pacing the test
    assert [p.done for p in job.snapshot().history] == [1, 2, 3]
    gate.set()
    snapshot = job.wait(10)
    assert snapshot.status is JobStatus.DONE and snapshot.result == "trained"
    assert snapshot.history == () and snapshot.latest == Progress(3, 3, "train")


def test_cancel_is_seen_by_the_worker():
    started = threading.Event()

    def work(*, on_progress, cancel):
        started.set()
        assert cancel.wait(10)
        return None

    job = run(work)
    assert started.wait(10)
    job.cancel()
    assert job.wait(10).status is JobStatus.CANCELLED


def test_work_that_raises_cancelled_ends_cancelled_not_failed():
    def work(*, on_progress, cancel):
        raise Cancelled

    snapshot = run(work).wait(10)
    assert snapshot.status is JobStatus.CANCELLED and snapshot.error is None


def test_a_user_error_becomes_one_line_error():
    def work(*, on_progress, cancel):
        raise UserError("too few rows:\n add more")

    snapshot = run(work).wait(10)
    assert snapshot.status is JobStatus.FAILED
    assert snapshot.error == "too few rows: add more"


def test_any_other_error_is_a_bug_logged_under_a_reference(caplog, unexpected_page_errors):
    def work(*, on_progress, cancel):
        raise ValueError("an internal library error")  # not a UserError: a bug

    with caplog.at_level(logging.ERROR, logger="core.jobs"):
        snapshot = run(work).wait(10)
    assert snapshot.status is JobStatus.FAILED
    assert "unexpected error" in snapshot.error and "library error" not in snapshot.error
    reference = snapshot.error.split("reference ")[1][:8]
    (record,) = [r for r in caplog.records if reference in r.getMessage()]
    assert record.exc_info is not None  # the traceback is in the log
    unexpected_page_errors.clear()  # caused on purpose


def test_history_stays_bounded_and_keeps_the_ends():
    gate = threading.Event()

    def work(*, on_progress, cancel):
        for step in range(3 * MAX_HISTORY):
            on_progress(Progress(step, 3 * MAX_HISTORY))
        gate.wait(10)

    job = run(work)
    for _ in range(1000):
        latest = job.snapshot().latest
        if latest is not None and latest.done == 3 * MAX_HISTORY - 1:
            break
        threading.Event().wait(0.01)
    history = [p.done for p in job.snapshot().history]
    gate.set()
    assert len(history) <= MAX_HISTORY + 1
    assert history[0] == 0 and history[-1] == 3 * MAX_HISTORY - 1
    assert history == sorted(history)


def test_the_eta_follows_the_current_phase_rate(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("core.jobs.time.monotonic", lambda: clock[0])
    job = Job(Task(work=lambda **_: None, title="t", kind="t", owner="o"))
    job._status, job._started = JobStatus.RUNNING, 100.0
    assert job.remaining_s() is None  # nothing reported yet
    clock[0] = 110.0
    job._on_progress(Progress(25, 100, "embed"))  # 25 in 10 s since the start
    assert job.remaining_s() == 30.0
    job._on_progress(Progress(0, 8, "train"))  # a new phase: its own rate, none yet
    assert job.remaining_s() is None
    clock[0] = 114.0
    job._on_progress(Progress(2, 8, "train"))  # 2 steps in 4 s, 6 to go
    assert job.remaining_s() == 12.0


def test_eta_follows_the_average_rate_so_far():
    assert eta_seconds(25, 100, 10.0) == 30.0  # 2.5 per second, 75 to go
    assert eta_seconds(100, 100, 40.0) == 0.0


def test_no_eta_before_a_rate_is_known():
    assert eta_seconds(0, 100, 5.0) is None  # nothing done yet
    assert eta_seconds(10, 100, 0.0) is None  # no time has passed


def test_progress_fraction_is_clipped_and_zero_without_a_total():
    assert Progress(1, 4).fraction == 0.25
    assert Progress(5, 4).fraction == 1.0 and Progress(3, 0).fraction == 0.0
