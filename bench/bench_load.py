"""Team-server load test: eight simulated reviewers (Streamlit protocol clients, loopback only)
click through Data, Classify, Explain and Triage with no training running (the named baseline),
then while one training runs in the same server; the training is also timed alone.

    .venv/bin/python -m bench.bench_load [--sessions 8] [--idle-s 90] [--loaded-max-s 300]
        [--backbone minilm|tiny] [--train-rows 1500] [--epochs 2] [--max-steps 100]
        [--model models/NAME] [--phases idle alone loaded] [--json-out FILE] [--force]

Size the training first (`--phases alone`: warm-up and the training alone, 60-120 s wanted);
its duration scales with --max-steps.

Everything lives in a temporary folder: a server (`python -m ui.launch` on a free loopback port
with its own data and models folders), a model for the reviewers (trained with the project's CLI
unless --model), and a triage queue of that model's unsure predictions. Both phases with
reviewers and both trainings run after a warm-up (model loaded, one training done), so the
ratios are warm against warm. Interaction time: from sending the BackMsg to script_finished
with the expected element on screen. Goals (the issue's): p95 at most 2x idle, no interaction
over 5 s, the training at most 10% longer than alone. Refuses to report when the machine was
busy (load before a phase above cores/4 plus the bench's own decaying load, or other processes
using more than cores/4 during a phase) unless --force, which marks every figure as busy.
The whole run is also recorded by bench.machine's load guard, the server, the CLI training and
their children counted as the bench's own work (`machine_load` in the JSON, the load line at
the end); a busy start is refused, and a run that was busy overall does not count either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from bench.load_flows import (
    SETUP,
    Analyst,
    Recorder,
    Reviewer,
    StepRecord,
    TextSource,
    TrainingOutcome,
    TrainSettings,
)
from bench.machine import LoadGuard, command_line, machine, print_load, refuse_busy_start
from bench.streamlit_client import RunResult
from core.access import OPERATOR
from core.data.demo import DemoConfig, generate_demo_data
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.store import DB_NAME, Store
from core.review.triage import enqueue_uncertain, triage_batch_id

ROOT = Path(__file__).resolve().parent.parent
MODEL_NAME = "loadbench"  # letters only: shown unescaped in the Train page's caption
GOAL_P95_RATIO = 2.0
GOAL_MAX_S = 5.0
GOAL_TRAIN_RATIO = 1.10
SERVER_START_S = 120


@dataclass(frozen=True)
class LoadConfig:
    """The command line, checked."""

    sessions: int
    idle_s: float
    loaded_max_s: float  # the loaded phase ends when the training ends, or after this
    train_timeout_s: float
    step_timeout_s: float  # an interaction slower than this is a failure (and a lost session)
    think_s: tuple[float, float]  # pause between interactions, uniform in this range
    backbone: str
    train_rows: int  # rows uploaded for the timed training; 0: the built-in demo data (3000)
    epochs: int
    max_steps: int
    batch_size: int
    model: Path | None  # a saved model folder for the reviewers; None: train one
    model_rows: int
    model_steps: int
    triage_items: int
    settle_s: float
    settle_max_s: float
    seed: int
    json_out: Path | None
    work_dir: Path | None
    force: bool
    phases: tuple[str, ...]  # of "idle", "alone", "loaded"; "alone" only: calibrate the training


def parse_args() -> LoadConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=8, help="simulated reviewers (1..16)")
    p.add_argument("--idle-s", type=float, default=90, help="length of the idle phase")
    p.add_argument("--loaded-max-s", type=float, default=300, help="longest loaded phase")
    p.add_argument("--train-timeout-s", type=float, default=900)
    p.add_argument("--step-timeout-s", type=float, default=30)
    p.add_argument("--think-s", type=float, nargs=2, default=(1.0, 3.0), metavar=("MIN", "MAX"))
    p.add_argument("--backbone", choices=("minilm", "tiny"), default="minilm")
    p.add_argument("--train-rows", type=int, default=1500, help="0: the built-in demo data")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=100, help="0: no limit")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--model", type=Path, help="a saved model folder for the reviewers")
    p.add_argument("--model-rows", type=int, default=600, help="rows to train that model on")
    p.add_argument("--model-steps", type=int, default=20, help="steps to train that model")
    p.add_argument("--triage-items", type=int, default=400)
    p.add_argument("--settle-s", type=float, default=20, help="pause before each phase")
    p.add_argument("--settle-max-s", type=float, default=120, help="longest wait for quiet")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", type=Path)
    p.add_argument("--work-dir", type=Path, help="a new folder to work in, kept afterwards")
    p.add_argument("--force", action="store_true", help="report even on a busy machine")
    p.add_argument(
        "--phases", nargs="+", choices=("idle", "alone", "loaded"),
        default=["idle", "alone", "loaded"],
        help="run only these (e.g. 'alone' to size --max-steps for 60-120 s)",
    )  # fmt: skip
    a = p.parse_args()
    if not 1 <= a.sessions <= 16:
        p.error("--sessions must lie in 1..16 (bounded: this is one machine's loopback)")
    if not 0 < a.think_s[0] <= a.think_s[1]:
        p.error("--think-s needs 0 < MIN <= MAX")
    if a.train_rows and a.train_rows < 50:
        p.error("--train-rows needs at least 50 rows (or 0 for the demo data)")
    if a.model is not None and not (a.model / "card.json").is_file():
        p.error(f"--model {a.model} is not a saved model folder (no card.json)")
    if a.work_dir is not None and a.work_dir.exists():
        p.error(f"--work-dir {a.work_dir} exists; give a new folder")
    return LoadConfig(
        a.sessions, a.idle_s, a.loaded_max_s, a.train_timeout_s, a.step_timeout_s,
        tuple(a.think_s), a.backbone, a.train_rows, a.epochs, a.max_steps, a.batch_size, a.model,
        a.model_rows, a.model_steps, a.triage_items, a.settle_s, a.settle_max_s, a.seed,
        a.json_out, a.work_dir, a.force, tuple(a.phases),
    )  # fmt: skip


# ------------------------------------------------------------------------------- the setup


@dataclass(frozen=True)
class Folders:
    root: Path
    data: Path  # the server's GRIEVANCE_LENS_DATA_DIR (its review store)
    models: Path  # the server's GRIEVANCE_LENS_MODELS_DIR

    @classmethod
    def under(cls, root: Path) -> Folders:
        folders = cls(root, root / "data", root / "models")
        folders.data.mkdir(parents=True)
        folders.models.mkdir()
        return folders


def run_cli(*args: str, log: Path) -> None:
    """`python -m core ARGS` in a child process (the bench process never imports torch)."""
    with log.open("a") as out:
        subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, stdout=out,
                       stderr=subprocess.STDOUT, check=True)  # fmt: skip


def build_model(folders: Folders, config: LoadConfig) -> None:
    """The reviewers' model at models/loadbench: a copy of --model, or a short CLI training."""
    target = folders.models / MODEL_NAME
    if config.model is not None:
        shutil.copytree(config.model, target)
        return
    demo = folders.root / "model-data.csv"
    generate_demo_data(DemoConfig(rows=config.model_rows, seed=7)).to_csv(demo, index=False)
    run_cli("train", str(demo), "--out", str(target), "--backbone", config.backbone,
            "--epochs", "1", "--max-steps", str(config.model_steps),
            log=folders.root / "setup.log")  # fmt: skip


