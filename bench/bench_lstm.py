"""An LSTM beside attention, trained: held-out word-order twin accuracy of the bag of words, the
tiny transformer with and without positions and the bidirectional LSTM, and the time per
complaint of the LSTM against the tiny transformer as the complaint grows.

    .venv/bin/python -m bench.bench_lstm                      # split seeds 0 and 1, demo data
    .venv/bin/python -m bench.bench_lstm --split-seeds 0 --json
    .venv/bin/python -m bench.bench_lstm --rows 300 --epochs 1 --lengths 16 64 --force  # smoke

Every model is trained by core.lab.order_models.compare_order_models on one split per seed
that holds out whole twin groups (validation rows pick each model's best epoch; the test rows
never choose anything), with each backbone's defaults (BACKBONE_DEFAULTS) unless --epochs caps
them. Timing: forward pass only, batch of one, fp32, median of --repeats, on the training device
and --threads torch threads. Results: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.lab.order_models import (
    LSTM_MODEL,
    TINY_ON,
    OrderModels,
    OrderModelsConfig,
    compare_order_models,
)

MODULE = "bench.bench_lstm"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=DemoConfig.rows, help="demo data rows")
    parser.add_argument("--seed", type=int, default=DemoConfig.seed, help="demo data seed")
    parser.add_argument("--split-seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--epochs", type=int, help="cap every model (default: its own)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=20, help="timed passes per point")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: fastest here)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def run(args: argparse.Namespace) -> list[tuple[int, OrderModels]]:
    """compare_order_models on the demo data, once per split seed."""
    with tempfile.TemporaryDirectory() as scratch:
        demo = DemoConfig(rows=args.rows, seed=args.seed)
        path = write_demo_data(Path(scratch) / "demo.csv", demo)
        data, _ = load_dataset(path)
    results = []
    for seed in args.split_seeds:
        config = OrderModelsConfig(
            seed=seed, epochs=args.epochs, lengths=tuple(args.lengths), repeats=args.repeats,
            device=args.device,
        )  # fmt: skip
        print(f"split seed {seed}: training four models", file=sys.stderr)
        results.append((seed, compare_order_models(data, config)))
    return results


def to_json(seed: int, result: OrderModels) -> dict:
    timing = result.timing
    ratio = timing.ratio(LSTM_MODEL, TINY_ON)
    return {
        "split_seed": seed, "split": result.split, "test_rows": result.test_rows,
        "twin_groups_held_out": result.twin_groups_held_out,
        "scores": [asdict(s) for s in result.scores], "timing_device": timing.device,
        "timing": timing.table.to_dict(orient="records"),
        "lstm_over_transformer": {int(k): round(float(v), 3) for k, v in ratio.items()},
    }  # fmt: skip


def report_text(seed: int, result: OrderModels) -> None:
    print(f"\nsplit seed {seed}: {result.split}")
    print(f"{'model':34s} {'test acc':>8} {'twin acc':>8} {'twin rows':>9} {'max |dp|':>8} "
          f"{'train s':>7}")  # fmt: skip
    for s in result.scores:
        print(f"{s.name:34s} {s.accuracy:8.3f} {s.twin_accuracy:8.3f} {s.twin_rows:9d} "
              f"{s.twin_spread:8.1e} {s.train_seconds:7.1f}")  # fmt: skip
    wide = result.timing.table.pivot(index="tokens", columns="model", values="ms_per_complaint")
    ratio = result.timing.ratio(LSTM_MODEL, TINY_ON)
    print(f"time per complaint (ms, batch 1, fp32, {result.timing.device}, median of "
          f"{result.timing.repeats}):")  # fmt: skip
    print(f"{'tokens':>6} {'tiny transformer':>16} {'LSTM':>8} {'LSTM / transformer':>18}")
    for tokens, row in wide.iterrows():
        print(f"{tokens:6d} {row[TINY_ON]:16.3f} {row[LSTM_MODEL]:8.3f} {ratio[tokens]:18.2f}")


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)  # this process only: a bench script, not a server job
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with held_output() as held:
        results = run(args)
    load = guard.finish()
    if shows_figures(load):
        sys.stdout.write(held.getvalue())
        report(args, results, load)
    print_load(load, file=sys.stderr if args.json else None)
    return 0


def report(args: argparse.Namespace, results: list[tuple[int, OrderModels]], load) -> None:
    if args.json:
        document = {
            "command": command_line(MODULE), "machine": machine(), "threads": args.threads,
            "data": asdict(DemoConfig(rows=args.rows, seed=args.seed)),
            "runs": [to_json(seed, result) for seed, result in results],
            "machine_load": load.to_json(),
        }  # fmt: skip
        print(json.dumps(document, indent=2, default=str))
        return
    print(f"machine: {machine()}; torch threads {args.threads}")
    print(f"demo data {args.rows} rows, seed {args.seed}")
    for seed, result in results:
        report_text(seed, result)
    print(command_line(MODULE))


if __name__ == "__main__":
    sys.exit(main())
