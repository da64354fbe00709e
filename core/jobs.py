"""The server's one queue of long work: a `Task` (what runs, who asked, which lane, its limits)
becomes a `Job` once submitted; every job reports `core.progress.Progress` values and the queue
computes every ETA from them.

Lanes of worker threads: heavy CPU work (one job per two cores by default: a torch job already
uses both), a GPU lane per visible GPU, and a short lane (at least two workers, one running task
per user) for bounded work a person waits for (one explanation, one complaint), so it never
waits behind a training and one user cannot hold it. The queue enforces the caps of a shared
server: jobs per user, tokens per batch, wall-clock time per job (work checks cancel between
batches, so a job past its limit or whose caller gave up frees its worker), and cancels a job
whose browser session ended unless it saves its result (a training). A finished job keeps a
small summary; only the newest `KEEP_RESULTS` finished jobs keep their result objects, and large
outputs (a classified table) are files in the asking session's scratch folder, deleted with the
session (core.scratch_folders); core.eta makes the ETAs. No job changes process-wide state: the
queue sets no seed and no thread count, and heavy workers run at a lower scheduling priority of
their own thread. Nothing here imports streamlit.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, TypeVar

from core.access import Actor, Permission
from core.errors import UserError
from core.eta import PhaseClock, TypicalDurations
from core.progress import Cancelled, Progress
from core.queue_config import QueueConfig
from core.scratch_folders import SessionScratch

log = logging.getLogger(__name__)

R = TypeVar("R")  # result type

# A running job's progress history, for curves: hundreds of points, not every step of a run.
MAX_HISTORY = 2000
KEEP_RESULTS = 16  # finished jobs that keep their result objects; older ones keep a summary
MONITOR_INTERVAL_S = 0.5  # how often the queue checks time limits and ended sessions


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        """Still to finish: queued or running."""
        return self in (JobStatus.QUEUED, JobStatus.RUNNING)


class Lane(StrEnum):
    CPU = "cpu"  # training, file classification, audits, scans, estimates on the CPU
    GPU = "gpu"  # the same on a CUDA GPU
    SHORT = "short"  # bounded work of a second or two a person waits for (one explanation)


@dataclass(frozen=True)
class Task:
    """One piece of work as the queue sees it: what runs, who asked, which lane, its limits.

    `work(on_progress=..., cancel=...)` reports `Progress` values and checks the
    `threading.Event` `cancel` between batches; its return value is the job's result (a small
    summary: big outputs go to files). A UserError it raises becomes the job's one-line error;
    a result whose `cancelled` attribute is true counts as cancelled.
    """

    work: Callable[..., Any]
    title: str  # shown on the Jobs page, e.g. "Train minilm on demo data"
    kind: str  # "train", "classify", "audit", "scan", "review", "estimate", "explain", ...
    owner: str  # the actor's user (e-mail when signed in)
    lane: Lane = Lane.CPU
    session_id: str | None = None  # the browser session that asked; None: no session to watch
    keep_after_session: bool = False  # true for work that saves its result (a training)
    max_seconds: float | None = None  # wall-clock cap; None: the queue's default
    tokens_per_batch: int | None = None  # batch size × max length of its forward passes


@dataclass(frozen=True)
class JobSnapshot(Generic[R]):
    """A consistent view of a job at one moment."""

    status: JobStatus
    latest: Progress | None
    history: tuple[Progress, ...]  # while running; emptied once the job has ended
    result: R | None
    error: str | None
    elapsed_s: float  # running time (0 while queued)
    eta_s: float | None = None  # while running: seconds left at the current phase's rate
    position: int | None = None  # 1-based place in its lane's queue while queued
    start_eta_s: float | None = None  # while queued: seconds until it should start, if known
    result_dropped: bool = False  # ended long ago: its result is no longer kept


@dataclass(frozen=True)
class Requester:
    """Who asks for a job, and from which browser session (None: command line or test)."""

    actor: Actor
    session_id: str | None = None

    def task(
        self,
        work: Callable[..., Any],
        title: str,
        kind: str,
        *,
        lane: Lane = Lane.CPU,
        keep_after_session: bool = False,
        max_seconds: float | None = None,
        tokens_per_batch: int | None = None,
    ) -> Task:
        return Task(
            work=work, title=title, kind=kind, owner=self.actor.user, lane=lane,
            session_id=self.session_id, keep_after_session=keep_after_session,
            max_seconds=max_seconds, tokens_per_batch=tokens_per_batch,
        )  # fmt: skip


class Job(Generic[R]):
    """A submitted `Task`: its state, progress and result. `run()` runs it once in the calling
    thread (a queue worker; `start()` gives it a thread of its own for the command line)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.id = 0  # set by JobQueue.submit: unique within the queue
        self.submitted_at = datetime.now(UTC)
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._history: list[Progress] = []
        self._phase_clock = PhaseClock()
        self._result: R | None = None
        self._result_dropped = False
        self._error: str | None = None
        # Set when someone other than the work stops it: why, and whether that counts as a
        # failure (a time limit) or as a cancellation (its session ended).
        self._stop_reason: str | None = None
        self._stop_fails = False
        self._status = JobStatus.QUEUED
        self._queued = time.monotonic()
        self._started: float | None = None
        self._finished: float | None = None
        self._done = threading.Event()
        self._queue: JobQueue | None = None

    def start(self) -> Job[R]:
        """Run in a daemon thread of its own (command line and tests; servers use a JobQueue)."""
        threading.Thread(target=self.run, name=self.task.kind, daemon=True).start()
        return self

    def cancel(self, *, reason: str | None = None, fails: bool = False) -> None:
        """Ask the work to stop at its next check; a queued job is cancelled at once. `reason`
        (shown as the job's error) says why when someone other than its owner stops it."""
        with self._lock:
            if reason is not None and self._stop_reason is None:
                self._stop_reason, self._stop_fails = reason, fails
            queued = self._status is JobStatus.QUEUED
        self._cancel.set()
        if queued and self._queue is not None:
            self._queue._withdraw(self)

    def wait(self, timeout: float | None = None) -> JobSnapshot[R]:
        """Block until the work ends (or `timeout` passes); return the snapshot."""
        self._done.wait(timeout)
        return self.snapshot()

    def snapshot(self) -> JobSnapshot[R]:
        position, start_eta = None, None
        if self._queue is not None and self.status is JobStatus.QUEUED:
            position, start_eta = self._queue.place(self)
        with self._lock:
            return JobSnapshot(
                status=self._status,
                latest=self._history[-1] if self._history else None,
                history=tuple(self._history) if self._status is JobStatus.RUNNING else (),
                result=self._result,
                error=self._error,
                elapsed_s=self._running_s(),
                eta_s=self._eta_s(),
                position=position,
                start_eta_s=start_eta,
                result_dropped=self._result_dropped,
            )

    @property
    def status(self) -> JobStatus:
        with self._lock:
            return self._status

    @property
    def error(self) -> str | None:
        with self._lock:
            return self._error

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def timings(self) -> tuple[float, float]:
        """(seconds waited in the queue, seconds running so far or in all)."""
        with self._lock:
            waited_until = self._started or self._finished or time.monotonic()
            return waited_until - self._queued, self._running_s()

    def remaining_s(self) -> float | None:
        """Seconds left while running, at the rate of the current phase so far."""
        with self._lock:
            return self._eta_s()

    def run(self) -> None:
        """Run the work in the calling thread and record how it ended (called once)."""
        with self._lock:
            if self._status is not JobStatus.QUEUED:
                return  # cancelled while queued
            self._status, self._started = JobStatus.RUNNING, time.monotonic()
        try:
            result = self.task.work(on_progress=self._on_progress, cancel=self._cancel)
        except Cancelled:
            self._end_stopped(None)
        except UserError as exc:
            self._finish(JobStatus.FAILED, error=" ".join(str(exc).split()))
        except Exception:  # a worker must always end in a state the page can show
            reference = secrets.token_hex(4).upper()  # as the pages show one (ui.errors)
            log.exception(
                "job %s (%s) failed unexpectedly [%s]", self.id, self.task.kind, reference
            )
            error = f"an unexpected error happened (reference {reference}); the server log has it"
            self._finish(JobStatus.FAILED, error=error)
        else:
            cancelled = bool(getattr(result, "cancelled", False)) or self._cancel.is_set()
            if not cancelled:
                self._finish(JobStatus.DONE, result=result)
            else:
                self._end_stopped(result)

    def _end_stopped(self, result: Any) -> None:
        """End a job that stopped early: failed when the queue stopped it for a limit, else
        cancelled."""
        failed = self._stop_reason is not None and self._stop_fails
        status = JobStatus.FAILED if failed else JobStatus.CANCELLED
        self._finish(status, result=result, error=self._stop_reason)

    def _running_s(self) -> float:
        if self._started is None:
            return 0.0
        end = self._finished if self._finished is not None else time.monotonic()
        return end - self._started

    def _eta_s(self) -> float | None:
        """Seconds left at the current phase's average rate (under the lock)."""
        if self._status is not JobStatus.RUNNING or not self._history:
            return None
        return self._phase_clock.remaining_s(self._history[-1])

    def _on_progress(self, value: Progress) -> None:
        with self._lock:
            self._phase_clock.report(value, started=self._started)
            self._history.append(value)
            if len(self._history) > MAX_HISTORY:
                del self._history[1:-1:2]  # thin evenly, keep first and last

    def _finish(self, status: JobStatus, *, result: Any = None, error: str | None = None) -> None:
        with self._lock:
            self._status, self._result, self._error = status, result, error
            self._finished = time.monotonic()
            self._history = self._history[-1:]  # curves are drawn while running only
            # The work holds its inputs (a data set, a loaded model): a finished job keeps
            # only what the Jobs page lists.
            self.task = dataclasses.replace(self.task, work=_done_work)
        self._done.set()

    def _drop_result(self) -> None:
        """Forget the result object (the queue keeps only the newest finished jobs' results)."""
        with self._lock:
            if self._result is not None:
                self._result, self._result_dropped = None, True