@dataclass(frozen=True)
class QueuedPrediction:
    """A classified row as the triage queue needs it (core.review.triage.RoutedPrediction)."""

    label: str
    confidence: float
    probabilities: dict[str, float]


def fill_triage_queue(folders: Folders, config: LoadConfig) -> int:
    """Classify demo complaints with the CLI and queue them as the Classify page does (every
    prediction below confidence 1.0, i.e. all), before the server starts."""
    source = folders.root / "triage.csv"
    demo = generate_demo_data(DemoConfig(rows=max(config.triage_items, 50), seed=8))
    frame = demo[["text", "desk"]].head(config.triage_items)
    frame.to_csv(source, index=False)
    out = folders.root / "triage_classified.csv"
    run_cli("classify", "--model", str(folders.models / MODEL_NAME), str(source), "--out",
            str(out), log=folders.root / "setup.log")  # fmt: skip
    result = pd.read_csv(out)
    probs = [c for c in result.columns if c.startswith("prob_")]
    predictions = [
        QueuedPrediction(str(row["predicted_label"]), float(row["confidence"]),
                         {c[len("prob_"):]: float(row[c]) for c in probs})
        for _, row in result.iterrows()
    ]  # fmt: skip
    texts = result["text"].astype(str).tolist()
    with Store.open(folders.data / DB_NAME) as store:
        added = enqueue_uncertain(
            store, texts, predictions, actor=OPERATOR, threshold=1.0,
            batch=triage_batch_id("load-bench.csv", texts), rows=range(2, len(texts) + 2),
        )  # fmt: skip
    return len(added)


