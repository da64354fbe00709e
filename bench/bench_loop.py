"""The closed loop, measured: how much of the accuracy lost to wrong labels the team's own
corrections win back (issue #23).

On a data set with a seeded share of labels flipped (10%) and a clean held-out test set:
train on the noisy labels, audit them, let a simulated reviewer (who knows the true desk) work
through the audit's order up to a review budget, retrain from those corrections through the
app's own path (saved data set, review store, `core.review.corrections`, the split inherited
from the noisy model's card), and score the noisy, corrected and clean-label models on the clean
test rows. The triage path too: the noisy model classifies fresh complaints, the reviewer
corrects the ones it was unsure of, and the verdicts are folded in as new rows.

    python -m bench.bench_loop [--data demo|cfpb] [--recipes quick full] [--budgets 100 300 600]
        [--seeds 3] [--audit quick|bow]

Every model is trained on one split of the pool (the clean-label model once; each flip seed's
models on the same rows), and the figures are means over the flip seeds: one seed's test
accuracy moves by about a point with the validation rows' choice of head strength and blend.
"Recovered" is (corrected - noisy) / (clean - noisy) of those means: the share of the loss won
back. The load is recorded around the run (bench.machine); figures of a busy run are withheld
unless --force.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.machine import (
    LoadGuard,
    command_line,
    held_output,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.access import OPERATOR
from core.analysis.audit import AuditConfig, plant_label_flips, run_audit
from core.analysis.audit_embedding import embedding_train_config, run_embedding_audit
from core.data.dataset import Dataset, split_dataset, split_inheriting
from core.data.demo import DemoConfig, generate_demo_data
from core.data.saved import DatasetSave
from core.data.saved import load_dataset as load_saved
from core.data.validation import load_dataset
from core.models.classifier import DEFAULT_REVIEW_THRESHOLD
from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from core.models.transformer.training import TrainResult, train_models
from core.review.corrections import build_next_version, plan_corrections
from core.review.library import save_and_record
from core.review.records import ReviewDecision
from core.review.store import Store
from core.review.triage import enqueue_uncertain

CFPB = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "cfpb-sample"
NOISY = "noisy"


@dataclass(frozen=True)
class Corpus:
    """Training pool (true labels), clean test rows, and fresh complaints for the triage path."""

    name: str
    pool: Dataset
    test: Dataset
    fresh: Dataset


@dataclass(frozen=True)
class Scored:
    """A trained model pair and the accuracy on the clean test rows of its routing decision, of
    the transformer alone and of the bag of words alone."""

    result: TrainResult
    accuracy: float
    neural: float
    bow: float
    seconds: float


def demo_corpus(rows: int) -> Corpus:
    """Demo data: the pool from seed 0, test and fresh complaints from other seeds, texts seen
    in the pool removed (the generator can repeat a short complaint)."""
    pool = _demo(rows, seed=0)
    seen = set(pool.texts)
    test, fresh = _unseen(_demo(2000, seed=1), seen), _unseen(_demo(600, seed=2), seen)
    return Corpus("demo", pool, test, fresh)


def cfpb_corpus() -> Corpus:
    """The shared CFPB sample: its train file is the pool (a fifth kept back as fresh
    complaints for the triage path), its test file the clean test rows."""
    data, _ = load_dataset(CFPB / "train.csv")
    pool, fresh = split_dataset(data, val_fraction=0.2, seed=7)
    test, _ = load_dataset(CFPB / "test.csv")
    return Corpus("cfpb", pool, test, fresh)


def _demo(rows: int, *, seed: int) -> Dataset:
    frame = generate_demo_data(DemoConfig(rows=rows, seed=seed))
    extra = frame[["slice"]].reset_index(drop=True)
    return Dataset(texts=tuple(frame["text"]), labels=tuple(frame["desk"]), extra=extra)


def _unseen(data: Dataset, seen: set[str]) -> Dataset:
    return data.subset([i for i, text in enumerate(data.texts) if text not in seen])


def with_labels(data: Dataset, labels: Sequence[str]) -> Dataset:
    return Dataset(texts=data.texts, labels=tuple(labels), rows=data.rows, extra=data.extra)


def decide(result: TrainResult, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The routing decision's labels (n,) and confidences (n,) for `texts`."""
    texts = list(texts)
    probs = result.blend.combine(
        result.neural.predict_proba(texts),
        result.bow.predict_proba(texts),
        frozen_probs(result, texts),
    )
    classes = np.asarray([str(c) for c in result.neural.classes_])
    return classes[probs.argmax(axis=1)], probs.max(axis=1)


