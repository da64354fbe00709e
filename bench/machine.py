"""What every benchmark records about the machine it ran on: the load average before and after, and
the CPU's fp32 matrix-multiply peak, so a figure can be read as a share of what the cores can do.

A figure measured while other work ran is not a figure (one MiniLM training step took 0.7 s
alone and 7 s beside another process on 2 cores). `LoadGuard` waits a while for the machine to
go quiet, records the load before and after, and says in the report whether the run counts.

    guard = LoadGuard.start(force=args.force)   # waits for quiet; warns when it never came
    ...                                          # the measurements
    print(guard.finish().line())                 # load before/after and whether it counts
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass

# A 1-minute load above a quarter of the cores means someone else is computing: on 2 cores 0.5.
QUIET_SHARE = 0.25


def cores() -> int:
    return os.cpu_count() or 1


def quiet_limit() -> float:
    return cores() * QUIET_SHARE


def wait_for_quiet(max_wait_s: float) -> float:
    """Wait (up to `max_wait_s`) until the 1-minute load is under `quiet_limit()`; the load."""
    deadline = time.monotonic() + max_wait_s
    while os.getloadavg()[0] > quiet_limit() and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def busy_seconds() -> float:
    """CPU seconds every process on the machine has used since boot (all cores, /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass(frozen=True)
class MachineLoad:
    """Load averages (1, 5, 15 min) around a measurement, the cores other processes used during
    it, and whether it counts: quiet before, and others used at most a quarter of the cores."""

    before: tuple[float, float, float]
    after: tuple[float, float, float]
    limit: float
    other_cores: float  # average cores busy with work not of this process during the run
    seconds: float
    forced: bool = False

    @property
    def quiet(self) -> bool:
        return self.before[0] <= self.limit and self.other_cores <= cores() * QUIET_SHARE

    def line(self) -> str:
        verdict = "quiet" if self.quiet else "BUSY: these figures do not count"
        return (
            f"load average before {self.before[0]:.2f} {self.before[1]:.2f} {self.before[2]:.2f}, "
            f"after {self.after[0]:.2f} {self.after[1]:.2f} {self.after[2]:.2f}; other processes "
            f"used {self.other_cores:.2f} of {cores()} cores over {self.seconds:.0f} s: {verdict}"
        )

    def to_json(self) -> dict:
        return {**asdict(self), "quiet": self.quiet, "cores": cores()}


@dataclass
class LoadGuard:
    """Records the load around a benchmark; refuses to call a busy run a result."""

    before: tuple[float, float, float]
    forced: bool
    started: tuple[float, float, float]  # (monotonic, busy_seconds, own_seconds)

    @classmethod
    def start(cls, *, force: bool = False, max_wait_s: float = 300.0) -> LoadGuard:
        """Wait for a quiet machine (unless `force`), then record the load before."""
        load = os.getloadavg()[0] if force else wait_for_quiet(max_wait_s)
        if load > quiet_limit():
            print(
                f"warning: load average {load:.2f} on {cores()} cores (quiet is under "
                f"{quiet_limit():.2f}): other work is running, so these figures will not count",
                file=sys.stderr,
            )
        return cls(os.getloadavg(), force, (time.monotonic(), busy_seconds(), own_seconds()))

    def finish(self) -> MachineLoad:
        at, busy, own = self.started
        seconds = max(time.monotonic() - at, 1e-9)
        others = max((busy_seconds() - busy) - (own_seconds() - own), 0.0) / seconds
        load = MachineLoad(
            self.before, os.getloadavg(), quiet_limit(), round(others, 3), seconds, self.forced
        )
        if not load.quiet:
            print(f"warning: {load.line()}", file=sys.stderr)
        return load


def matmul_peak_gflops(size: int = 1024, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of square matrix products in torch with its current thread count: the
    ceiling a dense model's throughput is read against (a share of it, not an absolute)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm-up: the first call picks kernels
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        torch.mm(a, b)
        calls += 1
    return 2 * size**3 * calls / (time.perf_counter() - started) / 1e9
