"""Tests for how a label audit picks how many rows to flag, orders them, and estimates how many of
them are real errors (core.analysis.audit, audit_estimate, audit_blend): tiny seeded data and
hand-made probabilities, no model download."""

from __future__ import annotations

import numpy as np
import pytest
from cleanlab.count import num_label_issues

from core.analysis.audit import (
    MODEL,
    AuditConfig,
    OutOfFold,
    choose_out_of_fold,
    find_issues,
    find_issues_and_estimate,
    out_of_fold_log_loss,
    plant_label_flips,
    run_audit,
    share_progress,
)
from core.analysis.audit_blend import blend_out_of_fold
from core.analysis.audit_estimate import ErrorEstimate, error_probabilities, estimate_errors
from core.analysis.label_conflicts import SAME_BAG
from core.data.dataset import Dataset
from core.progress import Progress


class Oracle:
    """A fold model that knows each text's true label: `sure` on it, the rest spread evenly."""

    def __init__(self, truth: dict[str, str], classes: list[str], sure: float = 0.9) -> None:
        self.truth, self.sure = truth, sure
        self.classes_ = np.asarray(classes)

    def predict_proba(self, texts):
        k = len(self.classes_)
        probs = np.full((len(texts), k), (1 - self.sure) / (k - 1))
        for row, text in enumerate(texts):
            probs[row, list(self.classes_).index(self.truth[text])] = self.sure
        return probs


def _toy(n_per_class: int = 20, share: float = 0.1, seed: int = 3):
    """Three labels, distinct texts, a seeded share flipped: data, truth by text, flips."""
    labels = [label for label in ("A", "B", "C") for _ in range(n_per_class)]
    texts = [f"complaint number {i} about {label.lower()}" for i, label in enumerate(labels)]
    noisy, flipped = plant_label_flips(labels, share=share, seed=seed)
    truth = dict(zip(texts, labels, strict=True))
    return Dataset(texts=texts, labels=noisy), truth, set(flipped.tolist())


def _oracle_fit(truth, sure=0.9):
    return lambda train: Oracle(truth, list(train.classes), sure)


# ------------------------------------------------------------------------------ the flagged count


def test_the_audit_flags_as_many_rows_as_cleanlab_estimates_are_issues():
    data, truth, flipped = _toy()
    result = run_audit(data, AuditConfig(model="oracle", folds=3), fit=_oracle_fit(truth))
    flagged = {x.index for x in result.issues if MODEL in x.kinds}
    classes = sorted(set(data.labels))
    label_ids = np.asarray([classes.index(y) for y in data.labels])
    assert len(flagged) == num_label_issues(label_ids, result.pred_probs) == len(flipped) == 6
    assert flagged == flipped  # the oracle ranks every flip below every clean row


def test_the_flagged_count_follows_the_data_not_a_setting():
    few, truth_few, flipped_few = _toy(share=0.05)
    many, truth_many, flipped_many = _toy(share=0.2)
    config = AuditConfig(model="oracle", folds=3)
    n_few = len(run_audit(few, config, fit=_oracle_fit(truth_few)).issues)
    n_many = len(run_audit(many, config, fit=_oracle_fit(truth_many)).issues)
    assert (n_few, n_many) == (len(flipped_few), len(flipped_many)) == (3, 12)


# ------------------------------------------------------------------------------ the order


def test_flagged_rows_come_most_likely_error_first():
    data = Dataset(texts=[f"t{i}" for i in range(12)], labels=["A"] * 6 + ["B"] * 6)
    p_a = np.array([0.9, 0.95, 0.3, 0.9, 0.05, 0.92, 0.1, 0.08, 0.2, 0.92, 0.04, 0.1])
    pred_probs = np.column_stack([p_a, 1 - p_a])  # rows 4 (A) and 9 (B) look wrong, 2 less so
    issues = find_issues(data, pred_probs, config=AuditConfig(conflicts=False))
    order = [x.index for x in issues]
    given = [pred_probs[i, 0 if i < 6 else 1] for i in order]
    assert given == sorted(given)
    assert order[:2] == [4, 9]


# ------------------------------------------------------------------------------ the estimate


def test_error_probabilities_read_the_given_label_and_the_noise_rates():
    label_ids = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    pred_probs = np.array(
        [[0.9, 0.1], [0.8, 0.2], [0.85, 0.15], [0.1, 0.9], [0.2, 0.8], [0.1, 0.9], [0.3, 0.7],
         [0.95, 0.05]]
    )  # fmt: skip
    plain, noisy = error_probabilities(label_ids, pred_probs)
    np.testing.assert_allclose(plain, 1 - pred_probs[np.arange(8), label_ids])
    assert noisy.shape == (8,) and ((noisy >= 0) & (noisy <= plain + 1e-12)).all()
    assert noisy[3] > noisy[0] and noisy[7] > noisy[4]  # the doubted rows stay the most doubted


