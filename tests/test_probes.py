"""Word-order probes (core.analysis: perturbations, probe_compare, probe_scan, review_sample):
perturbations and bag-of-words bookkeeping, both models on them, the data set scan (twin
groups, one-model-right rows, flip rates) and its background job."""

from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

from core.analysis.perturbations import (
    ARGUMENT_SWAP,
    CLAUSE_REORDER,
    NEGATION_MOVE,
    PLEASE,
    PUNCTUATION,
    SHUFFLE,
    TYPO,
    ProbeConfig,
    perturb,
)
from core.analysis.probe_compare import (
    DEMO_DESKS,
    DEMO_TEXT,
    bow_is_order_blind,
    js_divergence,
    order_demo,
    run_probes,
)
from core.analysis.probe_scan import (
    ScanConfig,
    bow_ceiling,
    scan_dataset,
    twin_groups,
)
from core.analysis.review_sample import review_rows
from core.charts.probe_tables import (
    capped_frame,
    kind_stats_table,
    one_right_table,
    probe_table,
    twin_table,
)
from core.charts.probes import capped_chart, flip_rate_chart, probe_shift_chart
from core.cli import main
from core.jobs import JobStatus
from core.models.bag_of_words import BagOfWordsClassifier, BagOfWordsConfig
from core.progress import Progress
from core.tasks.probes import start_review, start_scan
from core.text import bag_key
from tests.conftest import make_dataset

CLASSES = ["Card Fraud", "UPI Dispute"]


def _of_kind(text: str, kind: str, config: ProbeConfig = ProbeConfig()):
    return [p for p in perturb(text, config) if p.kind == kind]


def test_argument_swaps_around_connectives_keep_the_bag():
    cases = {
        DEMO_TEXT: "I paid ₹2,500 to Croma by UPI, not by card, and was charged twice.",
        "Money went from my savings account to the UPI wallet.": (
            "Money went from the UPI wallet to my savings account."
        ),
        "Refund it to card instead of UPI please.": "Refund it to UPI instead of card please.",
        "Block the credit card rather than the UPI ID.": (
            "Block the UPI ID rather than the credit card."
        ),
        "I received the UPI refund but not the loan NOC.": (
            "I received the loan NOC but not the UPI refund."
        ),
    }
    for text, expected in cases.items():
        swaps = _of_kind(text, ARGUMENT_SWAP)
        assert expected in [p.text for p in swaps], text
        assert all(p.bag_unchanged for p in swaps)


def test_negation_moves_reproduce_the_demo_twins():
    twins = {
        "My loan application at SBI is approved but my KYC verification is not complete, as of "
        "2 June.": "My loan application at SBI is not approved but my KYC verification is "
        "complete, as of 2 June.",
        "Since 4 May net banking is working but UPI is not, on my HDFC account.": (
            "Since 4 May net banking is not working but UPI is, on my HDFC account."
        ),
        "I did not authorise the card payment of Rs 500; the UPI transfer I did authorise.": (
            "I did authorise the card payment of Rs 500; the UPI transfer I did not authorise."
        ),
        "Mera loan approve ho gaya hai, KYC verify nahi hua hai.": (
            "Mera loan approve nahi ho gaya hai, KYC verify hua hai."
        ),
    }
    for text, twin in twins.items():
        moves = _of_kind(text, NEGATION_MOVE)
        assert twin in [p.text for p in moves], text
        assert all(p.bag_unchanged for p in moves)


def test_clause_reorder_keeps_numbers_whole_and_the_bag():
    reorders = _of_kind(DEMO_TEXT, CLAUSE_REORDER)
    assert reorders and all(p.bag_unchanged for p in reorders)
    assert all("₹2,500" in p.text for p in reorders)
    two = _of_kind("UPI failed. Card blocked.", CLAUSE_REORDER)
    assert [p.text for p in two] == ["Card blocked. UPI failed."]


def test_shuffles_are_seeded_and_keep_punctuation_in_place():
    text = "UPI refund pending, card blocked!"
    first = _of_kind(text, SHUFFLE, ProbeConfig(n_shuffles=3, seed=4))
    again = _of_kind(text, SHUFFLE, ProbeConfig(n_shuffles=3, seed=4))
    other = _of_kind(text, SHUFFLE, ProbeConfig(n_shuffles=3, seed=5))
    assert [p.text for p in first] == [p.text for p in again] != [p.text for p in other]
    for p in first:
        assert p.bag_unchanged and p.text != text
        assert p.text.count(",") == 1 and p.text.endswith("!")


