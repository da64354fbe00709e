"""The server's one job queue (core.jobs.JobQueue): lanes, order, caps, cancelling, time limits,
ended sessions and what finished jobs keep. Jobs here are tiny functions gated by events: no
sleeps decide an outcome."""

import os
import sys
import threading

import pytest

from core.access import AccessDenied, Actor, Permission, Role
from core.errors import UserError
from core.jobs import (
    KEEP_RESULTS,
    Job,
    JobQueue,
    JobStatus,
    Lane,
    QueueConfig,
    QueueFull,
    Requester,
    Task,
)
from core.progress import Progress

ANNA = Actor("anna@bank.in", Role.REVIEWER, signed_in=True)
RAVI = Actor("ravi@bank.in", Role.REVIEWER, signed_in=True)
VERA = Actor("vera@bank.in", Role.VIEWER, signed_in=True)
ADMIN = Actor("lead@bank.in", Role.ADMIN, signed_in=True)


@pytest.fixture
def queue():
    q = JobQueue(QueueConfig(max_jobs_per_user=20), cpus=2)
    yield q
    q.shutdown()


def gated(gate: threading.Event, log: list, name: str):
    """Work that records its start, then waits for `gate` (or a cancel)."""

    def work(*, on_progress, cancel):
        log.append(name)
        while not gate.is_set() and not cancel.is_set():
            gate.wait(0.01)
        return name

    return work


def task(work, actor: Actor, *, lane: Lane = Lane.CPU, **options) -> Task:
    title = f"Classify complaints-{actor.user}.csv"  # titles may name data
    return Task(work=work, title=title, kind="test", owner=actor.user, lane=lane, **options)


def submit(queue: JobQueue, work, actor: Actor = ANNA, **options) -> Job:
    return queue.submit(task(work, actor, **options), actor=actor, permission=Permission.RUN_JOBS)


def call(queue: JobQueue, work, actor: Actor, **options):
    """`work(cancel)` on the short lane for `actor`."""
    return queue.call(work, requester=Requester(actor), title="short", kind="test", **options)


def test_a_two_core_machine_runs_ten_heavy_jobs_one_after_another(queue):
    assert queue.workers(Lane.CPU) == 1
    gates = [threading.Event() for _ in range(10)]
    started: list[str] = []
    jobs = [submit(queue, gated(g, started, f"job{i}")) for i, g in enumerate(gates)]
    for i, (job, gate) in enumerate(zip(jobs, gates, strict=True)):
        _wait_until(lambda job=job: job.status is JobStatus.RUNNING)
        assert started == [f"job{k}" for k in range(i + 1)]  # one at a time, in order
        assert [j.snapshot().position for j in jobs[i + 1 :]] == list(range(1, 10 - i))
        gate.set()
        assert job.wait(10).status is JobStatus.DONE
    assert [info.status for info in queue.jobs(seen_by=ADMIN)] == [JobStatus.DONE] * 10
    assert queue.jobs(seen_by=ANNA)[0].title == f"Classify complaints-{ANNA.user}.csv"
    seen = queue.jobs(seen_by=RAVI)[0]  # another reviewer: owner and state, not what it is
    assert (seen.owner, seen.title, seen.status) == (ANNA.user, "test job", JobStatus.DONE)


def test_short_jobs_do_not_wait_behind_a_training(queue):
    gate = threading.Event()
    training = submit(queue, gated(gate, [], "training"))
    _wait_until(lambda: training.status is JobStatus.RUNNING)
    answer = call(queue, lambda cancel: 42, VERA)
    assert answer == 42 and training.status is JobStatus.RUNNING
    gate.set()


def test_caps_refuse_with_a_line_that_says_what_to_do():
    q = JobQueue(QueueConfig(max_jobs_per_user=2, max_tokens_per_batch=1000), cpus=2)
    try:
        gate = threading.Event()
        submit(q, gated(gate, [], "a"))
        submit(q, gated(gate, [], "b"))
        with pytest.raises(QueueFull, match="already has 2 jobs .* cancel it on the Jobs page"):
            submit(q, gated(gate, [], "c"))
        submit(q, gated(gate, [], "ravi's"), RAVI)  # the cap is per user
        assert call(q, lambda cancel: "quick", ANNA) == "quick"
        with pytest.raises(QueueFull, match="lower the batch size or max length"):
            submit(q, gated(gate, [], "big"), RAVI, tokens_per_batch=64 * 512)
        gate.set()
    finally:
        q.shutdown()


