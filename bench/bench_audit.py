"""Label audit benchmark: how well the audit finds label flips planted in demo data (or in a CSV).

Plants a seeded share of flips (each to another desk), runs the audit, and prints precision and
recall of the flagged rows against the flips (the audit picks how many rows to flag), the audit's
own estimate of the real errors among them against the true count, and the precision-recall curve
of its ranking (precision at recall 0.5 / 0.7 / 0.85 / 0.9, average precision); overall and, on
demo data, on the regular and twin slices; next to named baselines: flag rows at random, flag
every row whose out-of-fold prediction differs from its label ("argmax != given"), and the
previous default (bag of words at C=10, cleanlab "both"). Run from the repo root:

    python -m bench.bench_audit [--rows 3000] [--share 0.05] [--folds 5] [--force]
    python -m bench.bench_audit --csv ../shared/data/cfpb-sample/train.csv \
        --text-column narrative --label-column product --quick

With `--transformer tiny` (or minilm, or a model folder) it also runs the fine-tune audit
(fine-tuned afresh on each fold with `--epochs`, `--lr`, ...) on the same flipped data and prints
it beside the bag-of-words audit, slice by slice. With `--quick` (default backbone minilm, or
`--quick FOLDER`) it runs the embedding audit (core.analysis.audit_embedding: frozen embeddings
computed once, a linear head per fold) on the same flipped data and prints it beside the bag of
words, with the seconds of both.

The load is recorded around the run (bench.machine); the figures of a busy run are withheld
unless --force, which prints them marked busy.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score

from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.analysis.audit import (
    FILTER_METHODS,
    MODEL,
    AuditConfig,
    AuditResult,
    LabelIssue,
    find_issues,
    plant_label_flips,
    run_audit,
)
from core.analysis.audit_embedding import embedding_train_config, run_embedding_audit
from core.analysis.audit_fine_tune import fine_tune_audit_config, fine_tune_fit
from core.analysis.label_conflicts import SAME_BAG
from core.data.dataset import Dataset
from core.data.demo import DemoConfig, generate_demo_data
from core.models.transformer.config import TrainConfig


@dataclass(frozen=True)
class Score:
    """Precision and recall of a set of flagged rows against the planted flips."""

    flagged: int
    precision: float
    recall: float


def score(flagged: set[int], planted: set[int]) -> Score:
    """Precision and recall of `flagged` against `planted` (0 when either is empty)."""
    hits = len(flagged & planted)
    precision = hits / len(flagged) if flagged else 0.0
    return Score(len(flagged), precision, hits / len(planted) if planted else 0.0)


def demo_data(rows: int, *, seed: int) -> Dataset:
    """The demo data set as a Dataset (desk = label), slice and twin_group kept in `extra`."""
    frame = generate_demo_data(DemoConfig(rows=rows, seed=seed))
    extra = frame[["slice", "twin_group"]].reset_index(drop=True)
    return Dataset(texts=tuple(frame["text"]), labels=tuple(frame["desk"]), extra=extra)


def csv_data(path: str, *, text_column: str, label_column: str) -> Dataset:
    """A CSV's texts and labels as a Dataset (no slices); refuses a file without the columns."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = {text_column, label_column} - set(frame.columns)
    if missing:
        raise SystemExit(
            f"{path} has no column {sorted(missing)}; its header: {list(frame.columns)}"
        )
    return Dataset(texts=tuple(frame[text_column]), labels=tuple(frame[label_column]))


def with_flips(data: Dataset, *, share: float, seed: int) -> tuple[Dataset, set[int]]:
    """`data` with a seeded `share` of labels flipped to another desk, and the flipped rows."""
    labels, flipped = plant_label_flips(data.labels, share=share, seed=seed)
    noisy = Dataset(texts=data.texts, labels=labels, rows=data.rows, extra=data.extra)
    return noisy, set(flipped.tolist())


def flagged_by(issues: Sequence[LabelIssue], kind: str | None) -> set[int]:
    """Positions of the issues of `kind` (any kind when None)."""
    return {x.index for x in issues if kind is None or kind in x.kinds}


def print_row(name: str, s: Score, *, reference: Score | None = None) -> None:
    ratio = ""
    if reference is not None and reference.precision:
        ratio = f"  precision x{s.precision / reference.precision:.2f} vs argmax!=given"
    print(f"  {name:<44} flagged {s.flagged:5d}  P {s.precision:.3f}  R {s.recall:.3f}{ratio}")


