"""Drift: when the live monitor's warnings fire on a replayed stream of complaints, and that none
fires on the unchanged stream.

    .venv/bin/python -m bench.bench_drift                      # demo data, 10 seeds, minutes
    .venv/bin/python -m bench.bench_drift --rows 600 --complaints 1200 --seeds 2   # a smoke run

The demo data is split once (seed 0) into training (60%), validation (20%) and a held-out pool
(20%). A model is trained on the training rows with the quick recipe (the bundled MiniLM; its
validation rows choose the head, the blend, the review policy and the card's validation
profile, as `core train` does), saved and loaded as the app loads it. It routes every pool
complaint and a set of made-up complaints of a new kind (insurance, FASTag tolls, lockers,
pensions, mutual funds, crypto: no desk of the demo data) once, with `classification_columns`,
the decision the intake API gives.

Each seed replays a stream of `--complaints` complaints drawn from them, `--per-day` a day from
Monday 2026-01-05 (UTC), and builds the monitor's report (core.monitor.report, the rule of
core.monitor.drift: PSI > 0.2 on weeks of 200 or more complaints; unknown-desk share at least
double the validation rows' with 10 or more) every `--check-every` complaints, as /v1/ready
would read it then. Scenarios, each from the same draws:
- unchanged: every complaint drawn from the pool as it is (any warning is a false alarm);
- tripled: from mid-stream, `--desk`'s share of arrivals is three times its share in the pool;
- new kind: from mid-stream, `--new-share` of arrivals are complaints of the new kind;
- both: the two at once.
Reported per scenario and warning: in how many seeds it fired, and after how many complaints
from the shift (median, min, max); for the unchanged stream, the seeds with a false alarm. The
figures are counts, not timings: they do not depend on the machine's load (printed anyway).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.machine import LoadGuard, command_line, machine, print_load
from core.monitor.drift import CONFIDENCE, DESK_MIX, UNKNOWN_DESK, DriftRule
from core.monitor.report import Baseline, build_report, card_baseline, group_rows

KINDS = (DESK_MIX, CONFIDENCE, UNKNOWN_DESK)
SCENARIOS = ("unchanged", "tripled", "new kind", "both")
START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday: the stream's first ISO week is whole

# The new kind of complaint: products no desk of the demo data serves.
NEW_TOPICS = (
    "my motor insurance claim for the accident in {month} is still pending with no surveyor",
    "the FASTag wallet was debited twice at the {place} toll plaza and the toll was not paid",
    "the bank locker at the {place} branch was drilled open without informing me",
    "my family pension has not been credited since {month} although the life certificate "
    "was submitted",
    "the mutual fund SIP of Rs {amount} was debited but no units were allotted",
    "I bought crypto through your partner app and the withdrawal of Rs {amount} is stuck",
    "the health insurance policy sold with my account was auto-renewed without consent",
    "the sovereign gold bond interest for {month} was never paid into my account",
)
OPENERS = ("Dear team,", "Hello,", "Sir,", "", "Please help.", "Respected manager,")
CLOSERS = ("Resolve it soon.", "This is very disappointing.", "", "Kindly call me back.",
           "I will go to the ombudsman otherwise.")  # fmt: skip
PLACES = ("Pune", "Kolkata", "Indore", "Mysuru", "Nagpur", "Surat", "Kochi")
MONTHS = ("January", "March", "May", "August", "October", "December")


def new_kind_texts(n: int, seed: int) -> list[str]:
    """`n` made-up complaints of the new kind, seeded."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        body = str(rng.choice(NEW_TOPICS)).format(
            month=rng.choice(MONTHS), place=rng.choice(PLACES),
            amount=f"{int(rng.integers(500, 90_000)):,}",
        )  # fmt: skip
        parts = [str(rng.choice(OPENERS)), body[0].upper() + body[1:] + ".",
                 str(rng.choice(CLOSERS))]  # fmt: skip
        texts.append(" ".join(p for p in parts if p))
    return texts


@dataclass(frozen=True)
class Routed:
    """Complaints as the live model routed them, one row each (arrays of length n)."""

    label: np.ndarray  # the true desk (demo data), "new kind" for the made-up ones
    channel: np.ndarray
    desk: np.ndarray  # as routed
    reason: np.ndarray  # review_reason
    confidence: np.ndarray

    def take(self, rows: np.ndarray) -> Routed:
        return Routed(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))


