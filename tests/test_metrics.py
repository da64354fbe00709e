"""Metrics: hand-checked numbers on six rows, label order, JSON shape, the model protocol."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from core.metrics import ClassMetrics, confusion_frame, evaluate_predictions, evaluate_proba
from core.models.evaluation import evaluate_model, evaluate_with_slices
from tests.conftest import make_dataset

Y_TRUE = ["A", "A", "A", "B", "B", "C"]
Y_PRED = ["A", "A", "B", "B", "C", "C"]


def test_six_row_example_by_hand():
    report = evaluate_predictions(Y_TRUE, Y_PRED)
    assert report.n == 6
    assert report.labels == ("A", "B", "C")
    assert report.accuracy == pytest.approx(4 / 6)
    assert report.per_class["A"] == ClassMetrics(precision=1.0, recall=2 / 3, f1=0.8, support=3)
    assert report.per_class["B"] == ClassMetrics(precision=0.5, recall=0.5, f1=0.5, support=2)
    assert report.per_class["C"].f1 == pytest.approx(2 / 3)
    assert report.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert report.macro_f1 == pytest.approx(f1_score(Y_TRUE, Y_PRED, average="macro"))


def test_confusion_rows_are_true_labels_and_columns_predictions():
    report = evaluate_predictions(Y_TRUE, Y_PRED)
    assert report.confusion == ((2, 1, 0), (0, 1, 1), (0, 0, 1))
    assert [sum(row) for row in report.confusion] == [3, 2, 1]  # row sums are supports


def test_explicit_labels_set_the_order_and_report_absent_classes():
    report = evaluate_predictions(Y_TRUE, Y_PRED, labels=["C", "B", "A", "D"])
    assert report.labels == ("C", "B", "A", "D")
    assert report.confusion[0] == (1, 0, 0, 0)  # true C
    assert report.confusion[2] == (0, 1, 2, 0)  # true A
    assert report.per_class["D"] == ClassMetrics(0.0, 0.0, 0.0, 0)  # zero_division=0
    assert report.macro_f1 == pytest.approx((0.8 + 0.5 + 2 / 3) / 4)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "labels", "message"),
    [
        ([], [], None, "empty"),
        (["A"], ["A", "B"], None, "align"),
        (["A", "B"], ["A", "X"], ["A", "B"], r"not in labels: \['X'\]"),
        (["A"], ["A"], ["A", "A"], "distinct"),
        ([1, 2], [1, 2], None, "convert labels to strings"),
        ("AB", "AB", None, "not one string"),
    ],
)
def test_bad_input_is_refused(y_true, y_pred, labels, message):
    with pytest.raises(ValueError, match=message):
        evaluate_predictions(y_true, y_pred, labels=labels)


def test_to_json_has_the_contract_keys_and_serialises():
    data = evaluate_predictions(Y_TRUE, Y_PRED).to_json()
    assert set(data) == {"accuracy", "macro_f1", "per_class", "labels", "confusion", "n"}
    assert set(data["per_class"]["A"]) == {"precision", "recall", "f1", "support"}
    assert data["labels"] == ["A", "B", "C"]
    assert data["confusion"][0] == [2, 1, 0]
    assert json.loads(json.dumps(data)) == data


def test_evaluate_proba_uses_argmax_and_keeps_unpredicted_classes():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.6, 0.3, 0.1]])
    report = evaluate_proba(["A", "B", "C", "B"], probs, ["A", "B", "Z"])
    assert report.labels == ("A", "B", "C", "Z")
    assert report.accuracy == pytest.approx(0.5)
    assert report.confusion[2] == (0, 0, 0, 1)  # true C predicted Z
    assert report.per_class["Z"].precision == 0.0


@pytest.mark.parametrize(
    ("probs", "classes", "message"),
    [
        (np.ones((2, 2)), ["A", "B", "C"], r"shape \(n, 3\)"),
        (np.ones(3), ["A", "B", "C"], "shape"),
        (np.array([[np.nan, 1.0], [0.5, 0.5]]), ["A", "B"], "NaN"),
        (np.ones((2, 2)), ["A", "A"], "distinct"),
    ],
)
def test_evaluate_proba_refuses_mismatched_arrays(probs, classes, message):
    with pytest.raises(ValueError, match=message):
        evaluate_proba(["A", "B"], probs, classes)


class KeywordModel:
    """A stand-in that meets the protocol: `classes_` and `predict_proba` only."""

    classes_ = np.array(["Card Fraud", "UPI Dispute"])

    def predict_proba(self, texts):
        upi = np.array([0.9 if "upi" in t.lower() else 0.2 for t in texts])
        return np.column_stack([1 - upi, upi])


def test_evaluate_model_needs_only_the_protocol():
    texts = ["UPI failed", "card stolen", "UPI and card", "refund"]
    report = evaluate_model(KeywordModel(), texts, ["UPI Dispute", "Card Fraud", "Card Fraud", "B"])
    assert report.labels == ("B", "Card Fraud", "UPI Dispute")
    assert report.accuracy == pytest.approx(0.5)
    assert report.confusion == ((0, 1, 0), (0, 1, 1), (0, 0, 1))
    with pytest.raises(ValueError, match="one per text"):
        evaluate_model(KeywordModel(), texts, ["Card Fraud"])


def test_evaluate_with_slices_reports_the_whole_set_and_each_marked_slice():
    texts = ["UPI failed", "card stolen", "UPI and card", "upi refund"]
    labels = ["UPI Dispute", "Card Fraud", "Card Fraud", "UPI Dispute"]
    extra = pd.DataFrame({"slice": ["twin", "", "twin", None]})
    report, slices = evaluate_with_slices(KeywordModel(), make_dataset(texts, labels, extra=extra))
    assert report == evaluate_model(KeywordModel(), texts, labels)
    assert list(slices) == ["twin"]
    assert (slices["twin"].n, slices["twin"].accuracy) == (2, 0.5)
    assert slices["twin"].labels == (
        "Card Fraud",
        "UPI Dispute",
    )  # every class, not only the slice's
    _, none = evaluate_with_slices(KeywordModel(), make_dataset(texts, labels))
    assert none == {}


def test_confusion_frame_is_tidy_long_format():
    report = evaluate_predictions(Y_TRUE, Y_PRED)
    frame = confusion_frame(report)
    assert list(frame.columns) == ["true", "predicted", "count"]
    assert len(frame) == 9 and frame["count"].sum() == 6
    assert frame["count"].dtype == np.int64
    row = frame[(frame["true"] == "A") & (frame["predicted"] == "B")]
    assert row["count"].tolist() == [1]
    assert frame[["true", "predicted"]].iloc[:3].values.tolist() == [
        ["A", "A"],
        ["A", "B"],
        ["A", "C"],
    ]
