"""New desks found among the complaints a model says fit no desk: BANKING77 with desks held out
of training, discovered by `core.tasks.discovery` as the app and `discover` run it.

    .venv/bin/python -m bench.bench_discovery --data bench/external/banking77/train.csv \\
        --test bench/external/banking77/test.csv --holdout 10 --seeds 0 1 2

Per seed: `--holdout` intents are drawn at random and left out of training. A model (the quick
recipe on the bundled MiniLM unless `--recipe full`) learns the other intents from the training
file, split 80/20 into training and validation rows (the validation rows choose the head, the
blend and the review policy, as `core train` does), and is saved and loaded as the app loads it.
The whole test file is then classified and the rows flagged as fitting no desk are grouped
(`discover_in_file`, the default smallest candidate of 10).

Reported per seed, and as the mean over seeds:
- found: held-out intents with a candidate of at least 10 members of which at least 70% are
  that intent (the issue's rule);
- NMI and ARI of the candidates against the true intents over the held-out intents' test rows
  (a row in no candidate counts as its own group "none"); the NMI over the held-out rows the
  model flagged (what discovery is given), and over those that are in a candidate;
- known-intent rows inside candidates;
- the challenger: each found candidate named after its majority intent, its members added to
  the training rows with that name ("retrain from corrections"), trained with the same recipe
  and seed; its accuracy on the test rows that were not named (of the named intents, and the
  rest, beside the live model's on the same rest).
Accuracy and clustering figures do not depend on the machine's load; seconds do (printed with
the load line).

`--tune` chooses HDBSCAN's settings (core.analysis.discovery.DiscoveryConfig) without the test
file: the training file alone is split per intent into 75% to learn from and 25% to discover
in, with other seeds (100, 101) drawing the held-out intents; every setting of a small grid
groups the same flagged rows, and the table is ranked by intents found, then the NMI over the
held-out rows that were flagged, then the fewest known-intent rows in candidates.

    .venv/bin/python -m bench.bench_discovery --data bench/external/banking77/train.csv --tune
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.machine import LoadGuard, machine, print_load
from core.access import OPERATOR
from core.analysis.discovery import DEFAULT_MIN_SIZE, DiscoveryConfig
from core.data.dataset import Dataset, split_dataset
from core.data.validation import load_dataset
from core.models.registry import load_model, save_model
from core.models.transformer.config import FULL, QUICK, TrainConfig
from core.models.transformer.training import train_models
from core.tasks.discovery import discover_in_file

FOUND_SIZE, FOUND_PURITY = 10, 0.7


TUNING_SEEDS = (100, 101)
GRID = [
    {"min_samples": samples, "selection": selection, "dimensions": dims}
    for samples in (None, 5, 4, 3, 2) for selection in ("eom", "leaf") for dims in (10, 20, 30)
]  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="labelled training file")
    parser.add_argument("--test", type=Path, help="labelled test file (not with --tune)")
    parser.add_argument("--tune", action="store_true", help="choose HDBSCAN's settings")
    parser.add_argument("--holdout", type=int, default=10, help="intents left out per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipe", choices=(QUICK, FULL), default=QUICK)
    parser.add_argument("--min-size", type=int, default=DEFAULT_MIN_SIZE)
    parser.add_argument("--no-retrain", action="store_true", help="skip the challenger")
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args()


def subset(data: Dataset, keep: np.ndarray) -> Dataset:
    return data.subset([int(i) for i in np.flatnonzero(keep)])


def train_and_load(train: Dataset, val: Dataset, config: TrainConfig, folder: Path):
    result = train_models(train, val, config)
    saved = save_model(result, folder.parent, folder.name, actor=OPERATOR)
    return load_model(saved), result.train_seconds


def scores(discovery, found_rows: np.ndarray, truth: np.ndarray, held: set[str]) -> dict:
    """The figures of one discovery whose complaints are the rows `found_rows` (0-based) of a
    test file with the intents `truth`, `held` having been left out of training."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    candidate_of = np.full(len(truth), "none", dtype=object)
    candidate_of[found_rows] = discovery.labels()
    candidates = {}
    for candidate in discovery.candidates:
        rows = found_rows[list(candidate.members)]
        intent, count = Counter(truth[rows]).most_common(1)[0]
        candidates[candidate.id] = {"size": candidate.size, "intent": intent,
                                    "purity": round(count / candidate.size, 3)}  # fmt: skip
    found = {
        c["intent"] for c in candidates.values()
        if c["intent"] in held and c["size"] >= FOUND_SIZE and c["purity"] >= FOUND_PURITY
    }  # fmt: skip
    in_held = np.array([t in held for t in truth])
    clustered = in_held & (candidate_of != "none") & (candidate_of != "")
    flagged = np.zeros(len(truth), dtype=bool)
    flagged[found_rows] = True
    candidate_of[candidate_of == ""] = "none"
    seen = in_held & flagged
    return {
        "flagged": len(found_rows), "candidates": len(discovery.candidates),
        "unclustered": len(discovery.unclustered), "found": len(found),
        "found_intents": sorted(found),
        "held_out_rows": int(in_held.sum()),
        "held_out_flagged": int(np.isin(found_rows, np.flatnonzero(in_held)).sum()),
        "nmi": round(normalized_mutual_info_score(truth[in_held], candidate_of[in_held]), 4),
        "ari": round(adjusted_rand_score(truth[in_held], candidate_of[in_held]), 4),
        "nmi_flagged": round(
            normalized_mutual_info_score(truth[seen], candidate_of[seen]), 4
        ) if seen.any() else None,
        "nmi_clustered": round(
            normalized_mutual_info_score(truth[clustered], candidate_of[clustered]), 4
        ) if clustered.any() else None,
        "known_rows_in_candidates": int(((candidate_of != "none") & ~in_held).sum()),
        "by_candidate": candidates,
    }  # fmt: skip


