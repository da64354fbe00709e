"""The unknown-desk score and the review policy (core.models.flagging), and how they reach the
card, `classify`'s columns and the triage queue."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sklearn.covariance import ledoit_wolf

from core.errors import UserError
from core.models.flagging import (
    COMBINED,
    COMBINED_K,
    COMBINED_WEIGHTS,
    DETECTOR,
    FINE_TUNED_DETECTOR,
    KNN,
    KNN_MSP,
    MAHALANOBIS,
    UNKNOWN_FILE,
    ReviewPolicy,
    UnknownDeskDetector,
    choose_policy,
    detector_for,
    fit_detector,
    knn_distances,
    mahalanobis_distances,
    rank_in,
    shrunk_covariance,
    unit_rows,
)


def clusters(seed: int = 0, per_desk: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Three tight desks in 6 dimensions, centred 10 along each of the first three axes."""
    rng = np.random.default_rng(seed)
    centres = np.zeros((3, 6))
    centres[0, 0], centres[1, 1], centres[2, 2] = 10.0, 10.0, 10.0
    labels = np.repeat(np.arange(3), per_desk)
    return centres[labels] + rng.normal(scale=0.3, size=(len(labels), 6)), labels


def test_mahalanobis_distances_match_the_formula_row_by_row():
    rng = np.random.default_rng(1)
    features, means = rng.normal(size=(5, 4)), rng.normal(size=(3, 4))
    root = rng.normal(size=(4, 4))
    precision = root @ root.T + np.eye(4)
    expected = [min((x - m) @ precision @ (x - m) for m in means) for x in features]
    np.testing.assert_allclose(mahalanobis_distances(features, means, precision), expected)


def test_knn_distance_is_one_minus_the_kth_cosine_similarity():
    neighbours = np.array([[1.0, 0.0], [0.0, 1.0], [math.sqrt(0.5), math.sqrt(0.5)]])
    query = np.array([[2.0, 0.0]])  # cosines 1, 0, 0.707: the 2nd nearest is 0.707
    assert knn_distances(query, neighbours, 1)[0] == pytest.approx(0.0, abs=1e-6)
    assert knn_distances(query, neighbours, 2)[0] == pytest.approx(1 - math.sqrt(0.5), abs=1e-6)
    assert knn_distances(query, neighbours, 9)[0] == pytest.approx(1.0, abs=1e-6)  # k capped


def test_rank_counts_ties_half_and_saturates():
    reference = np.array([1.0, 2.0, 2.0, 3.0])
    np.testing.assert_allclose(rank_in(np.array([0.5, 2.0, 2.5, 9.0]), reference),
                               [0.0, 0.5, 0.75, 1.0])  # fmt: skip


def test_shrunk_covariance_is_ledoit_wolf():
    rng = np.random.default_rng(2)
    centred = rng.normal(size=(20, 8)) * np.arange(1, 9)  # fewer rows than a full estimate needs
    centred -= centred.mean(axis=0)
    expected, _ = ledoit_wolf(centred, assume_centered=True)
    np.testing.assert_allclose(shrunk_covariance(centred), expected, rtol=1e-10, atol=1e-12)


def sure(n: int, top: float) -> np.ndarray:
    """n rows of probabilities over 3 desks, the first desk at `top`."""
    return np.tile([top, (1 - top) / 2, (1 - top) / 2], (n, 1))


@pytest.mark.parametrize("method", [MAHALANOBIS, KNN, KNN_MSP, COMBINED])
def test_a_point_far_from_every_desk_scores_one_and_a_desk_like_one_low(method, tmp_path: Path):
    features, labels = clusters()
    val, _ = clusters(seed=3, per_desk=10)
    val_probs = sure(30, 0.9) + np.linspace(0, 0.05, 30)[:, None] * [[-1, 0.5, 0.5]]
    detector = fit_detector(features, labels, val, n_classes=3, method=method,
                            val_probs=val_probs)  # fmt: skip
    queries = np.array([[10.1, 0.0, 0, 0, 0, 0], [-9.0, -9.0, -9, 0, 0, 0]])
    scores = detector.scores(queries, np.vstack([sure(1, 0.95), sure(1, 0.4)]))
    assert scores[0] < 0.8 and scores[1] == 1.0
    detector.save(tmp_path)
    loaded = UnknownDeskDetector.load(tmp_path, n_classes=3)
    np.testing.assert_array_equal(loaded.scores(val, val_probs), detector.scores(val, val_probs))