def frozen_probs(result: TrainResult, texts: list[str]) -> np.ndarray | None:
    """The frozen encoder's probabilities where the recipe "auto" blended it in."""
    return None if result.frozen is None else result.frozen.predict_proba(texts)


def train_scored(train: Dataset, val: Dataset, config: TrainConfig, test: Dataset) -> Scored:
    started = time.perf_counter()
    result = train_models(train, val, config)
    seconds = time.perf_counter() - started
    texts, truth = list(test.texts), np.asarray(test.labels)
    classes = np.asarray([str(c) for c in result.neural.classes_])
    neural = result.neural.predict_proba(texts)
    bow = result.bow.predict_proba(texts)
    decision = result.blend.combine(neural, bow, frozen_probs(result, texts))
    accuracy = {
        name: float(np.mean(classes[probs.argmax(axis=1)] == truth))
        for name, probs in (("decision", decision), ("transformer", neural), ("bow", bow))
    }
    return Scored(result, accuracy["decision"], accuracy["transformer"], accuracy["bow"], seconds)


def audit_order(noisy: Dataset, args: argparse.Namespace) -> tuple[list[int], int, float]:
    """Positions in the order a reviewer works through them: the audit's flagged rows, most
    suspicious first, then every other row by how little the out-of-fold model believed its
    label. Also the number flagged and the audit's seconds."""
    config = AuditConfig(folds=args.folds, seed=0)
    started = time.perf_counter()
    if args.audit == "quick":
        result = run_embedding_audit(noisy, config, embedding_train_config())
    else:
        result = run_audit(noisy, config)
    seconds = time.perf_counter() - started
    flagged = [issue.index for issue in result.issues]
    column = {label: i for i, label in enumerate(result.classes)}
    belief = result.pred_probs[np.arange(len(noisy)), [column[y] for y in noisy.labels]]
    rest = [int(i) for i in np.argsort(belief, kind="stable") if int(i) not in set(flagged)]
    return flagged + rest, len(flagged), seconds


def review(store: Store, noisy: Dataset, truth: Sequence[str], order: Sequence[int], budget: int):
    """The simulated reviewer: the first `budget` rows of `order`, relabelled to the true desk
    where the given one is wrong, kept otherwise, recorded in the store like the app does."""
    for i in order[:budget]:
        given, true = noisy.labels[i], truth[i]
        store.record_decision(
            ReviewDecision(
                fingerprint=noisy.fingerprint, row=noisy.rows[i], text=noisy.texts[i],
                given_label=given, decision="keep" if given == true else "relabel",
                reviewer="simulated@bank.example", new_label=None if given == true else true,
            ),
            actor=OPERATOR,
        )  # fmt: skip


def triage_verdicts(store: Store, model: TrainResult, fresh: Dataset) -> int:
    """The noisy model classifies the fresh complaints; the unsure ones go to the triage queue
    and the reviewer gives each its true desk. Returns how many were unsure."""
    labels, confidences = decide(model, fresh.texts)
    predictions = [_Routed(str(y), float(c)) for y, c in zip(labels, confidences, strict=True)]
    ids = enqueue_uncertain(
        store, fresh.texts, predictions, actor=OPERATOR,
        threshold=DEFAULT_REVIEW_THRESHOLD, batch="fresh", rows=list(fresh.rows),
    )  # fmt: skip
    truth = dict(zip(fresh.rows, fresh.labels, strict=True))
    for item in store.triage_items(batch="fresh"):
        if item.id in ids:
            store.decide_triage(
                item.id, final_label=truth[item.row], reviewer="simulated@bank.example",
                actor=OPERATOR,
            )  # fmt: skip
    return len(ids)


@dataclass(frozen=True)
class _Routed:
    label: str
    confidence: float

    @property
    def probabilities(self) -> dict[str, float]:
        return {self.label: self.confidence}


def retrain(store: Store, root: Path, noisy_model: TrainResult, config: TrainConfig, test: Dataset):
    """The next version of the noisy data set from the store's corrections, trained with the
    noisy model's held-out rows still held out; scored on `test`."""
    parent, _ = load_saved(root, NOISY)
    plan = plan_corrections(store, root, NOISY, actor=OPERATOR)
    version, _ = build_next_version(parent, plan)
    split = noisy_model.split
    train, val = split_inheriting(
        version, train_keys=split["train_keys"], validation_keys=split["validation_keys"],
        val_fraction=config.val_fraction,
    )  # fmt: skip
    return train_scored(train, val, config, test), plan


