"""The Explain page end to end, as a person waits for it: a real chromium (Playwright, Debian's
/usr/bin/chromium) on a real server on a free loopback port types new one-sentence complaints
one by one, clicks Explain, and times each click until the page is done. Optionally a training
runs beside it (a CPU-busy `python -m core train` in a child process), the issue's worst case.

    .venv/bin/python -m bench.bench_explain_page [--complaints 20] [--model models/NAME]
        [--under-training] [--train-rows 1500] [--json-out FILE] [--work-dir DIR] [--force]

"Done": the app's script state is "notRunning" (the attribute Streamlit's own end-to-end tests
wait on), the new complaint is on the page, no element is stale, the word strip and the visible
attention chart are drawn, then two animation frames (a paint). Times are the browser's own
(performance.now() at the click and when done). "Busy until" adds the main thread's long tasks
(charts drawing) that ended within a second after done. Without --model a MiniLM is trained on
demo data with the quick recipe (seconds). Goals (the issue's): median at most 1 s idle, never
over 3 s while a training runs. Figures are withheld when the machine was busy (bench.machine).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.bench_load import Folders, Server, WorkDir, run_cli
from bench.machine import (
    LoadGuard,
    command_line,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, generate_demo_data

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# As tests/browser/conftest.py: chromium must not reach for Google's services (no network).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
MODEL_NAME = "explainbench"  # letters only
FIRST_LOAD_MS = 240_000  # a cold server imports torch and loads the model on the first page
CLICK_TIMEOUT_MS = 60_000
GOAL_IDLE_MEDIAN_S = 1.0
GOAL_TRAINING_MAX_S = 3.0
GREETINGS = {"Dear", "Good", "Hello", "Hi", "Hi,", "Respected", "Sir,", "Sir/Madam,"}
SETTLE_MS = 1000  # long tasks ending this long after "done" still count as the page's work
TRAINING_START_S = 300
# tqdm's "train: ... | 1/3750 [" once the training beside has taken a step (not its loading bars)
STEPPED = re.compile(r"train:[^\r\n]*?\| *[1-9]\d*/\d+ \[")

# Records long tasks (main-thread work over 50 ms) from the page's start, for "busy until".
LONG_TASKS_JS = """() => {
    window.__longTasks = [];
    new PerformanceObserver(list => {
        for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]);
    }).observe({type: "longtask", buffered: true});
}"""
# True once the page is done for `text` (see the module docstring); records when.
DONE_JS = """(text) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    const shown = [...document.querySelectorAll('[data-testid="stText"]')]
        .some(e => e.textContent === text);
    const strip = [...document.querySelectorAll('[data-testid="stHeading"]')]
        .some(e => e.textContent.includes("Word by word"));
    if (!shown || !strip) return false;
    const tab = [...document.querySelectorAll('[role="tabpanel"]')]
        .find(panel => panel.offsetParent !== null);
    const chart = tab && tab.querySelector("canvas, svg.marks");
    if (!chart || chart.getBoundingClientRect().width === 0) return false;
    window.__doneAt = window.__doneAt || performance.now();
    return true;
}"""
# Two animation frames after "done": the browser has painted what it had.
PAINTED_JS = """() => new Promise(resolve => requestAnimationFrame(
    () => requestAnimationFrame(() => resolve(performance.now()))))"""


@dataclass(frozen=True)
class PageConfig:
    """The command line, checked."""

    complaints: int
    model: Path | None  # a saved model folder; None: train a quick MiniLM on demo data
    under_training: bool
    train_rows: int  # demo rows the beside-training trains on
    seed: int
    json_out: Path | None
    work_dir: Path | None
    force: bool


def parse_args() -> PageConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--complaints", type=int, default=20, help="clicks timed (1..200)")
    p.add_argument("--model", type=Path, help="a saved model folder (default: train one)")
    p.add_argument("--under-training", action="store_true",
                   help="a MiniLM training runs in a child process during the clicks")  # fmt: skip
    p.add_argument("--train-rows", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", type=Path)
    p.add_argument("--work-dir", type=Path, help="a new folder to work in, kept afterwards")
    p.add_argument("--force", action="store_true", help="report even on a busy machine")
    a = p.parse_args()
    if not 1 <= a.complaints <= 200:
        p.error("--complaints must lie in 1..200")
    if a.model is not None and not (a.model / "card.json").is_file():
        p.error(f"--model {a.model} is not a saved model folder (no card.json)")
    if a.work_dir is not None and a.work_dir.exists():
        p.error(f"--work-dir {a.work_dir} exists; give a new folder")
    if not CHROMIUM.exists():
        p.error(f"{CHROMIUM} is missing: apt-get install chromium")
    return PageConfig(a.complaints, a.model, a.under_training, a.train_rows, a.seed, a.json_out,
                      a.work_dir, a.force)  # fmt: skip


def one_sentence_complaints(count: int, seed: int) -> list[str]:
    """`count` distinct one-sentence complaints (the first sentence of demo complaints, 6 to 25
    words, greetings dropped), shuffled; each is explained once (the page caches per text)."""
    demo = generate_demo_data(DemoConfig(rows=max(40 * count, 400), seed=20 + seed))
    sentences = []
    for text in demo["text"]:
        for sentence in str(text).replace("!", ".").split(". "):
            if sentence.split(" ", 1)[0] in GREETINGS:
                sentence = sentence.partition(",")[2]
            words = sentence.strip().rstrip(".").split()
            if 6 <= len(words) <= 25:
                sentences.append(" ".join(words) + ".")
                break
    unique = list(dict.fromkeys(sentences))
    random.Random(seed).shuffle(unique)
    if len(unique) < count + 1:
        raise SystemExit(f"error: only {len(unique)} distinct complaints; ask for fewer")
    return unique[: count + 1]  # the first warms the page up and is not timed


def build_model(folders: Folders, config: PageConfig) -> None:
    target = folders.models / MODEL_NAME
    if config.model is not None:
        shutil.copytree(config.model, target)
        return
    demo = folders.root / "model-data.csv"
    generate_demo_data(DemoConfig(rows=600, seed=7)).to_csv(demo, index=False)
    run_cli("train", str(demo), "--out", str(target), "--recipe", "quick",
            log=folders.root / "setup.log")  # fmt: skip


def start_training(folders: Folders, config: PageConfig) -> subprocess.Popen:
    """A full-recipe MiniLM training in a child process, long enough to outlast the clicks
    (it is ended when they are done)."""
    data = folders.root / "train-data.csv"
    generate_demo_data(DemoConfig(rows=config.train_rows, seed=9)).to_csv(data, index=False)
    log = (folders.root / "training.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "core", "train", str(data), "--out", str(folders.root / "beside"),
         "--recipe", "full", "--epochs", "50"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def wait_for_steps(folders: Folders, process: subprocess.Popen) -> None:
    """Until the training beside has taken its first step (its progress bar shows "1/N"), so
    that every timed click meets a training that computes, not one that loads."""
    log = folders.root / "training.log"
    deadline = time.monotonic() + TRAINING_START_S
    while not STEPPED.search(log.read_text(errors="replace")):
        if process.poll() is not None:
            raise RuntimeError(f"the training beside ended early; see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the training beside took no step in {TRAINING_START_S} s")
        time.sleep(1)  # polling a child process's log


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


@dataclass(frozen=True)
class Click:
    text: str
    done_s: float  # click to done
    painted_s: float  # click to the paint after done
    busy_until_s: float  # click to the end of the last long task within SETTLE_MS after done
    long_tasks_ms: float  # main-thread long tasks between the click and then, summed


def use_model(page, name: str) -> None:
    """Make `name` the session's model on the Train page (as tests/browser/steps.py does)."""
    from playwright.sync_api import expect

    nav = page.get_by_test_id("stSidebarNav")
    expect(nav).to_be_visible(timeout=FIRST_LOAD_MS)
    nav.get_by_role("link", name="Train", exact=True).click()
    picker = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Model", exact=True))
    picker.click()
    page.get_by_role("option", name=name, exact=True).click()
    page.get_by_role("button", name="Use this model").click()
    expect(page.get_by_test_id("stSidebar")).to_contain_text(f"Model: {name}")