def test_invariance_perturbations_report_their_bag_honestly():
    text = "I didn't get my refund for the UPI payment."
    kinds = {p.kind: p for p in perturb(text)}
    assert not kinds[TYPO].bag_unchanged  # a misspelt word is another word
    assert not kinds[PLEASE].bag_unchanged and kinds[PLEASE].text.startswith("Please, I didn't")
    # "didn't" is two words (didn, t); without the apostrophe it is one: the bag changes.
    assert kinds[PUNCTUATION].text == "I didn t get my refund for the UPI payment"
    assert kinds[PUNCTUATION].bag_unchanged
    fused = [p for p in perturb("KYC-update pending.") if p.kind == PUNCTUATION]
    assert fused[0].bag_unchanged
    removed = [p for p in perturb("Please unblock my card.") if p.kind == PLEASE][0]
    assert removed.text == "unblock my card." and not removed.bag_unchanged
    assert not [p for p in perturb(text, ProbeConfig(invariance=False)) if p.kind == TYPO]


def test_bag_flag_always_agrees_with_bag_key():
    texts = [
        DEMO_TEXT,
        "My UPI refund of ₹1,200 is pending since 3 May, but the bank says it is done; "
        "please check, not my card.",
        "मेरा UPI payment fail ho gaya, paisa nahi aaya.",
        "<script>alert('x')</script> card stolen 😀",
    ]
    for text in texts:
        perturbations = perturb(text, ProbeConfig(n_shuffles=3, max_per_kind=5))
        assert perturbations
        assert len({p.text for p in perturbations}) == len(perturbations)
        for p in perturbations:
            assert p.bag_unchanged == (bag_key(p.text) == bag_key(text))
            assert p.text != text


def test_bad_text_and_config_are_refused():
    with pytest.raises(ValueError, match="no words"):
        perturb("?!")
    with pytest.raises(ValueError, match="n_shuffles"):
        ProbeConfig(n_shuffles=-1)
    with pytest.raises(ValueError, match="max_rows"):
        ScanConfig(max_rows=0)


class BagModel:
    """Answers from the bag of words alone: "Card Fraud" when "card" comes up more than "upi"."""

    classes_ = np.array(CLASSES)

    def predict_proba(self, texts):
        rows = []
        for text in texts:
            key = bag_key(text)
            score = key.count("card") - key.count("upi") + 0.1 * len(key)
            p = 1 / (1 + np.exp(-score))
            rows.append([p, 1 - p])
        return np.array(rows)


class FirstMethodModel:
    """Reads order: the desk of whichever of "card" / "upi" comes first after "by"."""

    classes_ = np.array(CLASSES)

    def predict_proba(self, texts):
        rows = []
        for text in texts:
            words = text.lower().replace(",", " ").split()
            after = words[words.index("by") + 1] if "by" in words[:-1] else ""
            rows.append([0.9, 0.1] if after == "card" else [0.2, 0.8])
        return np.array(rows)


def test_run_probes_compares_both_models_on_every_perturbation():
    result = run_probes(FirstMethodModel(), BagModel(), DEMO_TEXT)
    assert result.neural.label == "Card Fraud"
    swap = next(o for o in result.outcomes if o.perturbation.kind == ARGUMENT_SWAP)
    assert swap.neural.label == "UPI Dispute" and swap.neural_flipped
    assert swap.neural_shift == pytest.approx(0.2 - 0.9)
    assert swap.neural_jsd > 0.2
    for outcome in result.outcomes:
        if outcome.perturbation.bag_unchanged:  # the bag model cannot move, by construction
            assert outcome.bow_shift == 0.0 and not outcome.bow_flipped and outcome.bow_jsd == 0.0
    table = probe_table(result)
    assert len(table) == len(result.outcomes)
    assert (
        table["transformer flipped"].any()
        and not table.loc[table["same bag of words"], "bag of words flipped"].any()
    )
    document = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert set(document) == {"original", "perturbations"}
    assert set(document["original"]) == {"text", "transformer", "bow"}
    assert {"kind", "text", "bag_unchanged", "transformer", "bow"} <= set(
        document["perturbations"][0]
    )
    assert set(document["perturbations"][0]["bow"]) == {"label", "probabilities"}
    assert probe_shift_chart(result).to_dict()