def recovered(noisy: float, corrected: float, clean: float) -> str:
    lost = clean - noisy
    return f"{(corrected - noisy) / lost:.0%}" if lost > 0.002 else "n/a (nothing lost)"


@dataclass(frozen=True)
class SeedRun:
    """One flip seed: the noisy model, the corrected one per budget (with the flips each
    review budget fixed), the triage path's model and how many complaints it was unsure of."""

    noisy: Scored
    corrected: dict[int, Scored]
    fixed: dict[int, int]
    flagged: int
    caught: int
    triage: Scored
    unsure: int
    added: int


def run_seed(corpus, config, split, seed: int, args, scratch: Path) -> SeedRun:
    """Flip a seeded share of the pool's labels, train on them (the shared split's rows), audit,
    review up to each budget, retrain from the corrections; then the triage path."""
    truth = corpus.pool.labels
    flipped_labels, flipped = plant_label_flips(truth, share=args.share, seed=seed)
    noisy = with_labels(corpus.pool, flipped_labels)
    train, val = (noisy.subset(part) for part in split)
    noisy_model = train_scored(train, val, config, corpus.test)
    order, flagged, _ = audit_order(noisy, args)
    corrected, fixed = {}, {}
    for budget in args.budgets:
        root, store = _fresh_store(scratch, noisy, f"{config.recipe}-{seed}-{budget}")
        review(store, noisy, truth, order, budget)
        corrected[budget], _ = retrain(store, root, noisy_model.result, config, corpus.test)
        fixed[budget] = len(set(order[:budget]) & set(flipped))
    root, store = _fresh_store(scratch, noisy, f"{config.recipe}-{seed}-triage")
    unsure = triage_verdicts(store, noisy_model.result, corpus.fresh)
    triage, plan = retrain(store, root, noisy_model.result, config, corpus.test)
    caught = len(set(order[:flagged]) & set(flipped))
    return SeedRun(noisy_model, corrected, fixed, flagged, caught, triage, unsure, len(plan.added))


