"""Complaints that fit no desk: how well each unknown-desk score tells desks held out of training
from the desks a model knows, and what the review policy flags, per data set and recipe.

    .venv/bin/python -m bench.bench_unknown                                      # demo data
    .venv/bin/python -m bench.bench_unknown --data ../shared/data/cfpb-sample/train.csv \\
        --test ../shared/data/cfpb-sample/test.csv
    .venv/bin/python -m bench.bench_unknown --data bench/external/banking77/train.csv \\
        --test bench/external/banking77/test.csv --holdout 10 --rounds 3
    add --recipe full to fine-tune a model per held-out run (minutes each)

The file is split into train / validation (and test, without `--test`) as `bench_accuracy`
splits it. Each run holds out desks: each desk in turn (default), or `--holdout N` desks drawn
at random (`--rounds` draws, seeded). The model learns from the other desks' training rows; its
validation rows of those desks choose the head's strength, the softmax temperature, the blend
with the bag of words and the review policy, as `core train` does. Scored: the test rows, known
desks against held-out ones. Scores compared (higher = less like a known desk):
- msp: 1 - the largest softmax probability after temperature scaling on validation rows;
- energy: -logsumexp of the logits (Liu et al. 2020);
- mahalanobis, knn: core.models.flagging's distances in the model's own embedding space.
Reported per score: AUROC, and for the review policy it would ship with (core.models.flagging
.choose_policy on the validation rows) the share of unknown-desk test complaints flagged and of
known-desk ones flagged (unsure or unknown, as `classify` flags them).

Recipe "quick" embeds every text once with the frozen encoder and fits a head per run, so all
runs of a data set cost about one embedding pass; "full" fine-tunes MiniLM per run
(`TrainConfig(recipe="full")`). Accuracy figures: they do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.bench_accuracy import Splits
from core.data.dataset import Dataset, split_dataset
from core.data.demo import DemoConfig, write_demo_data
from core.data.privacy import mask_texts
from core.data.validation import load_dataset
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.blend import calibrated_temperature, choose_blend, tempered
from core.models.device import Runtime
from core.models.flagging import (
    COMBINED,
    KNN,
    KNN_MSP,
    MAHALANOBIS,
    choose_policy,
    doubt,
    fit_detector,
    knn_msp,
    rank_in,
)
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import FULL, QUICK, TrainConfig
from core.models.transformer.quick import embed_texts, fit_linear_head
from core.models.transformer.training import train_models

SCORES = ("msp", "energy", "max-logit", MAHALANOBIS, KNN, KNN_MSP, COMBINED)
# Per score and run: AUROC on validation and test rows, the share of known-desk test complaints
# still scored above the level that catches 95% of the held-out ones (FPR at 95% TPR), and at
# the shipped threshold (the review policy's, from validation rows) the unknown-desk flags alone:
# the known-desk share flagged, the held-out share caught and the open-class F1; then all
# flags (unsure or unknown desk) as `classify` raises them.
METRICS = ("val_auroc", "auroc", "fpr95", "known_scored_unknown", "unknown_caught", "open_f1",
           "unknown_flagged", "known_flagged")  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="labelled file (default: the demo data)")
    parser.add_argument("--test", type=Path, help="a separate labelled test file")
    parser.add_argument("--recipe", choices=(QUICK, FULL), default=QUICK)
    parser.add_argument("--holdout", type=int, help="desks held out per run (default: each one)")
    parser.add_argument("--rounds", type=int, default=3, help="draws of --holdout desks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, help="full recipe: TrainConfig override")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def load_splits(args: argparse.Namespace, scratch: Path) -> Splits:
    source = args.data or write_demo_data(scratch / "demo.csv", DemoConfig())
    data, _ = load_dataset(source)
    if args.test:
        test, _ = load_dataset(args.test)
        rest = data
    else:
        rest, test = split_dataset(data, val_fraction=0.2, seed=args.seed)
    train, val = split_dataset(rest, val_fraction=0.2, seed=args.seed)
    return Splits(train, val, test)


def held_out_groups(classes: list[str], args: argparse.Namespace) -> list[list[str]]:
    if args.holdout is None:
        return [[label] for label in classes]
    rng = np.random.default_rng(args.seed)
    return [sorted(rng.choice(classes, args.holdout, replace=False).tolist())
            for _ in range(args.rounds)]  # fmt: skip


def auroc(known: np.ndarray, unknown: np.ndarray) -> float:
    """P(an unknown row scores above a known one), ties half (the Mann-Whitney statistic)."""
    both = np.concatenate([known, unknown])
    ranks = np.empty(len(both))
    order = np.argsort(both, kind="stable")
    ranks[order] = np.arange(1, len(both) + 1)
    for value in np.unique(both):  # average ranks over ties
        tied = both == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    upper = ranks[len(known) :].sum() - len(unknown) * (len(unknown) + 1) / 2
    return float(upper / (len(known) * len(unknown)))


@dataclass(frozen=True)
class Scored:
    """One model's view of every validation and test row (its logits cover the known desks)."""

    val_logits: np.ndarray
    test_logits: np.ndarray
    train_features: np.ndarray  # the known desks' training rows
    val_features: np.ndarray
    test_features: np.ndarray