def _done_work(**_: Any) -> None:
    """What a finished job's task runs: nothing (its real work and inputs are let go)."""


class QueueFull(UserError):
    """A request the queue refuses by its caps; the message says what to do instead."""


@dataclass(frozen=True)
class JobInfo:
    """One row of the Jobs page."""

    id: int
    title: str
    kind: str
    owner: str
    lane: Lane
    status: JobStatus
    position: int | None
    submitted_at: datetime
    waited_s: float
    run_s: float
    eta_s: float | None  # running: seconds left; queued: seconds until it should start
    error: str | None
    cancel_requested: bool


@dataclass
class _LaneState:
    workers: int
    waiting: deque[Job] = field(default_factory=deque)
    running: list[Job] = field(default_factory=list)


def _default_workers(config: QueueConfig, cpus: int, gpus: int) -> dict[Lane, int]:
    return {
        Lane.CPU: config.cpu_workers or max(1, cpus // 2),
        Lane.GPU: config.gpu_workers or gpus,
        Lane.SHORT: config.short_workers,
    }


class JobQueue:
    """The server's one queue: lanes of worker threads, caps, and the list the Jobs page shows.

    `session_alive(session_id)` tells whether a browser session is still open (the UI layer
    gives it; without it, sessions are never considered ended).
    """

    def __init__(
        self,
        config: QueueConfig = QueueConfig(),
        *,
        cpus: int | None = None,
        gpus: int = 0,
        session_alive: Callable[[str], bool] | None = None,
    ) -> None:
        self.config = config
        self._session_alive = session_alive
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        workers = _default_workers(config, cpus or (os.cpu_count() or 1), gpus)
        self._lanes = {lane: _LaneState(n) for lane, n in workers.items() if n > 0}
        self._finished: deque[Job] = deque(maxlen=config.finished_kept)
        self._durations = TypicalDurations()  # for the start ETAs of queued jobs
        self._scratch = SessionScratch()  # nothing on disk until a session needs a folder
        self._closed = False
        self._threads = [
            threading.Thread(
                target=self._work_lane, args=(lane,), name=f"jobs-{lane}-{i}", daemon=True
            )
            for lane, state in self._lanes.items()
            for i in range(state.workers)
        ]
        self._threads.append(
            threading.Thread(target=self._monitor, name="jobs-monitor", daemon=True)
        )
        for thread in self._threads:
            thread.start()

    @property
    def has_gpu(self) -> bool:
        return Lane.GPU in self._lanes

    def heavy_lane(self, device: str) -> Lane:
        """The lane for heavy work on `device` ("auto", "cpu" or "cuda")."""
        return Lane.GPU if self.has_gpu and device in ("auto", "cuda") else Lane.CPU

    def workers(self, lane: Lane) -> int:
        return self._lanes[lane].workers if lane in self._lanes else 0

    def session_folder(self, session_id: str | None) -> Path:
        """A scratch folder for the files `session_id`'s jobs write (a classified table): it is
        deleted when the session ends, and everything at shutdown or when the process exits."""
        return self._scratch.folder(session_id)

    def submit(self, task: Task, *, actor: Actor, permission: Permission) -> Job:
        """Queue `task` for `actor` (checked for `permission` and the caps); returns its job."""
        actor.require(permission)
        if task.owner != actor.user:
            raise RuntimeError(f"a job for {actor.user} must be owned by them, not {task.owner}")
        if task.lane not in self._lanes:
            raise UserError(f"this server has no {task.lane} lane; choose another device")
        tokens = task.tokens_per_batch
        if tokens is not None and tokens > self.config.max_tokens_per_batch:
            raise QueueFull(
                f"a batch of {tokens:,} tokens (batch size × max length) is over this "
                f"server's {self.config.max_tokens_per_batch:,}; lower the batch size or max length"
            )
        job: Job = Job(task)
        with self._cond:
            if self._closed:
                raise UserError("the job queue is shut down; restart the server")
            mine = self._counted_jobs(actor.user)
            if task.lane is not Lane.SHORT and mine >= self.config.max_jobs_per_user:
                raise QueueFull(
                    f"{actor.user} already has {mine} jobs queued or running (the limit is "
                    f"{self.config.max_jobs_per_user}); wait for one or cancel it on the Jobs page"
                )
            job.id, job._queue = next(self._ids), self
            self._lanes[task.lane].waiting.append(job)
            self._cond.notify_all()
        return job

    def start(
        self,
        work: Callable[..., R],
        /,
        *args: Any,
        requester: Requester,
        title: str,
        kind: str,
        permission: Permission,
        lane: Lane = Lane.CPU,
        keep_after_session: bool = False,
        tokens_per_batch: int | None = None,
        **kwargs: Any,
    ) -> Job[R]:
        """Queue `work(*args, **kwargs, on_progress=..., cancel=...)` for `requester`."""

        def bound(*, on_progress: Callable[[Progress], None], cancel: threading.Event) -> R:
            return work(*args, **kwargs, on_progress=on_progress, cancel=cancel)

        task = requester.task(
            bound, title, kind, lane=lane, keep_after_session=keep_after_session,
            tokens_per_batch=tokens_per_batch,
        )  # fmt: skip
        return self.submit(task, actor=requester.actor, permission=permission)

    def call(
        self,
        work: Callable[[threading.Event], R],
        *,
        requester: Requester,
        title: str,
        kind: str,
        permission: Permission = Permission.READ,
        timeout_s: float = 60.0,
    ) -> R:
        """Run a short, bounded `work(cancel)` on the short lane and return its result (what a
        person waits for, e.g. one explanation). `work` checks `cancel` between its steps.

        Raises UserError when it fails, or when it does not finish within `timeout_s`: it is
        then cancelled (the time limit also stops it), so the worker is free again."""

        def bound(*, on_progress: Callable[[Progress], None], cancel: threading.Event) -> R:
            return work(cancel)

        task = requester.task(bound, title, kind, lane=Lane.SHORT, max_seconds=timeout_s)
        job: Job[R] = self.submit(task, actor=requester.actor, permission=permission)
        snapshot = job.wait(timeout_s)
        if snapshot.status.active:
            job.cancel()
            raise UserError(f"{title} took longer than {timeout_s:.0f} s; try again")
        if snapshot.status is not JobStatus.DONE:
            raise UserError(snapshot.error or f"{title} was cancelled")
        return snapshot.result  # type: ignore[return-value]

    def cancel(self, job_id: int, *, actor: Actor) -> None:
        """Cancel a job: its owner may, an admin may cancel anyone's."""
        job = self.find(job_id)
        if job is None:
            raise UserError(f"no job {job_id} on this server")
        if job.task.owner != actor.user:
            actor.require(Permission.CANCEL_ANY_JOB)
        job.cancel()

    def find(self, job_id: int) -> Job | None:
        with self._cond:
            for job in (*self._active(), *self._finished):
                if job.id == job_id:
                    return job
        return None

    def place(self, job: Job) -> tuple[int | None, float | None]:
        """(1-based position in its lane's queue, seconds until it should start) while queued;
        the start ETA is known only when every job ahead has an estimate."""
        with self._cond:
            state = self._lanes.get(job.task.lane)
            if state is None or job not in state.waiting:
                return None, None
            ahead = list(state.waiting)[: state.waiting.index(job)]
            running_left = [j.remaining_s() for j in state.running]
            kinds = [j.task.kind for j in ahead]
            return len(ahead) + 1, self._durations.start_eta(running_left, state.workers, kinds)

    def jobs(self, *, seen_by: Actor) -> list[JobInfo]:
        """Queued, running and finished jobs (newest finished last) as `seen_by` may see them:
        everyone sees every job's owner, kind and state (so a queue position makes sense);
        only the owner and admins see its title and error, which may name data."""
        with self._cond:
            listed = [*self._active(), *self._finished]
        return [_as_seen_by(self._info(job), seen_by) for job in listed]

    def shutdown(self, *, timeout: float = 5.0) -> None:
        """Cancel every job, stop the workers and delete the scratch files (tests, and the UI
        when Streamlit drops the cached queue; the scratch also goes at the process's exit)."""
        with self._cond:
            self._closed = True
            jobs = list(self._active())
            self._cond.notify_all()
        for job in jobs:
            job.cancel()
        for thread in self._threads:
            thread.join(timeout)
        self._scratch.remove()

    # -- inside the queue ---------------------------------------------------------------------

    def _active(self) -> list[Job]:
        """Running then queued jobs, lane by lane (call with the lock held)."""
        return [j for s in self._lanes.values() for j in (*s.running, *s.waiting)]

    def _counted_jobs(self, user: str) -> int:
        """`user`'s queued and running heavy jobs (call with the lock held). Short jobs do not
        count: each is bounded by its time limit and waited for by the page that asked."""
        return sum(
            1 for j in self._active() if j.task.owner == user and j.task.lane is not Lane.SHORT
        )

    def _info(self, job: Job) -> JobInfo:
        """The job's row, without copying its progress history (`snapshot` would)."""
        status, error = job.status, job.error
        waited, ran = job.timings()
        task = job.task
        position, eta = self.place(job) if status is JobStatus.QUEUED else (None, None)
        if status is JobStatus.RUNNING:
            eta = job.remaining_s()
        return JobInfo(
            id=job.id, title=task.title, kind=task.kind, owner=task.owner, lane=task.lane,
            status=status, position=position, submitted_at=job.submitted_at, waited_s=waited,
            run_s=ran, eta_s=eta, error=error, cancel_requested=job.cancel_requested,
        )  # fmt: skip

    def _withdraw(self, job: Job) -> None:
        """Take a queued job out of its lane and mark it cancelled (it never ran)."""
        with self._cond:
            state = self._lanes.get(job.task.lane)
            if state is None or job not in state.waiting:
                return
            state.waiting.remove(job)
            self._finished.append(job)
        job._end_stopped(None)

    def _next_job(self, lane: Lane) -> Job | None:
        """The first waiting job of `lane` that may start now (call with the lock held): on the
        short lane, one whose owner runs fewer than `max_short_per_user` short tasks."""
        state = self._lanes[lane]
        for job in state.waiting:
            if lane is not Lane.SHORT or self._running_short(job.task.owner) < (
                self.config.max_short_per_user
            ):
                return job
        return None

    def _running_short(self, user: str) -> int:
        return sum(1 for j in self._lanes[Lane.SHORT].running if j.task.owner == user)

    def _work_lane(self, lane: Lane) -> None:
        if lane is not Lane.SHORT:
            _lower_own_priority(self.config.heavy_nice)
        state = self._lanes[lane]
        while True:
            with self._cond:
                while (job := self._next_job(lane)) is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                state.waiting.remove(job)
                state.running.append(job)
            job.run()
            with self._cond:
                state.running.remove(job)
                self._keep_finished(job)
                self._cond.notify_all()  # a user's next short task may start now

    def _keep_finished(self, job: Job) -> None:
        """List `job` as finished; only the newest KEEP_RESULTS finished jobs keep their result
        (call with the lock held)."""
        self._finished.append(job)
        if job.status is JobStatus.DONE:
            self._durations.record(job.task.kind, job.timings()[1])
        for old in list(self._finished)[:-KEEP_RESULTS]:
            old._drop_result()

    def _monitor(self) -> None:
        """Stop jobs past their time limit and jobs whose session ended (unless they save);
        delete the scratch files of ended sessions."""
        while True:
            with self._cond:
                if self._closed:
                    return
                jobs = list(self._active())
            for job in jobs:
                stop = self._stop_reason(job)
                if stop is not None and not job.cancel_requested:
                    log.info("stopping job %s: %s", job.id, stop[0])
                    job.cancel(reason=stop[0], fails=stop[1])
            self._sweep_scratch()
            with self._cond:  # shutdown() wakes it at once, not after the interval
                if not self._closed:
                    self._cond.wait(MONITOR_INTERVAL_S)

    def _sweep_scratch(self) -> None:
        """Delete the scratch folders of browser sessions that have ended."""
        alive = self._session_alive
        if alive is None:
            return
        with self._cond:
            working = {j.task.session_id for j in self._active()}  # a job may still be writing
        self._scratch.sweep(lambda session: session not in working and not alive(session))

    def _stop_reason(self, job: Job) -> tuple[str, bool] | None:
        """(why, counts as a failure) for a job the queue must stop now, else None."""
        task = job.task
        limit = min(task.max_seconds or self.config.max_job_seconds, self.config.max_job_seconds)
        if job.timings()[1] > limit:
            return f"stopped after {limit:.0f} s, this server's time limit for one job", True
        ended = task.session_id is not None and self._session_alive is not None
        if ended and not task.keep_after_session and not self._session_alive(task.session_id):
            return "cancelled: the browser session that started it has ended", False
        return None


def _as_seen_by(info: JobInfo, actor: Actor) -> JobInfo:
    if info.owner == actor.user or actor.can(Permission.CANCEL_ANY_JOB):
        return info
    return dataclasses.replace(info, title=f"{info.kind} job", error=None)


def _lower_own_priority(nice: int) -> None:
    """Give the calling thread (and the torch threads it starts) a lower CPU priority.

    Linux keeps a nice value per thread, and threads inherit it from the thread that creates
    them, so interactive work in other threads wins the cores while a training runs. Elsewhere
    this is a no-op."""
    if nice <= 0 or not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError as exc:  # e.g. a sandbox that forbids it: run at normal priority
        log.warning("could not lower the job worker's priority: %s", exc)