def run_recipe(corpus: Corpus, recipe: str, args: argparse.Namespace, scratch: Path) -> None:
    """Every seed on one split of the pool (stratified on the true desks), so the clean-label
    model is trained once and every model of a seed sees the same rows."""
    config = TrainConfig(recipe=recipe, seed=0)
    train, val = split_dataset(corpus.pool, val_fraction=config.val_fraction, seed=0)
    position = {row: i for i, row in enumerate(corpus.pool.rows)}
    split = [[position[r] for r in part.rows] for part in (train, val)]
    clean = train_scored(train, val, config, corpus.test)
    runs = [run_seed(corpus, config, split, seed, args, scratch) for seed in range(args.seeds)]
    flips = round(args.share * len(corpus.pool))
    print(
        f"\n{corpus.name}, recipe {recipe}: {len(corpus.pool)} rows ({len(train)} train, "
        f"{len(val)} validation), {flips} flipped ({args.share:.0%}) per seed, seeds "
        f"0-{args.seeds - 1}, {len(corpus.test)} clean test rows; {args.audit} audit flagged "
        f"{_mean(r.flagged for r in runs):.0f} rows ({_mean(r.caught for r in runs):.0f} of "
        f"the flips) on average; one training {clean.seconds:.0f} s. Means over the seeds:"
    )
    print("| model | review budget | flips fixed | decision accuracy | recovered "
          "| transformer alone | bag of words alone |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    noisy = _means([r.noisy for r in runs])
    print(f"| noisy labels | 0 | 0 | {noisy[0]:.3f} | 0% | {noisy[1]:.3f} | {noisy[2]:.3f} |")
    for budget in args.budgets:
        fixed = _mean(r.fixed[budget] for r in runs)
        got = _means([r.corrected[budget] for r in runs])
        share = recovered(noisy[0], got[0], clean.accuracy)
        print(f"| corrected | {budget} | {fixed:.0f} of {flips} | {got[0]:.3f} | {share} | "
              f"{got[1]:.3f} | {got[2]:.3f} |")  # fmt: skip
    print(f"| clean labels | - | - | {clean.accuracy:.3f} | 100% | {clean.neural:.3f} | "
          f"{clean.bow:.3f} |")  # fmt: skip
    per_seed = ", ".join(
        f"{r.noisy.accuracy:.3f}/"
        + "/".join(f"{r.corrected[b].accuracy:.3f}" for b in args.budgets)
        for r in runs
    )
    print(f"decision accuracy per seed (noisy/{'/'.join(map(str, args.budgets))}): {per_seed}")
    print(recovered_by_budget(runs, args.budgets, clean.accuracy, flips))
    triage = _means([r.triage for r in runs])
    print(
        f"triage path: the noisy model was unsure of {_mean(r.unsure for r in runs):.0f} of "
        f"{len(corpus.fresh)} fresh complaints; {_mean(r.added for r in runs):.0f} verdicts "
        f"folded in as rows; decision accuracy {noisy[0]:.3f} -> {triage[0]:.3f} "
        f"({triage[0] - noisy[0]:+.3f}); transformer {noisy[1]:.3f} -> {triage[1]:.3f}, bag of "
        f"words {noisy[2]:.3f} -> {triage[2]:.3f}"
    )


def recovered_by_budget(runs: Sequence[SeedRun], budgets: Sequence[int], clean: float,
                        flips: int) -> str:  # fmt: skip
    """The recovered share per budget, each seed's own (against its noisy model), as mean ±
    standard error over the seeds; whether it never falls by more than one standard error as
    the budget grows, and the smallest budget recovering 80% (#40's goals)."""
    shares = np.array([[(r.corrected[b].accuracy - r.noisy.accuracy)
                        / max(clean - r.noisy.accuracy, 1e-9) for b in budgets]
                       for r in runs])  # fmt: skip
    mean = shares.mean(axis=0)
    error = shares.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else 0 * mean
    steady = all(mean[i + 1] >= mean[i] - max(error[i], error[i + 1]) for i in range(len(mean) - 1))
    enough = [b for b, m in zip(budgets, mean, strict=True) if m >= 0.8]
    cells = ", ".join(
        f"{b}: {m:.0%} ± {e:.0%}" for b, m, e in zip(budgets, mean, error, strict=True)
    )
    first = f"{enough[0]} ({enough[0] / flips:.1f}x the flips)" if enough else "none"
    return (
        f"recovered per seed, mean ± standard error: {cells}; non-decreasing within one "
        f"standard error: {'yes' if steady else 'no'}; 80% first at budget {first}"
    )


def _mean(values) -> float:
    return float(np.mean(list(values)))


def _means(scores: Sequence[Scored]) -> tuple[float, float, float]:
    """Mean decision, transformer and bag-of-words accuracy."""
    return (_mean(s.accuracy for s in scores), _mean(s.neural for s in scores),
            _mean(s.bow for s in scores))  # fmt: skip


def _fresh_store(scratch: Path, noisy: Dataset, name: str) -> tuple[Path, Store]:
    """A new review store and data folder holding the noisy data set as saved by the operator."""
    folder = scratch / name
    folder.mkdir()
    store = Store.open(folder / "lens.db")
    root = folder / "datasets"
    save_and_record(store, root, DatasetSave(NOISY, noisy), actor=OPERATOR)
    return root, store


def main() -> int:
    args = parse_args()
    print(f"command: {command_line('bench.bench_loop')}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with held_output() as held, tempfile.TemporaryDirectory() as scratch:
        corpus = demo_corpus(args.rows) if args.data == "demo" else cfpb_corpus()
        for recipe in args.recipes:
            run_recipe(corpus, recipe, args, Path(scratch))
    load = guard.finish()
    if shows_figures(load):
        print(held.getvalue(), end="")
    print_load(load)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("demo", "cfpb"), default="demo")
    parser.add_argument("--rows", type=int, default=3000, help="demo rows in the training pool")
    parser.add_argument("--recipes", nargs="+", choices=(QUICK, FULL, AUTO), default=[QUICK])
    parser.add_argument("--budgets", nargs="+", type=int, default=[100, 300, 600])
    parser.add_argument("--share", type=float, default=0.10, help="share of labels flipped")
    parser.add_argument("--seeds", type=int, default=3, help="flip seeds 0..N-1, averaged")
    parser.add_argument("--audit", choices=("quick", "bow"), default="quick")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--force", action="store_true", help="print figures of a busy run")
    return parser.parse_args()


if __name__ == "__main__":
    raise SystemExit(main())