def training_upload(config: LoadConfig) -> tuple[str, bytes] | None:
    """The file the analyst uploads: `train_rows` demo complaints as CSV (None: demo button)."""
    if not config.train_rows:
        return None
    frame = generate_demo_data(DemoConfig(rows=config.train_rows, seed=9))
    return "training.csv", frame.to_csv(index=False).encode("utf-8")


def text_pools(config: LoadConfig) -> dict[str, TextSource]:
    """Disjoint complaints of 25-50 words (like for like) for warm-up, idle and loaded."""
    demo = generate_demo_data(DemoConfig(rows=8000, seed=10 + config.seed))
    texts = [t for t in dict.fromkeys(demo["text"]) if 25 <= len(t.split()) <= 50]
    random.Random(config.seed).shuffle(texts)
    third = len(texts) // 3
    return {name: TextSource(texts[i * third : (i + 1) * third])
            for i, name in enumerate(("warm-up", "idle", "loaded"))}  # fmt: skip


class Server:
    """`python -m ui.launch` on a free loopback port, on the bench's folders; production
    settings otherwise (torch picks its own thread count, as with `make run`)."""

    def __init__(self, folders: Folders) -> None:
        env = {**os.environ, DATA_DIR_ENV: str(folders.data), MODELS_DIR_ENV: str(folders.models),
               "PYTHONUNBUFFERED": "1"}  # fmt: skip
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folders.root / "server.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ui.launch", "--server.port", str(self.port),
                 "--server.address", "127.0.0.1"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited early; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)  # polling a server that is still starting
        raise RuntimeError(f"the server did not answer within {SERVER_START_S} s; see {self.log}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=20)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------- machine and load


@dataclass(frozen=True)
class CpuSnapshot:
    at: float
    busy: int  # jiffies the whole machine was busy
    server: int  # jiffies of the server process (and its reaped children: upload readers)
    bench: int  # jiffies of this process (the protocol clients)


def _jiffies(pid: int | str) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])  # utime stime cutime cstime


def cpu_snapshot(server_pid: int) -> CpuSnapshot:
    line = Path("/proc/stat").read_text().split("\n", 1)[0]
    values = [int(x) for x in line.split()[1:9]]  # user .. steal (guest time is in user)
    busy = sum(values) - values[3] - values[4]  # all but idle and iowait
    return CpuSnapshot(time.monotonic(), busy, _jiffies(server_pid), _jiffies("self"))


@dataclass(frozen=True)
class CpuShare:
    """Average cores used over a phase: by the server, by the bench's clients, by the rest."""

    server: float
    bench: float
    others: float


def cpu_share(start: CpuSnapshot, end: CpuSnapshot) -> CpuShare:
    ticks = os.sysconf("SC_CLK_TCK") * max(end.at - start.at, 1e-9)
    server, bench = (end.server - start.server) / ticks, (end.bench - start.bench) / ticks
    others = (end.busy - start.busy) / ticks - server - bench
    return CpuShare(round(server, 3), round(bench, 3), round(max(others, 0.0), 3))


