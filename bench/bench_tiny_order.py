"""Does the textbook's tiny transformer learn word order? Its accuracy on word-order twins it never
saw (whole twin groups held out), with positional encoding on and off, per lever setting.

    .venv/bin/python -m bench.bench_tiny_order            # the old and the current defaults
    .venv/bin/python -m bench.bench_tiny_order --grid     # the wider lever search (~12 min)
    .venv/bin/python -m bench.bench_tiny_order --split-seed 1 --json   # other groups held out

The demo data's twins are groups of complaints with one bag of words and different desks, so a
bag-of-words model is capped on them. Split: the test rows are a seeded share of the twin groups
(whole groups) plus a stratified share of the other rows; validation is drawn from the rest the
same way, so no twin text of a held-out group is ever trained on. Every setting is trained
through `train_models` with positions on and off; the validation rows (twin accuracy, then
macro-F1) choose the best setting, the test rows never choose anything. Reported per run: test
accuracy and macro-F1, held-out twin accuracy, the largest probability difference within a held-out
twin group (order-blindness: about 1e-7 without positions), train seconds; and the bag-of-words
baseline's twin accuracy on the same split. One torch thread by default (`--threads`): this
small model trains fastest that way on a shared machine. Results: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import train_test_split

from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.dataset import TWIN_SLICE, Dataset, slice_names
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.metrics import evaluate_predictions
from core.models.tiny import model as tiny_model
from core.models.transformer import backbone
from core.models.transformer.config import TINY, TrainConfig
from core.models.transformer.training import TrainResult, train_models

GROUP_COLUMN = "twin_group"


@dataclass(frozen=True)
class Setting:
    """One point of the lever search: architecture (arguments of `create_tiny_classifier`;
    none: its defaults) and training options (None: `BACKBONE_DEFAULTS[TINY]`)."""

    name: str
    arch: dict = field(default_factory=dict)
    lr: float | None = None
    epochs: int | None = None
    pooling: str = "mean"
    patience: int | None = None  # None: TrainConfig's


# The tiny model before this bench existed: one layer, 64 wide, embeddings at scale 1, lr 1e-3,
# 4 epochs (0.575 on held-out twins with positions, 0.486 without, issue #10).
OLD_ARCH = {"n_layers": 1, "d_model": 64, "embedding_scale": 1.0, "dropout": 0.1}
BEFORE = Setting("before", OLD_ARCH, 1e-3, 4)
DEFAULTS = Setting("defaults")  # exactly what `core train --backbone tiny` does with no flags


def _two_layers(
    name: str, lr: float = 2e-3, pooling: str = "mean", patience: int | None = None, **arch
) -> Setting:
    """A setting of the search around the chosen one: two layers, no dropout, 20 epochs."""
    arch = {"n_layers": 2, "dropout": 0.0, "embedding_scale": 0.5, **arch}
    return Setting(name, arch, lr, 20, pooling, patience)


# One lever at a time on the way from BEFORE to the defaults, then around them.
GRID = (
    BEFORE,
    Setting("2 layers", {**OLD_ARCH, "n_layers": 2}, 1e-3, 4),
    Setting("2 layers, 20 epochs", {**OLD_ARCH, "n_layers": 2}, 1e-3, 20),
    _two_layers("2 layers, 20 epochs, dropout 0", 1e-3, embedding_scale=1.0),
    _two_layers("... and scale 0.5", 1e-3),
    _two_layers("... and scale 0.5, lr 2e-3"),
    _two_layers("... and scale 0.25, lr 2e-3", embedding_scale=0.25),
    _two_layers("... and scale 8 = sqrt(d_model), lr 2e-3", embedding_scale=8.0),
    _two_layers("... and scale 0.5, lr 2e-3, 3 layers", n_layers=3),
    _two_layers("... and scale 0.5, lr 2e-3, [CLS] pooling", pooling="cls"),
    _two_layers("... and scale 0.5, lr 2e-3, patience 5", patience=5),
    _two_layers("... and scale 0.5, lr 2e-3, no early stop", patience=20),
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=DemoConfig.rows, help="demo data rows")
    parser.add_argument("--seed", type=int, default=DemoConfig.seed, help="demo data seed")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of both splits and runs")
    parser.add_argument(
        "--test-fraction", type=float, default=0.25, help="share of twin groups and other rows"
    )
    parser.add_argument("--val-fraction", type=float, default=0.2, help="of the rest")
    parser.add_argument("--grid", action="store_true", help="the wider lever search")
    parser.add_argument("--only", nargs="+", help="run only the grid settings with these names")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: fastest here)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


# ------------------------------------------------------------------------------ the split


def twin_groups(data: Dataset) -> np.ndarray:
    """The twin group id of every row, -1 for rows outside the twin slice, (n,)."""
    groups = pd.to_numeric(data.extra[GROUP_COLUMN], errors="coerce").fillna(-1).astype(int)
    is_twin = np.asarray(slice_names(data)) == TWIN_SLICE
    return np.where(is_twin, groups.to_numpy(), -1)


def group_split(data: Dataset, fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """(rest, held out): a seeded `fraction` of the twin groups, whole, plus a stratified
    `fraction` of the other rows."""
    groups = twin_groups(data)
    ids = np.unique(groups[groups >= 0])
    held_groups = set(np.random.default_rng(seed).permutation(ids)[: round(len(ids) * fraction)])
    others = np.flatnonzero(groups < 0)
    _, held_others = train_test_split(
        others, test_size=fraction, random_state=seed, stratify=[data.labels[i] for i in others]
    )
    held = set(held_others.tolist()) | {i for i, g in enumerate(groups) if g in held_groups}
    rest = [i for i in range(len(data)) if i not in held]
    return data.subset(rest), data.subset(sorted(held))


@dataclass(frozen=True)
class Splits:
    train: Dataset
    val: Dataset
    test: Dataset


def make_splits(args: argparse.Namespace, scratch: Path) -> Splits:
    source = write_demo_data(scratch / "demo.csv", DemoConfig(rows=args.rows, seed=args.seed))
    data, _ = load_dataset(source)
    rest, test = group_split(data, args.test_fraction, args.split_seed)
    train, val = group_split(rest, args.val_fraction, args.split_seed)
    return Splits(train, val, test)


# ------------------------------------------------------------------------------ scoring


def twin_scores(test: Dataset, pred_probs: np.ndarray, classes: tuple[str, ...]) -> dict:
    """Accuracy on the twin rows of `test` and the largest |p_a - p_b| of one class between two
    members of one twin group (0 for a model that cannot see order)."""
    groups = twin_groups(test)
    rows = np.flatnonzero(groups >= 0)
    predicted = np.asarray(classes)[pred_probs[rows].argmax(axis=1)]
    truth = np.asarray(test.labels)[rows]
    spread = max(
        float(np.ptp(pred_probs[groups == g], axis=0).max()) for g in np.unique(groups[rows])
    )
    return {"twin_accuracy": round(float((predicted == truth).mean()), 4),
            "twin_n": len(rows), "max_group_prob_diff": spread}  # fmt: skip


def score(result: TrainResult, test: Dataset) -> dict:
    """Test figures of the trained transformer (all rows and held-out twins), and validation."""
    model = result.neural
    pred_probs = model.predict_proba(list(test.texts))
    predicted = list(np.asarray(model.classes_)[pred_probs.argmax(axis=1)])
    report = evaluate_predictions(list(test.labels), predicted, labels=list(model.classes_))
    val_twin = result.neural_twin_report
    return {
        "test_accuracy": round(report.accuracy, 4), "test_macro_f1": round(report.macro_f1, 4),
        **twin_scores(test, pred_probs, tuple(model.classes_)),
        "val_macro_f1": round(result.neural_report.macro_f1, 4),
        "val_twin_accuracy": round(val_twin.accuracy, 4) if val_twin else None,
        "best_epoch": result.best_epoch, "train_seconds": round(result.train_seconds, 1),
    }  # fmt: skip


def bow_twin_accuracy(result: TrainResult, test: Dataset) -> dict:
    """The bag-of-words baseline (fitted by `train_models` on the same rows) on the test rows."""
    pred_probs = result.bow.predict_proba(list(test.texts))
    return twin_scores(test, pred_probs, tuple(result.bow.classes_))


# ------------------------------------------------------------------------------ runs


def run_setting(setting: Setting, data: Splits, *, positions: bool, seed: int) -> TrainResult:
    """`train_models` on the tiny backbone with this setting's architecture and options."""
    patience = {} if setting.patience is None else {"patience": setting.patience}
    config = TrainConfig(
        backbone=TINY, positional_encoding=positions, lr=setting.lr, epochs=setting.epochs,
        pooling=setting.pooling, seed=seed, **patience,
    )  # fmt: skip
    # load_backbone builds the tiny model with create_tiny_classifier's defaults; a setting
    # that changes the architecture hands it those arguments for this run only.
    builder = partial(tiny_model.create_tiny_classifier, **setting.arch)
    with mock.patch.object(backbone, "create_tiny_classifier", builder):
        return train_models(data.train, data.val, config)