def test_order_demo_swaps_card_and_upi():
    result = order_demo(FirstMethodModel(), BagModel())
    assert [o.perturbation.text for o in result.outcomes] == [
        t for t in DEMO_DESKS if t != DEMO_TEXT
    ]
    assert result.neural.label == DEMO_DESKS[DEMO_TEXT]
    assert result.outcomes[0].neural.label == DEMO_DESKS[result.outcomes[0].perturbation.text]
    assert not result.outcomes[0].bow_flipped


def test_models_with_different_desks_are_refused():
    class Other(BagModel):
        classes_ = np.array(["A", "B"])

    with pytest.raises(ValueError, match="differ from the bag of words"):
        run_probes(FirstMethodModel(), Other(), DEMO_TEXT)


def test_js_divergence_is_bounded_and_symmetric():
    p = np.array([[1.0, 0.0], [0.5, 0.5], [0.9, 0.1]])
    q = np.array([[0.0, 1.0], [0.5, 0.5], [0.6, 0.4]])
    d = js_divergence(p, q)
    np.testing.assert_allclose(d[:2], [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(d, js_divergence(q, p))
    assert 0 < d[2] < 1


def test_bow_order_blindness_follows_the_ngram_setting():
    assert bow_is_order_blind(BagOfWordsClassifier(BagOfWordsConfig(ngram_max=1)))
    assert not bow_is_order_blind(BagOfWordsClassifier(BagOfWordsConfig(ngram_max=2)))
    assert not bow_is_order_blind(BagModel())


def _planted():
    texts = [
        "paid by card, not by upi",  # group 1: same bag, two desks
        "paid by upi, not by card",
        "paid by card not by upi",  # same bag again, labelled like the first
        "card stolen yesterday",
        "upi refund pending",
        "upi refund pending",  # a plain duplicate with the same desk: not a twin group
        "the upi is fine the card is not",  # group 2
        "the card is fine the upi is not",
    ]
    labels = ["Card Fraud", "UPI Dispute", "Card Fraud", "Card Fraud", "UPI Dispute"]
    labels += ["UPI Dispute", "Card Fraud", "UPI Dispute"]
    return make_dataset(texts, labels)


def test_twin_groups_find_the_planted_groups_and_the_ceiling():
    data = _planted()
    groups = twin_groups(data.texts, data.labels, data.rows)
    assert [g.positions for g in groups] == [(0, 1, 2), (6, 7)]
    assert groups[0].rows == (2, 3, 4) and groups[0].reachable == 2
    assert bow_ceiling(groups, len(data)) == pytest.approx(1 - 2 / 8)
    table = twin_table(groups)
    assert list(table["group"]) == [1, 1, 1, 2, 2]
    capped = capped_frame(groups)
    out = capped[capped["status"] == "out of reach for a bag of words"]
    assert out["rows"].sum() == 2
    assert capped_chart(capped).to_dict()


def test_scan_finds_twins_one_model_right_rows_and_flip_rates():
    data = _planted()
    seen: list[Progress] = []
    config = ScanConfig(perturb_rows=8, batch_size=3, probe=ProbeConfig(n_shuffles=1))
    result = scan_dataset(FirstMethodModel(), BagModel(), data, config, on_progress=seen.append)
    assert not result.cancelled and result.n_rows == 8 and len(result.scanned) == 8
    assert [g.positions for g in result.twin_groups] == [(0, 1, 2), (6, 7)]
    assert result.capped_rows == 2
    assert 1 in [r.position for r in result.neural_only]  # "by upi, not by card"
    confidences = [r.confidence for r in result.neural_only]
    assert confidences == sorted(confidences, reverse=True)
    assert all(r.right == "bag of words" for r in result.bow_only)
    stats = {s.kind: s for s in result.kind_stats}
    assert stats[ARGUMENT_SWAP].neural_flip_rate == 1.0
    assert stats[ARGUMENT_SWAP].bow_flip_rate == 0.0 and stats[SHUFFLE].bow_mean_jsd == 0.0
    assert seen[-1].done == seen[-1].total and [p.done for p in seen] == sorted(
        p.done for p in seen
    )
    for frame in (one_right_table(result.neural_only), kind_stats_table(result.kind_stats)):
        assert isinstance(frame, pd.DataFrame) and len(frame)
    assert flip_rate_chart(result.kind_stats).to_dict()


def test_scan_samples_large_data_sets_with_twins_first():
    texts = [f"upi refund pending {i}" for i in range(50)] + ["a card b", "b card a"]
    labels = ["UPI Dispute"] * 50 + ["Card Fraud", "UPI Dispute"]
    data = make_dataset(texts, labels)
    result = scan_dataset(
        BagModel(), BagModel(), data, ScanConfig(max_rows=10, perturb_rows=0, seed=3)
    )
    assert len(result.scanned) == 10 and {50, 51} <= set(result.scanned)
    assert result.kind_stats == ()


def test_cancelled_scan_returns_what_it_has():
    cancel = threading.Event()
    cancel.set()
    result = scan_dataset(FirstMethodModel(), BagModel(), _planted(), cancel=cancel)
    assert result.cancelled and result.neural_accuracy is None
    assert len(result.twin_groups) == 2  # found before any model ran


def test_scan_runs_in_the_background_and_reports_errors(
    job_queue, requester, unexpected_page_errors
):
    data = _planted()
    queued = {"queue": job_queue, "requester": requester}
    run = start_scan(
        FirstMethodModel(),
        BagModel(),
        data,
        ScanConfig(),
        model_path="m",
        dataset_fingerprint="f",
        **queued,
    )
    snapshot = run.job.wait(timeout=60)
    assert snapshot.status is JobStatus.DONE and snapshot.error is None
    assert snapshot.result.capped_rows == 2
    assert snapshot.latest.done == snapshot.latest.total

    class Broken(BagModel):
        def predict_proba(self, texts):
            raise RuntimeError("model exploded")

    broken = start_scan(
        Broken(), BagModel(), data, ScanConfig(), model_path="m", dataset_fingerprint="f", **queued
    )
    snapshot = broken.job.wait(timeout=60)
    assert snapshot.status is JobStatus.FAILED and "unexpected error" in snapshot.error
    (logged,) = unexpected_page_errors  # a bug: its traceback is in the log, not on the page
    assert logged.exc_info[0] is RuntimeError and "model exploded" not in snapshot.error
    unexpected_page_errors.clear()


def test_review_rows_put_misclassified_rows_first():
    texts = [f"upi refund pending {i}" for i in range(30)] + ["a card b", "b card a"]
    labels = ["UPI Dispute"] * 30 + ["Card Fraud", "UPI Dispute"]
    data = make_dataset(texts, labels)
    frame = review_rows(FirstMethodModel(), BagModel(), data, max_rows=6, include=[5])
    assert 5 in set(frame["position"]) and {30, 31} <= set(frame["position"])
    order = {"both": 0, "transformer": 1, "bag of words": 2, "": 3}
    ranks = [order[w] for w in frame["wrong"]]
    assert ranks == sorted(ranks) and ranks[0] < 3
    row = frame.set_index("position").loc[31]
    assert row["row"] == 33 and row["desk"] == "UPI Dispute" and row["text"] == "b card a"


def test_cli_probe_prints_the_contract_json_and_one_line_errors(tiny_model_dir, tmp_path, capsys):
    assert main(["probe", "--model", str(tiny_model_dir), DEMO_TEXT, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["original"]["text"] == DEMO_TEXT
    assert set(document["original"]["bow"]) == {"label", "probabilities"}
    kinds = {p["kind"] for p in document["perturbations"]}
    assert {ARGUMENT_SWAP, SHUFFLE, TYPO} <= kinds
    for p in document["perturbations"]:
        assert p["bag_unchanged"] == (bag_key(p["text"]) == bag_key(DEMO_TEXT))
        if p["bag_unchanged"]:  # the unigram bag of words cannot move
            assert p["bow"] == document["original"]["bow"]
    assert main(["probe", "--model", str(tiny_model_dir), DEMO_TEXT]) == 0
    assert "same bag" in capsys.readouterr().out
    assert main(["probe", "--model", str(tmp_path), DEMO_TEXT]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_review_rows_report_progress_and_stop_when_cancelled(job_queue, requester):
    data = _planted()
    seen: list[Progress] = []
    frame = review_rows(FirstMethodModel(), BagModel(), data, batch_size=3, on_progress=seen.append)
    assert len(frame) == 8 and seen[-1].done == seen[-1].total == 16
    cancel = threading.Event()
    cancel.set()
    assert review_rows(FirstMethodModel(), BagModel(), data, cancel=cancel) is None
    run = start_review(
        FirstMethodModel(), BagModel(), data, max_rows=5, include=(7,), model_path="m",
        dataset_fingerprint="f", queue=job_queue, requester=requester,
    )  # fmt: skip
    snapshot = run.job.wait(timeout=60)
    assert snapshot.status is JobStatus.DONE and 7 in set(snapshot.result["position"])