def draw_stream(
    pool: Routed, new: Routed, scenario: str, args: argparse.Namespace, seed: int
) -> Routed:
    """The stream of one seed and scenario: pool rows drawn uniformly, and after mid-stream
    the scenario's change. The same seed draws the same first half in every scenario."""
    rng = np.random.default_rng(seed)
    n, mid = args.complaints, args.complaints // 2
    plain = rng.integers(0, len(pool.label), size=n)
    desk_rows = np.flatnonzero(pool.label == args.desk)
    other_rows = np.flatnonzero(pool.label != args.desk)
    share = len(desk_rows) / len(pool.label)
    from_desk = rng.random(n) < 3 * share  # tripled: this desk with three times its share
    tripled = np.where(from_desk, rng.choice(desk_rows, n), rng.choice(other_rows, n))
    is_new = rng.random(n) < args.new_share
    new_rows = rng.integers(0, len(new.label), size=n)
    rows = plain.copy()
    if scenario in ("tripled", "both"):
        rows[mid:] = tripled[mid:]
    stream = pool.take(rows)
    if scenario in ("new kind", "both"):
        swap = np.flatnonzero(is_new & (np.arange(n) >= mid))
        for field in stream.__dataclass_fields__:
            getattr(stream, field)[swap] = getattr(new, field)[new_rows[swap]]
    return stream


