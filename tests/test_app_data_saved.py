"""AppTest for the Data page's saved data sets: a reviewer saves the demo data, everyone sees it
listed and loads it in one click in a session of their own, a viewer cannot save, an admin
retires one, and whatever people typed is shown as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.data.saved import datasets_root, list_datasets, load_dataset
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.store import Store, default_db_path
from core.roles import ROLES_ENV
from tests.helpers import AUTH
from ui.safe import md_escape
from ui.state import ACTIVE_DATASET

APP = str(Path(__file__).resolve().parent.parent / "app.py")
ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example"]
viewer = ["*@bank.example"]
"""
SAVE = "FormSubmitter:data.save_form-Save on the server"
RETIRE = "FormSubmitter:data.retire_form-Retire"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder, models folder and roles file of the test's own."""
    roles = tmp_path / "roles.toml"
    roles.write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(roles))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    return tmp_path


def signed_in(email: str) -> AppTest:
    """The app (the Data page opens first) in a new session, signed in as `email`."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    at.run()
    assert not at.exception
    return at


def shown(at: AppTest) -> str:
    parts = [*at.markdown, *at.caption, *at.success, *at.error, *at.info]
    return "\n".join(str(part.value) for part in parts)


def save_name_input(at: AppTest):
    return next(t for t in at.text_input if t.key.startswith("data.save_name."))


def save_demo(at: AppTest, name: str) -> AppTest:
    at.button(key="data.demo").click().run()
    save_name_input(at).set_value(name)
    at.button(key=SAVE).click().run()
    assert not at.exception
    return at


def test_a_reviewer_saves_the_demo_data_and_another_session_loads_it():
    asha = signed_in("asha@bank.example")
    asha.button(key="data.demo").click().run()
    assert save_name_input(asha).value == "built-in-demo-data"  # a default from the source
    save_demo(asha, "demo-june")
    assert md_escape("Saved 3,000 rows on the server as demo-june.") in shown(asha)
    assert f"**{md_escape('demo-june')}** · 3,000 rows · 5 desks" in shown(asha)
    assert "saved on the server as **demo\\-june**" in shown(asha)  # no second save offered
    assert not [t for t in asha.text_input if t.key.startswith("data.save_name.")]

    (saved,) = list_datasets(datasets_root())
    assert saved.saved_by == "asha@bank.example" and saved.rows == 3000
    with Store.open(default_db_path()) as store:
        (event,) = store.events("dataset.saved")
    assert event.actor == "asha@bank.example" and event.details["name"] == "demo-june"

    vic = signed_in("vic@bank.example")  # a viewer, in a session of their own
    assert f"**{md_escape('demo-june')}**" in shown(vic)
    assert md_escape("saved by asha@bank.example on") in shown(vic)
    vic.button(key="data.load.demo-june").click().run()
    assert not vic.exception
    active = vic.session_state[ACTIVE_DATASET]
    assert active.name == "demo-june"
    assert active.dataset.fingerprint == load_dataset(datasets_root(), "demo-june")[0].fingerprint
    assert active.report.rows_kept == 3000
    assert "Validation report: demo\\-june" in [s.value for s in vic.subheader]
    assert md_escape("Loaded the saved data set demo-june (3,000 rows).") in shown(vic)
    vic.run()  # a later rerun keeps the saved data set: the demo choice does not replace it
    assert vic.session_state[ACTIVE_DATASET].name == "demo-june"


def test_a_viewer_can_load_but_not_save():
    vic = signed_in("vic@bank.example")
    vic.button(key="data.demo").click().run()
    assert not vic.exception
    assert not [t for t in vic.text_input if t.key.startswith("data.save_name.")]
    assert "Saving a data set on the server needs the reviewer role; you are a viewer." in shown(
        vic
    )
    assert "No data set is saved on the server yet." in shown(vic)
    assert not [e for e in vic.expander if e.label == "Retire a data set"]


def test_a_taken_name_is_refused_in_one_line():
    lead = save_demo(signed_in("lead@bank.example"), "demo")
    asha = signed_in("asha@bank.example")
    asha.file_uploader[0].set_value(("Complaints June.csv", CSV, "text/csv"))
    asha.run()
    assert save_name_input(asha).value == "complaints-june"
    save_name_input(asha).set_value("DEMO")
    asha.button(key=SAVE).click().run()
    assert not asha.exception
    assert [e.value for e in asha.error] == [
        md_escape("a data set named 'demo' already exists; choose another name")
    ]
    assert [s.name for s in list_datasets(datasets_root())] == ["demo"]
    assert lead.session_state[ACTIVE_DATASET].name == "Built-in demo data"


def test_an_admin_retires_a_data_set_with_a_reason_shown_as_text():
    lead = save_demo(signed_in("lead@bank.example"), "demo-old")
    reason = "**bold** [link](http://127.0.0.1:9/x) :red[alarm]"
    lead.selectbox(key="data.retire_name").set_value("demo-old")
    lead.text_input(key="data.retire_reason").set_value(reason)
    lead.button(key=RETIRE).click().run()
    assert not lead.exception
    assert md_escape("Retired demo-old: it is hidden from the list") in shown(lead)
    assert f"**{md_escape('demo-old')}**" not in shown(lead)  # hidden from the list
    assert list_datasets(datasets_root()) == []
    (retired,) = list_datasets(datasets_root(), include_retired=True)
    assert retired.retired_reason == reason and (retired.path / "data.parquet").is_file()

    lead.toggle(key="data.show_retired").set_value(True).run()
    caption = next(c.value for c in lead.caption if "retired by" in c.value)
    assert md_escape(reason) in caption and "**bold**" not in caption
    with Store.open(default_db_path()) as store:
        (event,) = store.events("dataset.retired")
    assert event.actor == "lead@bank.example" and event.details["reason"] == reason


def test_a_reviewer_cannot_retire():
    save_demo(signed_in("lead@bank.example"), "demo")
    asha = signed_in("asha@bank.example")
    assert f"**{md_escape('demo')}**" in shown(asha)
    assert not [e for e in asha.expander if e.label == "Retire a data set"]


def test_a_derived_data_set_shows_its_lineage():
    from core.access import OPERATOR
    from core.data.dataset import Dataset
    from core.data.saved import DatasetSave, save_dataset

    texts = ["upi payment failed", "card stolen", "loan emi high", "kyc update please"]
    parent = Dataset(texts, ["UPI Dispute", "Card Fraud", "Loan Query", "KYC Update"])
    child = Dataset(texts[:3] + ["upi refund late"], ["UPI Dispute", "UPI Dispute",
                    "Loan Query", "UPI Dispute"], rows=(2, 3, 4, 6))  # fmt: skip
    lineage = {"parent_fingerprint": parent.fingerprint, "decisions": [11], "verdicts": [5],
               "relabelled_rows": [3], "excluded_rows": [5], "added_rows": [6],
               "stale": [], "by_reviewer": {"asha@bank.example": 2}}  # fmt: skip
    save_dataset(datasets_root(), DatasetSave("v1", parent), actor=OPERATOR)
    save_dataset(
        datasets_root(), DatasetSave("v2", child, parent="v1", lineage=lineage), actor=OPERATOR
    )
    vic = signed_in("vic@bank.example")
    (expander,) = [e for e in vic.expander if e.label == "Lineage"]
    assert {m.label: m.value for m in expander.metric} == {
        "Relabelled rows": "1", "Excluded rows": "1", "Added rows": "1"
    }  # fmt: skip
    assert expander.dataframe[0].value.to_dict("records") == [
        {"reviewer": "asha@bank.example", "changes": 2}
    ]
    assert md_escape("derived from v1") in shown(vic)
    vic.button(key="data.load.v2").click().run()
    assert vic.session_state[ACTIVE_DATASET].dataset.fingerprint == child.fingerprint
    assert vic.session_state[ACTIVE_DATASET].report.rows_kept == 4  # validated afresh


CSV = (
    b"id,complaint,desk\n"
    b"1,UPI payment failed but money debited,UPI Dispute\n"
    b"2,Card used for a purchase I never made,Card Fraud\n"
    b"3,EMI charged twice on my home loan,Loan Query\n"
    b"4,UPI refund not received after 5 days,UPI Dispute\n"
)
