"""Personal-data masking speed: `mask_texts` over demo complaints, against tokenising the same
texts with `core.text.words` (the work every model does on every text anyway).

    .venv/bin/python -m bench.bench_privacy [--n 5000] [--repeats 7] [--force]

Both are warmed first and timed as the best of `--repeats` interleaved runs. Prints the command,
the machine and the load around the run (bench.machine); a busy start is refused and a busy
run's timings withheld unless --force (alias --even-if-busy), which prints them marked busy.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from bench.machine import (
    LoadGuard,
    command_line,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, generate_demo_data
from core.data.privacy import mask_texts
from core.text import words


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="demo complaints to mask")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--force", "--even-if-busy", action="store_true", help="report even on a busy machine"
    )
    args = parser.parse_args()
    print(f"command: {command_line('bench.bench_privacy')}")
    print(f"machine: {machine()}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    texts = generate_demo_data(DemoConfig(rows=args.n))["text"].tolist()
    mask_texts(texts), [words(t) for t in texts]  # warm both
    masked = best_seconds(lambda: mask_texts(texts), args.repeats)
    tokenised = best_seconds(lambda: [words(t) for t in texts], args.repeats)
    load = guard.finish()
    if shows_figures(load):
        chars = sum(map(len, texts))
        print(f"{len(texts):,} texts, {chars:,} characters")
        print(f"mask_texts:  {masked * 1000:7.1f} ms  ({len(texts) / masked:,.0f} texts/s)")
        print(f"words():     {tokenised * 1000:7.1f} ms  (baseline)")
        print(f"ratio mask / words: {masked / tokenised:.2f}")
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
