"""AppTest for the Label audit page: audit the demo data, relabel a row, the decision is stored;
the cached audit is reused; the fine-tune audit runs (and cancels) with a saved tiny model."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.data.validation import validate
from core.jobs import JobStatus
from core.review.records import ReviewDecision
from core.review.store import Store, default_db_path
from tests.conftest import separable_rows
from tests.helpers import AUTH, open_page
from ui.safe import md_escape
from ui.state import ACTIVE_DATASET, ACTIVE_MODEL, AUDIT_JOB, REVIEWER, ActiveDataset

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "label_audit.py")
RUN = "FormSubmitter:audit.form-Run the audit"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    """A fresh review store per test."""
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture(autouse=True)
def no_cached_audits():
    """Every test starts without the finished audits of earlier tests: the page keeps them in
    st.cache_resource (`finished_audits()`), shared by the whole process."""
    st.cache_resource.clear()


@pytest.fixture()
def app() -> AppTest:
    at = open_page(PAGE).run()
    assert not at.exception
    return at


def finish_audit(at: AppTest) -> None:
    """Wait for the session's audit thread, then rerun as the polling fragment would."""
    assert not at.session_state[AUDIT_JOB].wait(timeout=600).status.active
    at.run()
    assert not at.exception


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def toy_active() -> ActiveDataset:
    """90 separable complaints, three desks, through the same validate() as the Data page."""
    texts, labels = separable_rows(30)
    dataset, report = validate(pd.DataFrame({"text": texts, "desk": labels}), label_col="desk")
    return ActiveDataset(name="toy complaints", dataset=dataset, report=report)


def test_without_data_the_page_offers_the_demo_data(app: AppTest):
    assert app.title[0].value == "Label audit"
    assert any("use the built-in demo data" in i.value for i in app.info)
    assert app.button(key="audit.use_demo")


@pytest.mark.slow  # the 3000-row demo data: 5 to 15 s on the shared 2-core machine
def test_audit_the_demo_data_then_relabel_one_row(app: AppTest, data_dir: Path):
    app.button(key="audit.use_demo").click().run()
    app.button(key=RUN).click().run()
    assert not app.exception
    finish_audit(app)
    flagged = int(metric(app, "Flagged rows").replace(",", ""))
    assert flagged > 50 and metric(app, "Decided") == "0"
    assert any("the audit expects about" in i.value for i in app.info)  # its own estimate
    table = app.dataframe[0].value
    assert list(table.columns[:5]) == ["rank", "row", "text", "given", "suggested"]
    assert table["quality"].is_monotonic_increasing

    app.text_input(key="audit.reviewer_name").set_value("Asha Rao")
    app.button(key="FormSubmitter:audit.reviewer_form-Start reviewing").click().run()
    row = app.selectbox(key="audit.row").value
    assert row == table.loc[0, "row"]  # the most suspicious row comes first
    given, suggested = table.loc[0, "given"], table.loc[0, "suggested"]
    app.radio(key=f"audit.decision.{row}").set_value("relabel")
    assert app.selectbox(key=f"audit.label.{row}").value == suggested  # pre-selected
    app.text_input(key=f"audit.note.{row}").set_value("mentions a KYC form")
    app.button(key=f"FormSubmitter:audit.decide.{row}-Save decision").click().run()
    assert not app.exception

    assert [s.value for s in app.success] == [
        f"Saved decision \\#1\\: row {row}\\, relabel to {suggested}\\."
    ]
    with Store.open(default_db_path()) as store:
        (stored,) = store.decisions(app.session_state[ACTIVE_DATASET].dataset.fingerprint)
    assert default_db_path().parent == data_dir
    assert (stored.row, stored.given_label, stored.decision, stored.new_label) == (
        row,
        given,
        "relabel",
        suggested,
    )
    assert (stored.reviewer, stored.note) == ("Asha Rao", "mentions a KYC form")
    assert metric(app, "Decided") == "1" and metric(app, "Relabelled") == "1"
    assert app.selectbox(key="audit.row").value != row  # moved on to the next undecided row
    history = app.dataframe[1].value
    assert history.loc[0, "row"] == row and history.loc[0, "verdict"] == f"relabel to {suggested}"


def test_the_corrected_data_set_downloads_as_csv_and_on_request_as_xlsx():
    app = open_page(PAGE, {ACTIVE_DATASET: toy_active()}).run()
    labels = [b.proto.label for b in app.get("download_button")]
    assert labels == ["Download the corrected data set (CSV)"]  # no XLSX built on every rerun
    app.button(key="audit.export_xlsx.prepare").click().run()
    assert not app.exception
    labels = [b.proto.label for b in app.get("download_button")]
    assert labels == [
        "Download the corrected data set (CSV)",
        "Download the corrected data set (XLSX)",
    ]


