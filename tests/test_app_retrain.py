"""AppTest of retrain from corrections: the Train page previews the next version of a saved data
set (what changes, from whose decisions, desk counts before and after) for an admin before
anything starts, starts it, and shows a reviewer why they cannot; Label audit records "exclude"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR, Actor, Role
from core.data.saved import DatasetSave, datasets_root, read_summary, save_dataset
from core.data.validation import validate
from core.models.card import read_card
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import promote_model
from core.review.records import ReviewDecision, TriageItem
from core.review.store import Store, default_db_path
from core.roles import ROLES_ENV
from tests.conftest import separable_rows
from tests.helpers import AUTH, distinct_tiny_data
from ui.state import ACTIVE_DATASET, AUDIT_JOB, ActiveDataset

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
TRAIN = str(ROOT / "pages" / "train.py")
AUDIT = str(ROOT / "pages" / "label_audit.py")
ADMIN = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example"]
viewer = ["*@bank.example"]
"""


@pytest.fixture
def team(tmp_path: Path, distinct_tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sign-in roles, a data folder with two saved data sets ("tiny", the live model's, and the
    newer "other"), the live model, and the team's work on "tiny": a relabel and an exclusion
    by asha, a triage verdict by ravi. Returns the models folder."""
    (tmp_path / "roles.toml").write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(tmp_path / "roles.toml"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    models = tmp_path / "models"
    shutil.copytree(distinct_tiny_model_dir, models / "live-tiny")
    data = distinct_tiny_data()
    save_dataset(datasets_root(), DatasetSave("tiny", data), actor=OPERATOR)
    save_dataset(datasets_root(), DatasetSave("other", data.subset(range(8))), actor=OPERATOR)
    with Store.open(default_db_path()) as store:
        promote_model(store, models, "live-tiny", reason="first model", actor=ADMIN)
        for position, decision, new in ((0, "relabel", "Card Fraud"), (1, "exclude", None)):
            store.record_decision(ReviewDecision(
                data.fingerprint, data.rows[position], data.texts[position],
                data.labels[position], decision, "asha@bank.example", new_label=new,
            ), actor=OPERATOR)  # fmt: skip
        item = TriageItem(batch="b", text="upi refund stuck", predicted_label="Other",
                          confidence=0.4)  # fmt: skip
        (item_id,) = store.enqueue_triage([item], actor=OPERATOR)
        store.decide_triage(item_id, final_label="UPI Dispute", reviewer="ravi@bank.example",
                            actor=OPERATOR)  # fmt: skip
    st.cache_resource.clear()  # no store connection of an earlier test's data folder
    return models


def signed_in(email: str, page: str, state: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    at = at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_an_admin_sees_the_preview_of_the_live_models_data_set_before_anything_starts(
    team: Path,
):
    at = signed_in("lead@bank.example", TRAIN)
    assert at.selectbox(key="train.retrain.parent").value == "tiny"  # the live model's data
    assert (metric(at, "Relabelled"), metric(at, "Excluded")) == ("1", "1")
    assert (metric(at, "Added from triage"), metric(at, "Stale (not applied)")) == ("1", "0")
    by_reviewer = next(d.value for d in at.dataframe if "reviewer" in d.value.columns)
    assert dict(zip(by_reviewer["reviewer"], by_reviewer["changes"], strict=True)) == {
        "asha@bank.example": 2, "ravi@bank.example": 1}  # fmt: skip
    desks = next(d.value for d in at.dataframe if "desk" in d.value.columns).set_index("desk")
    # row 2 (UPI Dispute) relabelled to Card Fraud, row 3 (UPI Dispute) excluded, one UPI added
    assert desks.loc["UPI Dispute"].tolist() == [8, 7, -1]
    assert desks.loc["Card Fraud"].tolist() == [8, 9, 1]
    assert at.text_input(key="train.retrain.name.tiny").value == "tiny-v2"
    assert at.button(key="train.retrain.start")
    with pytest.raises(Exception, match="no saved data set"):
        read_summary(datasets_root(), "tiny-v2")  # a preview writes nothing
    with Store.open(default_db_path()) as store:
        assert store.events("retrain.queued") == []

    at.selectbox(key="train.retrain.parent").set_value("other").run()  # decisions are per data set
    assert (metric(at, "Relabelled"), metric(at, "Excluded")) == ("0", "0")
    assert metric(at, "Added from triage") == "1"  # the verdict's complaint is not a row there
    assert at.text_input(key="train.retrain.name.other").value == "other-v2"


def test_the_admin_starts_it_and_the_challenger_is_trained_and_saved(team: Path):
    at = signed_in("lead@bank.example", TRAIN)
    at.button(key="train.retrain.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = at.session_state["train.retrain.run"]
    assert run.training.job.wait(300).status == "done"
    at.run()
    assert any("Challenger tiny\\-v2\\-challenger is saved" in s.value for s in at.success)
    card = read_card(team / "tiny-v2-challenger")
    assert card["data_fingerprint"] == read_summary(datasets_root(), "tiny-v2").fingerprint
    with Store.open(default_db_path()) as store:
        (event,) = store.events("retrain.queued")
    assert event.actor == "lead@bank.example" and event.details["live_model"] == "live-tiny"
    assert not [b for b in at.button if b.key == "train.retrain.start"]  # built: not again
    assert any("already built as tiny\\-v2" in i.value for i in at.info)


def test_a_reviewer_sees_why_they_cannot_retrain(team: Path):
    at = signed_in("asha@bank.example", TRAIN)
    assert any(
        c.value == "Retraining from corrections needs the admin role; you are a reviewer."
        for c in at.caption
    )
    assert not [w for w in at.selectbox if w.key == "train.retrain.parent"]
    assert not [b for b in at.button if b.key == "train.retrain.start"]
    assert not [m for m in at.metric if m.label == "Added from triage"]


def noisy_active() -> ActiveDataset:
    """90 separable complaints with three labels flipped: the audit flags them."""
    texts, labels = separable_rows(30)
    desks = sorted(set(labels))
    for i in (0, 31, 62):
        labels[i] = next(d for d in desks if d != labels[i])
    dataset, report = validate(pd.DataFrame({"text": texts, "desk": labels}), label_col="desk")
    return ActiveDataset(name="noisy complaints", dataset=dataset, report=report)


def test_label_audit_records_an_exclusion(team: Path):
    active = noisy_active()
    at = signed_in("asha@bank.example", AUDIT, {ACTIVE_DATASET: active})
    at.button(key="FormSubmitter:audit.form-Run the audit").click().run()
    assert not at.session_state[AUDIT_JOB].wait(timeout=300).status.active
    at.run()
    row = at.selectbox(key="audit.row").value
    options = at.radio(key=f"audit.decision.{row}").options
    assert "Exclude (drop this row from the next version)" in options
    at.radio(key=f"audit.decision.{row}").set_value("exclude")
    at.button(key=f"FormSubmitter:audit.decide.{row}-Save decision").click().run()
    assert not at.exception
    # the team fixture recorded decisions 1 and 2
    assert [s.value for s in at.success] == [f"Saved decision \\#3\\: row {row}\\, exclude\\."]
    assert metric(at, "Excluded") == "1"
    with Store.open(default_db_path()) as store:
        (stored,) = store.decisions(active.dataset.fingerprint)
    assert (stored.row, stored.decision, stored.new_label) == (row, "exclude", None)
    assert stored.reviewer == "asha@bank.example"
