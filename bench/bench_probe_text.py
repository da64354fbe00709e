"""Work a typed probe text costs (#24): seconds and peak Python memory of `run_probes` (masking,
the cut, every perturbation; two constant models, so only the probe's own work is timed) against
the text's length, for crafted texts built to be worst cases (many short negated clauses,
argument swaps, sentences), and the time to refuse a 1 MB text.

The baseline is the shortest text of each kind in the same run: time and memory per character
should stay flat as the text grows (linear work). Before #24 a 20 KB text of short clauses kept
the short lane busy for hours (the negation moves were cubic in the clause count).

    python -m bench.bench_probe_text [--force]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

import numpy as np

LENGTHS = (1_000, 2_000, 5_000, 10_000, 20_000)
CRAFTED = {
    "negated clauses": "it was not paid, it was, ",
    "argument swaps": "from upi to card instead of wallet ",
    "sentences": "Card was not blocked. ",
    "one long word": "x",
}


class Constant:
    """A model that reads nothing: the bench times the probe's own work."""

    classes_ = np.array(["A", "B"])
    max_length = 4096  # reads up to 131,072 characters: the 20,000-character cap binds first
    truncation = "head"

    def predict_proba(self, texts):
        return np.tile([0.6, 0.4], (len(texts), 1))


def measure(text: str, config=None) -> tuple[float, float, int]:
    """(seconds, peak MB, perturbations) of one `run_probes` on `text` (default ProbeConfig)."""
    from core.analysis.perturbations import ProbeConfig
    from core.analysis.probe_compare import run_probes

    tracemalloc.start()
    started = time.perf_counter()
    result = run_probes(Constant(), Constant(), text, config or ProbeConfig())
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak, len(result.outcomes)


def refusal_seconds() -> float:
    from core.analysis.probe_compare import run_probes
    from core.errors import UserError

    text = "it was not paid, it was, " * 42_000  # 1 MB
    started = time.perf_counter()
    try:
        run_probes(Constant(), Constant(), text)
    except UserError:
        return time.perf_counter() - started
    raise AssertionError("a 1 MB probe text was not refused")


def print_most_asked() -> None:
    """The largest probe anyone may ask for: 20,000 characters, 20 per kind, 20 shuffles."""
    from core.analysis.perturbations import MAX_PER_KIND, MAX_SHUFFLES, ProbeConfig

    config = ProbeConfig(n_shuffles=MAX_SHUFFLES, max_per_kind=MAX_PER_KIND)
    print(f"the most one may ask (n_shuffles={MAX_SHUFFLES}, max_per_kind={MAX_PER_KIND}):")
    for kind, unit in CRAFTED.items():
        text = (unit * (LENGTHS[-1] // len(unit) + 1))[: LENGTHS[-1]]
        seconds, peak, variants = measure(text, config)
        print(f"{kind:15s} {LENGTHS[-1]:6,d}  {seconds:8.3f}  {peak:7.2f}  {variants:8d}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="measure on a busy machine")
    args = parser.parse_args()
    from bench.machine import (
        LoadGuard,
        command_line,
        held_output,
        machine,
        print_load,
        refuse_busy_start,
        shows_figures,
    )

    print(f"machine: {machine()}\ncommand: {command_line('bench.bench_probe_text')}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    measure("warm up: it was not paid, from upi to card.")
    with held_output() as held:
        print(f"refusing a 1 MB text: {refusal_seconds() * 1e6:.0f} µs")
        print("kind             chars   seconds  peak MB  variants  µs/char (× shortest)")
        for kind, unit in CRAFTED.items():
            base = None
            for length in LENGTHS:
                text = (unit * (length // len(unit) + 1))[:length]
                seconds, peak, variants = measure(text)
                per_char = seconds / length * 1e6
                base = base or per_char
                print(f"{kind:15s} {length:6,d}  {seconds:8.3f}  {peak:7.2f}  {variants:8d}  "
                      f"{per_char:7.2f} ({per_char / base:.2f})")  # fmt: skip
        print_most_asked()
    load = guard.finish()
    if shows_figures(load):
        print(held.getvalue(), end="")
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