def test_the_same_audit_again_is_served_from_the_cache():
    app = open_page(PAGE, {ACTIVE_DATASET: toy_active()}).run()
    app.button(key=RUN).click().run()
    finish_audit(app)
    first = app.session_state[AUDIT_JOB].snapshot().result
    app.button(key=RUN).click().run()
    job = app.session_state[AUDIT_JOB]
    snapshot = job.snapshot()  # no new job: the cached result, done
    assert snapshot.status is JobStatus.DONE and snapshot.result is first
    app.number_input(key="audit.folds").set_value(3)
    app.button(key=RUN).click().run()
    assert app.session_state[AUDIT_JOB] is not job  # other settings, a new audit
    finish_audit(app)
    assert "3 folds" in app.subheader[0].value


def test_the_fine_tune_audit_needs_an_active_model(app: AppTest):
    app.button(key="audit.use_demo").click().run()
    app.radio(key="audit.model").set_value("transformer")
    app.button(key=RUN).click().run()
    assert not app.exception
    assert any("no active model" in e.value for e in app.error)
    assert AUDIT_JOB not in app.session_state


def test_fine_tune_audit_with_a_saved_tiny_model(tiny_model_dir: Path):
    at = open_page(
        PAGE, {ACTIVE_DATASET: toy_active(), ACTIVE_MODEL: str(tiny_model_dir), REVIEWER: "Ben"}
    ).run()
    assert any("backbone tiny" in c.value for c in at.caption)
    at.radio(key="audit.model").set_value("transformer")
    at.number_input(key="audit.folds").set_value(2)
    at.button(key=RUN).click().run()
    assert not at.exception
    finish_audit(at)
    result = at.session_state[AUDIT_JOB].snapshot().result
    assert (result.model, result.folds) == ("transformer", 2)
    assert result.pred_probs.shape == (90, 3)
    assert at.subheader[0].value.startswith("Suspected issues (transformer, 2 folds")


def test_the_embedding_audit_embeds_with_minilm_beside_the_other_two():
    """The bundled MiniLM's frozen embeddings of 90 toy rows and a head per fold: seconds."""
    at = open_page(PAGE, {ACTIVE_DATASET: toy_active()}).run()
    assert at.radio(key="audit.model").options == [
        "Bag of words (seconds)",
        "Quick: MiniLM embeddings + a linear head, blended with the bag of words "
        "(about a minute per 3,000 rows)",
        "Transformer, fine-tuned per fold with the active model's settings (hours)",
    ]
    at.radio(key="audit.model").set_value("quick")
    at.number_input(key="audit.folds").set_value(2)
    at.button(key=RUN).click().run()
    assert not at.exception
    finish_audit(at)
    result = at.session_state[AUDIT_JOB].snapshot().result
    assert (result.model, result.folds, result.pred_probs.shape) == ("quick", 2, (90, 3))
    assert at.subheader[0].value.startswith("Suspected issues (quick, 2 folds")
    # the audit's own estimate of real errors among the flagged rows, and what it chose
    assert md_escape(result.estimate.sentence()) in [i.value for i in at.info]
    assert any("Chosen by out\\-of\\-fold log\\-loss" in c.value for c in at.caption)


