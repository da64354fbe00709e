"""core.intake.queue: the inbox's complaints waiting for a verdict come oldest due first with
their channel and clock, a verdict takes one off the list, and the open complaints become the
table the routing board draws (no model: routings are made by hand)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.access import OPERATOR
from core.board.board import BoardConfig, build_board
from core.board.tat import load_tat
from core.errors import UserError
from core.intake.inbox import (
    INBOX_BATCH,
    Routing,
    Submission,
    open_complaints,
    resolve_complaint,
    store_batch,
)
from core.intake.queue import (
    BOARD_COLUMNS,
    inbox_board_table,
    inbox_triage,
    inbox_triage_count,
    open_complaint_count,
)
from core.intake.tokens import create_token
from core.review.store import Store
from tests.helpers import inbox_items

ITEMS = inbox_items()


@pytest.fixture()
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


@pytest.fixture()
def stored(store: Store):
    token = create_token(store, "web", ["submit", "read"], actor=OPERATOR).token
    batch = store_batch(store, token, ITEMS, model=("tiny", "digest"), tat=load_tat())
    return token, {a.id: a.complaint_id for a in batch.answers}


def test_waiting_items_come_oldest_due_first_with_their_complaint(store: Store, stored):
    _, ids = stored
    waiting = inbox_triage(store, limit=10, offset=0)
    assert [w.caller_id for w in waiting] == ["c-4", "c-2", "c-1"]  # c-3 was sure: not queued
    assert [w.due_by for w in waiting] == sorted(w.due_by for w in waiting)
    first = waiting[0]
    assert (first.channel, first.source, first.complaint_id) == ("app", "web", ids["c-4"])
    assert (first.received_at, first.due_by) == ("2025-06-01T20:00:00Z", "2025-06-02T20:00:00Z")
    assert first.item.batch == INBOX_BATCH and first.item.row == ids["c-4"]
    assert first.item.status == "open" and first.item.predicted_label == "UPI Dispute"
    assert first.item.probabilities == {"UPI Dispute": 0.45, "Other": 0.55}
    assert inbox_triage_count(store) == 3 == store.triage_counts(batch=INBOX_BATCH)["open"]


def test_pages_of_the_waiting_list(store: Store, stored):
    assert [w.caller_id for w in inbox_triage(store, limit=2, offset=0)] == ["c-4", "c-2"]
    assert [w.caller_id for w in inbox_triage(store, limit=2, offset=2)] == ["c-1"]
    with pytest.raises(UserError, match="limit"):
        inbox_triage(store, limit=0, offset=0)
    with pytest.raises(UserError, match="offset"):
        inbox_triage(store, limit=1, offset=-1)


def test_a_verdict_takes_an_item_off_the_list(store: Store, stored):
    first = inbox_triage(store, limit=10, offset=0)[0]
    store.decide_triage(first.item.id, final_label="Card Fraud", reviewer="Ben", actor=OPERATOR)
    assert [w.caller_id for w in inbox_triage(store, limit=10, offset=0)] == ["c-2", "c-1"]
    assert inbox_triage_count(store) == 2


def test_other_batches_are_not_inbox_items(store: Store, stored):
    from core.review.records import TriageItem

    other = TriageItem(batch="march.csv", text="x", predicted_label="Other", confidence=0.2)
    store.enqueue_triage([other], actor=OPERATOR)
    assert inbox_triage_count(store) == 3
    assert {w.item.batch for w in inbox_triage(store, limit=10, offset=0)} == {INBOX_BATCH}


def test_an_empty_inbox(store: Store):
    assert inbox_triage(store, limit=10, offset=0) == []
    assert inbox_triage_count(store) == open_complaint_count(store) == 0
    table = inbox_board_table([])
    assert list(table.columns) == list(BOARD_COLUMNS) and table.empty


def test_the_board_table_of_the_open_complaints(store: Store, stored):
    token, ids = stored
    resolve_complaint(store, ids["c-3"], token=token)
    first = inbox_triage(store, limit=10, offset=0)[0]  # c-4, UPI Dispute: corrected
    store.decide_triage(first.item.id, final_label="Card Fraud", reviewer="Ben", actor=OPERATOR)
    records = open_complaints(store, tat=load_tat())
    assert open_complaint_count(store) == 3 == len(records)
    table = inbox_board_table(records)
    assert list(table.columns) == list(BOARD_COLUMNS)
    assert table["complaint_id"].tolist() == [ids["c-1"], ids["c-4"], ids["c-2"]]  # received
    assert table["predicted_label"].tolist() == ["Card Fraud", "Card Fraud", "UPI Dispute"]
    assert table["needs_review"].tolist() == [True, False, True]  # c-4 has its verdict
    assert table["channel"].tolist() == ["branch", "app", "web"]
    assert table["confidence"].tolist() == [0.41, 0.45, 0.38]
    assert table["text"].tolist()[0] == "card stolen, unknown charge"


def test_the_board_draws_the_inbox(store: Store, stored):
    as_of = datetime(2025, 6, 3, 12, 0, tzinfo=UTC)
    table = inbox_board_table(open_complaints(store, tat=load_tat()))
    board = build_board(table, load_tat(), BoardConfig(as_of=as_of))
    loads = {load.desk: load for load in board.desks}
    assert board.received_col == "received_at" and board.desk_col == "predicted_label"
    assert {desk: load.open for desk, load in loads.items()} == {
        "Card Fraud": 1, "Loan Query": 1, "UPI Dispute": 2,
    }  # fmt: skip
    assert loads["UPI Dispute"].breached == 2  # 52 h and 40 h old against 24 h
    assert loads["UPI Dispute"].unsure == 2 and loads["Loan Query"].unsure == 0


def test_a_verdict_on_an_inbox_complaint_is_a_correction_for_retraining(tmp_path):
    """The closed loop: a complaint posted through the API, flagged, and corrected on the Triage
    queue becomes a labelled row of the next version of a saved data set."""
    from core.data.dataset import Dataset
    from core.data.saved import DatasetSave, save_dataset
    from core.review.corrections import plan_corrections
    from tests.helpers import TINY_LABELS, TINY_TEXTS

    root = tmp_path / "datasets"
    save_dataset(root, DatasetSave("complaints", Dataset(TINY_TEXTS, TINY_LABELS)), actor=OPERATOR)
    with Store.open(tmp_path / "loop.db") as store:
        token = create_token(store, "web", ["submit", "read"], actor=OPERATOR).token
        text = "a new kind of complaint about a locker key"
        routing = Routing("Other", 0.4, True, "unsure", 0.9, "transformer", {"Other": 0.4})
        store_batch(store, token, [(Submission("L-1", text), routing)], model=("m", "d"),
                    tat=load_tat())  # fmt: skip
        (waiting,) = inbox_triage(store)
        store.decide_triage(
            waiting.item.id, final_label="KYC Update", reviewer="Ben", actor=OPERATOR
        )
        plan = plan_corrections(store, root, "complaints", actor=OPERATOR)
    assert [(a.text, a.label, a.status) for a in plan.added] == [(text, "KYC Update", "corrected")]
