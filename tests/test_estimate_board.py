"""The server's board of training-time estimates (core.tasks.training.EstimateBoard): one
estimate per settings while it runs or is fresh, a new one when the old is cancelled, stale or
no longer kept by the queue."""

from __future__ import annotations

import threading

from core.jobs import JobStatus, Task
from core.tasks.training import EstimateBoard


class Starts:
    """`start()` for the board: a job of its own each call, gated by `gate`."""

    def __init__(self, job_queue, gate: threading.Event) -> None:
        self.queue, self.gate, self.count = job_queue, gate, 0

    def __call__(self):
        from core.access import OPERATOR, Permission

        self.count += 1

        def work(*, on_progress, cancel):
            while not self.gate.is_set() and not cancel.is_set():
                self.gate.wait(0.01)
            return "estimate"

        task = Task(work, title="estimate", kind="estimate", owner=OPERATOR.user)
        return self.queue.submit(task, actor=OPERATOR, permission=Permission.TRAIN)


def test_one_estimate_per_settings_while_it_runs_and_while_fresh(job_queue):
    gate = threading.Event()
    start, board = Starts(job_queue, gate), EstimateBoard(ttl_s=600)
    first = board.job("a", start)
    assert board.job("a", start) is first and start.count == 1  # running: shared
    gate.set()
    assert first.wait(10).status is JobStatus.DONE
    assert board.job("a", start) is first and start.count == 1  # done and fresh: reused
    assert board.job("b", start) is not first and start.count == 2  # other settings


def test_a_cancelled_stale_or_dropped_estimate_is_started_again(job_queue):
    gate = threading.Event()
    start, board = Starts(job_queue, gate), EstimateBoard(ttl_s=600)
    cancelled = board.job("a", start)
    cancelled.cancel()
    cancelled.wait(10)
    assert board.job("a", start) is not cancelled  # its session left: time it again
    gate.set()
    done = board.job("a", start)
    done.wait(10)
    done._drop_result()  # the queue keeps only the newest finished jobs' results
    assert board.job("a", start) is not done
    stale = EstimateBoard(ttl_s=0)
    old = stale.job("a", start)
    old.wait(10)
    assert stale.job("a", start) is not old  # past its time to live