def test_knn_plus_msp_adds_the_relative_distance_and_the_rank_of_doubt():
    features, labels = clusters()
    val, _ = clusters(seed=3, per_desk=10)
    val_probs = sure(30, 0.9) + np.linspace(0, 0.05, 30)[:, None] * [[-1, 0.5, 0.5]]
    both = fit_detector(features, labels, val, n_classes=3, method=KNN_MSP, val_probs=val_probs)
    knn = fit_detector(features, labels, val, n_classes=3, method=KNN)
    near = knn.distances(val)
    doubts = 1 - val_probs.max(1)
    expected = near / np.median(near) + rank_in(doubts, np.sort(doubts))
    np.testing.assert_allclose(both.distances(val, val_probs), expected, rtol=1e-6)
    # far beyond every training complaint yet confidently routed: still the least like a desk
    far = both.scores(np.array([[-9.0, -9.0, -9, 0, 0, 0]]), sure(1, 0.99))
    assert far[0] == 1.0
    with pytest.raises(ValueError, match="needs the model's probabilities"):
        both.distances(val)


def test_combined_is_the_weighted_sum_of_its_standardised_parts():
    features, labels = clusters()
    val, _ = clusters(seed=3, per_desk=10)
    val_probs = sure(30, 0.9) + np.linspace(0, 0.05, 30)[:, None] * [[-1, 0.5, 0.5]]
    detector = fit_detector(features, labels, val, n_classes=3, method=COMBINED,
                            val_probs=val_probs)  # fmt: skip
    unit = unit_rows(features)
    means = np.stack([unit[labels == c].mean(0) for c in range(3)])
    precision = np.linalg.pinv(shrunk_covariance(unit - means[labels]))
    parts = np.column_stack([
        knn_distances(val, detector.neighbours_fp32, COMBINED_K),  # float16 as stored
        np.sqrt(mahalanobis_distances(unit_rows(val), means, precision)),
        1 - val_probs.max(1),
    ])  # fmt: skip
    assert np.allclose(detector.neighbours_fp32, unit, atol=1e-3)
    np.testing.assert_allclose(detector.parts(val, val_probs), parts, rtol=1e-4)
    standard = (parts - parts.mean(0)) / parts.std(0)
    np.testing.assert_allclose(detector.distances(val, val_probs), standard @ COMBINED_WEIGHTS,
                               rtol=1e-4, atol=1e-6)  # fmt: skip
    assert COMBINED not in (DETECTOR, FINE_TUNED_DETECTOR)  # measured, not shipped (#40)


def test_combined_ranks_doubt_and_distance_together():
    features, labels = clusters()
    val, _ = clusters(seed=3, per_desk=10)
    val_probs = sure(30, 0.9) + np.linspace(0, 0.05, 30)[:, None] * [[-1, 0.5, 0.5]]
    detector = fit_detector(features, labels, val, n_classes=3, method=COMBINED,
                            val_probs=val_probs)  # fmt: skip
    at_desk = np.array([[10.0, 0.0, 0, 0, 0, 0]] * 2)
    between = np.array([[7.0, 7.0, 0, 0, 0, 0]])  # as far from two desks: unlike either
    probs = np.vstack([sure(1, 0.95), sure(1, 0.5), sure(1, 0.95)])
    scores = detector.distances(np.vstack([at_desk, between]), probs)
    assert scores[0] < scores[1]  # the model's doubt alone raises the score
    assert scores[0] < scores[2]  # the distance alone raises it
    with pytest.raises(ValueError, match="needs the validation rows' probabilities"):
        fit_detector(features, labels, val, n_classes=3, method=COMBINED)
    with pytest.raises(ValueError, match="needs the model's probabilities"):
        detector.distances(val)


def test_detectors_saved_before_combined_still_load_and_a_combined_one_needs_its_parts(
    tmp_path: Path,
):
    features, labels = clusters()
    val, _ = clusters(seed=3, per_desk=10)
    val_probs = sure(30, 0.9) + np.linspace(0, 0.05, 30)[:, None] * [[-1, 0.5, 0.5]]
    old = fit_detector(features, labels, val, n_classes=3, method=KNN_MSP, val_probs=val_probs)
    np.savez(
        tmp_path / UNKNOWN_FILE,
        means=old.means,
        precision=old.precision,
        neighbours=old.neighbours,
        reference=old.reference,
        knn_reference=old.knn_reference,
        doubt_reference=old.doubt_reference,
        method=np.array(KNN_MSP),
    )  # fmt: skip  (the file as saved before COMBINED)
    loaded = UnknownDeskDetector.load(tmp_path, n_classes=3)
    np.testing.assert_array_equal(loaded.scores(val, val_probs), old.scores(val, val_probs))
    combined = fit_detector(features, labels, val, n_classes=3, method=COMBINED,
                            val_probs=val_probs)  # fmt: skip
    replace(combined, part_scale=np.zeros(0)).save(tmp_path)
    with pytest.raises(UserError, match="damaged"):
        UnknownDeskDetector.load(tmp_path, n_classes=3)