def run_all(settings: tuple[Setting, ...], data: Splits, seed: int) -> tuple[list[dict], dict]:
    """One row per setting with both runs (positions on and off) and the chosen one marked."""
    rows, bow = [], None
    for setting in settings:
        row = {"setting": setting.name, "levers": asdict(setting)}
        for positions, key in ((True, "on"), (False, "off")):
            print(f"training {setting.name!r}, positions {key}", file=sys.stderr)
            result = run_setting(setting, data, positions=positions, seed=seed)
            row[key] = score(result, data.test)
            bow = bow or bow_twin_accuracy(result, data.test)
        rows.append(row)
    best = max(rows, key=lambda r: (r["on"]["val_twin_accuracy"] or 0, r["on"]["val_macro_f1"]))
    for row in rows:
        row["chosen_by_validation"] = row is best
    return rows, bow


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)  # this process only: a bench script, not a server job
    settings = GRID if args.grid else (BEFORE, DEFAULTS)
    if args.only:
        settings = tuple(s for s in (*GRID, DEFAULTS) if s.name in args.only)
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        data = make_splits(args, Path(scratch))
    with held_output() as held:
        rows, bow = run_all(settings, data, args.split_seed)
    load = guard.finish()
    if shows_figures(load):
        sys.stdout.write(held.getvalue())
        report(args, data, rows, bow, load)
    print_load(load, file=sys.stderr if args.json else None)
    return 0