def open_explain(page) -> None:
    from playwright.sync_api import expect

    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Explain", exact=True).click()
    expect(page.get_by_text("Word by word")).to_be_visible(timeout=FIRST_LOAD_MS)
    page.evaluate(LONG_TASKS_JS)


def click_explain(page, text: str, *, timeout_ms: float) -> Click:
    """Type `text`, click Explain, wait until done; the browser's times."""
    page.get_by_role("textbox", name="Complaint").fill(text)
    button = page.get_by_role("button", name="Explain", exact=True)
    button.scroll_into_view_if_needed()
    started = page.evaluate("() => { window.__doneAt = 0; return performance.now(); }")
    button.click()
    page.wait_for_function(DONE_JS, arg=text, polling="raf", timeout=timeout_ms)
    painted = page.evaluate(PAINTED_JS)
    done = page.evaluate("() => window.__doneAt")
    page.wait_for_timeout(SETTLE_MS)
    tasks = page.evaluate("() => window.__longTasks")
    mine = [(s, d) for s, d in tasks if s >= started and s <= done + SETTLE_MS]
    busy_until = max([painted] + [s + d for s, d in mine])
    return Click(text, (done - started) / 1000, (painted - started) / 1000,
                 (busy_until - started) / 1000, sum(d for _, d in mine))  # fmt: skip


