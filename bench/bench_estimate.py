"""How good the Train page's duration estimate is: estimate, then train for real, same settings.

    .venv/bin/python -m bench.bench_estimate                       # demo data: quick, then full
    .venv/bin/python -m bench.bench_estimate --data ../shared/data/cfpb-sample/train.csv
    .venv/bin/python -m bench.bench_estimate --short-queries 10003 --recipes quick
    .venv/bin/python -m bench.bench_estimate --short-queries 10003 --recipes quick \
        --truncations head head_tail     # what reading heads and tails costs, one process

`--short-queries N`: N demo complaints cut to their first 12 words (about 16 word pieces, the
length of a banking-intent query), for the "quick model on 10k short queries" figure.

For each recipe, `estimate_training` (a few timed passes, as the page does before a training
starts) and then `train_models` on the same split and settings; the ratio estimate / real is
the figure (1.0 is perfect). The full recipe runs with early stopping off (patience = epochs),
as the estimate assumes every epoch runs; `--epochs` keeps it short. Both models are trained,
as a training job does. Seconds are wall time on this machine; the load guard records the load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.machine import LoadGuard, print_load, refuse_busy_start, shows_figures
from core.data.dataset import split_dataset
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.models.training_job import estimate_training
from core.models.transformer.config import TrainConfig
from core.models.transformer.training import train_models
from core.models.transformer.truncation import HEAD, TRUNCATIONS

RECIPES = ("quick", "full")
SHORT_WORDS = 12


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="labelled file (default: the demo data)")
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES))
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--max-length", type=int, default=TrainConfig.max_length)
    parser.add_argument("--truncations", nargs="+", choices=TRUNCATIONS, default=[HEAD])
    parser.add_argument("--epochs", type=int, default=1, help="full recipe (default 1: minutes)")
    parser.add_argument("--short-queries", type=int, help="N demo complaints cut to 12 words")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def short_queries(source: Path, out: Path) -> Path:
    """The demo complaints of `source` cut to their first SHORT_WORDS words."""
    frame = pd.read_csv(source)
    frame["text"] = [" ".join(str(t).split()[:SHORT_WORDS]) for t in frame["text"]]
    frame.to_csv(out, index=False)
    return out


def main() -> int:
    args = parse_args()
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        source = args.data or write_demo_data(
            Path(scratch) / "demo.csv", DemoConfig(rows=args.short_queries or DemoConfig.rows)
        )
        if args.short_queries:
            source = short_queries(source, Path(scratch) / "short.csv")
        dataset, _ = load_dataset(source)
    rows = []
    settings = [(r, t) for r in args.recipes for t in args.truncations]
    for recipe, truncation in settings:
        config = TrainConfig(
            backbone=args.backbone, recipe=recipe, epochs=args.epochs, patience=args.epochs,
            max_length=args.max_length, truncation=truncation, device="cpu",
        )  # fmt: skip
        started = time.perf_counter()
        estimate = estimate_training(dataset, config)
        estimate_cost = time.perf_counter() - started
        train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
        started = time.perf_counter()
        train_models(train, val, config)
        real = time.perf_counter() - started
        rows.append({
            "recipe": recipe, "truncation": truncation,
            "epochs": config.epochs if recipe == "full" else None,
            "estimate_s": round(estimate.seconds, 1), "real_s": round(real, 1),
            "ratio": round(estimate.seconds / real, 3), "estimate_cost_s": round(estimate_cost, 1),
            "passes": estimate.passes,
        })  # fmt: skip
    load = guard.finish()
    name = f"{args.short_queries} short queries" if args.short_queries else "demo data"
    document = {
        "data": str(args.data or name), "rows": len(dataset),
        "backbone": args.backbone, "results": rows, "machine_load": load.to_json(),
    }  # fmt: skip
    if shows_figures(load):
        if args.json:
            print(json.dumps(document, indent=2))
        else:
            print(f"{document['data']}: {len(dataset)} rows, backbone {args.backbone}")
            print(f"{'recipe':8s} {'reads':9s} {'epochs':>6} {'estimate s':>10} {'real s':>8} "
                  f"{'ratio':>6} {'cost s':>7}")  # fmt: skip
            for row in rows:
                print(
                    f"{row['recipe']:8s} {row['truncation']:9s} {row['epochs'] or '':>6} "
                    f"{row['estimate_s']:10.1f} "
                    f"{row['real_s']:8.1f} {row['ratio']:6.2f} {row['estimate_cost_s']:7.1f}"
                )
    print_load(load, file=sys.stderr if args.json else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
