"""AppTest for the New desks page (issue 37): a reviewer finds candidate desks in the live
inbox, takes a complaint out of one, names it, and the verdicts are in the store; a viewer may
look but not search."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.review.store import Store, default_db_path
from tests.helpers import AUTH, ROOT
from tests.test_discovery import flagged_inbox

PAGE = str(ROOT / "pages" / "new_desks.py")


@pytest.fixture()
def inbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    with Store.open(default_db_path()) as store:
        flagged_inbox(store)


def page(tiny_model_dir: Path) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["active_model"] = str(tiny_model_dir)
    return at.run()


def test_a_reviewer_names_a_candidate_found_in_the_inbox(inbox, tiny_model_dir):
    import datetime as dt

    at = page(tiny_model_dir)
    assert not at.exception
    at.date_input(key="new_desks.since").set_value(dt.date(2026, 12, 1))
    at.number_input(key="new_desks.min_size").set_value(5)
    at.button(key="new_desks.start").click().run()
    at.session_state["new_desks.run"].job.wait(120)
    at.run()
    assert not at.exception and not at.error
    assert any("fit no desk" in m.value for m in at.markdown)
    run = at.session_state["new_desks.run"].job.snapshot().result
    first = run.discovery.candidates[0]
    key = f"new_desks.{first.id}"
    at.text_input(key="new_desks.reviewer_name").set_value("Asha")
    at.button(key="FormSubmitter:new_desks.reviewer_form-Start reviewing").click().run()
    at.multiselect(key=f"{key}.removed").set_value([first.members[0]])
    at.radio(key=f"{key}.kind").set_value("name")
    at.text_input(key=f"{key}.name").set_value("Locker Rent")
    at.button(key=f"FormSubmitter:{key}.form-Record the decision").click().run()
    assert not at.exception and not at.error
    assert any(f"{first.size - 1} complaints now have the desk Locker Rent" in s.value
               for s in at.success)  # fmt: skip
    with Store.open(default_db_path()) as store:
        named = store.triage_items(status="corrected", limit=100)
    assert {i.final_label for i in named} == {"Locker Rent"} and len(named) == first.size - 1


def test_a_viewer_may_not_search(inbox, tiny_model_dir, tmp_path, monkeypatch):
    roles = tmp_path / "roles.toml"
    roles.write_text('viewer = ["*@bank.example"]\n')
    monkeypatch.setenv("GRIEVANCE_LENS_ROLES", str(roles))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "vera@bank.example", "email_verified": True}
    at.session_state["active_model"] = str(tiny_model_dir)
    at.run()
    assert not at.exception
    assert any("needs the reviewer role" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "new_desks.start"]
