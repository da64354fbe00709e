"""The trained word-order comparison (core.lab.order_models): one split holding out whole twin
groups, four models scored on it, and the time per complaint of the LSTM and the tiny
transformer."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from core.data.dataset import Dataset
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.errors import UserError
from core.lab.order_models import (
    ORDER_MODELS,
    OrderModelsConfig,
    compare_order_models,
    split_for_order_models,
    time_per_complaint,
    twin_groups,
)
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.lstm.model import create_lstm_classifier
from core.models.tiny.model import create_tiny_classifier
from tests.helpers import TINY_LABELS, TINY_TEXTS

QUICK = OrderModelsConfig(epochs=1, lengths=(8, 80), repeats=1, device="cpu")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Dataset:
    folder = tmp_path_factory.mktemp("models")
    data, _ = load_dataset(write_demo_data(folder / "demo.csv", DemoConfig(rows=200)))
    return data


@pytest.fixture(scope="module")
def compared(demo):
    """The four models, one epoch each, on the 200-row demo data, and the progress seen."""
    seen = []
    return compare_order_models(demo, QUICK, on_progress=seen.append), seen


def _group_sets(data: Dataset) -> set[int]:
    groups = twin_groups(data)
    return set(groups[groups >= 0].tolist())


def test_the_split_holds_out_whole_twin_groups(demo):
    train, val, test = split_for_order_models(demo, QUICK)
    assert len(train) + len(val) + len(test) == len(demo)
    held, validation, trained = _group_sets(test), _group_sets(val), _group_sets(train)
    assert held and not held & trained and not held & validation and not validation & trained
    all_groups = _group_sets(demo)
    assert len(held) == round(len(all_groups) * QUICK.test_share)
    texts = set(train.texts)
    assert not texts & set(test.texts)  # no twin (or other) text on both sides
    again = split_for_order_models(demo, QUICK)[2]
    assert again.texts == test.texts  # seeded


def test_compare_returns_four_readers_on_held_out_twins(demo, compared):
    result, seen = compared
    assert result is not None
    assert tuple(s.name for s in result.scores) == ORDER_MODELS
    _, _, test = split_for_order_models(demo, QUICK)
    twin_rows = int((twin_groups(test) >= 0).sum())
    assert twin_rows > 0 and result.test_rows == len(test)
    assert result.twin_groups_held_out == len(_group_sets(test))
    for score in result.scores:
        assert score.twin_rows == twin_rows
        assert 0.0 <= score.accuracy <= 1.0 and 0.0 <= score.twin_accuracy <= 1.0
    # Order-blind models give every member of a twin group the same probabilities.
    assert result.score("bag of words").twin_spread == 0.0
    assert result.score("tiny transformer, positions off").twin_spread < 1e-5
    assert result.score("LSTM").twin_spread > 1e-5
    assert seen and seen[-1].done == seen[-1].total - 1 and seen[-1].detail == "timing"
    assert list(result.table()["name"]) == list(ORDER_MODELS)
    timing = result.timing.table
    assert sorted(set(timing["model"])) == ["LSTM", "tiny transformer, positions on"]
    assert sorted(set(timing["tokens"])) == [8, 80]


def test_the_bag_of_words_score_is_computed_from_its_predictions(demo, compared):
    """The twin accuracy of the bag of words, recomputed independently on the same split."""
    result, _ = compared
    train, _, test = split_for_order_models(demo, QUICK)
    bow = BagOfWordsClassifier().fit(list(train.texts), list(train.labels))
    twins = twin_groups(test) >= 0
    predicted = np.asarray(bow.predict(list(np.asarray(test.texts)[twins])))
    expected = float((predicted == np.asarray(test.labels)[twins]).mean())
    assert result.score("bag of words").twin_accuracy == pytest.approx(expected)


def test_data_without_twin_groups_is_refused():
    with pytest.raises(UserError, match="no slice or twin_group column"):
        compare_order_models(Dataset(TINY_TEXTS, TINY_LABELS), QUICK)
    extra = pd.DataFrame({"slice": ["regular"] * 8, "twin_group": [pd.NA] * 8})
    with pytest.raises(UserError, match="marks no word-order twin groups"):
        compare_order_models(Dataset(TINY_TEXTS, TINY_LABELS, extra=extra), QUICK)


def test_a_cancelled_comparison_returns_none(demo):
    cancel = threading.Event()
    cancel.set()
    assert compare_order_models(demo, QUICK, cancel=cancel) is None


def test_time_per_complaint_has_one_row_per_reader_and_length():
    lstm = create_lstm_classifier(TINY_TEXTS, TINY_LABELS, max_length=16, seed=0)
    tiny = create_tiny_classifier(TINY_TEXTS, TINY_LABELS, max_length=16, seed=0)
    timing = time_per_complaint({"LSTM": lstm, "tiny": tiny}, (4, 16, 40), repeats=2)
    table = timing.table
    assert list(table.columns) == ["model", "tokens", "ms_per_complaint"]
    assert list(zip(table["model"], table["tokens"], strict=True)) == [
        ("LSTM", 4), ("LSTM", 16), ("LSTM", 40), ("tiny", 4), ("tiny", 16), ("tiny", 40),
    ]  # fmt: skip
    assert (table["ms_per_complaint"] > 0).all() and timing.repeats == 2
    # 40 tokens is beyond the tiny model's 16 positions: it was timed on a longer-table copy,
    # and the model itself is left as it was.
    assert tiny[0].config.max_length == 16
    assert list(timing.ratio("LSTM", "tiny").index) == [4, 16, 40]