@dataclass
class LoadWatch:
    """The 1-minute load average the bench itself explains: what it last measured after its
    own work, decaying as the kernel's average does (e^(-t/60)); anything above that plus
    cores/4 is someone else's."""

    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    mark: tuple[float, float] = (0.0, 0.0)  # (monotonic time, load) after the bench's last work

    def note_own_work(self) -> None:
        self.mark = (time.monotonic(), os.getloadavg()[0])

    def limit(self) -> float:
        at, load = self.mark
        return self.cores / 4 + load * math.exp(-(time.monotonic() - at) / 60)

    async def settle(self, pause_s: float, max_s: float) -> tuple[float, float, bool]:
        """Pause, then wait (up to max_s) until the load is explained; (load, limit, quiet)."""
        await asyncio.sleep(pause_s)
        deadline = time.monotonic() + max_s
        while os.getloadavg()[0] > self.limit() and time.monotonic() < deadline:
            await asyncio.sleep(5)
        load, limit = os.getloadavg()[0], self.limit()
        return load, limit, load <= limit


@dataclass
class Phase:
    name: str
    load_before: tuple[float, float, float]
    load_limit: float
    quiet_before: bool
    seconds: float = 0.0
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cpu: CpuShare | None = None
    note: str = ""

    @property
    def valid(self) -> bool:
        cores = os.cpu_count() or 1
        return self.quiet_before and self.cpu is not None and self.cpu.others <= cores / 4


class PhaseClock:
    """Measures a phase: load average before and after, and who used the CPU during it."""

    def __init__(self, watch: LoadWatch, server: Server) -> None:
        self.watch, self.server = watch, server

    async def begin(self, name: str, config: LoadConfig) -> tuple[Phase, CpuSnapshot]:
        load, limit, quiet = await self.watch.settle(config.settle_s, config.settle_max_s)
        if not quiet:
            print(f"warning: before {name}: load {load:.2f} above {limit:.2f}", file=sys.stderr)
        phase = Phase(name, os.getloadavg(), round(limit, 2), quiet)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: load before {load:.2f} (limit {limit:.2f})")
        return phase, cpu_snapshot(self.server.process.pid)

    def end(self, phase: Phase, start: CpuSnapshot) -> Phase:
        end = cpu_snapshot(self.server.process.pid)
        phase.seconds = round(end.at - start.at, 1)
        phase.cpu, phase.load_after = cpu_share(start, end), os.getloadavg()
        self.watch.note_own_work()
        print(f"[{time.strftime('%H:%M:%S')}] {name_line(phase)}")
        return phase


def name_line(phase: Phase) -> str:
    cpu = phase.cpu
    return (
        f"{phase.name}: {phase.seconds:.0f} s, load after {phase.load_after[0]:.2f}; cores used: "
        f"server {cpu.server:.2f}, clients {cpu.bench:.3f}, others {cpu.others:.2f}"
    )


# ------------------------------------------------------------------------------ the phases


@dataclass(frozen=True)
class Training:
    analyst: Analyst
    page: RunResult  # the Train page, its form filled in by `Analyst.start`
    settings: TrainSettings


