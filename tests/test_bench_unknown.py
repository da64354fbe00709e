"""bench/bench_unknown.py scores one held-out run from a model's logits and embeddings; checked
here on made-up embeddings where the held-out desk lies far from the others."""

from __future__ import annotations

import numpy as np
import pytest

from bench.bench_accuracy import Splits
from bench.bench_unknown import (
    SCORES,
    Scored,
    auroc,
    fpr_at_recall,
    known_rows,
    open_f1,
    run_one,
    summary,
)
from tests.conftest import make_dataset, separable_rows


def test_auroc_is_the_chance_an_unknown_row_outscores_a_known_one():
    assert auroc(np.array([0.1, 0.2]), np.array([0.3, 0.4])) == 1.0
    assert auroc(np.array([0.3, 0.4]), np.array([0.1, 0.2])) == 0.0
    assert auroc(np.array([0.1, 0.5]), np.array([0.5, 0.2])) == pytest.approx(0.625)  # a tie


def test_fpr_at_95_recall_counts_known_rows_at_or_above_the_95th_unknown_row():
    unknown = np.arange(1.0, 21.0)  # 19 of 20 (95%) reach 2.0
    known = np.array([0.5, 1.5, 2.0, 3.0])
    assert fpr_at_recall(known, unknown) == 0.5


def test_open_f1_is_the_f1_of_the_unknown_class():
    predicted = np.array([True, True, False, False, True])
    unknown = np.array([True, False, True, False, True])  # 2 hits, 1 false alarm, 1 missed
    assert open_f1(predicted, unknown) == pytest.approx(2 * 2 / (3 + 3))
    assert open_f1(np.zeros(3, bool), np.zeros(3, bool)) == 0.0


def test_a_far_away_held_out_desk_is_found_by_every_embedding_score():
    rng = np.random.default_rng(0)
    texts, labels = separable_rows(12)
    data = make_dataset(texts, labels)
    splits = Splits(data, data, data)
    desks = sorted(set(labels))
    held = [desks[-1]]
    centres = {desk: rng.normal(size=8) * 5 for desk in desks}
    centres[held[0]] += 40.0  # far from every known desk

    def embed(part):
        return np.stack([centres[label] + rng.normal(size=8) for label in part.labels])

    known = [d for d in desks if d not in held]
    weight = np.stack([centres[d] for d in known]) / 10  # logits favour the nearest centre

    def logits(features):
        return features @ weight.T

    ids = {"train": known_rows(data, held), "val": known_rows(data, held)}
    features = {name: embed(data) for name in ("train", "val", "test")}
    scored = Scored(logits(features["val"]), logits(features["test"]),
                    features["train"][ids["train"]], features["val"], features["test"])  # fmt: skip
    result = run_one(splits, held, scored, ids)
    assert result["unknown_test"] == 12 and result["known_test"] == 12 * (len(desks) - 1)
    for name in ("mahalanobis", "knn", "knn+msp", "knn+mahalanobis+msp"):
        assert result[name]["auroc"] > 0.95, (name, result[name])
        assert result[name]["unknown_flagged"] > 0.9
        assert result[name]["unknown_caught"] > 0.9 and result[name]["fpr95"] < 0.1
    assert set(summary([result, result])) == set(SCORES)
