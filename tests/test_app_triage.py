"""AppTest for the Triage queue page: unsure predictions wait in the queue, a reviewer confirms
one and corrects another, the verdicts are stored, and the reviewed rows can be downloaded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.models.classifier import Prediction
from core.review.store import Store, default_db_path
from core.review.triage import enqueue_uncertain
from tests.helpers import AUTH
from ui.safe import md_escape

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "triage.py")
TEXTS = [
    "UPI se paisa gaya, merchant ko nahi mila",
    "card stolen, unknown charge",
    "**EMI** bounced <script>alert(1)</script>",
]


def prediction(label: str, confidence: float, other: str) -> Prediction:
    probabilities = {label: confidence, other: round(1 - confidence, 6)}
    return Prediction(label, probabilities, confidence < 0.5)


@pytest.fixture()
def queued(tmp_path, monkeypatch) -> list[int]:
    """Three classified complaints, two below the 0.5 threshold, queued as Classify would."""
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    predictions = [
        prediction("UPI Dispute", 0.41, "Card Fraud"),
        prediction("Card Fraud", 0.93, "Other"),
        prediction("Other", 0.38, "Loan Query"),
    ]
    with Store.open(default_db_path()) as store:
        return enqueue_uncertain(
            store, TEXTS, predictions, threshold=0.5, batch="march.csv", rows=[2, 3, 4],
            actor=OPERATOR,
        )  # fmt: skip


@pytest.fixture()
def app(queued) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def sign_in(at: AppTest, name: str = "Ben") -> None:
    at.text_input(key="triage.reviewer_name").set_value(name)
    at.button(key="FormSubmitter:triage.reviewer_form-Start reviewing").click().run()
    assert not at.exception


def test_unsure_predictions_wait_in_the_queue(app: AppTest, queued: list[int]):
    assert app.title[0].value == "Triage queue"
    assert (metric(app, "Waiting"), metric(app, "Confirmed")) == ("2", "0")
    table = app.dataframe[0].value
    assert table["item"].tolist() == queued
    assert table["text"].tolist() == [TEXTS[0], TEXTS[2]]  # shown as data, verbatim
    assert app.selectbox(key="triage.batch").options == ["All batches", "march.csv"]
    assert not [b for b in app.button if "triage.decide" in (b.key or "")]  # no name yet


def test_confirm_one_and_correct_another(app: AppTest, queued: list[int]):
    sign_in(app)
    first, second = queued
    assert app.selectbox(key="triage.item").value == first
    app.button(key=f"FormSubmitter:triage.decide.{first}-Confirm UPI Dispute").click().run()
    assert not app.exception
    assert [s.value for s in app.success] == [
        f"Saved\\: item \\#{first} confirmed as UPI Dispute\\."
    ]
    assert app.selectbox(key="triage.item").value == second  # moved on

    app.selectbox(key=f"triage.label.{second}").set_value("Loan Query")
    app.button(key=f"FormSubmitter:triage.decide.{second}-Correct to the chosen desk").click()
    app.run()
    assert not app.exception
    assert (metric(app, "Waiting"), metric(app, "Confirmed"), metric(app, "Corrected")) == (
        "0",
        "1",
        "1",
    )
    assert any("Nothing is waiting" in i.value for i in app.info)
    with Store.open(default_db_path()) as store:
        decided = {i.id: i for i in store.triage_items()}
    assert (decided[first].status, decided[first].final_label) == ("confirmed", "UPI Dispute")
    assert (decided[second].status, decided[second].final_label) == ("corrected", "Loan Query")
    assert decided[second].reviewer == "Ben"
    labels = [b.proto.label for b in app.get("download_button")]
    assert labels == ["Download 2 reviewed rows (CSV)"]
    app.radio(key="triage.include").set_value("corrected only").run()
    assert [b.proto.label for b in app.get("download_button")] == ["Download 1 reviewed rows (CSV)"]


def test_an_item_decided_elsewhere_is_refused_not_overwritten(app: AppTest, queued: list[int]):
    sign_in(app, "Asha")
    first = queued[0]
    with Store.open(default_db_path()) as other_session:
        other_session.decide_triage(
            first, final_label="Card Fraud", reviewer="Ravi", actor=OPERATOR
        )
    app.button(key=f"FormSubmitter:triage.decide.{first}-Confirm UPI Dispute").click().run()
    assert not app.exception
    assert any("already corrected" in e.value for e in app.error)
    with Store.open(default_db_path()) as store:
        item = next(i for i in store.triage_items() if i.id == first)
    assert (item.final_label, item.reviewer) == ("Card Fraud", "Ravi")


def test_the_reviewer_is_asked_once_per_session(app: AppTest):
    assert app.text_input(key="triage.reviewer_name")
    sign_in(app, "  Asha   Rao ")
    assert any("Asha Rao" in c.value for c in app.caption)
    app.run()
    assert not app.text_input  # not asked again


def test_a_corrupt_store_is_a_message_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    default_db_path().write_bytes(random.Random(1).randbytes(4096))
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("The review store cannot be used") and "not a readable" in error
    assert not at.metric  # the page stopped there


def test_a_read_only_store_is_shown_and_refuses_verdicts(queued: list[int]):
    default_db_path().chmod(0o444)
    try:
        at = AppTest.from_file(PAGE, default_timeout=60).run()
        assert not at.exception
        assert any("read-only" in w.value for w in at.warning)
        assert metric(at, "Waiting") == "2"
        sign_in(at)
        at.button(key=f"FormSubmitter:triage.decide.{queued[0]}-Confirm UPI Dispute").click().run()
        assert not at.exception
        assert any("Not saved" in e.value and "read\\-only" in e.value for e in at.error)
        assert metric(at, "Waiting") == "2"
    finally:
        default_db_path().chmod(0o644)


HOSTILE_LABEL = "Confirm ![](https://attacker.example/b.png) [UPI Dispute](https://phish.example)"


def test_a_hostile_label_is_literal_on_the_button_and_stored_raw(tmp_path, monkeypatch):
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    with Store.open(default_db_path()) as store:
        [item] = enqueue_uncertain(
            store, ["refund pending"], [prediction(HOSTILE_LABEL, 0.4, "Other")],
            threshold=0.5, batch="evil.csv", rows=[2], actor=OPERATOR,
        )  # fmt: skip
    app = AppTest.from_file(PAGE, default_timeout=60)
    app.run()
    sign_in(app)
    [confirm] = [b for b in app.button if b.proto.label.startswith("Confirm")]
    assert confirm.proto.label == f"Confirm {md_escape(HOSTILE_LABEL)}"
    assert "](" not in confirm.proto.label.replace("\\]\\(", "")
    confirm.click().run()
    assert not app.exception
    with Store.open(default_db_path()) as store:
        [decided] = store.triage_items()
    assert (decided.id, decided.final_label) == (item, HOSTILE_LABEL)


# ------------------------------------------------------------------ a flood cannot hide new items


def test_every_waiting_item_is_reachable_past_a_flood(tmp_path, monkeypatch):
    """5,001 items queued before one new one: the counts are exact and the newest item is on
    the last page (the page showed only the oldest 5,000 before)."""
    from core.review.limits import TriageLimits
    from core.review.records import TriageItem

    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    flood = [
        TriageItem(batch="flood.csv", text=f"spam {n}", predicted_label="Other", confidence=0.1)
        for n in range(5001)
    ]
    newest = TriageItem(batch="today.csv", text="card stolen", predicted_label="Card Fraud",
                        confidence=0.4)  # fmt: skip
    lots = TriageLimits(max_items_per_hour=10_000)
    with Store.open(default_db_path()) as store:
        store.enqueue_triage(flood, actor=OPERATOR, limits=lots)
        (new_id,) = store.enqueue_triage([newest], actor=OPERATOR, limits=lots)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert metric(at, "Waiting") == "5,002"
    assert at.selectbox(key="triage.batch").options == ["All batches", "flood.csv", "today.csv"]
    assert len(at.dataframe[0].value) == 200  # one page at a time
    last = at.number_input(key="triage.page")
    assert last.max == 26
    last.set_value(26).run()
    assert not at.exception
    assert at.dataframe[0].value["item"].tolist()[-1] == new_id
    assert f"#{new_id}: Card Fraud (40%) · card stolen" in at.selectbox(key="triage.item").options


# ------------------------------------------------------------------ the actor of a click


def test_a_click_after_the_user_left_the_roles_file_records_nothing(queued, tmp_path, monkeypatch):
    """The verdict button was drawn while asha was a reviewer; she is removed from the roles file
    before she clicks: the click is judged by the roles file at the click."""
    from core.roles import ROLES_ENV

    roles = tmp_path / "roles.toml"
    roles.write_text('admin = ["lead@bank.example"]\nreviewer = ["asha@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "asha@bank.example", "email_verified": True}
    at.run()
    assert not at.exception
    confirm = next(b for b in at.button if b.label.startswith("Confirm"))
    roles.write_text('admin = ["lead@bank.example"]\n')  # asha removed
    confirm.click().run()
    assert not at.exception
    assert any(
        "is not on the list of people who may use Grievance Lens" in e.value for e in at.error
    )
    with Store.open(default_db_path()) as store:
        assert store.triage_counts() == {"open": 2, "confirmed": 0, "corrected": 0}
        assert [e.action for e in store.trail(actor=OPERATOR)] == ["triage.enqueued"] * 2


def test_a_bug_in_a_button_callback_is_the_unexpected_error_line_not_a_traceback(
    app: AppTest, queued: list[int], monkeypatch: pytest.MonkeyPatch, unexpected_page_errors
):
    """Callbacks run before the page, outside its error wrapper (ui.errors.guarded)."""

    def broken(self, *args, **kwargs):
        raise RuntimeError("a bug deep in the store")

    monkeypatch.setattr(Store, "decide_triage", broken)
    sign_in(app)
    app.button(key=f"FormSubmitter:triage.decide.{queued[0]}-Confirm UPI Dispute").click().run()
    assert not app.exception
    (error,) = [e.value for e in app.error if "unexpected error" in e.value]
    assert "a bug deep in the store" not in error and "reference" in error
    (logged,) = unexpected_page_errors  # the traceback went to the log, under the reference
    assert "a bug deep in the store" in str(logged.exc_info[1])
    unexpected_page_errors.clear()  # caused on purpose
