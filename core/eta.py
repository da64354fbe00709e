"""How long queued work will take: seconds left for a running job at its current phase's rate,
and when a queued job should start, from what runs ahead of it and how long jobs of each kind
typically took. Pure bookkeeping over `Progress` values and clocks; the queue holds the locks."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from core.progress import Progress

RECENT_RUNS = 20  # run times kept per kind of job: recent enough to follow a server's load


def eta_seconds(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left if the rest goes at the average rate so far; None before any rate is known."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    return max(total - done, 0.0) / rate if rate > 0 else None


class PhaseClock:
    """When a running job's current phase began and how much was done then: each phase
    ("embed", "train") has a rate of its own, so a slow load never skews a fast loop's ETA."""

    def __init__(self) -> None:
        self._start: tuple[str, float, float] | None = None  # (phase, at, done then)

    def report(self, value: Progress, *, started: float | None) -> None:
        """Note `value`; a new phase restarts the clock (`started`: when the job began)."""
        if self._start is not None and self._start[0] == value.phase:
            return
        # Count a phase from its first report, or from the job's start when the job's first
        # report already counts work done.
        first = self._start is None and started is not None
        at = started if first else time.monotonic()
        self._start = (value.phase, at, 0.0 if first else value.done)  # type: ignore[assignment]

    def remaining_s(self, latest: Progress) -> float | None:
        """Seconds left after `latest` at the current phase's average rate; None before any."""
        if self._start is None:
            return None
        _, since, done_then = self._start
        return eta_seconds(latest.done - done_then, latest.total - done_then,
                           time.monotonic() - since)  # fmt: skip


class TypicalDurations:
    """Recent run times of finished jobs by kind ("train", "classify"): what a queued job of a
    kind is expected to take, and so when the jobs behind it should start."""

    def __init__(self) -> None:
        self._runs: dict[str, deque[float]] = {}

    def record(self, kind: str, seconds: float) -> None:
        self._runs.setdefault(kind, deque(maxlen=RECENT_RUNS)).append(seconds)

    def typical_s(self, kind: str) -> float | None:
        """Mean recent run time of `kind`; None before one has finished."""
        runs = self._runs.get(kind)
        return sum(runs) / len(runs) if runs else None

    def start_eta(
        self, running_left: Sequence[float | None], workers: int, ahead: Sequence[str]
    ) -> float | None:
        """Seconds until a queued job starts: simulate its lane, where each job ahead (by kind)
        takes its typical time on the first free of `workers`, busy for `running_left` seconds
        more. None when any of those times is unknown."""
        if any(t is None for t in running_left):
            return None
        slots = sorted([*running_left, *[0.0] * (workers - len(running_left))])  # type: ignore[list-item]
        for kind in ahead:
            typical = self.typical_s(kind)
            if typical is None:
                return None
            slots[0] += typical
            slots.sort()
        return slots[0]
