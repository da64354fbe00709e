"""Run long work (training, audits) in a worker thread that reports progress and can be cancelled.

The worker never touches the UI: it calls `on_progress` with a typed progress value and checks a
`threading.Event`. A page polls `snapshot()` from a fragment. Nothing here imports streamlit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

P = TypeVar("P")  # progress value type
R = TypeVar("R")  # result type

# Keep the progress history bounded: curves need hundreds of points, not every step of a long run.
MAX_HISTORY = 2000


class JobStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class JobSnapshot(Generic[P, R]):
    """A consistent view of a job at one moment."""

    status: JobStatus
    latest: P | None
    history: tuple[P, ...]
    result: R | None
    error: str | None
    elapsed_s: float


def eta_seconds(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left if the rest goes at the average rate so far; None before any rate is known."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    return (total - done) / rate if rate > 0 else None


class BackgroundJob(Generic[P, R]):
    """`work(on_progress=..., cancel=...)` run once in a daemon thread.

    `work` receives two keyword arguments, `on_progress` (call it with a progress value) and
    `cancel` (a threading.Event to check). Its return value becomes the result; a ValueError
    becomes a one-line error; a result whose `cancelled` attribute is true counts as cancelled.
    """

    def __init__(self, work: Callable[..., R], *, name: str = "job") -> None:
        self._work = work
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._history: list[P] = []
        self._result: R | None = None
        self._error: str | None = None
        self._status = JobStatus.RUNNING
        self._started = time.monotonic()
        self._finished: float | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> BackgroundJob[P, R]:
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the work to stop at its next check."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> JobSnapshot[P, R]:
        """Block until the work ends (or `timeout` passes); return the snapshot."""
        self._thread.join(timeout)
        return self.snapshot()

    def snapshot(self) -> JobSnapshot[P, R]:
        with self._lock:
            end = self._finished if self._finished is not None else time.monotonic()
            return JobSnapshot(
                status=self._status,
                latest=self._history[-1] if self._history else None,
                history=tuple(self._history),
                result=self._result,
                error=self._error,
                elapsed_s=end - self._started,
            )

    def _on_progress(self, value: P) -> None:
        with self._lock:
            self._history.append(value)
            if len(self._history) > MAX_HISTORY:
                del self._history[1:-1:2]  # thin evenly, keep first and last

    def _run(self) -> None:
        try:
            result = self._work(on_progress=self._on_progress, cancel=self._cancel)
        except ValueError as exc:
            self._finish(JobStatus.FAILED, error=" ".join(str(exc).split()))
        except Exception as exc:  # a worker must always end in a state the page can show
            log.exception("background job %r failed", self._thread.name)
            self._finish(JobStatus.FAILED, error=f"unexpected {type(exc).__name__}: {exc}")
        else:
            cancelled = bool(getattr(result, "cancelled", False)) or self._cancel.is_set()
            self._finish(JobStatus.CANCELLED if cancelled else JobStatus.DONE, result=result)

    def _finish(self, status: JobStatus, *, result: Any = None, error: str | None = None) -> None:
        with self._lock:
            self._status, self._result, self._error = status, result, error
            self._finished = time.monotonic()


def start_job(work: Callable[..., R], /, *args: Any, name: str, **kwargs: Any) -> BackgroundJob:
    """Run `work(*args, **kwargs, on_progress=..., cancel=...)` in a started `BackgroundJob`."""

    def bound(*, on_progress: Callable[[Any], None], cancel: threading.Event) -> R:
        return work(*args, **kwargs, on_progress=on_progress, cancel=cancel)

    return BackgroundJob(bound, name=name).start()