def subset(data: Dataset, rows: np.ndarray) -> Dataset:
    return Dataset(
        texts=tuple(data.texts[i] for i in rows), labels=tuple(data.labels[i] for i in rows),
        rows=tuple(data.rows[i] for i in rows),
    )  # fmt: skip


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(1, keepdims=True))
    return shifted / shifted.sum(1, keepdims=True)


def logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(1)
    return top + np.log(np.exp(logits - top[:, None]).sum(1))


def raw_scores(
    scored: Scored,
    train_labels: np.ndarray,
    val_known: np.ndarray,
    val_labels: np.ndarray,
    n_classes: int,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each score's raw values on (all validation rows, all test rows); higher = less known."""
    temperature = calibrated_temperature(softmax(scored.val_logits[val_known]), val_labels)
    out = {
        "msp": tuple(-tempered(softmax(x), temperature).max(1)
                     for x in (scored.val_logits, scored.test_logits)),
        "energy": tuple(-logsumexp(x) for x in (scored.val_logits, scored.test_logits)),
        "max-logit": tuple(-x.max(1) for x in (scored.val_logits, scored.test_logits)),
    }  # fmt: skip
    for method in (MAHALANOBIS, KNN):  # "knn+msp" is their sum of ranks, below
        detector = fit_detector(scored.train_features, train_labels,
                                scored.val_features[val_known], n_classes=n_classes,
                                method=method)  # fmt: skip
        out[method] = tuple(detector.distances(x)
                            for x in (scored.val_features, scored.test_features))  # fmt: skip
    doubts = tuple(doubt(softmax(x)) for x in (scored.val_logits, scored.test_logits))
    references = np.sort(out[KNN][0][val_known]), np.sort(doubts[0][val_known])
    out[KNN_MSP] = tuple(knn_msp(out[KNN][i], doubts[i], *references) for i in (0, 1))
    val_probs = softmax(scored.val_logits)  # untempered, as `classify` hands them over
    combined = fit_detector(scored.train_features, train_labels, scored.val_features[val_known],
                            n_classes=n_classes, method=COMBINED,
                            val_probs=val_probs[val_known])  # fmt: skip
    out[COMBINED] = (
        combined.distances(scored.val_features, val_probs),
        combined.distances(scored.test_features, softmax(scored.test_logits)),
    )
    return out


def run_one(
    splits: Splits, held: list[str], scored: Scored, known_ids: dict[str, np.ndarray]
) -> dict:
    """Every score and the policy for one held-out group, given the model's logits/features."""
    classes = sorted(set(splits.train.labels) - set(held))
    index = {c: i for i, c in enumerate(classes)}
    train_rows = known_ids["train"]
    val_known = np.array([label not in held for label in splits.val.labels])
    test_known = np.array([label not in held for label in splits.test.labels])
    val_labels = np.array([index[label] for label in np.array(splits.val.labels)[val_known]])
    train_labels = np.array([index[splits.train.labels[i]] for i in train_rows])
    raw = raw_scores(scored, train_labels, val_known, val_labels, len(classes))
    bow = BagOfWordsClassifier().fit(
        [splits.train.texts[i] for i in train_rows], [splits.train.labels[i] for i in train_rows]
    )
    val_bow = bow.predict_proba(list(splits.val.texts))
    test_bow = bow.predict_proba(list(splits.test.texts))
    val_probs, test_probs = softmax(scored.val_logits), softmax(scored.test_logits)
    blend = choose_blend(val_probs[val_known], val_bow[val_known], [classes[i] for i in val_labels],
                         classes)  # fmt: skip
    val_decision = blend.combine(val_probs, val_bow)[val_known]
    test_decision = blend.combine(test_probs, test_bow)
    val_right = val_decision.argmax(1) == val_labels
    out = {"held_out": held, "known_test": int(test_known.sum()),
           "unknown_test": int((~test_known).sum())}  # fmt: skip
    for name in SCORES:
        val_raw, test_raw = raw[name]
        reference = np.sort(val_raw[val_known])
        policy = choose_policy(
            val_decision.max(1), val_right, rank_in(val_raw[val_known], reference)
        )
        test_scores = rank_in(test_raw, reference)
        flagged = policy.reasons(test_decision.max(1), test_scores,
                                 np.zeros(len(test_raw), bool)) != ""  # fmt: skip
        assert policy.unknown_threshold is not None
        unknown = test_scores > policy.unknown_threshold
        out[name] = {
            "val_auroc": auroc(val_raw[val_known], val_raw[~val_known]),
            "auroc": auroc(test_raw[test_known], test_raw[~test_known]),
            "fpr95": fpr_at_recall(test_raw[test_known], test_raw[~test_known]),
            "known_scored_unknown": float(unknown[test_known].mean()),
            "unknown_caught": float(unknown[~test_known].mean()),
            "open_f1": open_f1(unknown, ~test_known),
            "unknown_flagged": float(flagged[~test_known].mean()),
            "known_flagged": float(flagged[test_known].mean()),
        }
        out[name] = {key: round(value, 4) for key, value in out[name].items()}
    return out


def fpr_at_recall(known: np.ndarray, unknown: np.ndarray, recall: float = 0.95) -> float:
    """The share of known rows scoring at least the threshold that `recall` of the unknown rows
    reach (FPR at 95% TPR, as the out-of-distribution literature reports it)."""
    threshold = np.sort(unknown)[::-1][int(np.ceil(recall * len(unknown))) - 1]
    return float(np.mean(known >= threshold))


def open_f1(predicted_unknown: np.ndarray, unknown: np.ndarray) -> float:
    """F1 of the open class: a held-out desk's complaint is a positive, one the score flags as
    an unknown desk a predicted positive."""
    hits = float(np.sum(predicted_unknown & unknown))
    denominator = float(np.sum(predicted_unknown) + np.sum(unknown))
    return 2 * hits / denominator if denominator else 0.0


def known_rows(data: Dataset, held: list[str]) -> np.ndarray:
    return np.array([i for i, label in enumerate(data.labels) if label not in held])


def quick_runs(splits: Splits, groups: list[list[str]], seed: int) -> list[dict]:
    """One embedding pass of every text, then a head and the scores per held-out group."""
    config = TrainConfig(recipe=QUICK, seed=seed)
    classes = sorted(set(splits.train.labels))
    model, tokenizer = load_backbone(config, classes)
    runtime = Runtime.resolve("cpu")
    features = {
        name: embed_texts(model, tokenizer, mask_texts(list(part.texts)),
                          max_length=config.max_length, runtime=runtime)
        for name, part in (("train", splits.train), ("val", splits.val), ("test", splits.test))
    }  # fmt: skip
    results = []
    for held in groups:
        ids = {"train": known_rows(splits.train, held), "val": known_rows(splits.val, held)}
        known = sorted(set(splits.train.labels) - set(held))
        index = {c: i for i, c in enumerate(known)}
        head = fit_linear_head(
            features["train"][ids["train"]],
            np.array([index[splits.train.labels[i]] for i in ids["train"]]),
            features["val"][ids["val"]],
            np.array([index[splits.val.labels[i]] for i in ids["val"]]),
            n_classes=len(known),
        )
        scored = Scored(
            head.logits(features["val"]), head.logits(features["test"]),
            features["train"][ids["train"]], features["val"], features["test"],
        )  # fmt: skip
        results.append(run_one(splits, held, scored, ids))
        print(f"  held out {held}: done", file=sys.stderr)
    return results


def full_runs(splits: Splits, groups: list[list[str]], args: argparse.Namespace) -> list[dict]:
    """A fine-tuned MiniLM per held-out group (TrainConfig(recipe="full"))."""
    results = []
    options = {} if args.epochs is None else {"epochs": args.epochs}
    for held in groups:
        ids = {"train": known_rows(splits.train, held), "val": known_rows(splits.val, held)}
        train, val = subset(splits.train, ids["train"]), subset(splits.val, ids["val"])
        started = time.perf_counter()
        result = train_models(train, val, TrainConfig(recipe=FULL, seed=args.seed, **options))
        neural = result.neural
        layer = neural.model.classifier
        weight = layer.weight.detach().float().numpy().astype(np.float64)
        bias = layer.bias.detach().float().numpy().astype(np.float64)
        parts = (("train", train), ("val", splits.val), ("test", splits.test))
        feats = {name: neural.predict_proba_and_features(list(part.texts))[1]
                 for name, part in parts}  # fmt: skip
        scored = Scored(feats["val"] @ weight.T + bias, feats["test"] @ weight.T + bias,
                        feats["train"], feats["val"], feats["test"])  # fmt: skip
        results.append(run_one(splits, held, scored, ids))
        print(f"  held out {held}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return results


def summary(results: list[dict]) -> dict:
    return {
        name: {key: round(float(np.mean([r[name][key] for r in results])), 4)
               for key in METRICS}
        for name in SCORES
    }  # fmt: skip


TABLE_HEAD = (
    f"{'score':<20} {'val AUROC':>9} {'AUROC':>6} {'FPR95':>6} {'known->unknown':>14} "
    f"{'caught':>7} {'open F1':>7} {'unknown flagged':>15} {'known flagged':>13}"
)


def table_row(name: str, row: dict[str, float]) -> str:
    return (f"{name:<20} {row['val_auroc']:>9.3f} {row['auroc']:>6.3f} {row['fpr95']:>6.3f} "
            f"{row['known_scored_unknown']:>14.1%} {row['unknown_caught']:>7.1%} "
            f"{row['open_f1']:>7.3f} {row['unknown_flagged']:>15.1%} "
            f"{row['known_flagged']:>13.1%}")  # fmt: skip


def main() -> int:
    args = parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        splits = load_splits(args, Path(scratch))
    groups = held_out_groups(sorted(set(splits.train.labels)), args)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    runs = quick_runs(splits, groups, args.seed) if args.recipe == QUICK else full_runs(
        splits, groups, args)  # fmt: skip
    document = {
        "data": str(args.data or "demo"), "recipe": args.recipe, "runs": runs,
        "mean": summary(runs), "seconds": round(time.perf_counter() - started, 1),
        "rows": {"train": len(splits.train), "val": len(splits.val), "test": len(splits.test)},
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }  # fmt: skip
    if args.json:
        print(json.dumps(document, indent=1))
        return 0
    print(f"{document['data']} ({args.recipe}), {len(runs)} held-out runs, {document['rows']}")
    print(f"load average before {document['load'][0]}, after {document['load'][1]} "
          "(accuracy figures do not depend on it)")  # fmt: skip
    print(TABLE_HEAD)
    for name, row in document["mean"].items():
        print(table_row(name, row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
