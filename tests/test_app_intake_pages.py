"""AppTest for the pages the intake API feeds: the Triage queue opens on the inbox's waiting
complaints (oldest due first, with channel, received and due times) and its Confirm / Correct
flow decides them; the Routing board opens on the live inbox while it holds open complaints, and
its other sources still work. Complaints are stored with hand-made routings: no model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.board.tat import load_tat
from core.intake.inbox import INBOX_BATCH, resolve_complaint, store_batch
from core.intake.tokens import create_token, list_tokens
from core.review.records import TriageItem
from core.review.store import Store, default_db_path
from tests.helpers import ROOT, inbox_items, open_page

TRIAGE = str(ROOT / "pages" / "triage.py")
AS_OF = datetime(2025, 6, 3, 12, 0, tzinfo=UTC)


ITEMS = inbox_items()[:3]  # the fourth, another UPI complaint, is the queue tests' own


@pytest.fixture()
def inbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Three complaints from the intake API, two sent to people, and one older item of another
    batch; the caller's ids mapped to the complaints' ids."""
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GRIEVANCE_LENS_TAT", raising=False)
    with Store.open(default_db_path()) as store:
        other = TriageItem(batch="march.csv", text="kyc", predicted_label="Other", confidence=0.2)
        store.enqueue_triage([other], actor=OPERATOR)
        token = create_token(store, "web", ["submit", "read"], actor=OPERATOR).token
        batch = store_batch(store, token, ITEMS, model=("tiny", "digest"), tat=load_tat())
    return {a.id: a.complaint_id for a in batch.answers}


def triage_page() -> AppTest:
    at = AppTest.from_file(TRIAGE, default_timeout=60).run()
    assert not at.exception
    return at


def test_the_triage_page_opens_on_the_inbox_oldest_due_first(inbox: dict[str, int]):
    at = triage_page()
    assert at.selectbox(key="triage.batch").value == INBOX_BATCH
    assert at.selectbox(key="triage.batch").options == ["All batches", "inbox", "march.csv"]
    assert any(s.value == "Arriving from the intake API (2 waiting)" for s in at.subheader)
    table = at.dataframe[0].value
    assert table["complaint"].tolist() == [inbox["c-2"], inbox["c-1"]]  # due 06-03, then 06-11
    assert table["channel"].tolist() == ["web", "branch"]
    assert table["received"].tolist() == ["2025-06-02 08:00 UTC", "2025-06-01 08:00 UTC"]
    assert table["due by"].tolist() == ["2025-06-03 08:00 UTC", "2025-06-11 08:00 UTC"]
    assert table["text"].tolist() == ["upi paisa gaya", "card stolen, unknown charge"]
    at.selectbox(key="triage.batch").set_value("All batches").run()  # the other batches too
    assert not at.exception
    assert len(at.dataframe[0].value) == 3 and "channel" not in at.dataframe[0].value.columns


def test_a_reviewer_decides_inbox_complaints_in_due_order(inbox: dict[str, int]):
    at = triage_page()
    at.text_input(key="triage.reviewer_name").set_value("Ben")
    at.button(key="FormSubmitter:triage.reviewer_form-Start reviewing").click().run()
    first, second = at.dataframe[0].value["item"].tolist()
    assert at.selectbox(key="triage.item").value == first  # the one due first
    assert any(f"complaint {inbox['c-2']} from web" in c.value for c in at.caption)
    at.button(key=f"FormSubmitter:triage.decide.{first}-Confirm UPI Dispute").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == [
        f"Saved\\: item \\#{first} confirmed as UPI Dispute\\."
    ]
    assert at.selectbox(key="triage.item").value == second  # the next one down the list
    at.selectbox(key=f"triage.label.{second}").set_value("Other")
    at.button(key=f"FormSubmitter:triage.decide.{second}-Correct to the chosen desk").click()
    at.run()
    assert not at.exception
    assert any(s.value == "Arriving from the intake API (0 waiting)" for s in at.subheader)
    assert any("Nothing is waiting" in i.value for i in at.info)
    with Store.open(default_db_path()) as store:
        assert store.triage_counts(batch=INBOX_BATCH) == {"open": 0, "confirmed": 1,
                                                          "corrected": 1}  # fmt: skip
        assert store.triage_counts(batch="march.csv")["open"] == 1


def test_without_waiting_inbox_items_the_page_opens_on_all_batches(inbox: dict[str, int]):
    with Store.open(default_db_path()) as store:
        for item in store.open_triage(batch=INBOX_BATCH):
            store.decide_triage(item.id, final_label="Other", reviewer="Ravi", actor=OPERATOR)
    at = triage_page()
    assert at.selectbox(key="triage.batch").value == "All batches"
    assert any(s.value == "Waiting for review (1)" for s in at.subheader)


# ------------------------------------------------------------------ the routing board


def board_page() -> AppTest:
    at = open_page("pages/board.py")
    at.query_params["as_of"] = AS_OF.isoformat()
    at.run()
    assert not at.exception
    return at


def desk_table(at: AppTest) -> pd.DataFrame:
    frame = next(d.value for d in at.dataframe if "breached" in d.value.columns)
    return frame.set_index("desk")


def test_the_board_shows_the_live_inbox_by_default(inbox: dict[str, int]):
    at = board_page()
    assert at.radio(key="board.source").value == "The live inbox (complaints from the intake API)"
    desks = desk_table(at)
    assert desks["open"].to_dict() == {"Card Fraud": 1, "Loan Query": 1, "UPI Dispute": 1}
    assert desks.loc["UPI Dispute", "breached"] == 1  # 52 h old against 24 h
    assert next(m.value for m in at.metric if m.label == "Unsure (needs review)") == "2"
    assert any("The live inbox \\(3 open complaints" in c.value for c in at.caption)
    with Store.open(default_db_path()) as store:  # a verdict moves a complaint to its desk
        item = next(i for i in store.open_triage(batch=INBOX_BATCH) if i.row == inbox["c-2"])
        store.decide_triage(item.id, final_label="Card Fraud", reviewer="Ben", actor=OPERATOR)
    at.run()
    assert desk_table(at)["open"].to_dict() == {"Card Fraud": 2, "Loan Query": 1}


def test_the_board_still_reads_a_file(inbox: dict[str, int]):
    at = board_page()
    at.radio(key="board.source").set_value("An uploaded classified file").run()
    csv = pd.DataFrame(
        {"text": ["upi a", "kyc b"], "desk": ["UPI Dispute", "KYC Update"],
         "received_at": ["2025-06-01T10:00+05:30", "2025-06-03T08:00+05:30"]}
    ).to_csv(index=False).encode()  # fmt: skip
    at.file_uploader(key="board.upload").set_value(("june.csv", csv, "text/csv")).run()
    assert not at.exception
    assert desk_table(at)["open"].to_dict() == {"KYC Update": 1, "UPI Dispute": 1}


def test_the_board_opens_on_the_data_set_when_the_inbox_is_closed(inbox: dict[str, int]):
    with Store.open(default_db_path()) as store:
        [token] = list_tokens(store, actor=OPERATOR)
        for complaint_id in inbox.values():
            resolve_complaint(store, complaint_id, token=token)
    at = board_page()
    assert at.radio(key="board.source").value == "The active data set, as routed in its desk column"
    at.radio(key="board.source").set_value("The live inbox (complaints from the intake API)").run()
    assert not at.exception
    assert any("No complaint from the intake API is open" in i.value for i in at.info)