def test_the_estimate_lies_between_its_bounds_and_says_so():
    label_ids = np.array([0] * 5 + [1] * 5)
    p0 = np.array([0.95, 0.9, 0.9, 0.1, 0.05, 0.1, 0.05, 0.1, 0.2, 0.9])
    pred_probs = np.column_stack([p0, 1 - p0])
    estimate = estimate_errors(label_ids, pred_probs, np.array([3, 4, 9]))
    assert estimate.flagged == 3
    assert estimate.low <= estimate.expected <= estimate.high
    assert estimate.expected == pytest.approx((estimate.low + estimate.high) / 2)
    assert estimate.high == pytest.approx(0.9 + 0.95 + 0.9)
    sentence = estimate.sentence()
    assert sentence.startswith("Of the 3 rows the model flags, the audit expects about")
    assert f"between {estimate.low:.0f} and {estimate.high:.0f}" in sentence


def test_no_flagged_row_is_a_sentence_too():
    estimate = ErrorEstimate(flagged=0, expected=0.0, low=0.0, high=0.0)
    assert "flags no row" in estimate.sentence() and estimate.share == 0.0


def test_the_result_carries_the_estimate_of_its_flagged_rows():
    data, truth, flipped = _toy()
    result = run_audit(data, AuditConfig(model="oracle", folds=3), fit=_oracle_fit(truth))
    flagged = [x for x in result.issues if MODEL in x.kinds]
    assert result.estimate is not None and result.estimate.flagged == len(flagged)
    # the oracle gives each flip 0.05 on its given label: about 0.95 of each is an error
    assert result.estimate.high == pytest.approx(0.95 * len(flipped))
    assert result.to_json()["estimate"]["flagged"] == len(flagged)


# ------------------------------------------------------------------------------ conflicts


def test_same_words_in_another_order_only_annotate_a_flagged_row():
    # rows 0/1 are twins (same words, other order, other labels) that the model trusts; rows
    # 2/3 are twins too, and row 3 is flagged by the model anyway.
    texts = ["money sent not received", "money not sent received", "card blocked help please",
             "card help blocked please"] + [f"filler {i}" for i in range(8)]  # fmt: skip
    labels = ["A", "B", "A", "B"] + ["A", "B"] * 4
    data = Dataset(texts=texts, labels=labels)
    given = np.array([0.9, 0.9, 0.9, 0.02] + [0.9] * 8)
    ids = np.array([0 if y == "A" else 1 for y in labels])
    pred_probs = np.zeros((12, 2))
    pred_probs[np.arange(12), ids] = given
    pred_probs[np.arange(12), 1 - ids] = 1 - given
    issues, _ = find_issues_and_estimate(data, pred_probs)
    by_index = {x.index: x for x in issues}
    assert 0 not in by_index and 1 not in by_index and 2 not in by_index
    assert {MODEL, SAME_BAG} <= set(by_index[3].kinds)


# ------------------------------------------------------------------------------ choices


def test_choose_out_of_fold_keeps_the_lowest_log_loss():
    data, truth, _ = _toy()
    candidates = {"timid": _oracle_fit(truth, 0.4), "sure": _oracle_fit(truth, 0.8)}
    chosen = choose_out_of_fold(data, candidates, folds=3, seed=0)
    assert chosen is not None and chosen.name == "sure"
    assert chosen.log_loss == pytest.approx(out_of_fold_log_loss(data, chosen.pred_probs))


def test_progress_of_several_candidates_ends_on_the_folds():
    data, truth, _ = _toy()
    reports: list[Progress] = []
    candidates = {"a": _oracle_fit(truth), "b": _oracle_fit(truth, 0.7)}
    choose_out_of_fold(data, candidates, folds=3, seed=0, on_progress=reports.append)
    done = [r.done for r in reports]
    assert done == sorted(done) and done[-1] == 3 and {r.total for r in reports} == {3}
    assert len(reports) == 6


def test_share_progress_maps_a_part_onto_the_whole():
    seen: list[Progress] = []
    second_half = share_progress(seen.append, 0.5, 0.5)
    second_half(Progress(1, 4, "fold"))
    second_half(Progress(4, 4, "fold"))
    assert [(p.done, p.total) for p in seen] == [(2.5, 4), (4.0, 4)]
    assert share_progress(None, 0.0, 1.0) is None


def test_the_blend_weight_follows_the_better_member():
    data, truth, _ = _toy()
    rows = np.arange(len(data))
    classes = sorted(set(data.labels))
    sure = np.full((len(data), 3), 0.05)
    sure[rows, [classes.index(truth[t]) for t in data.texts]] = 0.9
    flat = np.full((len(data), 3), 1 / 3)
    head, bow = OutOfFold("head C=1", sure, 0.0), OutOfFold("bag of words C=3", flat, 0.0)
    chosen = blend_out_of_fold(data, head, bow)
    assert chosen.name == "100% head C=1 + 0% bag of words C=3"
    swapped = blend_out_of_fold(data, bow.__class__("head C=1", flat, 0.0), head)
    assert swapped.name.startswith("0% head")
    np.testing.assert_allclose(chosen.pred_probs.sum(axis=1), 1.0)
