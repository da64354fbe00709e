"""core.models.blend: the routing decision chosen on validation rows, calibrated and explained."""

from __future__ import annotations

import numpy as np
import pytest

from core.models.blend import (
    BAG_OF_WORDS,
    BLEND,
    FROZEN,
    NEURAL,
    NEURAL_ONLY,
    Blend,
    calibrated_temperature,
    choose_blend,
    choose_mix,
    tempered,
)
from core.models.classifier import Prediction
from core.numeric import MIN_GAIN_ROWS, clearly_more_right

CLASSES = ["Card Fraud", "Loan Query", "UPI Dispute"]


def one_hot_ish(label_ids: list[int], sure: float) -> np.ndarray:
    """Rows that give `sure` to the label of `label_ids` and split the rest evenly."""
    probs = np.full((len(label_ids), 3), (1 - sure) / 2)
    probs[np.arange(len(label_ids)), label_ids] = sure
    return probs


def names(label_ids: list[int]) -> list[str]:
    return [CLASSES[i] for i in label_ids]


def test_a_transformer_that_gets_every_row_right_decides_alone():
    truth = [0, 1, 2, 0, 1, 2]
    neural = one_hot_ish(truth, 0.9)
    bow = one_hot_ish([1, 1, 2, 2, 1, 2], 0.8)  # wrong on two rows
    blend = choose_blend(neural, bow, names(truth), CLASSES)
    assert blend == NEURAL_ONLY
    assert blend.decided_by == NEURAL
    assert blend.describe() == "the transformer alone"


def test_a_tie_goes_to_the_transformer():
    truth = [0, 1, 2]
    both = one_hot_ish(truth, 0.7)
    assert choose_blend(both, both.copy(), names(truth), CLASSES) == NEURAL_ONLY


