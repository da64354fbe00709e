"""The role check that counts is in core: every shared-state action refuses an actor whose role
lacks the permission, whatever the page showed, and a signed-in reviewer acts under their own
e-mail only."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.access import OPERATOR, AccessDenied, Actor, Permission, Role, needed_role
from core.review.records import ReviewDecision, TriageItem
from core.review.relabel import apply_decisions, plan_carry_over
from core.review.store import Store
from core.review.triage import triage_training_rows
from tests.test_store import _card_files

VIEWER = Actor("vera@bank.example", Role.VIEWER, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
OTHER_REVIEWER = Actor("ravi@bank.example", Role.REVIEWER, signed_in=True)
ADMIN = Actor("lead@bank.example", Role.ADMIN, signed_in=True)


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def _decision(reviewer: str, row: int = 2, **changes) -> ReviewDecision:
    values = dict(
        fingerprint="f" * 64, row=row, text=f"complaint on row {row}", given_label="Card Fraud",
        decision="keep", reviewer=reviewer,
    )  # fmt: skip
    return ReviewDecision(**{**values, **changes})


def _open_item(store: Store) -> int:
    item = TriageItem(batch="b", text="upi failed", predicted_label="UPI Dispute", confidence=0.4)
    (item_id,) = store.enqueue_triage([item], actor=ADMIN)
    return item_id


def test_each_role_holds_the_permissions_of_the_roles_below_it():
    assert [p for p in Permission if VIEWER.can(p)] == [Permission.READ]
    assert {p for p in Permission if REVIEWER.can(p)} == {
        Permission.READ, Permission.DECIDE, Permission.RUN_JOBS,
    }  # fmt: skip
    assert all(ADMIN.can(p) for p in Permission)
    assert needed_role(Permission.TRAIN) is Role.ADMIN


def test_model_management_refuses_anyone_but_an_admin(tmp_path: Path):
    from core.models.registry import delete_model, rename_model, save_model

    for actor in (VIEWER, REVIEWER):
        with pytest.raises(AccessDenied, match="manage models needs the admin role"):
            save_model(None, tmp_path, "any", actor=actor)  # refused before the result is read
        with pytest.raises(AccessDenied, match=f"{actor.user} is a {actor.role.label}"):
            rename_model(tmp_path, "any", "other", actor=actor)
        with pytest.raises(AccessDenied):
            delete_model(tmp_path, "any", actor=actor)
    with pytest.raises(ValueError, match="no model named 'any'"):  # an admin gets past the check
        delete_model(tmp_path, "any", actor=ADMIN)


def test_a_viewer_can_neither_decide_nor_export_relabels(store: Store):
    item_id = _open_item(store)
    with pytest.raises(AccessDenied, match="decide needs the reviewer role"):
        store.record_decision(_decision(VIEWER.user), actor=VIEWER)
    with pytest.raises(AccessDenied):
        store.decide_triage(item_id, final_label="Other", reviewer=VIEWER.user, actor=VIEWER)
    before, after = _card_files()
    with pytest.raises(AccessDenied):
        apply_decisions(after, [], actor=VIEWER)
    with pytest.raises(AccessDenied):
        plan_carry_over(after, [], [], actor=VIEWER)
    with pytest.raises(AccessDenied):
        triage_training_rows([], actor=VIEWER)
    assert store.decisions("f" * 64) == [] and store.open_triage()[0].id == item_id


def test_a_signed_in_reviewer_decides_under_their_own_email_only(store: Store):
    with pytest.raises(ValueError, match="signed in as asha@bank.example"):
        store.record_decision(_decision("Ravi"), actor=REVIEWER)
    item_id = _open_item(store)
    with pytest.raises(ValueError, match="signed in as asha@bank.example"):
        store.decide_triage(item_id, final_label="Other", reviewer="ravi", actor=REVIEWER)
    store.record_decision(_decision(REVIEWER.user), actor=REVIEWER)
    done = store.decide_triage(item_id, final_label="Other", reviewer=REVIEWER.user, actor=REVIEWER)
    assert done.reviewer == REVIEWER.user
    assert {e.actor for e in store.trail(actor=ADMIN)} == {REVIEWER.user, ADMIN.user}  # queued it


def test_without_sign_in_the_typed_name_is_the_reviewer(store: Store):
    store.record_decision(_decision("Asha Rao"), actor=OPERATOR)
    assert store.trail(actor=OPERATOR)[0].actor == "Asha Rao"


def test_only_an_admin_sees_everyones_trail(store: Store):
    store.record_decision(_decision(REVIEWER.user), actor=REVIEWER)
    store.record_decision(_decision(OTHER_REVIEWER.user, row=3), actor=OTHER_REVIEWER)
    _open_item(store)  # queued by the admin: every event names its actor
    assert [e.actor for e in store.trail(actor=REVIEWER)] == [REVIEWER.user]
    assert [e.actor for e in store.trail(actor=OTHER_REVIEWER)] == [OTHER_REVIEWER.user]
    assert store.trail(actor=VIEWER) == []
    assert [e.actor for e in store.trail(actor=ADMIN)] == [
        ADMIN.user, OTHER_REVIEWER.user, REVIEWER.user,
    ]  # fmt: skip


def test_a_signed_in_carry_over_is_saved_under_the_carrier_and_counts_for_everyone(store: Store):
    before, after = _card_files()
    legacy = after.legacy_fingerprint
    text = "someone used my card abroad"
    first = store.record_decision(
        _decision("Asha Rao", fingerprint=legacy, text=text, note="abroad"), actor=OPERATOR
    )
    plan = plan_carry_over(after, store.decisions(legacy), [], actor=REVIEWER)
    (copy,) = plan.pending
    assert copy.reviewer == REVIEWER.user
    assert copy.note == f"abroad (carried over from decision #{first} by Asha Rao)"
    store.record_decision(copy, actor=REVIEWER)
    current = store.decisions(after.fingerprint)
    for actor in (OTHER_REVIEWER, OPERATOR):  # whoever looks next, it is carried already
        again = plan_carry_over(after, store.decisions(legacy), current, actor=actor)
        assert (again.pending, again.carried) == ((), 1)
