"""How long the routing board takes on a large classified file, against reading that file.

    .venv/bin/python -m bench.bench_board               # 100,000 and 500,000 rows (intake cap)
    .venv/bin/python -m bench.bench_board --rows 20000  # a quick look

The file: the demo data classified by hand-made columns (predicted_label, confidence,
needs_review and one prob_<desk> per desk, a reviewed desk column and received_at), tiled to
`rows` rows and written as Parquet. Baseline: `core.data.intake.load_table` reading that Parquet
file (what `python -m core board` does first). Measured: `build_board` on the read table (with
the what-if, which costs most), median of `--repeats` runs, one process, nothing else running.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.board.board import BoardConfig, build_board
from core.board.tat import load_tat
from core.data.demo import DemoConfig, generate_demo_data
from core.data.intake import load_table
from core.data.limits import IntakeLimits

RECEIVED_UNTIL = date(2026, 11, 30)  # a fixed queue, so every run boards the same file
AS_OF = "2026-11-30T12:00:00+05:30"


def classified_demo(rows: int, seed: int = 0) -> pd.DataFrame:
    """The demo data tiled to `rows` rows, with a classified file's columns drawn from a seeded
    generator: the routed desk is the given one for 85% of rows, another desk otherwise."""
    demo = generate_demo_data(DemoConfig(received_until=RECEIVED_UNTIL))
    table = demo.iloc[np.arange(rows) % len(demo)].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    desks = sorted(set(demo["desk"]))
    probs = rng.dirichlet(np.ones(len(desks)) * 0.3, size=rows)  # (rows, desks)
    given = table["desk"].map({d: i for i, d in enumerate(desks)}).to_numpy()
    right = rng.random(rows) < 0.85
    probs[right, given[right]] += 1.0
    probs /= probs.sum(axis=1, keepdims=True)
    table["predicted_label"] = np.array(desks)[probs.argmax(axis=1)]
    table["confidence"] = probs.max(axis=1)
    table["needs_review"] = table["confidence"] < 0.6
    for i, desk in enumerate(desks):
        table[f"prob_{desk}"] = probs[:, i]
    return table


def timed(work, repeats: int) -> float:
    """Median seconds of `repeats` calls of `work()`."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def measure(rows: int, repeats: int, folder: Path) -> dict:
    path = folder / f"classified-{rows}.parquet"
    classified_demo(rows).to_parquet(path, index=False)
    limits = IntakeLimits.from_env()
    read_s = timed(lambda: load_table(path, limits=limits), repeats)
    table = load_table(path, limits=limits)
    tat, config = load_tat(), BoardConfig(as_of=pd.Timestamp(AS_OF).to_pydatetime())
    board_s = timed(lambda: build_board(table, tat, config), repeats)
    board = build_board(table, tat, config)
    return {
        "rows": rows, "read_s": read_s, "board_s": board_s, "ratio": board_s / read_s,
        "breached": sum(d.breached for d in board.desks), "what_if": board.what_if is not None,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[100_000, 500_000]
    )  # 500,000: the intake cap
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    args = parser.parse_args(argv)
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with held_output() as held, tempfile.TemporaryDirectory() as folder:
        results = [measure(rows, args.repeats, Path(folder)) for rows in args.rows]
    load = guard.finish()
    print(f"machine: {machine()}")
    if shows_figures(load):
        sys.stdout.write(held.getvalue())
        print(f"{'rows':>10} {'read s':>8} {'board s':>8} {'board/read':>10} {'breached':>9}")
        for r in results:
            print(f"{r['rows']:>10,} {r['read_s']:>8.2f} {r['board_s']:>8.2f} "
                  f"{r['ratio']:>10.2f} {r['breached']:>9,}")  # fmt: skip
    print(command_line("bench.bench_board"))
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
