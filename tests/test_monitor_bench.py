"""bench/bench_drift.py's replay without a model: on a pool routed by hand whose validation
profile matches it, the unchanged stream raises no warning, a tripled desk raises the desk-mix
warning after the shift, a tenth of a new kind raises the unknown-desk one, and the summary
counts them so."""

from __future__ import annotations

import argparse

import numpy as np

from bench.bench_drift import Routed, draw_stream, first_warnings, new_kind_texts, summarise
from core.models.profile import CONFIDENCE_EDGES, ValidationProfile, confidence_counts
from core.monitor.drift import DESK_MIX, UNKNOWN_DESK, DriftRule
from core.monitor.report import Baseline

DESKS = np.array(["A", "B", "C", "D"], dtype=object)
ARGS = argparse.Namespace(complaints=2000, per_day=200, check_every=50, desk="B", new_share=0.1)


def pool(n: int = 1000) -> Routed:
    """Four desks in turn, each routed right at 0.995; every twentieth fits no desk (0.7)."""
    label = DESKS[np.arange(n) % 4]
    unknown = np.arange(n) % 20 == 0
    reason = np.where(unknown, "unknown desk", "").astype(object)
    confidence = np.where(unknown, 0.7, 0.995)
    return Routed(label, np.full(n, "web", dtype=object), label.copy(), reason, confidence)


def new_kind(n: int = 100) -> Routed:
    """Complaints of no desk: routed to A at 0.45, nine in ten flagged as fitting no desk."""
    reason = np.where(np.arange(n) % 10 == 0, "unsure", "unknown desk").astype(object)
    return Routed(np.full(n, "new kind", dtype=object), np.full(n, "app", dtype=object),
                  np.full(n, "A", dtype=object), reason, np.full(n, 0.45))  # fmt: skip


def baseline(routed: Routed) -> Baseline:
    desks, counts = np.unique(routed.desk, return_counts=True)
    profile = ValidationProfile(
        len(routed.label), CONFIDENCE_EDGES, confidence_counts(routed.confidence),
        dict(zip(desks.tolist(), counts.tolist(), strict=True)),
        float(np.mean(routed.reason == "unknown desk")), float(np.mean(routed.reason != "")),
    )  # fmt: skip
    return Baseline("hand", "d", profile)


def test_the_replay_fires_each_warning_after_its_shift_and_none_unchanged():
    rows, new = pool(), new_kind()
    base, rule = baseline(rows), DriftRule()
    runs = {
        scenario: [
            first_warnings(draw_stream(rows, new, scenario, ARGS, seed), base, rule, ARGS)
            for seed in range(3)
        ]  # fmt: skip
        for scenario in ("unchanged", "tripled", "new kind")
    }
    mid = ARGS.complaints // 2
    assert all(f == dict.fromkeys(f) for f in runs["unchanged"])  # no warning at all
    for first in runs["tripled"]:
        assert first[DESK_MIX] is not None and first[DESK_MIX] > mid
        assert first[UNKNOWN_DESK] is None
    for first in runs["new kind"]:
        assert first[UNKNOWN_DESK] is not None and first[UNKNOWN_DESK] > mid
    summary = summarise(runs, mid)
    assert summary["unchanged"]["any_before_shift"] == 0
    assert summary["tripled"][DESK_MIX]["fired"] == 3
    assert summary["tripled"][DESK_MIX]["before_shift"] == 0
    assert summary["tripled"][DESK_MIX]["after_shift_min"] >= ARGS.check_every


def test_the_streams_share_their_first_half_and_change_only_after_it():
    rows, new = pool(), new_kind()
    plain = draw_stream(rows, new, "unchanged", ARGS, 4)
    both = draw_stream(rows, new, "both", ARGS, 4)
    mid = ARGS.complaints // 2
    assert (plain.label[:mid] == both.label[:mid]).all()
    after = both.label[mid:]
    assert 0.05 < np.mean(after == "new kind") < 0.15
    b_share = np.mean(after == "B") / (1 - np.mean(after == "new kind"))
    assert 0.65 < b_share < 0.85  # three times a quarter


def test_new_kind_texts_are_seeded_and_varied():
    texts = new_kind_texts(50, seed=1)
    assert texts == new_kind_texts(50, seed=1) and len(set(texts)) > 40