def test_a_detector_file_that_does_not_fit_the_labels_is_refused(tmp_path: Path):
    features, labels = clusters()
    fit_detector(features, labels, features, n_classes=3, method=MAHALANOBIS).save(tmp_path)
    with pytest.raises(UserError, match=f"{UNKNOWN_FILE} is damaged"):
        UnknownDeskDetector.load(tmp_path, n_classes=4)
    np.savez(tmp_path / UNKNOWN_FILE, means=np.zeros((3, 2)), precision=np.eye(3),
             neighbours=np.zeros((0, 2)), reference=np.ones(2),
             method=np.array("mahalanobis"))  # fmt: skip
    with pytest.raises(UserError, match="damaged"):
        UnknownDeskDetector.load(tmp_path, n_classes=3)


def test_policy_flags_the_lowest_confidence_while_they_are_right_at_most_half_the_time():
    # Sorted by confidence: wrong, wrong, right, right, right ... (20 rows). The two lowest are
    # right 0% of the time, the three lowest 33%, the four lowest 50%, the five lowest 60%:
    # four rows may be flagged (20% > the 10% cap, so the cap keeps it to 2).
    confidence = np.linspace(0.30, 0.99, 20)
    right = np.ones(20, bool)
    right[:2] = False
    policy = choose_policy(confidence, right, None)
    assert policy.unknown_threshold is None
    assert policy.confidence_threshold == pytest.approx((confidence[1] + confidence[2]) / 2, 1e-3)
    assert policy.validation["unsure"] == pytest.approx(0.10)
    assert policy.validation["right_when_unsure"] == 0.0


def test_policy_leaves_room_for_unknown_desk_flags_within_the_cap():
    confidence = np.linspace(0.30, 0.99, 40)
    right = np.ones(40, bool)
    right[:6] = False
    scores = np.linspace(0.0, 1.0, 40)[::-1]  # the two highest scores exceed 0.95
    policy = choose_policy(confidence, right, scores)
    assert policy.unknown_threshold == pytest.approx(0.95)
    # 4 rows of 40 may be flagged; the two unknown-desk rows are also the two least confident,
    # so the confidence threshold may reach 4 rows and stay within the cap.
    assert policy.validation["flagged"] <= 0.10 + 1e-9
    assert policy.validation["unknown"] == pytest.approx(0.05)


def test_a_perfect_validation_set_flags_only_what_is_less_sure_than_all_of_it():
    policy = choose_policy(np.array([0.7, 0.8, 0.9]), np.ones(3, bool), None)
    assert policy.confidence_threshold == pytest.approx(0.7)
    assert policy.validation["unsure"] == 0.0
    assert policy.validation["right_when_unsure"] is None  # no flagged rows: no share, no NaN
    assert ReviewPolicy.from_card({"review": policy.to_json()}, fallback=0.6) == policy


def test_reasons_rank_blank_then_unknown_then_unsure():
    policy = ReviewPolicy(0.6, 0.95)
    reasons = policy.reasons(
        np.array([0.9, 0.5, 0.5, 0.9, 0.5]),
        np.array([0.1, 0.1, 0.99, 0.99, np.nan]),
        np.array([False, False, False, False, True]),
    )
    assert reasons.tolist() == ["", "unsure", "unknown desk", "unknown desk", "blank"]


def test_old_cards_flag_by_the_fixed_default_and_damaged_policies_are_refused():
    old = ReviewPolicy.from_card({}, fallback=0.6)
    assert (old.confidence_threshold, old.unknown_threshold) == (0.6, None)
    saved = ReviewPolicy(0.42, 0.95, "rule", {"flagged": 0.08})
    assert ReviewPolicy.from_card({"review": saved.to_json()}, fallback=0.6) == saved
    with pytest.raises(UserError, match="review policy is damaged"):
        ReviewPolicy.from_card({"review": {"confidence_threshold": "high"}}, fallback=0.6)
    assert saved.with_confidence(None) is saved
    assert saved.with_confidence(0.7) == ReviewPolicy(0.7, 0.95, "set by hand", {})


