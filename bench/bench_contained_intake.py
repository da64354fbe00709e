"""What the second wall costs: `load_table_contained` (a child process with capped memory) against
`load_table` in this process, on ordinary files from 100 KB to 150 MB, tables checked equal.

    python -m bench.bench_contained_intake [--force]

The load is recorded around the run (bench.machine; the child processes count as the bench's
own work); the figures of a busy run are withheld unless --force, which prints them marked busy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_hostile_inputs import csv_one_cell, ordinary_csv, ordinary_parquet, ordinary_xlsx
from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.contained import load_table_contained
from core.data.intake import load_table
from core.data.limits import IntakeLimits

MB = 1024**2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    args = parser.parse_args()
    print(f"command: {command_line('bench.bench_contained_intake')}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with tempfile.TemporaryDirectory() as tmp, held_output() as held:
        measure(Path(tmp))
    load = guard.finish()
    if shows_figures(load):
        print(held.getvalue(), end="")
    print_load(load)
    return 0


def measure(folder: Path) -> None:
    """Each file read both ways, timed, and the two tables compared; one line each."""
    cases = [
        ("ordinary CSV, 100 KB", ordinary_csv(folder / "small.csv", 100_000)),
        ("ordinary XLSX", ordinary_xlsx(folder / "o.xlsx", 3 * MB)),
        ("ordinary Parquet", ordinary_parquet(folder / "o.parquet", 2 * MB)),
        ("ordinary CSV, 150 MB", ordinary_csv(folder / "big.csv", 150 * MB)),
        ("CSV with one 150 MB cell", csv_one_cell(folder / "cell.csv", 150)),
    ]
    print(f"{'file':<26} {'size':>10} {'contained':>10} {'in-process':>11}")
    for name, path in cases:
        data = path.read_bytes()
        started = time.perf_counter()
        contained = load_table_contained(data, filename=path.name, limits=IntakeLimits())
        child_s = time.perf_counter() - started
        started = time.perf_counter()
        direct = load_table(data, filename=path.name, limits=IntakeLimits())
        direct_s = time.perf_counter() - started
        assert contained.equals(direct) and contained.attrs == direct.attrs, name
        size = len(data) / MB
        print(f"{name:<26} {size:>7.2f} MB {child_s:>9.2f}s {direct_s:>10.2f}s")


if __name__ == "__main__":
    sys.exit(main())
