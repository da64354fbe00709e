"""What every benchmark records about the machine it ran on: the load average before and after, and
the CPU's fp32 matrix-multiply peak, so a figure can be read as a share of what the cores can do.

A figure measured while other work ran is not a figure (one MiniLM training step took 0.7 s
alone and 7 s beside another process on 2 cores). `LoadGuard` waits a while for the machine to
go quiet, records the load before and after, and says in the report whether the run counts.

    guard = LoadGuard.start(force=args.force)   # waits for quiet; warns when it never came
    if refuse_busy_start(guard):                 # still busy and no --force: measure nothing
        return 1
    ...                                          # the measurements (held_output() holds prints)
    load = guard.finish()
    if shows_figures(load):                      # a quiet run, or a busy one under --force
        ...                                      # print the figures, machine_load in any JSON
    print_load(load)                             # load before/after, whether it counts, warning

A bench that starts processes it does not wait for while measuring (a server, Ray) passes
`descendants=True`, so their CPU time is its own rather than "other processes'".
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shlex
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

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


def _proc_stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, CPU ticks of the process and its reaped children) from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # it ended while we looked: its time went to whoever reaped it
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
    return int(fields[1]), sum(int(x) for x in fields[11:15])  # utime stime cutime cstime


def descendant_seconds() -> float:
    """CPU seconds of the live processes this one started, at any depth (a server, Ray's
    daemons and the workers they start), each with its own reaped children.

    Together with `own_seconds` this counts every process of a bench's tree: one that ends is
    reaped by this process (children times) or by another of the tree (its cutime). A process
    orphaned to init leaves the tree and its time counts as someone else's (conservative).
    """
    children: dict[int, list[int]] = defaultdict(list)
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        stat = _proc_stat(entry.name) if entry.name.isdigit() else None
        if stat is not None:
            children[stat[0]].append(int(entry.name))
            ticks[int(entry.name)] = stat[1]
    total, queue = 0, list(children[os.getpid()])
    while queue:
        pid = queue.pop()
        total += ticks[pid]
        queue.extend(children[pid])
    return total / os.sysconf("SC_CLK_TCK")


def command_line(module: str) -> str:
    """The exact command that ran this bench, ready to paste."""
    return shlex.join([sys.executable, "-m", module, *sys.argv[1:]])


def machine() -> dict[str, object]:
    """The machine a benchmark ran on: CPU model, the flags that matter (AVX2 or AVX-512 fp32;
    bf16 only with AMX or AVX512-BF16), cores, Python."""
    flags: list[str] = []
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "sse4_2")
                flags = [f for f in line.split(":", 1)[1].split() if f in wanted]
                break
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": model or "unknown",
        "cores": os.cpu_count(),
        "cpu_flags": flags,
        "python": platform.python_version(),
    }


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
    # True: the processes this one started (a server, Ray's workers) count as its own work,
    # not as other processes'.
    descendants: bool = False

    @property
    def quiet(self) -> bool:
        return self.before[0] <= self.limit and self.other_cores <= cores() * QUIET_SHARE

    def line(self) -> str:
        verdict = "quiet" if self.quiet else "BUSY: these figures do not count"
        others = (
            "processes other than the bench and those it started"
            if self.descendants
            else "other processes"
        )
        return (
            f"load average before {self.before[0]:.2f} {self.before[1]:.2f} {self.before[2]:.2f}, "
            f"after {self.after[0]:.2f} {self.after[1]:.2f} {self.after[2]:.2f}; {others} "
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
    descendants: bool = False  # count the processes this one starts as its own work

    @classmethod
    def start(
        cls, *, force: bool = False, max_wait_s: float = 300.0, descendants: bool = False
    ) -> LoadGuard:
        """Wait for a quiet machine (unless `force`), then record the load before.

        `descendants`: the bench starts processes that it does not wait for while it measures
        (a server, Ray's daemons and workers); their CPU time is the bench's, not others'.
        """
        load = os.getloadavg()[0] if force else wait_for_quiet(max_wait_s)
        if load > quiet_limit():
            print(
                f"warning: load average {load:.2f} on {cores()} cores (quiet is under "
                f"{quiet_limit():.2f}): other work is running, so these figures will not count",
                file=sys.stderr,
            )
        own = own_seconds() + (descendant_seconds() if descendants else 0.0)
        return cls(os.getloadavg(), force, (time.monotonic(), busy_seconds(), own), descendants)

    @property
    def busy_before(self) -> bool:
        """Whether the machine was still busy when the bench started."""
        return self.before[0] > quiet_limit()

    def finish(self) -> MachineLoad:
        at, busy, own = self.started
        seconds = max(time.monotonic() - at, 1e-9)
        now = own_seconds() + (descendant_seconds() if self.descendants else 0.0)
        others = max((busy_seconds() - busy) - (now - own), 0.0) / seconds
        load = MachineLoad(
            self.before, os.getloadavg(), quiet_limit(), round(others, 3), seconds, self.forced,
            self.descendants,
        )  # fmt: skip
        if not load.quiet:
            print(f"warning: {load.line()}", file=sys.stderr)
        return load


def refuse_busy_start(guard: LoadGuard) -> bool:
    """True, after saying why on stderr, when the machine stayed busy through the wait and
    --force was not given: the bench then measures nothing (exit 1)."""
    if guard.forced or not guard.busy_before:
        return False
    print(
        f"error: load average {guard.before[0]:.2f} on {cores()} cores stayed above "
        f"{quiet_limit():.2f}; not measuring. Rerun on a quiet machine, or pass --force to "
        "measure anyway (the figures are then marked busy and do not count).",
        file=sys.stderr,
    )
    return True


def shows_figures(load: MachineLoad) -> bool:
    """Whether a bench prints its figures: after a quiet run, or a busy one under --force
    (then marked as not counting by `print_load`). A busy run without --force withholds them."""
    return load.quiet or load.forced


def print_load(load: MachineLoad, *, file=None) -> None:
    """The load line (stdout unless `file`); after a busy run, the warning that says the figures
    were withheld, or, under --force, that those printed do not count."""
    print(load.line(), file=file)
    if load.quiet:
        return
    if load.forced:
        warning = "the figures above were measured on a busy machine and do not count"
    else:
        warning = "figures withheld: the machine was busy (rerun when quiet, or pass --force)"
    print(f"warning: {warning}", file=sys.stderr)


@contextlib.contextmanager
def held_output() -> Iterator[io.StringIO]:
    """What a bench prints on stdout while it measures, held back: shown afterwards only if the
    run counts (`shows_figures`), so figures of a busy run never appear as results. Warnings
    and progress on stderr still go out as they happen."""
    held = io.StringIO()
    with contextlib.redirect_stdout(held):
        yield held


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