@pytest.fixture()
def slow_model(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The tiny model with training settings that take minutes per fold (200 epochs, no early
    stop, no step limit), so its audit is surely still running when the test looks, however
    fast the machine."""
    folder = tmp_path / "slow-tiny"
    shutil.copytree(tiny_model_dir, folder)
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    card["train_config"].update(epochs=200, patience=200, max_steps=None)
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return folder


def test_a_running_fine_tune_audit_shows_progress_and_can_be_cancelled(slow_model: Path):
    at = open_page(PAGE, {ACTIVE_DATASET: toy_active(), ACTIVE_MODEL: str(slow_model)}).run()
    at.radio(key="audit.model").set_value("transformer")
    at.number_input(key="audit.folds").set_value(3)
    at.button(key=RUN).click().run()
    assert not at.exception
    assert at.session_state[AUDIT_JOB].snapshot().status.active
    assert at.button(key="audit.cancel")
    job = at.session_state[AUDIT_JOB]
    for _ in range(1000):  # until a queue worker has taken it (polling a thread, not pacing)
        if job.snapshot().status is not JobStatus.QUEUED or threading.Event().wait(0.01):
            break
    at.run()  # as the fragment's next poll
    assert at.get("progress") and "Fold 1 of 3" in at.get("progress")[0].proto.text
    at.button(key="audit.cancel").click().run()
    finish_audit(at)
    assert at.session_state[AUDIT_JOB].snapshot().status is JobStatus.CANCELLED
    assert any("cancelled" in w.value for w in at.warning)
    assert not at.metric  # no issue table from a cancelled audit


def test_decisions_under_the_old_fingerprint_are_named_and_carried_over(data_dir: Path):
    active = toy_active()
    data = active.dataset
    legacy = data.legacy_fingerprint
    with Store.open(default_db_path()) as store:
        store.record_decision(
            ReviewDecision(legacy, data.rows[0], data.texts[0], data.labels[0], "keep", "Asha"),
            actor=OPERATOR,
        )  # its row still holds that complaint
        store.record_decision(
            ReviewDecision(legacy, data.rows[1], data.texts[0], data.labels[1], "keep", "Asha"),
            actor=OPERATOR,
        )  # made when another complaint was on that row
    at = open_page(PAGE, {ACTIVE_DATASET: active}).run()
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(f"no longer match their rows ({data.rows[1]})" in w for w in warnings)
    assert any("1 decisions were saved on this data set before row numbers" in w for w in warnings)
    at.button(key="audit.carry_over_button").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == ["Carried over 1 decisions\\."]
    with Store.open(default_db_path()) as store:
        (carried,) = store.decisions(data.fingerprint)
    assert (carried.row, carried.text, carried.reviewer) == (data.rows[0], data.texts[0], "Asha")
    assert not [b for b in at.button if b.key == "audit.carry_over_button"]


def test_a_decision_on_another_complaint_stops_the_export_with_a_message(data_dir: Path):
    active = toy_active()
    data = active.dataset
    with Store.open(default_db_path()) as store:
        store.record_decision(
            ReviewDecision(
                data.fingerprint, data.rows[1], data.texts[0], data.labels[1], "keep", "A"
            ),
            actor=OPERATOR,
        )
    at = open_page(PAGE, {ACTIVE_DATASET: active}).run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert f"row {data.rows[1]} now holds" in error and "review the row again" in error
    assert not at.get("download_button")


def test_a_tampered_store_is_a_message_not_a_crash(data_dir: Path):
    with Store.open(default_db_path()) as store:
        store.record_run("audit", parameters={}, metrics={}, actor=OPERATOR)
    with sqlite3.connect(default_db_path()) as raw:
        raw.execute("DROP TRIGGER decisions_no_update")
    raw.close()
    at = open_page(PAGE, {ACTIVE_DATASET: toy_active()}).run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert "trigger decisions\\_no\\_update is missing" in error
    assert not at.get("download_button")


# ------------------------------------------------------------------ signed in: who sees and acts

ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example", "ravi@bank.example"]
viewer = ["*@bank.example"]
"""


@pytest.fixture()
def roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from core.roles import ROLES_ENV

    path = tmp_path / "roles.toml"
    path.write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(path))
    return path


def signed_page(email: str, state: dict) -> AppTest:
    """The Label audit page through app.py's router, signed in as `email`, with `state`."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    return at.switch_page(PAGE).run()


def test_a_viewer_sees_decisions_but_not_who_made_them_or_their_notes(roles: Path):
    active = toy_active()
    data = active.dataset
    ravi = ReviewDecision(
        data.fingerprint, data.rows[0], data.texts[0], data.labels[0], "escalate",
        "ravi@bank.example", note="ravi's private note",
    )  # fmt: skip
    with Store.open(default_db_path()) as store:
        store.record_decision(ravi, actor=OPERATOR)
    at = signed_page("vera@bank.example", {ACTIVE_DATASET: active})
    assert not at.exception
    history = next(d.value for d in at.dataframe if "reviewer" in d.value.columns)
    assert history["verdict"].tolist() == ["escalate"]
    assert history["reviewer"].tolist() == ["another reviewer"] and history["note"].tolist() == [""]
    shown = "\n".join(str(part.value) for part in [*at.caption, *at.markdown])
    assert "ravi" not in shown
    admin = signed_page("lead@bank.example", {ACTIVE_DATASET: active})
    history = next(d.value for d in admin.dataframe if "reviewer" in d.value.columns)
    assert history["reviewer"].tolist() == ["ravi@bank.example"]
    assert history["note"].tolist() == ["ravi's private note"]


def test_a_click_after_the_user_left_the_roles_file_carries_nothing_over(roles: Path):
    active = toy_active()
    data = active.dataset
    legacy = ReviewDecision(
        data.legacy_fingerprint, data.rows[0], data.texts[0], data.labels[0], "keep",
        "asha@bank.example",
    )  # fmt: skip
    with Store.open(default_db_path()) as store:
        store.record_decision(legacy, actor=OPERATOR)
    at = signed_page("asha@bank.example", {ACTIVE_DATASET: active})
    assert not at.exception
    button = at.button(key="audit.carry_over_button")
    roles.write_text('admin = ["lead@bank.example"]\n')  # asha removed before her click
    button.click().run()
    assert not at.exception
    assert any(
        "is not on the list of people who may use Grievance Lens" in e.value for e in at.error
    )
    with Store.open(default_db_path()) as store:
        assert store.decisions(data.fingerprint) == []