@dataclass
class Bench:
    config: LoadConfig
    server: Server
    folders: Folders
    pools: dict[str, TextSource]
    upload: tuple[str, bytes] | None
    steps: list[StepRecord] = field(default_factory=list)
    ignored_finishes: dict[str, int] = field(default_factory=dict)  # per phase (diagnostics)

    def reviewer(self, recorder: Recorder, stop: asyncio.Event, index: int) -> Reviewer:
        """Reviewer `index`: its own seeded pauses and its own share of the triage queue (the
        warm-up's reviewer has index `sessions`)."""
        c = self.config
        return Reviewer(
            self.server.url, index, recorder, timeout=c.step_timeout_s, stop=stop,
            model=MODEL_NAME, texts=self.pools[recorder.phase],
            rng=random.Random(f"{c.seed}-{recorder.phase}-{index}"), think_s=c.think_s,
            item_slots=c.sessions + 1,
        )  # fmt: skip

    def settings(self, *, max_steps: int | None = None) -> TrainSettings:
        c = self.config
        steps = c.max_steps if max_steps is None else max_steps
        return TrainSettings(c.backbone, c.epochs, steps, c.batch_size)

    async def reviewers_for(self, phase: str, stop: asyncio.Event, limit_s: float) -> bool:
        """`sessions` reviewers until `stop` is set or `limit_s` has passed (then True)."""
        recorder = Recorder(phase)
        users = [self.reviewer(recorder, stop, i) for i in range(self.config.sessions)]
        tasks = [asyncio.create_task(user.run()) for user in users]
        cut = False
        try:
            await asyncio.wait_for(stop.wait(), limit_s)
        except TimeoutError:
            cut = True
            stop.set()
        await asyncio.gather(*tasks)
        self.steps += recorder.steps
        self.ignored_finishes[phase] = recorder.ignored_finishes
        return cut

    async def analyst(self, phase: str, settings: TrainSettings) -> Training:
        """An analyst with the training data loaded and the Train page open (not started)."""
        recorder = Recorder(f"{phase} (analyst)")  # apart from the reviewers' steps
        analyst = Analyst(self.server.url, 0, recorder, timeout=self.config.step_timeout_s)
        await analyst.load_data(self.upload)
        return Training(analyst, await analyst.prepare(settings), settings)

    async def train(
        self, training: Training, save_as: str, ended: asyncio.Event | None = None
    ) -> TrainingOutcome:
        """Start the prepared training and watch it to its end (`ended` is set then)."""
        analyst = training.analyst
        started = await analyst.start(training.page, training.settings, save_as=save_as)
        outcome = await analyst.watch(
            started, timeout_s=self.config.train_timeout_s, models=self.folders.models,
            save_as=save_as, ended=ended,
        )  # fmt: skip
        await analyst.close()
        self.steps += analyst.recorder.steps
        return outcome

    async def warm_up(self) -> None:
        """One reviewer's full round and one short training, so both phases start warm."""
        recorder = Recorder("warm-up")
        reviewer = self.reviewer(recorder, asyncio.Event(), self.config.sessions)
        await reviewer.start()
        for flow in (reviewer.classify, reviewer.explain, reviewer.triage, reviewer.data):
            await flow()
        await reviewer.close()
        self.steps += recorder.steps
        outcome = await self.train(
            await self.analyst("warm-up", self.settings(max_steps=2)), "warmup"
        )
        if outcome.status != "done":
            raise RuntimeError(f"the warm-up training did not finish: {outcome}")


async def run_phases(
    bench: Bench, watch: LoadWatch
) -> tuple[list[Phase], dict[str, TrainingOutcome]]:
    """Warm up, then the chosen phases in order: idle, training alone, loaded."""
    clock = PhaseClock(watch, bench.server)
    print(f"[{time.strftime('%H:%M:%S')}] warming up (one reviewer round, one 2-step training)")
    await bench.warm_up()
    watch.note_own_work()
    phases, trainings = [], {}
    if "idle" in bench.config.phases:
        phases.append(await idle_phase(bench, clock))
    if "alone" in bench.config.phases:
        phase, trainings["alone"] = await alone_phase(bench, clock)
        phases.append(phase)
    if "loaded" in bench.config.phases:
        phase, trainings["loaded"] = await loaded_phase(bench, clock)
        phases.append(phase)
    return phases, trainings


async def idle_phase(bench: Bench, clock: PhaseClock) -> Phase:
    """The baseline: the reviewers for --idle-s, no training."""
    phase, start = await clock.begin("idle", bench.config)
    await bench.reviewers_for("idle", asyncio.Event(), bench.config.idle_s)
    return clock.end(phase, start)


async def alone_phase(bench: Bench, clock: PhaseClock) -> tuple[Phase, TrainingOutcome]:
    """The training's baseline: one training, nobody else on the server."""
    training = await bench.analyst("training alone", bench.settings())
    phase, start = await clock.begin("training alone", bench.config)
    outcome = await bench.train(training, "alone")
    return clock.end(phase, start), outcome