def run_clicks(url: str, texts: list[str], *, before_timing: Callable[[], None]) -> list[Click]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(url)
            use_model(page, MODEL_NAME)
            open_explain(page)
            click_explain(page, texts[0], timeout_ms=FIRST_LOAD_MS)  # warm-up, not timed
            before_timing()
            clicks = []
            for text in texts[1:]:
                clicks.append(click_explain(page, text, timeout_ms=CLICK_TIMEOUT_MS))
                print(f"  {clicks[-1].painted_s:6.2f} s  {text[:60]}", file=sys.stderr)
            return clicks
        finally:
            browser.close()


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p90": p90, "max": ordered[-1]}


def goal(config: PageConfig, painted: dict[str, float]) -> tuple[str, bool]:
    if config.under_training:
        return f"max <= {GOAL_TRAINING_MAX_S} s under training", painted[
            "max"
        ] <= GOAL_TRAINING_MAX_S
    return f"median <= {GOAL_IDLE_MEDIAN_S} s idle", painted["median"] <= GOAL_IDLE_MEDIAN_S


def report(config: PageConfig, clicks: list[Click]) -> dict:
    table = {
        "done": summary([c.done_s for c in clicks]),
        "painted": summary([c.painted_s for c in clicks]),
        "busy until": summary([c.busy_until_s for c in clicks]),
    }
    what = "while a training runs" if config.under_training else "idle server"
    print(f"Explain page, {len(clicks)} new one-sentence complaints, {what} (seconds):")
    print(f"{'':12s} {'median':>7} {'p90':>7} {'max':>7}")
    for name, row in table.items():
        print(f"{name:12s} {row['median']:7.2f} {row['p90']:7.2f} {row['max']:7.2f}")
    name, met = goal(config, table["painted"])
    print(f"goal ({name}, click to paint): {'met' if met else 'NOT met'}")
    return {"table": table, "goal": name, "goal_met": met}


def main() -> int:
    config = parse_args()
    command = command_line("bench.bench_explain_page")
    print(f"command: {command}")
    print(f"machine: {machine()}")
    texts = one_sentence_complaints(config.complaints, config.seed)
    # The server, chromium and the training beside are this bench's work, not others'.
    guard = LoadGuard.start(force=config.force, descendants=True)
    if refuse_busy_start(guard):
        return 1
    with WorkDir(config.work_dir, prefix="bench-explain-page-") as root:
        folders = Folders.under(root)
        build_model(folders, config)
        server = Server(folders)
        training = None
        try:
            server.wait_ready()
            training = start_training(folders, config) if config.under_training else None
            ready = (lambda: wait_for_steps(folders, training)) if training else lambda: None
            clicks = run_clicks(server.url, texts, before_timing=ready)
        finally:
            if training is not None:
                stop(training)
            server.stop()
    load = guard.finish()
    document = {"command": command, "machine": machine(), "machine_load": load.to_json(),
                "config": {k: str(v) for k, v in asdict(config).items()}}  # fmt: skip
    if shows_figures(load):  # a busy run's times are not figures: neither printed nor saved
        document |= report(config, clicks) | {"clicks": [asdict(c) for c in clicks]}
    if config.json_out is not None:
        config.json_out.write_text(json.dumps(document, indent=2), encoding="utf-8")
        print(f"wrote {config.json_out}")
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
