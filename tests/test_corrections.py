"""Retrain from corrections: the plan of a saved data set's next version (relabels applied where
the row still holds what was decided on, exclusions dropped, triage verdicts added once, nothing
built twice), the version built from it, and the retraining task that saves it and trains the
challenger with the live model's recipe and split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from core.access import OPERATOR, AccessDenied, Actor, Role
from core.data.dataset import Dataset, text_key
from core.data.saved import DatasetSave, load_dataset, read_summary, save_dataset
from core.errors import UserError
from core.models.card import read_card
from core.review.corrections import (
    FOLDED,
    PRESENT,
    build_next_version,
    next_version_name,
    plan_corrections,
)
from core.review.library import save_and_record
from core.review.live import promote_model
from core.review.records import ReviewDecision, TriageItem
from core.review.relabel import apply_decisions
from core.review.store import Store
from core.tasks.retrain import NO_RECIPE, RetrainRequest, start_retrain
from tests.helpers import TINY_LABELS, TINY_TEXTS, distinct_tiny_data

ADMIN = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
ASHA, RAVI = "asha@bank.example", "ravi@bank.example"


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "datasets"


def parent_dataset() -> Dataset:
    """The eight tiny complaints with an extra column, rows 2..9."""
    extra = pd.DataFrame({"channel": [f"branch {i}" for i in range(len(TINY_TEXTS))]})
    return Dataset(TINY_TEXTS, TINY_LABELS, extra=extra)


@pytest.fixture
def parent(root: Path) -> Dataset:
    data = parent_dataset()
    save_dataset(root, DatasetSave("complaints", data), actor=OPERATOR)
    return data


def decide(store: Store, data: Dataset, position: int, decision: str, reviewer: str, **kw) -> int:
    row, text, label = data.rows[position], data.texts[position], data.labels[position]
    record = ReviewDecision(data.fingerprint, row, kw.pop("text", text), kw.pop("given", label),
                            decision, reviewer, **kw)  # fmt: skip
    return store.record_decision(record, actor=OPERATOR)


def verdict(store: Store, text: str, predicted: str, final: str, reviewer: str = ASHA) -> int:
    item = TriageItem(batch="b", text=text, predicted_label=predicted, confidence=0.4)
    (item_id,) = store.enqueue_triage([item], actor=OPERATOR)
    store.decide_triage(item_id, final_label=final, reviewer=reviewer, actor=OPERATOR)
    return item_id


def build_and_save(store: Store, root: Path, parent_name: str, name: str):
    data, _ = load_dataset(root, parent_name)
    plan = plan_corrections(store, root, parent_name, actor=ADMIN)
    dataset, lineage = build_next_version(data, plan)
    save_and_record(
        store, root, DatasetSave(name, dataset, parent=parent_name, lineage=lineage), actor=ADMIN
    )
    return plan, dataset, lineage


# ----------------------------------------------------------------------------------- planning


def test_relabels_apply_exclusions_drop_and_changed_rows_are_reported(
    store: Store, root: Path, parent: Dataset
):
    relabel = decide(store, parent, 0, "relabel", ASHA, new_label="Card Fraud")
    exclude = decide(store, parent, 2, "exclude", RAVI)
    decide(store, parent, 3, "keep", RAVI)
    decide(store, parent, 4, "relabel", ASHA, new_label="Other")
    decide(store, parent, 4, "keep", RAVI)  # the latest decision wins: nothing to apply
    stale_text = decide(store, parent, 5, "relabel", ASHA, new_label="Other", text="another one")
    stale_label = decide(store, parent, 6, "exclude", RAVI, given="Other")

    plan = plan_corrections(store, root, "complaints", actor=ADMIN)

    assert [(r.decision_id, r.row, r.old_label, r.new_label) for r in plan.relabels] == [
        (relabel, 2, "UPI Dispute", "Card Fraud")
    ]
    assert [(e.decision_id, e.row) for e in plan.exclusions] == [(exclude, 4)]
    assert [(s.decision_id, s.row) for s in plan.stale] == [(stale_text, 7), (stale_label, 8)]
    assert "another complaint" in plan.stale[0].reason and "labelled KYC" in plan.stale[1].reason
    assert plan.decision_ids == sorted([relabel, exclude])
    assert plan.by_reviewer == {ASHA: 1, RAVI: 1}
    assert plan.desks_before == {"Card Fraud": 2, "KYC Update": 2, "Loan Query": 2,
                                 "UPI Dispute": 2}  # fmt: skip
    # row 2 moved from UPI Dispute to Card Fraud; row 4 (Card Fraud) left out
    assert plan.desks_after == {"Card Fraud": 2, "KYC Update": 2, "Loan Query": 2,
                                "UPI Dispute": 1}  # fmt: skip
    assert plan.counts()["rows_after"] == 7 and plan.already_built_as is None


def test_triage_verdicts_become_rows_once_with_the_reviewers_desk(
    store: Store, root: Path, parent: Dataset
):
    confirmed = verdict(store, "upi collect request i never approved", "UPI Dispute",
                        "UPI Dispute", RAVI)  # fmt: skip
    corrected = verdict(store, "atm kept my card", "UPI Dispute", "Card Fraud")
    verdict(store, TINY_TEXTS[1], "Other", "UPI Dispute")  # already a row of the data set
    open_item = TriageItem(batch="b", text="still open", predicted_label="Other", confidence=0.3)
    store.enqueue_triage([open_item], actor=OPERATOR)  # no verdict: not added

    plan = plan_corrections(store, root, "complaints", actor=ADMIN)

    assert [(v.item_id, v.label, v.reviewer, v.status) for v in plan.added] == [
        (confirmed, "UPI Dispute", RAVI, "confirmed"),
        (corrected, "Card Fraud", ASHA, "corrected"),
    ]
    assert plan.skipped_verdicts == {PRESENT: 1}
    assert plan.by_reviewer == {ASHA: 1, RAVI: 1}
    assert plan.desks_after["Card Fraud"] == 3 and plan.desks_after["UPI Dispute"] == 3


def test_verdicts_folded_into_a_version_are_not_added_again_down_the_lineage(
    store: Store, root: Path, parent: Dataset
):
    first = verdict(store, "atm kept my card", "UPI Dispute", "Card Fraud")
    build_and_save(store, root, "complaints", "complaints-v2")
    second = verdict(store, "home loan rate changed without notice", "Other", "Loan Query")
    v2_plan, _, lineage = build_and_save(store, root, "complaints-v2", "complaints-v3")
    assert [v.item_id for v in v2_plan.added] == [second] and lineage["verdicts"] == [second]
    assert v2_plan.skipped_verdicts == {FOLDED: 1}

    third = verdict(store, "pan card update pending", "Other", "KYC Update")
    v3 = plan_corrections(store, root, "complaints-v3", actor=ADMIN)  # two ancestors back
    assert [v.item_id for v in v3.added] == [third]
    assert v3.folded_verdicts == 2 and first not in v3.verdict_ids


def test_the_same_corrections_are_not_built_twice(store: Store, root: Path, parent: Dataset):
    decide(store, parent, 0, "relabel", ASHA, new_label="Card Fraud")
    verdict(store, "atm kept my card", "UPI Dispute", "Card Fraud")
    build_and_save(store, root, "complaints", "complaints-v2")

    again = plan_corrections(store, root, "complaints", actor=ADMIN)
    assert again.already_built_as == "complaints-v2"
    with pytest.raises(UserError, match="already built as complaints-v2"):
        build_next_version(parent, again)

    decide(store, parent, 1, "exclude", RAVI)  # new work: another version may be built
    more = plan_corrections(store, root, "complaints", actor=ADMIN)
    assert more.already_built_as is None and len(more.exclusions) == 1
    build_next_version(parent, more)


def test_a_plan_with_nothing_to_apply_or_for_another_version_is_refused(
    store: Store, root: Path, parent: Dataset
):
    decide(store, parent, 0, "keep", ASHA)
    empty = plan_corrections(store, root, "complaints", actor=ADMIN)
    assert empty.changes == 0
    with pytest.raises(UserError, match="no corrections to apply to complaints"):
        build_next_version(parent, empty)
    decide(store, parent, 0, "exclude", ASHA)
    plan = plan_corrections(store, root, "complaints", actor=ADMIN)
    with pytest.raises(UserError, match="made for another version"):
        build_next_version(parent.subset(range(1, len(parent))), plan)


@pytest.mark.parametrize("actor", [REVIEWER, Actor("vik@bank.example", Role.VIEWER, True)])
def test_only_an_admin_plans_corrections(store: Store, root: Path, parent: Dataset, actor):
    with pytest.raises(AccessDenied, match="manage data needs the admin role"):
        plan_corrections(store, root, "complaints", actor=actor)


# ----------------------------------------------------------------------------------- building


def test_the_next_version_keeps_rows_and_numbers_new_ones_after_the_largest(
    store: Store, root: Path, parent: Dataset
):
    relabel = decide(store, parent, 0, "relabel", ASHA, new_label="Card Fraud")
    exclude = decide(store, parent, 2, "exclude", RAVI)
    added = verdict(store, "atm kept my card", "UPI Dispute", "Card Fraud")
    stale = decide(store, parent, 5, "relabel", ASHA, new_label="Other", text="changed")

    plan, dataset, lineage = build_and_save(store, root, "complaints", "complaints-v2")

    assert dataset.fingerprint != parent.fingerprint
    assert dataset.rows == (2, 3, 5, 6, 7, 8, 9, 10)  # row 4 excluded; the verdict is row 10
    assert dataset.labels[0] == "Card Fraud" and dataset.labels[1:7] == parent.labels[1:2] + \
        parent.labels[3:]  # fmt: skip
    assert dataset.texts[-1] == "atm kept my card" and dataset.labels[-1] == "Card Fraud"
    assert dataset.extra["channel"].tolist()[:2] == ["branch 0", "branch 1"]
    assert dataset.extra["channel"].iloc[-1] is None
    assert dataset.extra["source"].tolist() == [""] * 7 + [f"triage #{added}"]
    assert lineage == {
        "parent_fingerprint": parent.fingerprint, "decisions": sorted([relabel, exclude]),
        "verdicts": [added], "relabelled_rows": [2], "excluded_rows": [4], "added_rows": [10],
        "stale": [{"decision": stale, "row": 7, "reason": plan.stale[0].reason}],
        "by_reviewer": {ASHA: 2, RAVI: 1},
    }  # fmt: skip
    loaded, summary = load_dataset(root, "complaints-v2")  # stored and read back as built
    assert loaded.fingerprint == dataset.fingerprint and summary.parent == "complaints"
    assert summary.lineage["verdicts"] == [added]


def test_an_existing_source_column_keeps_where_earlier_rows_came_from(
    store: Store, root: Path, parent: Dataset
):
    first = verdict(store, "atm kept my card", "UPI Dispute", "Card Fraud")
    build_and_save(store, root, "complaints", "complaints-v2")
    second = verdict(store, "pan card update pending", "Other", "KYC Update")
    _, v3, _ = build_and_save(store, root, "complaints-v2", "complaints-v3")
    assert v3.rows[-2:] == (10, 11)
    assert v3.extra["source"].tolist()[-2:] == [f"triage #{first}", f"triage #{second}"]


def test_the_corrected_export_keeps_excluded_rows_and_marks_them(store: Store, parent: Dataset):
    decide(store, parent, 2, "exclude", RAVI)
    frame = apply_decisions(parent, store.latest_decisions(parent.fingerprint), actor=OPERATOR)
    assert len(frame) == len(parent)
    assert frame.loc[2, "review"] == "excluded" and frame.loc[2, "label"] == parent.labels[2]


def test_version_names_count_up_past_taken_ones(root: Path, parent: Dataset):
    assert next_version_name(root, "complaints") == "complaints-v2"
    save_dataset(root, DatasetSave("complaints-v2", parent.subset([0, 1])), actor=OPERATOR)
    save_dataset(root, DatasetSave("complaints-v3", parent.subset([0, 2])), actor=OPERATOR)
    assert next_version_name(root, "complaints") == "complaints-v4"
    assert next_version_name(root, "complaints-v3") == "complaints-v4"


# ----------------------------------------------------------------------------------- the task


@pytest.fixture
def models(tmp_path: Path, distinct_tiny_model_dir: Path) -> Path:
    root = tmp_path / "models"
    shutil.copytree(distinct_tiny_model_dir, root / "live-tiny")
    return root


@pytest.fixture
def tiny_parent(root: Path) -> Dataset:
    """The data set the tiny model was trained on, saved."""
    data = distinct_tiny_data()
    save_dataset(root, DatasetSave("tiny", data), actor=OPERATOR)
    return data


def test_retrain_saves_the_version_and_trains_a_challenger_like_the_live_model(
    store: Store, root: Path, models: Path, tiny_parent: Dataset, job_queue, requester
):
    live_card = read_card(models / "live-tiny")
    assert tiny_parent.fingerprint == live_card["data_fingerprint"]
    promote_model(store, models, "live-tiny", reason="first", actor=OPERATOR)
    decide(store, tiny_parent, 0, "relabel", ASHA, new_label="Card Fraud")
    item = verdict(store, "upi refund stuck for a week", "Other", "UPI Dispute", RAVI)

    run = start_retrain(store, root, models, RetrainRequest("tiny", "tiny-v2"), queue=job_queue,
                        requester=requester)  # fmt: skip

    assert (run.recipe.name, run.recipe.live, run.split_inherited) == ("live-tiny", True, True)
    assert run.training.model_name == "tiny-v2-challenger"
    assert run.training.config == run.recipe.config  # the live model's recipe and settings
    summary = read_summary(root, "tiny-v2")
    assert summary.parent == "tiny" and summary.lineage["verdicts"] == [item]
    snapshot = run.training.job.wait(300)
    assert snapshot.status == "done", snapshot.error
    card = read_card(models / "tiny-v2-challenger")
    assert card["data_fingerprint"] == summary.fingerprint
    held_out = set(live_card["split"]["validation_keys"])
    assert held_out <= set(card["split"]["validation_keys"])  # still held out
    assert not held_out & set(card["split"]["train_keys"])
    (event,) = store.events("retrain.queued")
    assert event.actor == OPERATOR.user and event.details["parent"] == "tiny"
    assert (event.details["dataset"], event.details["challenger"]) == (
        "tiny-v2", "tiny-v2-challenger")  # fmt: skip
    assert event.details["live_model"] == "live-tiny" and event.details["split"] == "inherited"
    assert event.details["counts"]["relabelled"] == 1 and event.details["counts"]["added"] == 1
    assert text_key("upi refund stuck for a week") in (
        set(card["split"]["train_keys"]) | set(card["split"]["validation_keys"]))  # fmt: skip


def test_retrain_refuses_before_saving_anything(
    store: Store, root: Path, models: Path, tiny_parent: Dataset, job_queue, requester
):
    decide(store, tiny_parent, 0, "exclude", ASHA)
    with pytest.raises(UserError, match="no model is live and none is active"):
        start_retrain(store, root, models, RetrainRequest("tiny", "tiny-v2"), queue=job_queue,
                      requester=requester)  # fmt: skip
    assert NO_RECIPE.startswith("no model is live")
    with pytest.raises(UserError, match="already exists"):
        start_retrain(store, root, models,
                      RetrainRequest("tiny", "tiny-v2", challenger_name="live-tiny"),
                      queue=job_queue, requester=requester)  # fmt: skip
    from core.jobs import Requester

    with pytest.raises(AccessDenied):
        start_retrain(store, root, models, RetrainRequest("tiny", "tiny-v2"), queue=job_queue,
                      requester=Requester(REVIEWER))  # fmt: skip
    with pytest.raises(UserError, match="no saved data set"):
        read_summary(root, "tiny-v2")  # nothing was saved by any refusal
    assert store.events("retrain.queued") == []


def test_without_a_live_model_the_active_models_recipe_is_used(
    store: Store, root: Path, models: Path, tiny_parent: Dataset, job_queue, requester
):
    decide(store, tiny_parent, 0, "exclude", ASHA)
    run = start_retrain(store, root, models,
                        RetrainRequest("tiny", "tiny-v2", fallback_model=models / "live-tiny"),
                        queue=job_queue, requester=requester)  # fmt: skip
    assert (run.recipe.name, run.recipe.live) == ("live-tiny", False)
    run.training.job.cancel()
    assert store.events("retrain.queued")[0].details["live_model"] is None


def test_a_model_the_recipe_auto_trained_is_retrained_by_auto(
    store: Store, models: Path, three_member_model_dir: Path
):
    from core.models.transformer.config import AUTO, FULL
    from core.tasks.retrain import recipe_source

    assert read_card(three_member_model_dir)["train_config"]["recipe"] == FULL
    plain = recipe_source(store, models, fallback=three_member_model_dir)
    assert plain.config.recipe == FULL  # a fine-tuned run saved alone keeps its recipe
    auto_trained = models / "auto-trained"
    shutil.copytree(three_member_model_dir, auto_trained)
    card = read_card(auto_trained)
    card["recipe_choice"] = {"chosen": FULL, "reason": "a blend", "rows_per_desk": 16.0,
                             "validation_accuracy": {}}  # fmt: skip
    (auto_trained / "card.json").write_text(json.dumps(card), encoding="utf-8")
    assert recipe_source(store, models, fallback=auto_trained).config.recipe == AUTO
