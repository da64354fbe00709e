"""Challenger against live (core.analysis.compare, core.review.gold, core.tasks.compare): the
statistics on hand-computed cases, the rows scored (trained rows dropped, gold rows added), the
report's JSON, the trail event, and one end-to-end run with the saved tiny model."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from core.access import OPERATOR, Actor, Permission, Role
from core.analysis.compare import (
    MIN_ROWS,
    compare_models,
    expected_calibration_error,
    held_out_rows,
    mcnemar_p,
    render_text,
    verdict_text,
)
from core.data.dataset import Dataset, text_key
from core.errors import UserError
from core.models.blend import Blend
from core.models.classifier import DEFAULT_REVIEW_THRESHOLD
from core.models.flagging import ReviewPolicy
from core.progress import Cancelled
from core.review.gold import gold_rows
from core.review.records import TriageItem
from core.review.store import Store
from tests.helpers import TINY_LABELS, TINY_TEXTS, with_blend

DESKS = ("Card Fraud", "Loan Query", "UPI Dispute")


class TableClassifier:
    """A classifier that looks its answer up: text -> (desk, confidence); the rest of the
    probability is shared by the other desks."""

    def __init__(self, answers: dict[str, tuple[str, float]], classes: Sequence[str] = DESKS):
        self.answers = answers
        self.classes_ = np.array(sorted(classes))

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        k = len(self.classes_)
        out = np.zeros((len(texts), k))
        for i, text in enumerate(texts):
            desk, confidence = self.answers[text]
            out[i] = (1 - confidence) / (k - 1)
            out[i, list(self.classes_).index(desk)] = confidence
        return out


def fake_model(name, answers, *, bow_answers=None, blend=Blend(), card=None, classes=DESKS):
    """A LoadedModel stand-in: what core.models.classify reads of one."""
    return SimpleNamespace(
        scorer=TableClassifier(answers, classes),  # what routes (core.models.serving)
        classes=sorted(classes),  # as `classes_`
        bow=TableClassifier(bow_answers or answers, classes),
        blend=blend,
        card={"labels": list(classes), **(card or {})},
        path=Path("models") / name,
        digest=f"digest-of-{name}",
        review=ReviewPolicy(DEFAULT_REVIEW_THRESHOLD),  # a model saved before review policies
        detector=None,
        frozen=None,  # no frozen encoder in its blend
        reads_frozen=False,
        frozen_probs=lambda texts: None,
    )


def rows(n: int, *, prefix: str = "complaint") -> Dataset:
    """n complaints with desks in turn."""
    texts = [f"{prefix} {i}" for i in range(n)]
    return Dataset(texts, [DESKS[i % 3] for i in range(n)])


def answers_right_on(dataset: Dataset, right: set[int], confidence: float = 0.9):
    """Each text answered with its own desk where its position is in `right`, else another."""
    return {
        text: (label if i in right else DESKS[(DESKS.index(label) + 1) % 3], confidence)
        for i, (text, label) in enumerate(zip(dataset.texts, dataset.labels, strict=True))
    }


def split_card(trained: Sequence[str]) -> dict:
    return {"split": {"train_keys": sorted(text_key(t) for t in trained), "validation_keys": []}}


def test_mcnemar_exact_p_matches_the_hand_computed_binomial():
    # 10 discordant rows, 9 against 1: 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * 11 / 1024
    assert mcnemar_p(9, 1) == pytest.approx(22 / 1024)
    assert round(mcnemar_p(9, 1), 4) == 0.0215
    assert mcnemar_p(1, 9) == mcnemar_p(9, 1)
    assert mcnemar_p(5, 5) == 1.0
    assert mcnemar_p(0, 0) == 1.0


def test_expected_calibration_error_matches_a_hand_computed_case():
    # bin (14/15, 1]: 4 rows at 0.95, 3 right -> |0.75 - 0.95| = 0.2, weight 4/6
    # bin (8/15, 9/15]: 2 rows at 0.55, 1 right -> |0.5 - 0.55| = 0.05, weight 2/6
    confidence = np.array([0.95, 0.95, 0.95, 0.95, 0.55, 0.55])
    correct = np.array([1, 1, 1, 0, 1, 0], dtype=bool)
    assert expected_calibration_error(confidence, correct) == pytest.approx(0.15)
    # perfectly calibrated within each bin: 0
    assert expected_calibration_error(np.array([0.5, 0.5]), np.array([1, 0])) == 0.0
    # two rows in different bins do not cancel out (equal-width bins, not one pool)
    two = expected_calibration_error(np.array([0.1, 0.9]), np.array([1, 0]), bins=15)
    assert two == pytest.approx(0.9)


def test_intervals_contain_the_point_estimate_and_narrow_with_more_rows():
    widths = []
    for copies in (1, 10):
        base = rows(60)
        data = Dataset(base.texts * copies, base.labels * copies, rows=None)
        data = Dataset([f"{t} #{i}" for i, t in enumerate(data.texts)], data.labels)
        a = fake_model("a", answers_right_on(data, {i for i in range(len(data)) if i % 4}))
        b = fake_model("b", answers_right_on(data, {i for i in range(len(data)) if i % 5}))
        result = compare_models(a, b, data, seed=1)
        for scores in (result.a, result.b):
            low, high = scores.accuracy_ci
            assert low <= scores.accuracy <= high
            low, high = scores.macro_f1_ci
            assert low <= scores.macro_f1 <= high
        assert result.a.accuracy == pytest.approx(0.75)
        assert result.b.accuracy == pytest.approx(0.8)
        widths.append(result.a.accuracy_ci[1] - result.a.accuracy_ci[0])
    assert widths[1] < widths[0] / 2  # ten times the rows: about a third of the width


def test_the_bootstrap_is_seeded_and_paired():
    data = rows(90)
    a = fake_model("a", answers_right_on(data, set(range(0, 90, 2))))
    b = fake_model("b", answers_right_on(data, set(range(0, 90, 2))))
    first, again = compare_models(a, b, data, seed=3), compare_models(a, b, data, seed=3)
    assert first.a.accuracy_ci == again.a.accuracy_ci
    # the same answers on the same resamples: the same intervals (paired, not drawn apart)
    assert first.a.accuracy_ci == first.b.accuracy_ci
    other = compare_models(a, b, data, seed=4)
    assert other.a.macro_f1_ci != first.a.macro_f1_ci  # another seed, other resamples


def test_macro_f1_and_per_desk_figures():
    data = rows(30)
    right = set(range(30)) - {0, 3}  # two Card Fraud rows go to Loan Query
    a = fake_model("a", answers_right_on(data, right))
    result = compare_models(a, fake_model("b", answers_right_on(data, set(range(30)))), data)
    card = result.a.per_class["Card Fraud"]
    assert card["recall"] == pytest.approx(8 / 10) and card["support"] == 10
    loan = result.a.per_class["Loan Query"]
    assert loan["precision"] == pytest.approx(10 / 12) and loan["recall"] == 1.0
    f1s = [2 * 8 / 18, 2 * 10 / 22, 1.0]
    assert result.a.macro_f1 == pytest.approx(np.mean(f1s))
    assert result.b.macro_f1 == 1.0 and result.b.accuracy == 1.0


def test_the_verdict_says_which_is_better_or_that_it_is_noise():
    data = rows(40)
    a = fake_model("live-model", answers_right_on(data, set(range(20))))
    b = fake_model("challenger", answers_right_on(data, set(range(40))))
    better = compare_models(a, b, data)
    assert (better.b_only_right, better.a_only_right) == (20, 0)
    assert better.p_value < 1e-5
    assert better.verdict.startswith("challenger is better than live-model on these 40 rows")
    near = compare_models(a, fake_model("b", answers_right_on(data, set(range(2, 24)))), data)
    assert (near.b_only_right, near.a_only_right) == (4, 2)
    assert near.verdict.startswith("The difference is within noise (p = 0.688)")
    assert "b right on 4, live-model right on 2" in near.verdict
    worse = verdict_text(("a", "b"), 10, 1, 9, mcnemar_p(1, 9))
    assert worse == "a is better than b on these 10 rows (p = 0.0215)."


def test_review_load_counts_the_decisions_below_the_threshold():
    data = rows(30)
    pairs = enumerate(zip(data.texts, data.labels, strict=True))
    unsure = {t: (label, 0.5 if i < 7 else 0.9) for i, (t, label) in pairs}
    sure = {t: (label, 0.9) for t, label in zip(data.texts, data.labels, strict=True)}
    result = compare_models(fake_model("a", unsure), fake_model("b", sure), data, threshold=0.6)
    assert (result.a.flagged, result.b.flagged) == (7, 0)
    assert compare_models(fake_model("a", unsure), fake_model("b", sure), data,
                          threshold=0.4).a.flagged == 0  # fmt: skip


def test_decisions_are_the_blends_as_classify_routes():
    data = rows(30)
    right = answers_right_on(data, set(range(30)))
    wrong = answers_right_on(data, set())
    # B's transformer is always wrong, but its card says the bag of words decides (right)
    b = fake_model("b", wrong, bow_answers=right, blend=Blend(neural_weight=0.0))
    result = compare_models(fake_model("a", right), b, data)
    assert result.b.accuracy == 1.0 and result.changed == ()


def test_trained_rows_are_dropped_by_text_key():
    data = rows(40)
    trained_by_a = [data.texts[0], "  " + data.texts[1].replace(" ", "   ")]  # spacing differs
    trained_by_b = [data.texts[2]]
    cards = [split_card(trained_by_a), split_card(trained_by_b), {}]
    held, dropped = held_out_rows(data, cards)
    assert dropped == 3 and len(held) == 37
    assert set(data.texts[:3]).isdisjoint(held.texts)
    assert held.rows == data.rows[3:]
    a = fake_model("a", answers_right_on(data, set(range(40))), card=cards[0])
    b = fake_model("b", answers_right_on(data, set(range(40))), card=cards[1])
    result = compare_models(a, b, data)
    assert (result.rows, result.excluded_trained, result.warnings) == (37, 3, ())


def test_a_card_without_split_warns_and_drops_nothing():
    data = rows(25)
    answers = answers_right_on(data, set(range(25)))
    result = compare_models(fake_model("old", answers), fake_model("new", answers,
                            card=split_card([])), data)  # fmt: skip
    assert result.rows == 25 and result.excluded_trained == 0
    assert result.warnings == (
        "old's card does not record its training rows; rows it trained on may be scored",
    )


def test_too_few_rows_left_is_refused():
    data = rows(MIN_ROWS + 2)
    answers = answers_right_on(data, set(range(len(data))))
    card = split_card(data.texts[:3])
    with pytest.raises(UserError, match=r"only 19 rows are left .*\(3 were left out\).* 20"):
        compare_models(fake_model("a", answers, card=card), fake_model("b", answers), data)


def test_desks_with_nothing_in_common_are_refused_and_partial_overlap_warned():
    data = rows(30)
    answers = answers_right_on(data, set(range(30)))
    other = {t: ("KYC Update", 0.9) for t in data.texts}
    stranger = fake_model("stranger", other, classes=("KYC Update", "Other"))
    with pytest.raises(
        UserError, match=r"stranger to \['KYC Update', 'Other'\]: no desk in common"
    ):
        compare_models(fake_model("a", answers), stranger, data)
    # B knows one more desk and never gets Card Fraud (it cannot route there): its errors
    narrower = ("Loan Query", "UPI Dispute", "KYC Update")
    b_answers = {t: (d if d != "Card Fraud" else "KYC Update", c) for t, (d, c) in answers.items()}
    b = fake_model("b", b_answers, classes=narrower)
    result = compare_models(fake_model("a", answers), b, data)
    assert result.b.accuracy == pytest.approx(20 / 30)
    assert result.b.per_class["Card Fraud"]["recall"] == 0.0
    assert any("only a: ['Card Fraud']; only b: ['KYC Update']" in w for w in result.warnings)


def test_gold_rows_are_added_once_and_their_desk_is_shown_in_the_changed_table():
    data = rows(24)
    gold = Dataset(
        [data.texts[0], "a new complaint reviewed in triage", data.texts[5]],
        ["UPI Dispute", "Loan Query", "Card Fraud"],
        rows=[1, 2, 3],
        extra=pd.DataFrame({"source": ["triage #7", "triage #8", "triage #9"]}),
    )
    texts = [*data.texts, gold.texts[1]]
    a = fake_model("a", {t: ("Card Fraud", 0.9) for t in texts})
    b = fake_model("b", {t: ("UPI Dispute", 0.9) for t in texts}, card=split_card([texts[5]]))
    result = compare_models(a, b, data, gold=gold)
    # row 5 was trained on by B: dropped from the data set and from the gold rows
    assert (result.rows, result.excluded_trained, result.gold_rows) == (24, 2, 2)
    by_text = {c.text: c for c in result.changed}
    assert len(result.changed) == 24  # every row changes desk
    first = by_text[data.texts[0]]
    assert (first.row, first.reviewed_label, first.source) == (2, "UPI Dispute", "data set")
    added = by_text["a new complaint reviewed in triage"]
    assert (added.row, added.reviewed_label, added.source) == (2, "Loan Query", "triage #8")
    assert by_text[data.texts[1]].reviewed_label is None
    # the reviewers' desk is the truth: data set row 2 said Card Fraud, the verdict UPI Dispute,
    # so A (always Card Fraud) is right on the 7 other Card Fraud rows only
    assert result.a.accuracy == pytest.approx(7 / 24)


def test_twin_slice_accuracy_only_when_the_rows_have_twins():
    data = rows(30)
    slices = pd.DataFrame({"slice": ["twin" if i < 10 else "" for i in range(30)]})
    twins = Dataset(data.texts, data.labels, extra=slices)
    a = fake_model("a", answers_right_on(data, set(range(5, 30))))
    b = fake_model("b", answers_right_on(data, set(range(30))))
    result = compare_models(a, b, twins)
    assert (result.a.twin_accuracy, result.b.twin_accuracy) == (0.5, 1.0)
    assert compare_models(a, b, data).a.twin_accuracy is None


def test_progress_counts_both_models_and_cancel_stops():
    data = rows(30)
    answers = answers_right_on(data, set(range(30)))
    seen = []
    compare_models(fake_model("a", answers), fake_model("b", answers), data,
                   on_progress=seen.append)  # fmt: skip
    assert [(p.done, p.total) for p in seen] == [(30, 60), (60, 60)]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        compare_models(fake_model("a", answers), fake_model("b", answers), data, cancel=cancel)


def test_to_json_holds_the_design_keys_and_is_plain_json():
    data = rows(30)
    a = fake_model("a", answers_right_on(data, set(range(20))))
    b = fake_model("b", answers_right_on(data, set(range(30))))
    document = json.loads(json.dumps(compare_models(a, b, data).to_json(), allow_nan=False))
    assert {"rows", "a", "b", "changed", "p_value"} <= set(document)
    for side in ("a", "b"):
        assert {"name", "accuracy", "macro_f1", "per_class", "ece", "flagged"} <= set(
            document[side]
        )
    assert document["a"]["name"] == "a" and document["b"]["digest"] == "digest-of-b"
    assert document["rows"] == 30 and len(document["changed"]) == 10
    assert set(document["changed"][0]) >= {"row", "text", "a_label", "b_label", "reviewed_label"}
    assert document["a"]["per_class"]["Card Fraud"].keys() == {"recall", "precision", "f1",
                                                                "support"}  # fmt: skip
    text = render_text(compare_models(a, b, data))
    assert "30 rows scored" in text and "b is better than a" in text


# -- gold rows from the review store ---------------------------------------------------------


def queue_items(store: Store, texts: Sequence[str]) -> list[int]:
    items = [TriageItem("batch", t, "Card Fraud", 0.4, {"Card Fraud": 0.4}) for t in texts]
    return store.enqueue_triage(items, actor=OPERATOR)


def test_gold_rows_are_the_verdicts_given_after_since(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as store:
        first, second, third, _open = queue_items(store, ["one", "two", "three", "four"])
        store.decide_triage(first, final_label="Card Fraud", reviewer="r", actor=OPERATOR)
        since = store.triage_items(status="confirmed")[0].decided_at
        store.decide_triage(third, final_label="Loan Query", reviewer="r", actor=OPERATOR)
        store.decide_triage(second, final_label="Card Fraud", reviewer="r", actor=OPERATOR)
        gold = gold_rows(store, since=since)
        assert gold.texts == ("three", "two")  # oldest verdict first; the open item is no row
        assert gold.labels == ("Loan Query", "Card Fraud")
        assert gold.rows == (1, 2)
        assert gold.extra["source"].tolist() == [f"triage #{third}", f"triage #{second}"]
        assert len(gold_rows(store, since="2000-01-01T00:00:00")) == 3  # naive reads as UTC
        assert len(gold_rows(store, since="2999-01-01T00:00:00+00:00")) == 0
        with pytest.raises(UserError, match="ISO 8601"):
            gold_rows(store, since="last week")


# -- the task and a real saved model ---------------------------------------------------------

HELD_OUT = [f"{text} since yesterday" for text in TINY_TEXTS] * 3
HELD_OUT = [f"{text} {'please ' * (i // 8)}".strip() for i, text in enumerate(HELD_OUT)]


def two_models(tiny_model_dir: Path, root: Path) -> tuple[Path, Path]:
    """The tiny model and a copy whose bag of words decides, both in `root`."""
    a = root / "live"
    shutil.copytree(tiny_model_dir, a)
    b = with_blend(tiny_model_dir, root / "challenger", Blend(neural_weight=0.0))
    return a, b


def test_start_comparison_runs_on_the_queue_and_records_the_trail(
    tiny_model_dir: Path, tmp_path: Path, job_queue, requester
):
    from core.jobs import Requester
    from core.tasks.compare import ComparisonRequest, start_comparison

    two_models(tiny_model_dir, tmp_path / "models")
    trained = Dataset(TINY_TEXTS * 4, TINY_LABELS * 4)
    data = Dataset([*HELD_OUT, *trained.texts[:4]], [*(TINY_LABELS * 3), *trained.labels[:4]])
    with Store.open(tmp_path / "lens.db") as store:
        viewer = Requester(Actor("v@example.org", Role.VIEWER, signed_in=True))
        with pytest.raises(UserError, match="run jobs needs the reviewer role"):
            start_comparison(store, tmp_path / "models",
                             ComparisonRequest("live", "challenger", data),
                             queue=job_queue, requester=viewer)  # fmt: skip
        run = start_comparison(
            store, tmp_path / "models",
            ComparisonRequest("live", "challenger", data, dataset_name="held out"),
            queue=job_queue, requester=requester,
        )  # fmt: skip
        snapshot = run.job.wait(120)
        assert snapshot.status == "done", snapshot.error
        comparison = snapshot.result
        train_keys = set(
            json.loads((tiny_model_dir / "card.json").read_text())["split"]["train_keys"]
        )
        trained_here = sum(text_key(t) in train_keys for t in data.texts)
        assert trained_here >= 1  # the rows the tiny model trained on are left out
        assert comparison.excluded_trained == trained_here
        assert comparison.rows == len(data) - trained_here
        assert comparison.a.name == "live" and comparison.b.name == "challenger"
        assert comparison.a.digest == run.a.digest
        (event,) = store.events("comparison.run")
        assert event.actor == requester.actor.user
        details = event.details
        assert (details["a"]["name"], details["b"]["name"]) == ("live", "challenger")
        assert details["a"]["digest"] == run.a.digest and details["b"]["digest"] == run.b.digest
        assert details["rows"] == comparison.rows and details["p_value"] == comparison.p_value
        assert details["a"]["accuracy"] == comparison.a.accuracy
        assert details["dataset"] == "held out" and details["dataset_fingerprint"] == (
            data.fingerprint
        )


def test_a_model_saved_again_after_it_was_picked_is_refused(
    tiny_model_dir: Path, tmp_path: Path, job_queue, requester
):
    from core.tasks.compare import ComparisonRequest, start_comparison

    a, _ = two_models(tiny_model_dir, tmp_path / "models")
    data = Dataset(HELD_OUT, TINY_LABELS * 3)
    with Store.open(tmp_path / "lens.db") as store:
        job_queue_paused = threading.Event()  # hold the lane so the swap lands before loading
        blocker = job_queue.start(
            lambda *, on_progress, cancel: job_queue_paused.wait(30),
            requester=requester, title="hold", kind="hold", permission=Permission.RUN_JOBS,
        )  # fmt: skip
        run = start_comparison(store, tmp_path / "models",
                               ComparisonRequest("live", "challenger", data),
                               queue=job_queue, requester=requester)  # fmt: skip
        card = json.loads((a / "card.json").read_text())
        card["note"] = "saved again"
        (a / "card.json").write_text(json.dumps(card))
        job_queue_paused.set()
        blocker.wait(30)
        snapshot = run.job.wait(120)
        assert snapshot.status == "failed" and "changed on disk" in snapshot.error
        assert store.events("comparison.run") == []