async def loaded_phase(bench: Bench, clock: PhaseClock) -> tuple[Phase, TrainingOutcome]:
    """The same training again, with the reviewers until it ends (or --loaded-max-s)."""
    training = await bench.analyst("loaded", bench.settings())
    phase, start = await clock.begin("loaded", bench.config)
    stop = asyncio.Event()  # set when the training ends: the reviewers start nothing after it
    limit = bench.config.loaded_max_s
    reviewers = asyncio.create_task(bench.reviewers_for("loaded", stop, limit))
    try:
        outcome = await bench.train(training, "loaded", ended=stop)
    finally:
        stop.set()
        cut = await reviewers
    phase = clock.end(phase, start)
    if cut:
        phase.note = "the reviewers stopped at --loaded-max-s, before the training ended"
    return phase, outcome


# ------------------------------------------------------------------------------- reporting


@dataclass(frozen=True)
class Summary:
    n: int
    failures: int
    p50: float | None
    p95: float | None
    max: float | None


def summarize(steps: list[StepRecord]) -> Summary:
    ok = sorted(s.seconds for s in steps if s.ok)
    if not ok:
        return Summary(0, len(steps), None, None, None)
    p95 = statistics.quantiles(ok, n=20, method="inclusive")[-1] if len(ok) > 1 else ok[0]
    return Summary(len(ok), len(steps) - len(ok), round(statistics.median(ok), 3), round(p95, 3),
                   round(ok[-1], 3))  # fmt: skip


def interaction_table(steps: list[StepRecord]) -> dict[str, dict[str, Summary]]:
    names = sorted({s.name for s in steps if s.phase in ("idle", "loaded")})
    return {
        name: {phase: summarize([s for s in steps if s.phase == phase and s.name == name])
               for phase in ("idle", "loaded")}
        for name in names
    }  # fmt: skip


def goals(table: dict[str, dict[str, Summary]], trainings: dict[str, TrainingOutcome]) -> dict:
    """Each goal met (True), missed (False) or not measurable (None), with the figures."""
    judged = {n: t for n, t in table.items() if not n.startswith(SETUP)}
    ratios = {n: _ratio(t["loaded"].p95, t["idle"].p95) for n, t in judged.items()}
    p95_ok = [r <= GOAL_P95_RATIO if r is not None else None for r in ratios.values()]
    slow = {n: t["loaded"].max for n, t in judged.items()}
    max_ok = [
        (t["loaded"].max or 0) <= GOAL_MAX_S and t["loaded"].failures == 0 for t in judged.values()
    ]
    alone, loaded = (trainings.get(k) for k in ("alone", "loaded"))
    both = alone and loaded and alone.status == loaded.status == "done"
    train_ratio = _ratio(loaded.server_seconds, alone.server_seconds) if both else None
    return {
        "p95_ratio_at_most_2": _all(p95_ok), "p95_ratios": ratios,
        "no_interaction_over_5_s": _all(max_ok), "loaded_max_s": slow,
        "training_at_most_10_percent_longer": None if train_ratio is None
        else train_ratio <= GOAL_TRAIN_RATIO,
        "training_ratio": train_ratio,
    }  # fmt: skip


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def _all(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return None if not values or any(v is None for v in values) else True


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_report(table, trainings, verdicts, phases: list[Phase], valid: bool) -> None:
    mark = "" if valid else "  [BUSY MACHINE: NOT VALID]"
    head = ("idle n", "p50", "p95", "max", "loaded n", "p50", "p95", "max", "p95 x", "fail i/l")
    widths = (7, 7, 7, 7, 10, 7, 7, 7, 7, 10)
    print(
        "\n"
        + f"{'interaction':<28}"
        + "".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True))
        + mark
    )
    for name, t in table.items():
        i, lo = t["idle"], t["loaded"]
        ratio = _ratio(lo.p95, i.p95)
        print(f"{name:<28}{i.n:>7}{_fmt(i.p50):>7}{_fmt(i.p95):>7}{_fmt(i.max):>7}"
              f"{lo.n:>10}{_fmt(lo.p50):>7}{_fmt(lo.p95):>7}{_fmt(lo.max):>7}"
              f"{_fmt(ratio):>7}{f'{i.failures}/{lo.failures}':>10}")  # fmt: skip
    for key, t in trainings.items():
        print(f"training {key}: {t.status}, server {_fmt(t.server_seconds)} s, "
              f"seen by the client after {t.client_seconds:.1f} s  {t.message}")  # fmt: skip
    print(f"training loaded / alone: {_fmt(verdicts['training_ratio'])}{mark}")
    for goal in ("p95_ratio_at_most_2", "no_interaction_over_5_s",
                 "training_at_most_10_percent_longer"):  # fmt: skip
        verdict = {True: "met", False: "MISSED", None: "not measured"}[verdicts[goal]]
        print(f"goal {goal.replace('_', ' ')}: {verdict}{mark}")
    for p in phases:
        state = "valid" if p.valid else "NOT VALID"
        print(f"phase {p.name}: load before {p.load_before[0]:.2f} (limit {p.load_limit:.2f}), "
              f"after {p.load_after[0]:.2f}; {state} {p.note}")  # fmt: skip