def member_rows(run) -> np.ndarray:
    """The 0-based rows of the test file that a discovery run grouped, in its order."""
    return np.array([m.row - 1 for m in run.members])


def challenger(run, named: dict, train, val, test, config, folder: Path, live) -> dict:
    """Each found candidate named after its majority intent and added to the training rows; the
    challenger and the live model scored on the test rows that were not named."""
    found_rows = member_rows(run)
    added_rows, added_labels = [], []
    for candidate in run.discovery.candidates:
        intent = named.get(candidate.id)
        if intent is None:
            continue
        rows = found_rows[list(candidate.members)]
        added_rows += rows.tolist()
        added_labels += [intent] * len(rows)
    grown = Dataset([*train.texts, *(test.texts[i] for i in added_rows)],
                    [*train.labels, *added_labels])  # fmt: skip
    loaded, seconds = train_and_load(grown, val, config, folder)
    from core.models.classify import classification_columns

    rest = np.setdiff1d(np.arange(len(test)), added_rows)
    texts = [test.texts[i] for i in rest]
    truth = np.array(test.labels, dtype=object)[rest]
    right = classification_columns(loaded, texts)["predicted_label"].to_numpy() == truth
    live_right = classification_columns(live, texts)["predicted_label"].to_numpy() == truth
    held = np.isin(truth, list(set(named.values())))
    return {
        "named": len(named), "added_rows": len(added_rows), "train_seconds": round(seconds, 1),
        "accuracy_named_intents": round(float(right[held].mean()), 4) if held.any() else None,
        "rows_named_intents": int(held.sum()),
        "accuracy_rest": round(float(right[~held].mean()), 4), "rows_rest": int((~held).sum()),
        "live_accuracy_rest": round(float(live_right[~held].mean()), 4),
    }  # fmt: skip


def one_seed(seed: int, data: Dataset, test: Dataset, args, scratch: Path) -> dict:
    rng = np.random.default_rng(seed)
    intents = sorted(set(data.labels))
    held = set(rng.choice(intents, args.holdout, replace=False).tolist())
    known = subset(data, np.array([label not in held for label in data.labels]))
    train, val = split_dataset(known, val_fraction=0.2, seed=seed)
    config = TrainConfig(recipe=args.recipe, seed=seed)
    started = time.perf_counter()
    loaded, train_seconds = train_and_load(train, val, config, scratch / f"seed{seed}")
    config_run = DiscoveryConfig(min_size=args.min_size)
    begun = time.perf_counter()
    run = discover_in_file(loaded, list(test.texts), source="test", config=config_run)
    discover_seconds = time.perf_counter() - begun
    result = {"seed": seed, "held_out": sorted(held), "train_seconds": round(train_seconds, 1),
              "classify_and_discover_seconds": round(discover_seconds, 1),
              **scores(run.discovery, member_rows(run), np.array(test.labels, dtype=object),
                       held)}  # fmt: skip
    named = {cid: c["intent"] for cid, c in result["by_candidate"].items()
             if c["intent"] in result["found_intents"]}  # fmt: skip
    if not args.no_retrain and named:
        result["challenger"] = challenger(run, named, train, val, test, config,
                                          scratch / f"challenger{seed}", loaded)  # fmt: skip
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({k: v for k, v in result.items() if k != "by_candidate"}), file=sys.stderr)
    return result