def rescue(n_sure: int, n_rescued: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Rows where the transformer is right and sure (n_sure) or unsure and wrong (n_rescued),
    and a bag of words that is wrong but timid on the first and right and sure on the second."""
    truth = [i % 3 for i in range(n_sure + n_rescued)]
    wrong = [(t + 1) % 3 for t in truth]
    neural = np.vstack([one_hot_ish(truth[:n_sure], 0.95),
                             one_hot_ish(wrong[n_sure:], 0.40)])  # fmt: skip
    bow = np.vstack([one_hot_ish(wrong[:n_sure], 0.40), one_hot_ish(truth[n_sure:], 0.95)])
    return neural, bow, truth


def test_the_bag_of_words_is_mixed_in_where_it_clearly_gets_more_rows_right():
    neural, bow, truth = rescue(20, 10)
    blend = choose_blend(neural, bow, names(truth), CLASSES)
    assert blend.decided_by == BLEND
    assert 0 < blend.neural_weight < 1
    decision = blend.combine(neural, bow)
    assert (decision.argmax(1) == truth).all()  # the 10 rescued rows, and no row broken
    np.testing.assert_allclose(decision.sum(axis=1), 1.0)
    share = round(100 * blend.neural_weight)
    assert blend.describe() == f"a blend of {share}% transformer and {100 - share}% bag of words"


def test_a_few_rows_more_are_not_worth_a_mix_and_leave_the_call_to_the_transformer():
    neural, bow, truth = rescue(400, 2)  # the best mix fixes 2 rows of 402, breaks none
    assert Blend(0.5).combine(neural, bow).argmax(1).tolist() == truth
    assert choose_blend(neural, bow, names(truth), CLASSES) == NEURAL_ONLY


def test_a_mix_must_gain_three_rows_and_more_than_one_standard_error():
    assert MIN_GAIN_ROWS == 3
    neural, bow, truth = rescue(297, 3)  # the mix fixes 3 rows of 300 and breaks none
    assert choose_blend(neural, bow, names(truth), CLASSES).decided_by == BLEND
    neural, bow, truth = rescue(19, 2)  # 2 rows of 21: 10%, but two rows are a coin's toss
    assert choose_blend(neural, bow, names(truth), CLASSES) == NEURAL_ONLY


def test_clearly_more_right_counts_only_the_rows_where_the_two_differ():
    base = np.zeros(100, dtype=bool)
    fixes_four = base.copy()
    fixes_four[:4] = True
    assert clearly_more_right(fixes_four, base)  # 4 of 4 differing rows: 4 > sqrt(4)
    swaps = fixes_four.copy()
    other = base.copy()
    other[4:7] = True  # 7 rows differ, 4 against 3: a gain of 1
    assert not clearly_more_right(swaps, other)
    twenty, thirty_two = base.copy(), base.copy()
    twenty[:20] = True
    thirty_two[4:36] = True  # 20 rows differ (0-3 and 20-35): a gain of 12 > sqrt(20)
    assert clearly_more_right(thirty_two, twenty)
    fifty, forty_seven = base.copy(), base.copy()
    fifty[:50] = True
    forty_seven[20:67] = True  # 37 rows differ: a gain of 3, under sqrt(37) = 6.1
    assert not clearly_more_right(fifty, forty_seven)


def test_three_members_mix_where_each_clearly_pays_and_the_shares_sum_to_one():
    truth = [i % 3 for i in range(60)]
    wrong = [(t + 1) % 3 for t in truth]
    # each member is right and sure on its own third of the rows, and timidly wrong elsewhere
    parts = []
    for member in range(3):
        mine = [i for i in range(60) if i % 30 // 10 == member or i >= 30]
        labels = [truth[i] if i in mine else wrong[i] for i in range(60)]
        probs = one_hot_ish(labels, 0.5)
        probs[mine] = one_hot_ish([truth[i] for i in mine], 0.9)
        parts.append(probs)
    neural, frozen, bow = parts
    blend = choose_blend(neural, bow, names(truth), CLASSES, frozen_probs=frozen)
    assert set(blend.shares) == {NEURAL, FROZEN, BAG_OF_WORDS}
    assert sum(blend.shares.values()) == pytest.approx(1.0)
    assert (blend.combine(neural, bow, frozen).argmax(1) == truth).all()
    shares = {name: round(100 * share) for name, share in blend.shares.items()}
    assert blend.describe() == (
        f"a blend of {shares[NEURAL]}% transformer, {shares[FROZEN]}% "
        f"frozen encoder and {shares[BAG_OF_WORDS]}% bag of words"
    )
    with pytest.raises(ValueError, match="frozen encoder"):
        blend.combine(neural, bow)
    assert Blend.from_card({"blend": blend.to_json()}) == blend


def test_a_member_within_noise_of_the_best_mix_is_left_out():
    truth = [i % 3 for i in range(300)]
    neural = one_hot_ish(truth, 0.8)
    neural[:2] = one_hot_ish([(t + 1) % 3 for t in truth[:2]], 0.4)  # wrong and unsure on 2
    frozen = one_hot_ish(truth, 0.6)  # right everywhere: fixes 2 rows, a coin's toss
    blend = choose_blend(neural, one_hot_ish(truth, 0.34), names(truth), CLASSES, frozen)
    assert blend == NEURAL_ONLY


def test_the_simplest_of_equally_good_mixes_is_chosen_with_the_preferred_member():
    truth = np.array([0, 1, 2] * 10)
    probs = one_hot_ish(list(truth), 0.7)
    mix = choose_mix({"full": probs, "quick": probs.copy(), "bow": probs.copy()}, truth)
    assert mix.shares == {"full": 1.0} and mix.accuracy == 1.0


def test_a_frozen_encoder_never_decides_without_the_transformer():
    with pytest.raises(ValueError, match="never decides alone"):
        Blend(neural_weight=0.0, frozen_weight=0.5)
    with pytest.raises(ValueError, match="more than 1"):
        Blend(neural_weight=0.7, frozen_weight=0.5)


def test_a_sure_but_always_wrong_transformer_is_calibrated_down_and_outvoted():
    truth = [0, 1, 2, 0, 1, 2]
    neural = one_hot_ish([1, 2, 0, 1, 2, 0], 0.99)
    bow = one_hot_ish(truth, 0.6)
    blend = choose_blend(neural, bow, names(truth), CLASSES)
    assert blend.decided_by != NEURAL
    assert blend.neural_temperature > 1 > blend.bow_temperature or blend == Blend(0.0)
    assert blend.combine(neural, bow).argmax(1).tolist() == truth


def test_the_bag_of_words_alone_returns_its_own_numbers():
    rng = np.random.default_rng(1)
    neural, bow = rng.dirichlet(np.ones(3), size=4), rng.dirichlet(np.ones(3), size=4)
    assert Blend(0.0).decided_by == BAG_OF_WORDS
    assert Blend(0.0).describe() == "the bag of words alone"
    np.testing.assert_array_equal(Blend(0.0).combine(neural, bow), bow)


def test_the_transformer_alone_returns_its_own_numbers_unchanged():
    rng = np.random.default_rng(0)
    neural, bow = rng.dirichlet(np.ones(3), size=5), rng.dirichlet(np.ones(3), size=5)
    np.testing.assert_array_equal(NEURAL_ONLY.combine(neural, bow), neural)


def test_models_that_scored_different_rows_cannot_be_combined():
    with pytest.raises(ValueError, match="same texts and labels"):
        Blend(0.5).combine(np.ones((2, 3)) / 3, np.ones((3, 3)) / 3)


def test_temperature_keeps_the_answer_and_changes_only_the_confidence():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    for temperature in (0.2, 1.0, 5.0):
        scaled = tempered(probs, temperature)
        np.testing.assert_array_equal(scaled.argmax(1), probs.argmax(1))
        np.testing.assert_allclose(scaled.sum(1), 1.0)
    np.testing.assert_allclose(tempered(probs, 1.0), probs)
    assert tempered(probs, 5.0).max() < probs.max() < tempered(probs, 0.2).max()


def test_an_overconfident_model_is_calibrated_by_a_temperature_above_one():
    # Sure (0.99) and right on 6 of 10 rows: its log-loss falls when it is flattened.
    label_ids = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    predicted = np.array([0, 1, 2, 0, 1, 2, 1, 2, 0, 1])
    probs = one_hot_ish(list(predicted), 0.99)
    assert calibrated_temperature(probs, label_ids) > 1.0
    # and a timid model that is always right is sharpened
    assert calibrated_temperature(one_hot_ish(list(label_ids), 0.4), label_ids) < 1.0


def test_the_card_round_trip_and_older_cards():
    blend = Blend(0.3, neural_temperature=2.0, bow_temperature=0.5)
    saved = blend.to_json()
    assert saved["decided_by"] == BLEND
    assert Blend.from_card({"blend": saved}) == blend
    assert Blend.from_card({}) == NEURAL_ONLY  # cards saved before blends
    with pytest.raises(ValueError, match="damaged"):
        Blend.from_card({"blend": "0.3"})
    with pytest.raises(ValueError, match="transformer_weight"):
        Blend.from_card({"blend": {"transformer_weight": 1.5}})


def test_the_decision_for_one_text_from_both_predictions():
    neural = Prediction.of(CLASSES, np.array([0.2, 0.3, 0.5]))
    bow = Prediction.of(CLASSES, np.array([0.9, 0.05, 0.05]))
    assert NEURAL_ONLY.decide(neural, bow) == neural
    decision = Blend(0.5).decide(neural, bow)
    assert decision.label == "Card Fraud"
    assert decision.probabilities["Card Fraud"] == pytest.approx(0.55)


def test_choosing_needs_validation_rows_with_known_labels():
    probs = one_hot_ish([0], 0.9)
    with pytest.raises(ValueError, match="validation rows"):
        choose_blend(probs[:0], probs[:0], [], CLASSES)
    with pytest.raises(ValueError, match="KYC Update"):
        choose_blend(probs, probs, ["KYC Update"], CLASSES)


def test_of_members_within_noise_the_lower_log_loss_decides_not_the_preference():
    truth = [i % 3 for i in range(100)]
    wrong = [(t + 1) % 3 for t in truth]
    # the transformer: right on 60 rows but timid everywhere; the bag of words: right on 61 and
    # sure where right, so its log-loss is lower while neither is clearly more accurate
    neural = one_hot_ish([t if i < 60 else wrong[i] for i, t in enumerate(truth)], 0.4)
    bow = one_hot_ish([t if i < 61 else wrong[i] for i, t in enumerate(truth)], 0.9)
    assert not clearly_more_right(bow.argmax(1) == truth, neural.argmax(1) == truth)
    mix = choose_mix({"transformer": neural, "bag of words": bow}, np.array(truth),
                     allowed=lambda members: len(members) == 1)  # fmt: skip
    assert mix.shares == {"bag of words": 1.0}