def first_warnings(
    stream: Routed, baseline: Baseline, rule: DriftRule, args: argparse.Namespace
) -> dict[str, int | None]:
    """For each kind of warning, the number of complaints received when the report first gave
    it (checked every --check-every complaints); None when it never did."""
    n = len(stream.label)
    days = [(START + timedelta(days=i // args.per_day)).date().isoformat() for i in range(n)]
    edges = baseline.profile.confidence_edges
    counted: Counter = Counter()  # the groups so far, grown by each chunk's groups
    first: dict[str, int | None] = dict.fromkeys(KINDS)
    for end in range(args.check_every, n + 1, args.check_every):
        chunk = slice(end - args.check_every, end)
        for g in group_rows(days[chunk], stream.channel[chunk].tolist(),
                            stream.desk[chunk].tolist(), stream.reason[chunk].tolist(),
                            [True] * args.check_every, stream.confidence[chunk].tolist(),
                            edges):  # fmt: skip
            counted[replace(g, count=0)] += g.count
        groups = [replace(g, count=c) for g, c in counted.items()]
        received = START + timedelta(days=(end - 1) / args.per_day)
        report = build_report(groups, baseline, None, since=START, now=received, rule=rule)
        for warning in report.warnings:
            if first[warning.kind] is None:
                first[warning.kind] = end
    return first


def route_once(args: argparse.Namespace, scratch: Path) -> tuple[Baseline, Routed, Routed, dict]:
    """Train, save and load the live model; route the pool and the new kind once."""
    from core.access import OPERATOR
    from core.data.dataset import Dataset
    from core.data.demo import DemoConfig, generate_demo_data
    from core.models.classify import classification_columns
    from core.models.registry import load_model, save_model
    from core.models.transformer.config import QUICK, TrainConfig
    from core.models.transformer.training import train_models

    demo = generate_demo_data(DemoConfig(rows=args.rows))
    order = np.random.default_rng(0).permutation(len(demo))
    cut = [int(len(demo) * 0.6), int(len(demo) * 0.8)]
    train_rows, val_rows, pool_rows = np.split(order, cut)

    def dataset(rows: np.ndarray) -> Dataset:
        return Dataset(demo["text"].iloc[rows].tolist(), demo["desk"].iloc[rows].tolist())

    started = time.perf_counter()
    result = train_models(dataset(train_rows), dataset(val_rows), TrainConfig(recipe=QUICK))
    folder = save_model(result, scratch, "drift-bench", actor=OPERATOR)
    loaded = load_model(folder)
    trained = time.perf_counter() - started
    pool = demo.iloc[pool_rows]
    new_texts = new_kind_texts(args.new_texts, seed=1)
    columns = {
        "pool": classification_columns(loaded, pool["text"].tolist()),
        "new": classification_columns(loaded, new_texts),
    }
    rng = np.random.default_rng(2)
    pool_channels = pool["channel"].to_numpy(dtype=object)
    channels = {"pool": pool_channels, "new": rng.choice(pool_channels, len(new_texts))}
    labels = {"pool": pool["desk"].to_numpy(dtype=object),
              "new": np.full(len(new_texts), "new kind", dtype=object)}  # fmt: skip
    routed = {
        name: Routed(
            labels[name],
            channels[name],
            frame["predicted_label"].to_numpy(dtype=object),
            frame["review_reason"].to_numpy(dtype=object),
            frame["confidence"].to_numpy(dtype=float),
        )  # fmt: skip
        for name, frame in columns.items()
    }
    baseline = card_baseline(folder.name, loaded.digest, loaded.card)
    facts = {
        "rows": {"train": len(train_rows), "validation": len(val_rows), "pool": len(pool_rows),
                 "new kind": len(new_texts)},
        "train_and_route_seconds": round(time.perf_counter() - started, 1),
        "train_seconds": round(trained, 1),
        "new_kind_flagged_unknown": float(np.mean(routed["new"].reason == "unknown desk")),
        "pool_flagged_unknown": float(np.mean(routed["pool"].reason == "unknown desk")),
        "validation_unknown_share": baseline.profile.unknown_share,
    }  # fmt: skip
    return baseline, routed["pool"], routed["new"], facts


def summarise(runs: dict[str, list[dict[str, int | None]]], mid: int) -> dict:
    """Per scenario and kind: seeds it fired in, fired before the shift, complaints after it."""
    table = {}
    for scenario, firsts in runs.items():
        row = {}
        for kind in KINDS:
            fired = [f[kind] for f in firsts if f[kind] is not None]
            after = [x - mid for x in fired if x > mid]
            row[kind] = {
                "fired": len(fired), "before_shift": len(fired) - len(after), "seeds": len(firsts),
                "after_shift_median": float(np.median(after)) if after else None,
                "after_shift_min": min(after) if after else None,
                "after_shift_max": max(after) if after else None,
            }  # fmt: skip
        row["any_before_shift"] = sum(
            any(f[k] is not None and f[k] <= mid for k in KINDS) for f in firsts
        )
        table[scenario] = row
    return table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000, help="demo data rows (default 3000)")
    parser.add_argument("--complaints", type=int, default=6000, help="stream length per seed")
    parser.add_argument("--per-day", type=int, default=250, help="complaints a day (default 250)")
    parser.add_argument("--check-every", type=int, default=50, help="complaints between reads")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--desk", default="KYC Update", help="the desk whose share triples")
    parser.add_argument("--new-share", type=float, default=0.1, help="share of the new kind")
    parser.add_argument("--new-texts", type=int, default=300, help="made-up new complaints")
    parser.add_argument("--psi-threshold", type=float, default=DriftRule().psi_threshold)
    parser.add_argument("--min-complaints", type=int, default=DriftRule().min_complaints)
    parser.add_argument("--json", type=Path, help="also write the whole document here")
    return parser.parse_args()


def print_table(summary: dict, args: argparse.Namespace) -> None:
    mid = args.complaints // 2
    print(f"shift at complaint {mid:,} ({mid / args.per_day:.1f} days in); {args.seeds} seeds")
    print(f"{'scenario':<10} {'warning':<13} {'fired':>6} {'before':>7} "
          f"{'after the shift: median (min-max) complaints':>46}")  # fmt: skip
    for scenario, row in summary.items():
        for kind in KINDS:
            cell = row[kind]
            spread = ("never" if cell["after_shift_median"] is None else
                      f"{cell['after_shift_median']:,.0f} ({cell['after_shift_min']:,}-"
                      f"{cell['after_shift_max']:,})")  # fmt: skip
            print(f"{scenario:<10} {kind:<13} {cell['fired']:>3}/{cell['seeds']:<2} "
                  f"{cell['before_shift']:>7} {spread:>46}")  # fmt: skip
    unchanged = summary["unchanged"]
    alarms = sum(unchanged[k]["fired"] for k in KINDS)
    print(f"false alarms on the unchanged stream: {alarms} warnings over {args.seeds} seeds")


def main() -> int:
    args = parse_args()
    rule = DriftRule(psi_threshold=args.psi_threshold, min_complaints=args.min_complaints)
    print(command_line("bench.bench_drift"), file=sys.stderr)
    guard = LoadGuard.start(force=True)  # counts, not timings: the load is printed, not a gate
    with tempfile.TemporaryDirectory() as scratch:
        baseline, pool, new, facts = route_once(args, Path(scratch))
    if baseline.profile is None:
        raise SystemExit(f"error: the trained model has no validation profile: {baseline.missing}")
    started = time.perf_counter()
    runs = {
        scenario: [
            first_warnings(draw_stream(pool, new, scenario, args, seed), baseline, rule, args)
            for seed in range(args.seeds)
        ]  # fmt: skip
        for scenario in SCENARIOS
    }
    facts["replay_seconds"] = round(time.perf_counter() - started, 1)
    summary = summarise(runs, args.complaints // 2)
    load = guard.finish()
    document = {"machine": machine(), "load": load.to_json(), "command": command_line(
        "bench.bench_drift"), "rule": rule.to_json(), "facts": facts, "summary": summary,
        "runs": runs}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    print(json.dumps(facts))
    print(f"rule: {rule.describe()}")
    print_table(summary, args)
    print_load(load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