def test_a_trained_model_saves_its_detector_and_policy_and_classify_uses_them(
    tiny_model_dir: Path,
):
    from core.models.classify import classification_columns, classify_one
    from core.models.registry import load_model

    card = json.loads((tiny_model_dir / "card.json").read_text(encoding="utf-8"))
    assert set(card["review"]) == {"confidence_threshold", "unknown_threshold", "rule",
                                   "validation"}  # fmt: skip
    assert UNKNOWN_FILE in card["files"]
    loaded = load_model(tiny_model_dir, device="cpu")
    assert loaded.detector is not None
    assert loaded.detector.method == detector_for(card["recipe"]) == FINE_TUNED_DETECTOR
    from core.models.cache import model_bytes

    without = model_bytes(replace(loaded, detector=None))
    assert model_bytes(loaded) == without + loaded.detector.nbytes() > without
    assert loaded.review.confidence_threshold == card["review"]["confidence_threshold"]
    texts = ["my card was charged twice", "", "zzz qqq xxx"]
    columns = classification_columns(loaded, texts)
    assert columns["review_reason"].tolist()[1] == "blank"
    assert (columns["needs_review"] == (columns["review_reason"] != "")).all()
    assert columns["unknown_desk_score"].between(0, 1).all()
    one = classify_one(loaded, texts[0])
    assert one.row["unknown_desk_score"] == pytest.approx(columns["unknown_desk_score"][0])
    everything = classification_columns(loaded, texts, review_threshold=1.0)
    assert set(everything["review_reason"]) <= {"unsure", "unknown desk", "blank"}


def test_a_model_without_a_detector_still_classifies_with_empty_scores(
    tiny_model_dir: Path, tmp_path: Path
):
    import shutil

    from core.models.card import folder_digests
    from core.models.classify import classification_columns
    from core.models.registry import load_model

    old = tmp_path / "old"
    shutil.copytree(tiny_model_dir, old)
    (old / UNKNOWN_FILE).unlink()
    card = json.loads((old / "card.json").read_text(encoding="utf-8"))
    del card["review"]
    card["files"] = folder_digests(old)
    (old / "card.json").write_text(json.dumps(card), encoding="utf-8")
    loaded = load_model(old, device="cpu")
    assert loaded.detector is None and loaded.review.confidence_threshold == 0.6
    columns = classification_columns(loaded, ["my card was charged twice"])
    assert columns["unknown_desk_score"].isna().all()
    assert columns["review_reason"][0] in ("", "unsure")


def test_the_triage_queue_takes_the_flagged_rows_when_given(tmp_path: Path):
    from core.access import OPERATOR
    from core.models.classifier import Prediction
    from core.review.store import Store
    from core.review.triage import enqueue_uncertain

    sure = Prediction("UPI Dispute", {"UPI Dispute": 0.99, "Other": 0.01})
    with Store.open(tmp_path / "lens.db") as store:
        # Both are sure; only the one flagged (say, like no desk) is queued.
        added = enqueue_uncertain(store, ["a", "b"], [sure, sure], actor=OPERATOR,
                                  threshold=0.6, batch="b1", flagged=[False, True])  # fmt: skip
        assert len(added) == 1
        with pytest.raises(UserError, match="one entry per text"):
            enqueue_uncertain(store, ["a"], [sure], actor=OPERATOR, threshold=0.6, batch="b2",
                              flagged=[True, False])  # fmt: skip


def test_a_large_training_set_is_drawn_down_and_every_desk_keeps_a_row(
    tiny_bert_result, monkeypatch: pytest.MonkeyPatch
):
    from core.models.transformer import training
    from tests.conftest import make_dataset, separable_rows

    monkeypatch.setattr(training, "MAX_REFERENCE_ROWS", 2)  # of 12 rows over 3 desks
    neural = tiny_bert_result.neural
    data = make_dataset(*separable_rows(4))
    val_probs, val_features = neural.predict_proba_and_features(list(data.texts))
    detector = training.fit_unknown_desk(neural, data, val_features, val_probs, seed=0)
    assert 2 <= len(detector.neighbours) <= 4  # the draw, plus a row of each desk it missed
    assert np.isfinite(detector.means).all() and detector.means.shape[0] == 3