def main() -> int:
    config = parse_args()
    command = command_line("bench.bench_load")
    watch = LoadWatch()
    print(f"command: {command}")
    print(f"machine: {machine()}")
    # The server, the CLI training and their children are this bench's work, not others'.
    guard = LoadGuard.start(force=config.force, max_wait_s=config.settle_max_s, descendants=True)
    if refuse_busy_start(guard):
        return 1
    with WorkDir(config.work_dir, prefix="bench-load-") as root:
        folders = Folders.under(root)
        print(f"[{time.strftime('%H:%M:%S')}] setting up in {root}")
        build_model(folders, config)
        queued = fill_triage_queue(folders, config)
        server = Server(folders)
        try:
            server.wait_ready()
            bench = Bench(config, server, folders, text_pools(config), training_upload(config))
            phases, trainings = asyncio.run(run_phases(bench, watch))
        finally:
            server.stop()
        table = interaction_table(bench.steps)
    load = guard.finish()
    verdicts = goals(table, trainings)
    valid = all(p.valid for p in phases) and load.quiet
    document = {
        "command": command, "machine": machine(), "config": _jsonable(asdict(config)),
        "machine_load": load.to_json(), "valid": valid,
        "triage_items_queued": queued, "phases": [asdict(p) | {"valid": p.valid} for p in phases],
        "trainings": {k: asdict(v) for k, v in trainings.items()},
        "interactions": {n: {k: asdict(s) for k, s in t.items()} for n, t in table.items()},
        "goals": verdicts, "ignored_finishes": bench.ignored_finishes,
        "steps": [asdict(s) for s in bench.steps],
    }  # fmt: skip
    if config.json_out is not None:
        config.json_out.write_text(json.dumps(document, indent=2), encoding="utf-8")
        print(f"wrote {config.json_out}")
    if not valid and not config.force:
        print(
            "warning: the machine was busy during the bench (see the phases above and the load "
            "line below); figures not reported. Rerun on an idle machine, or pass --force.",
            file=sys.stderr,
        )
        print_load(load)
        return 1
    print_report(table, trainings, verdicts, phases, valid)
    print_load(load)
    if not valid and load.quiet:
        print("warning: a phase was busy (see above): the figures do not count", file=sys.stderr)
    return 0


def _jsonable(config: dict) -> dict:
    return {k: str(v) if isinstance(v, Path) else v for k, v in config.items()}


class WorkDir:
    """--work-dir (created, kept) or a temporary folder named `prefix`... (removed)."""

    def __init__(self, kept: Path | None, *, prefix: str) -> None:
        self.kept, self.prefix = kept, prefix
        self.temp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Path:
        if self.kept is not None:
            self.kept.mkdir(parents=True)
            return self.kept.resolve()
        self.temp = tempfile.TemporaryDirectory(prefix=self.prefix)
        return Path(self.temp.name)

    def __exit__(self, *exc: object) -> None:
        if self.temp is not None:
            self.temp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
