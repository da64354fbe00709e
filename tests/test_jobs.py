import threading

from core.jobs import MAX_HISTORY, BackgroundJob, JobStatus, eta_seconds


def test_result_and_progress_history():
    def work(*, on_progress, cancel):
        for step in range(1, 4):
            on_progress(step)
        return "trained"

    snapshot = BackgroundJob(work).start().wait(10)
    assert snapshot.status is JobStatus.DONE
    assert snapshot.result == "trained" and snapshot.history == (1, 2, 3) and snapshot.latest == 3


def test_cancel_is_seen_by_the_worker():
    started = threading.Event()

    def work(*, on_progress, cancel):
        started.set()
        assert cancel.wait(10)
        return None

    job = BackgroundJob(work).start()
    assert started.wait(10)
    job.cancel()
    assert job.wait(10).status is JobStatus.CANCELLED


def test_value_error_becomes_one_line_error():
    def work(*, on_progress, cancel):
        raise ValueError("too few rows:\n add more")

    snapshot = BackgroundJob(work).start().wait(10)
    assert snapshot.status is JobStatus.FAILED
    assert snapshot.error == "too few rows: add more"


def test_unexpected_error_is_reported_not_raised():
    def work(*, on_progress, cancel):
        raise RuntimeError("boom")

    snapshot = BackgroundJob(work).start().wait(10)
    assert snapshot.status is JobStatus.FAILED and "RuntimeError: boom" in snapshot.error


def test_history_stays_bounded_and_keeps_the_ends():
    def work(*, on_progress, cancel):
        for step in range(3 * MAX_HISTORY):
            on_progress(step)

    history = BackgroundJob(work).start().wait(10).history
    assert len(history) <= MAX_HISTORY + 1
    assert history[0] == 0 and history[-1] == 3 * MAX_HISTORY - 1
    assert list(history) == sorted(history)


def test_eta_follows_the_average_rate_so_far():
    assert eta_seconds(25, 100, 10.0) == 30.0  # 2.5 per second, 75 to go
    assert eta_seconds(100, 100, 40.0) == 0.0


def test_no_eta_before_a_rate_is_known():
    assert eta_seconds(0, 100, 5.0) is None  # nothing done yet
    assert eta_seconds(10, 100, 0.0) is None  # no time has passed