def test_roles_are_checked_by_the_queue_itself(queue):
    with pytest.raises(AccessDenied, match="needs the reviewer role"):
        submit(queue, gated(threading.Event(), [], "x"), VERA)
    with pytest.raises(AccessDenied, match="needs the admin role"):
        queue.submit(
            task(gated(threading.Event(), [], "t"), ANNA), actor=ANNA, permission=Permission.TRAIN
        )
    with pytest.raises(RuntimeError, match="must be owned by them"):
        queue.submit(task(gated(threading.Event(), [], "y"), RAVI), actor=ANNA,
                     permission=Permission.RUN_JOBS)  # fmt: skip


def test_owner_or_admin_cancels_and_a_queued_job_never_runs(queue):
    gate, started = threading.Event(), []
    running = submit(queue, gated(gate, started, "first"))
    waiting = submit(queue, gated(gate, started, "second"))
    _wait_until(lambda: running.status is JobStatus.RUNNING)
    with pytest.raises(AccessDenied):
        queue.cancel(waiting.id, actor=RAVI)
    queue.cancel(waiting.id, actor=ANNA)
    assert waiting.status is JobStatus.CANCELLED  # at once: it was only queued
    queue.cancel(running.id, actor=ADMIN)
    assert running.wait(10).status is JobStatus.CANCELLED
    assert started == ["first"]


def test_a_job_past_its_time_limit_is_stopped_and_says_why(queue):
    job = submit(queue, gated(threading.Event(), [], "slow"), max_seconds=0.3)
    snapshot = job.wait(10)
    assert snapshot.status is JobStatus.FAILED and "time limit" in snapshot.error


def test_a_job_of_an_ended_session_is_cancelled_unless_it_saves_its_result():
    alive = {"tab-1": True}
    q = JobQueue(QueueConfig(cpu_workers=2), cpus=2, session_alive=lambda s: alive.get(s, False))
    try:
        gate = threading.Event()
        scan = submit(q, gated(gate, [], "scan"), session_id="tab-1")
        training = submit(q, gated(gate, [], "train"), session_id="tab-1", keep_after_session=True)
        _wait_until(lambda: training.status is JobStatus.RUNNING)
        alive["tab-1"] = False
        snapshot = scan.wait(10)
        assert snapshot.status is JobStatus.CANCELLED and "session" in snapshot.error
        assert training.status is JobStatus.RUNNING
        gate.set()
        assert training.wait(10).status is JobStatus.DONE
    finally:
        q.shutdown()


def test_queued_jobs_know_when_they_should_start(queue):
    gate = threading.Event()

    def reporting(*, on_progress, cancel):
        on_progress(Progress(1, 4))  # a quarter done: three times what it took so far is left
        gate.wait(10)

    first = submit(queue, reporting)
    _wait_until(lambda: first.snapshot().latest is not None)
    second = submit(queue, gated(gate, [], "second"))
    snapshot = second.snapshot()
    left = first.remaining_s()
    assert snapshot.position == 1 and left is not None
    assert snapshot.start_eta_s == pytest.approx(left, abs=0.5)
    third = submit(queue, gated(gate, [], "third"))
    assert third.snapshot().start_eta_s is None  # "test" jobs have no typical duration yet
    gate.set()


def test_failures_come_back_from_a_short_call(queue):
    def broken(cancel):
        raise UserError("no model loaded;\n load one")

    with pytest.raises(UserError, match="^no model loaded; load one$"):
        call(queue, broken, VERA)


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_heavy_workers_run_at_a_lower_priority_short_ones_do_not(queue):
    def own_nice(*, on_progress, cancel):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    heavy = submit(queue, own_nice).wait(10).result
    short = call(queue, lambda cancel: own_nice(on_progress=None, cancel=cancel), VERA)
    assert heavy == os.getpriority(os.PRIO_PROCESS, 0) + 10 and short == os.getpriority(
        os.PRIO_PROCESS, 0
    )


def test_settings_come_from_the_environment():
    config = QueueConfig.from_env(
        {"GRIEVANCE_LENS_CPU_WORKERS": "2", "GRIEVANCE_LENS_MAX_JOB_SECONDS": "60"}
    )
    assert (config.cpu_workers, config.max_job_seconds) == (2, 60.0)
    with pytest.raises(ValueError, match="GRIEVANCE_LENS_CPU_WORKERS must be a number"):
        QueueConfig.from_env({"GRIEVANCE_LENS_CPU_WORKERS": "many"})