def summary(results: list[dict]) -> dict:
    def mean(key: str, inner: str | None = None) -> float | None:
        values = [r[key] if inner is None else r.get(key, {}).get(inner) for r in results]
        values = [v for v in values if v is not None]
        return round(float(np.mean(values)), 4) if values else None

    return {
        "found": mean("found"), "nmi": mean("nmi"), "nmi_flagged": mean("nmi_flagged"),
        "ari": mean("ari"),
        "nmi_clustered": mean("nmi_clustered"),
        "known_rows_in_candidates": mean("known_rows_in_candidates"),
        "challenger_accuracy_named_intents": mean("challenger", "accuracy_named_intents"),
        "challenger_accuracy_rest": mean("challenger", "accuracy_rest"),
        "live_accuracy_rest": mean("challenger", "live_accuracy_rest"),
    }  # fmt: skip


def per_intent_split(data: Dataset, seed: int) -> tuple[Dataset, Dataset]:
    """75% of each intent's rows to learn from, 25% to discover in (seeded)."""
    rng, learn, find = np.random.default_rng(seed), [], []
    labels = np.array(data.labels, dtype=object)
    for intent in sorted(set(data.labels)):
        rows = rng.permutation(np.flatnonzero(labels == intent))
        cut = len(rows) // 4
        find += rows[:cut].tolist()
        learn += rows[cut:].tolist()
    return data.subset(sorted(learn)), data.subset(sorted(find))


def tune(data: Dataset, args, scratch: Path) -> list[dict]:
    """Every GRID setting on the same flagged rows of each tuning seed, best first."""
    from core.analysis.discovery import find_candidates
    from core.models.classify import classification_with_embeddings
    from core.models.flagging import UNKNOWN

    rows = {i: [] for i in range(len(GRID))}
    for seed in TUNING_SEEDS:
        learn, find = per_intent_split(data, seed)
        held = set(np.random.default_rng(seed).choice(sorted(set(data.labels)), args.holdout,
                                                      replace=False).tolist())  # fmt: skip
        known = subset(learn, np.array([label not in held for label in learn.labels]))
        train, val = split_dataset(known, val_fraction=0.2, seed=seed)
        loaded, _ = train_and_load(train, val, TrainConfig(recipe=args.recipe, seed=seed),
                                   scratch / f"tune{seed}")  # fmt: skip
        frame, features = classification_with_embeddings(loaded, list(find.texts))
        flagged = np.flatnonzero(frame["review_reason"].to_numpy() == UNKNOWN)
        texts = [find.texts[i] for i in flagged]
        truth = np.array(find.labels, dtype=object)
        for i, setting in enumerate(GRID):
            config = DiscoveryConfig(min_size=args.min_size, **setting)
            found = find_candidates(features[flagged], texts, desk_means=None, desks=[],
                                    known_texts={}, config=config)  # fmt: skip
            rows[i].append(scores(found, flagged, truth, held))
    table = []
    for i, setting in enumerate(GRID):
        keys = ("found", "nmi_flagged", "nmi", "known_rows_in_candidates")
        means = {key: round(float(np.mean([r[key] for r in rows[i]])), 4) for key in keys}
        table.append({**setting, **means})
    # Most intents found; then the cleanest grouping of what was flagged; then the fewest
    # complaints of known desks inside candidates.
    return sorted(
        table, key=lambda r: (-r["found"], -r["nmi_flagged"], r["known_rows_in_candidates"])
    )


def main() -> int:
    args = parse_args()
    data, _ = load_dataset(args.data)
    if args.tune:
        with tempfile.TemporaryDirectory() as scratch:
            table = tune(data, args, Path(scratch))
        for row in table[:12]:
            print(json.dumps(row))
        return 0
    if args.test is None:
        raise SystemExit("error: --test is required (or --tune)")
    test, _ = load_dataset(args.test)
    guard = LoadGuard.start(force=True)  # accuracy figures; seconds are printed with the load
    with tempfile.TemporaryDirectory() as scratch:
        results = [one_seed(seed, data, test, args, Path(scratch)) for seed in args.seeds]
    load = guard.finish()
    document = {"machine": machine(), "load": load.to_json(), "recipe": args.recipe,
                "holdout": args.holdout, "min_size": args.min_size, "seeds": results,
                "mean": summary(results)}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    print(json.dumps(document["mean"], indent=1))
    print_load(load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