def main() -> int:
    args = parse_args()
    print(f"command: {command_line('bench.bench_audit')}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with held_output() as held:
        run(args)
    load = guard.finish()
    if shows_figures(load):
        print(held.getvalue(), end="")
    print_load(load)
    return 0


RECALLS = (0.5, 0.7, 0.85, 0.9)  # where the precision-recall curve of the ranking is read
PREVIOUS = AuditConfig(bow_strengths=(), filter_by="both")  # the default until issue #40


def run(args: argparse.Namespace) -> None:
    """The audit on flipped data and every comparison, printed."""
    if args.csv:
        clean = csv_data(args.csv, text_column=args.text_column, label_column=args.label_column)
    else:
        clean = demo_data(args.rows, seed=args.data_seed)
    data, planted = with_flips(clean, share=args.share, seed=args.flip_seed)
    slices = data.extra is not None and "slice" in data.extra
    twins = (
        set(np.flatnonzero(data.extra["slice"].to_numpy() == "twin").tolist()) if slices else set()
    )
    regular = set(range(len(data))) - twins
    config = AuditConfig(folds=args.folds, seed=args.seed)
    started = time.perf_counter()
    result = run_audit(data, config)
    seconds = time.perf_counter() - started
    predicted = np.asarray(result.classes)[result.pred_probs.argmax(axis=1)]
    naive = set(np.flatnonzero(predicted != np.asarray(data.labels)).tolist())
    print(
        f"{args.csv or 'demo'}: rows {len(data)}, planted flips {len(planted)} ({args.share:.0%}), "
        f"twin rows {len(twins)}, folds {args.folds}, audit {seconds:.1f} s (bow: {result.chosen})"
    )
    print(f"random flagging: precision {len(planted) / len(data):.3f} at any recall")
    reference = score(naive, planted)
    print_row("argmax != given (all rows)", reference)
    previous = run_audit(data, replace(PREVIOUS, folds=args.folds, seed=args.seed))
    report_audit("previous default (bow C=10, both)", data, previous, planted)
    report_audit("bow", data, result, planted)
    report_filters(data, result.pred_probs, config, planted, reference)
    if twins:
        report_slices(result.issues, planted, regular, twins, naive)
    report_clean(clean, config, regular)
    if args.transformer:
        report_neural(data, clean.labels, planted, (regular, twins), result, args)
    if args.quick:
        report_quick(data, clean.labels, planted, (regular, twins), (result, seconds), args)


def report_audit(name: str, data: Dataset, result: AuditResult, planted: set[int]) -> None:
    """The rows the audit flags (and lists), its estimate of real errors among the flagged, and
    the precision-recall curve of its ranking."""
    flagged, listed = flagged_by(result.issues, MODEL), flagged_by(result.issues, None)
    print_row(f"{name}: model flags", score(flagged, planted))
    print_row(f"{name}: listed (with conflicts)", score(listed, planted))
    if result.estimate is not None:
        e = result.estimate
        print(
            f"  {name}: estimate of real errors among the {e.flagged} flagged {e.expected:.0f} "
            f"(between {e.low:.0f} and {e.high:.0f}); true {len(flagged & planted)}"
        )
    precisions, ap = ranking_curve(data, result.pred_probs, planted)
    points = "  ".join(f"P@R{r:g} {p:.3f}" for r, p in zip(RECALLS, precisions, strict=True))
    print(f"  {name}: ranking {points}  average precision {ap:.3f}")


def ranking_curve(
    data: Dataset, pred_probs: np.ndarray, planted: set[int]
) -> tuple[list[float], float]:
    """Precision at each of RECALLS when rows are read lowest p(given) first, and the average
    precision of that ranking (the audit's order: cleanlab's self-confidence)."""
    classes = sorted(set(data.labels))
    label_ids = np.asarray([classes.index(y) for y in data.labels])
    given = pred_probs[np.arange(len(label_ids)), label_ids]
    is_flip = np.isin(np.arange(len(label_ids)), sorted(planted))
    hits = np.cumsum(is_flip[np.argsort(given, kind="stable")])
    precisions = []
    for recall in RECALLS:
        k = int(np.searchsorted(hits, np.ceil(recall * len(planted)))) + 1
        precisions.append(float(hits[k - 1] / k))
    return precisions, float(average_precision_score(is_flip, -given))


def report_quick(data, true_labels, planted, slices, bow, args) -> None:
    """The embedding audit (frozen embeddings once, a head per fold) beside the bag of words'."""
    bow_result, bow_seconds = bow
    train_config = embedding_train_config(args.quick, max_length=args.max_length)
    config = AuditConfig(folds=args.folds, seed=args.seed)
    embedded: list[float] = []  # seconds since the start at each embedding report
    started = time.perf_counter()
    result = run_embedding_audit(
        data, config, train_config,
        on_embed=lambda _: embedded.append(time.perf_counter() - started),
    )  # fmt: skip
    seconds = time.perf_counter() - started
    print(
        f"embedding audit ({args.quick}, max_length {args.max_length}): {seconds:.1f} s "
        f"(embedding {embedded[-1]:.1f} s) against bag of words {bow_seconds:.1f} s"
    )
    print(f"  quick chose: {result.chosen}")
    report_audit("quick", data, result, planted)
    compare({"bow": bow_result, "quick": result}, true_labels, planted, slices)


def report_neural(data, true_labels, planted, slices, bow_result, args) -> None:
    """The transformer-based audit on the same data, beside the bag-of-words audit."""
    train_config = TrainConfig(
        backbone=args.transformer,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_length=args.max_length,
        patience=args.epochs,  # no early stop: each fold trains for the same budget
        seed=args.seed,
    )
    config = fine_tune_audit_config(AuditConfig(folds=args.folds, seed=args.seed))
    started = time.perf_counter()
    result = run_audit(data, config, fit=fine_tune_fit(train_config))
    seconds = time.perf_counter() - started
    print(f"fine-tune audit ({train_config}): {seconds:.0f} s")
    compare({"bow": bow_result, "transformer": result}, true_labels, planted, slices)


def compare(audits, true_labels, planted, slices) -> None:
    """Out-of-fold accuracy and precision / recall by slice of each named audit."""
    regular, twins = slices
    truth = np.asarray(true_labels)
    for name, audit in audits.items():
        predicted = np.asarray(audit.classes)[audit.pred_probs.argmax(axis=1)]
        model = flagged_by(audit.issues, MODEL)
        calm = twins - planted
        print(f"  {name}: out-of-fold accuracy vs true desks {np.mean(predicted == truth):.3f}")
        print_row(f"{name}: all rows, model flags", score(model, planted))
        if twins:
            twin_rows = sorted(twins)
            accuracy = np.mean(predicted[twin_rows] == truth[twin_rows])
            print(f"  {name}: twins accuracy {accuracy:.3f}, unflipped twins flagged "
                  f"{len(model & calm)} of {len(calm)}")  # fmt: skip
            print_row(f"{name}: regular rows", score(model & regular, planted & regular))
            print_row(f"{name}: twin rows", score(model & twins, planted & twins))


def report_filters(data, pred_probs, config, planted, reference) -> None:
    """Precision and recall of each cleanlab filter over the same out-of-fold probabilities."""
    for filter_by in FILTER_METHODS:
        issues = find_issues(data, pred_probs, config=replace(config, filter_by=filter_by))
        name = f"cleanlab {filter_by}"
        model_score = score(flagged_by(issues, MODEL), planted)
        print_row(name + " (model flags)", model_score, reference=reference)
        if filter_by == config.filter_by:
            print_row(name + " + conflicts", score(flagged_by(issues, None), planted))


def report_slices(issues, planted, regular, twins, naive) -> None:
    """The default audit on regular and twin rows; how many unflipped twins it lists."""
    model, listed = flagged_by(issues, MODEL), flagged_by(issues, None)
    print(f"default audit (cleanlab {AuditConfig().filter_by}) by slice:")
    print_row("regular rows, model flags", score(model & regular, planted & regular))
    print_row("regular rows, model flags + conflicts", score(listed & regular, planted & regular))
    print_row("regular rows, argmax != given", score(naive & regular, planted & regular))
    print_row("twin rows, model flags", score(model & twins, planted & twins))
    calm = twins - planted
    same_bag = flagged_by(issues, SAME_BAG) & calm
    print(
        f"  unflipped twins {len(calm)}: flagged by the model {len(model & calm)} "
        f"({len(model & calm) / len(calm):.0%}), listed as same-words conflicts "
        f"{len(same_bag)} ({len(same_bag) / len(calm):.0%}), by anything {len(listed & calm)}"
    )


def report_clean(clean: Dataset, config: AuditConfig, regular: set[int]) -> None:
    """The same audit without flips: what it flags is ambiguous phrasing, twins, or the data's own
    label errors."""
    model = flagged_by(run_audit(clean, config).issues, MODEL)
    slices = ""
    if len(regular) < len(clean):
        slices = f" ({len(model & regular)} regular, {len(model - regular)} twins)"
    print(f"no flips planted: the model flags {len(model)} rows{slices}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000, help="demo rows (without --csv)")
    parser.add_argument("--csv", help="audit this CSV instead of demo data")
    parser.add_argument("--text-column", default="text", help="the CSV's text column")
    parser.add_argument("--label-column", default="label", help="the CSV's label column")
    parser.add_argument("--share", type=float, default=0.05, help="share of labels flipped")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="fold shuffling seed")
    parser.add_argument("--data-seed", type=int, default=7, help="demo data seed")
    parser.add_argument("--flip-seed", type=int, default=1, help="which labels get flipped")
    parser.add_argument(
        "--transformer", help="also audit with this backbone: tiny, minilm or a model folder"
    )
    parser.add_argument(
        "--quick", nargs="?", const="minilm",
        help="also run the embedding audit over this backbone's frozen embeddings (default minilm)",
    )  # fmt: skip
    parser.add_argument("--epochs", type=int, default=10, help="transformer epochs per fold")
    parser.add_argument("--lr", type=float, default=3e-3, help="transformer learning rate")
    parser.add_argument("--batch-size", type=int, default=32, help="transformer batch size")
    parser.add_argument("--max-length", type=int, default=128, help="transformer max tokens")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