def _wait_until(condition, timeout: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        done.wait(0.01)  # polling a worker thread's state, not pacing the test
    raise AssertionError("condition not met in time")


def test_heavy_work_takes_the_gpu_lane_when_there_is_one():
    with_gpu = JobQueue(QueueConfig(), cpus=2, gpus=1)
    without = JobQueue(QueueConfig(), cpus=2)
    try:
        assert [with_gpu.heavy_lane(d) for d in ("auto", "cuda", "cpu")] == [
            Lane.GPU, Lane.GPU, Lane.CPU
        ]  # fmt: skip
        assert without.heavy_lane("auto") is Lane.CPU and without.workers(Lane.GPU) == 0
        with pytest.raises(ValueError, match="no gpu lane"):
            submit(without, gated(threading.Event(), [], "x"), lane=Lane.GPU)
    finally:
        with_gpu.shutdown()
        without.shutdown()


def test_the_short_lane_has_two_workers_and_one_running_task_per_user(queue):
    assert queue.workers(Lane.SHORT) >= 2
    gate, started = threading.Event(), []
    first = submit(queue, gated(gate, started, "anna-1"), lane=Lane.SHORT)
    second = submit(queue, gated(gate, started, "anna-2"), lane=Lane.SHORT)
    _wait_until(lambda: first.status is JobStatus.RUNNING)
    # Anna's second task waits for her first; Ravi is not held up behind it.
    assert call(queue, lambda cancel: "ravi's", RAVI) == "ravi's"
    assert second.status is JobStatus.QUEUED and started == ["anna-1"]
    gate.set()
    assert second.wait(10).status is JobStatus.DONE


def test_a_caller_that_gives_up_frees_the_short_worker():
    """Work that checks cancel ends when its caller's time runs out, so the next task runs."""
    q = JobQueue(QueueConfig(short_workers=2, max_short_per_user=1), cpus=2)
    stopped = threading.Event()

    def slow(cancel):
        while not cancel.wait(0.01):
            pass
        stopped.set()

    try:
        with pytest.raises(UserError, match="took longer than 0 s; try again"):
            call(q, slow, ANNA, timeout_s=0.2)
        assert stopped.wait(10)  # the worker is free again
        assert call(q, lambda cancel: "next", ANNA) == "next"  # Anna's cap is free too
    finally:
        q.shutdown()


def test_finished_jobs_keep_a_summary_and_only_the_newest_keep_results(queue):
    jobs = []
    for _ in range(KEEP_RESULTS + 5):
        jobs.append(submit(queue, lambda **_: bytearray(1000)))
        assert jobs[-1].wait(10).status is JobStatus.DONE
    _wait_until(lambda: len(queue.jobs(seen_by=ADMIN)) == len(jobs))
    kept = [job.snapshot() for job in jobs]
    assert [s.result is not None for s in kept] == [False] * 5 + [True] * KEEP_RESULTS
    assert all(s.result_dropped for s in kept[:5]) and kept[0].status is JobStatus.DONE


def test_a_session_scratch_folder_goes_with_the_session(tmp_path):
    alive = {"tab-1": True, "tab-2": True}
    q = JobQueue(QueueConfig(), cpus=2, session_alive=lambda s: alive.get(s, False))
    try:
        one, two = q.session_folder("tab-1"), q.session_folder("tab-2")
        (one / "classified.parquet").write_bytes(b"rows")
        assert q.session_folder("tab-1") == one and one != two
        alive["tab-1"] = False
        _wait_until(lambda: not one.exists())
        assert two.is_dir()
    finally:
        q.shutdown()
    assert not two.exists()  # everything goes at shutdown


def test_a_new_session_never_gets_the_folder_of_a_live_one():
    """Regression: folders were numbered by the sessions still listed, so once one had ended
    the next session got a live session's name and failed with FileExistsError."""
    alive = {"tab-1": True, "tab-2": True, "tab-3": True}
    q = JobQueue(QueueConfig(), cpus=2, session_alive=lambda s: alive.get(s, False))
    try:
        one, two = q.session_folder("tab-1"), q.session_folder("tab-2")
        (two / "classified.parquet").write_bytes(b"tab-2's complaints")
        alive["tab-1"] = False
        _wait_until(lambda: not one.exists())
        three = q.session_folder("tab-3")
        assert three.is_dir() and three.name not in (one.name, two.name)
        assert (two / "classified.parquet").read_bytes() == b"tab-2's complaints"
        assert q.session_folder("tab-2") == two
    finally:
        q.shutdown()
