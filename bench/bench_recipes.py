"""The right recipe for the data at hand: quick, full, the bag of words and each recipe's routing
decision at several training-set sizes, on the same test rows, beside what recipe "auto"
chooses (core.models.transformer.recipe) and how far that lands from the best.

    .venv/bin/python -m bench.bench_recipes --data bench/external/banking77/train.csv \\
        --test bench/external/banking77/test.csv --per-desk 5 10 20
    .venv/bin/python -m bench.bench_recipes --data ../shared/data/cfpb-sample/train.csv \\
        --test ../shared/data/cfpb-sample/test.csv --per-desk 10 40 all
    .venv/bin/python -m bench.bench_recipes --per-desk 10 40 all               # the demo data

A size of N keeps N rows of each desk of the training file (seeded draw; "all" keeps every
row): that subsample is what a user would bring, so `train`'s own split cuts its validation
rows from it (val_fraction 0.2, stratified, as `core train` does). Every model learns from the
same training rows; validation rows choose the head's strength, the epoch, the blends and the
recipe; the test rows (a separate file, or 20% of the data without `--test`) choose nothing.
"auto" is scored from the quick and full runs themselves (the same models `train --recipe auto`
trains), so each size trains each recipe once; below FULL_MIN_ROWS_PER_DESK "auto" never
trains the full recipe, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.machine import LoadGuard, print_load
from core.data.dataset import Dataset, split_dataset
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.metrics import evaluate_predictions
from core.models.transformer.config import FULL, QUICK, TrainConfig
from core.models.transformer.recipe import median_rows_per_desk, try_full
from core.models.transformer.training import TrainResult, blend_recipes, train_models


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="labelled file (default: the demo data)")
    parser.add_argument("--test", type=Path, help="a separate labelled test file")
    parser.add_argument("--per-desk", nargs="+", default=["10", "40", "all"],
                        help="training rows kept per desk: numbers or 'all'")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def subsample(data: Dataset, per_desk: str, seed: int) -> Dataset:
    """`per_desk` rows of each desk (all of a smaller desk), drawn seeded; "all": `data`."""
    if per_desk == "all":
        return data
    rng = np.random.default_rng(seed)
    labels = np.array(data.labels)
    keep = np.sort(np.concatenate([
        rng.permutation(np.flatnonzero(labels == desk))[: int(per_desk)]
        for desk in sorted(set(data.labels))
    ]))  # fmt: skip
    return Dataset(
        texts=tuple(data.texts[i] for i in keep), labels=tuple(labels[keep].tolist()),
        rows=tuple(data.rows[i] for i in keep),
    )  # fmt: skip


def accuracy(probs: np.ndarray, classes: list[str], data: Dataset) -> float:
    predicted = [classes[i] for i in probs.argmax(1)]
    return round(evaluate_predictions(list(data.labels), predicted).accuracy, 4)


def scored(result: TrainResult, test: Dataset) -> dict[str, float]:
    """Test accuracy of a run's transformer, its bag of words and its decision (with the frozen
    encoder, where its blend reads one)."""
    texts = list(test.texts)
    classes = [str(c) for c in result.neural.classes_]
    neural = result.neural.predict_proba(texts)
    bow = result.bow.predict_proba(texts)
    frozen = None if result.frozen is None else result.frozen.predict_proba(texts)
    return {
        "model": accuracy(neural, classes, test),
        "bow": accuracy(bow, classes, test),
        "decision": accuracy(result.blend.combine(neural, bow, frozen), classes, test),
        "val_decision": round(result.decision_report.accuracy, 4),
        "seconds": round(result.train_seconds, 1),
    }


def one_size(data: Dataset, test: Dataset, per_desk: str, seed: int) -> dict:
    sample = subsample(data, per_desk, seed)
    train, val = split_dataset(sample, val_fraction=TrainConfig.val_fraction, seed=seed)
    trained = {recipe: train_models(train, val, TrainConfig(recipe=recipe, seed=seed))
               for recipe in (QUICK, FULL)}  # fmt: skip
    runs = {recipe: scored(result, test) for recipe, result in trained.items()}
    rows_per_desk = median_rows_per_desk(train.labels)
    if try_full(rows_per_desk):  # what `train --recipe auto` saves from the same two runs
        default = blend_recipes(trained[FULL], trained[QUICK], val, rows_per_desk)
        auto = {"chosen": default.blend.describe(), "reason": default.recipe_choice["reason"],
                "test": scored(default, test)["decision"]}  # fmt: skip
    else:
        auto = {"chosen": QUICK, "reason": "too few rows a desk for a full fine-tune",
                "test": runs[QUICK]["decision"]}  # fmt: skip
    candidates = {
        "quick": runs[QUICK]["model"], "full": runs[FULL]["model"], "bow": runs[QUICK]["bow"],
        "quick decision": runs[QUICK]["decision"], "full decision": runs[FULL]["decision"],
    }  # fmt: skip
    singles = {name: candidates[name] for name in ("quick", "full", "bow")}
    best = max(candidates, key=candidates.get)
    best_single = max(singles, key=singles.get)
    return {
        "per_desk": per_desk, "rows": {"train": len(train), "val": len(val)},
        "rows_per_desk": rows_per_desk, "test": {**candidates, "auto": auto["test"]},
        "runs": runs, "auto": auto,
        "best": {"name": best, "test": candidates[best]},
        "best_single_recipe": {"name": best_single, "test": singles[best_single]},
        "auto_gap_points": round(100 * (candidates[best] - auto["test"]), 2),
        "auto_below_best_single_points": round(100 * (singles[best_single] - auto["test"]), 2),
    }  # fmt: skip


def main() -> int:
    args = parse_args()
    guard = LoadGuard.start(force=True)  # accuracy figures; seconds are printed with the load
    with tempfile.TemporaryDirectory() as scratch:
        source = args.data or write_demo_data(Path(scratch) / "demo.csv", DemoConfig())
        data, _ = load_dataset(source)
    if args.test:
        test, _ = load_dataset(args.test)
    else:
        data, test = split_dataset(data, val_fraction=0.2, seed=args.seed)
    sizes = []
    for per_desk in args.per_desk:
        sizes.append(one_size(data, test, per_desk, args.seed))
        print(f"  {per_desk} per desk: {json.dumps(sizes[-1]['test'])}", file=sys.stderr)
    load = guard.finish()
    document = {"data": str(args.data or "demo"), "test_rows": len(test), "sizes": sizes,
                "machine_load": load.to_json()}  # fmt: skip
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        names = list(sizes[0]["test"])
        print(f"{'per desk':>8} {'train':>6} " + " ".join(f"{n:>14}" for n in names)
              + f" {'auto':>18} {'gap':>5}")  # fmt: skip
        for size in sizes:
            cells = " ".join(f"{size['test'][n]:>14.3f}" for n in names)
            auto = f"{size['auto']['chosen']} {size['auto']['test']:.3f}"
            print(f"{size['per_desk']:>8} {size['rows']['train']:>6} {cells} {auto:>18} "
                  f"{size['auto_gap_points']:>5.1f}")  # fmt: skip
    print_load(load, file=sys.stderr if args.json else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