def report(args, data: Splits, rows: list[dict], bow: dict, load) -> None:
    twins = {name: int((twin_groups(part) >= 0).sum()) for name, part in asdict_splits(data)}
    document = {
        "command": command_line("bench.bench_tiny_order"), "machine": machine(),
        "data": asdict(DemoConfig(rows=args.rows, seed=args.seed)), "threads": args.threads,
        "rows": {name: len(part) for name, part in asdict_splits(data)}, "twin_rows": twins,
        "bag_of_words": bow, "settings": rows, "machine_load": load.to_json(),
    }  # fmt: skip
    if args.json:
        print(json.dumps(document, indent=2, default=str))
        return
    print(f"demo data {args.rows} rows, seed {args.seed}: train {len(data.train)}, validation "
          f"{len(data.val)}, test {len(data.test)} rows; twin rows {twins}")  # fmt: skip
    print(f"bag of words: held-out twin accuracy {bow['twin_accuracy']:.3f}, max within-group "
          f"probability difference {bow['max_group_prob_diff']:.1e}")  # fmt: skip
    print(f"{'setting':44s} {'pos':>3} {'val twin':>8} {'val F1':>6} {'test acc':>8} "
          f"{'test F1':>7} {'twin acc':>8} {'max |dp|':>8} {'epoch':>5} {'seconds':>7}"
          )  # fmt: skip
    for row in rows:
        for key in ("on", "off"):
            r = row[key]
            mark = "*" if row["chosen_by_validation"] and key == "on" else " "
            print(
                f"{mark}{row['setting']:43s} {key:>3} {r['val_twin_accuracy']:8.3f} "
                f"{r['val_macro_f1']:6.3f} {r['test_accuracy']:8.3f} {r['test_macro_f1']:7.3f} "
                f"{r['twin_accuracy']:8.3f} {r['max_group_prob_diff']:8.1e} {r['best_epoch']:5d} "
                f"{r['train_seconds']:7.1f}"
            )
    print("* chosen by validation twin accuracy, then validation macro-F1")
    print(command_line("bench.bench_tiny_order"))


def asdict_splits(data: Splits) -> list[tuple[str, Dataset]]:
    return [("train", data.train), ("val", data.val), ("test", data.test)]


if __name__ == "__main__":
    sys.exit(main())
