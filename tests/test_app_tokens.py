"""AppTest for the API tokens page: an admin creates a token and sees its secret once (it
authenticates, the store never holds it), lists the tokens, revokes one after a confirmation;
a bad name is one line; a viewer or reviewer is refused the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import LOCAL_USER, OPERATOR
from core.intake.tokens import authenticate, list_tokens
from core.review.store import Store, default_db_path
from core.roles import ROLES_ENV
from tests.helpers import AUTH, ROOT

PAGE = str(ROOT / "pages" / "tokens.py")


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    return at


def create(at: AppTest, name: str, scopes: list[str], source: str = "") -> AppTest:
    at.text_input(key="tokens.name").input(name)
    at.multiselect(key="tokens.scopes").set_value(scopes)
    at.text_input(key="tokens.source").input(source)
    at.button(key="FormSubmitter:tokens.create-Create token").click().run()
    assert not at.exception
    return at


def tokens_table(at: AppTest):
    return next(d.value for d in at.dataframe if "scopes" in d.value.columns)


def test_a_token_is_created_shown_once_listed_and_revoked():
    at = create(page(), "crm", ["submit", "read"], source="crm-core")
    [secret] = [c.value for c in at.code]
    assert secret.startswith("glk_")
    assert any("cannot be shown again" in w.value for w in at.warning)
    with Store.open(default_db_path()) as store:
        token = authenticate(store, secret)
        assert token is not None and (token.name, token.source) == ("crm", "crm-core")
        assert token.scopes == ("submit", "read")
        # only the digest is kept: the secret is nowhere in the store's rows
        dumped = "\n".join(str(row) for row in store.query("SELECT * FROM api_tokens"))
        assert secret not in dumped
    table = tokens_table(at)
    assert table["name"].tolist() == ["crm"]
    assert table["source"].tolist() == ["crm-core"] and table["scopes"].tolist() == ["submit, read"]
    assert table["revoked"].tolist() == [""]
    assert at.text_input(key="tokens.name").value == ""  # the form is ready for the next one

    at.run()  # a rerun still shows it until Done
    assert [c.value for c in at.code] == [secret]
    at.button(key="tokens.done").click().run()
    assert not at.exception and not at.code  # gone for good

    at.selectbox(key="tokens.revoke_pick").set_value("crm")
    at.button(key="FormSubmitter:tokens.revoke-Revoke the chosen token").click().run()
    assert any("tick the box" in e.value for e in at.error)  # not without the confirmation
    at.checkbox(key="tokens.revoke_sure").check()
    at.button(key="FormSubmitter:tokens.revoke-Revoke the chosen token").click().run()
    assert not at.exception
    assert any("Revoked crm" in s.value for s in at.success)
    assert tokens_table(at)["revoked"].tolist()[0].endswith(f"by {LOCAL_USER.user}")
    with Store.open(default_db_path()) as store:
        assert authenticate(store, secret) is None
        newest_first = [e.action for e in store.trail(actor=OPERATOR)]
        assert newest_first == ["token.revoked", "token.created"]
    assert not at.selectbox  # nothing left to revoke
    assert any("Every token is revoked" in c.value for c in at.caption)


def test_a_second_token_replaces_the_shown_secret():
    at = create(page(), "web", ["submit"])
    first = at.code[0].value
    create(at, "branch", ["read"], source="web")
    assert [c.value for c in at.code] != [first] and len(at.code) == 1
    assert tokens_table(at)["name"].tolist() == ["web", "branch"]
    assert tokens_table(at)["source"].tolist() == ["web", "web"]


def test_a_bad_name_is_one_line_and_creates_nothing():
    at = create(page(), "**bad** name", ["submit"])
    [error] = [e.value for e in at.error]
    assert error.startswith("Not created") and "\\*\\*bad\\*\\*" in error  # escaped, literal
    assert not at.code
    create(at, "ok", [])
    assert any("scopes must be one or more" in e.value for e in at.error)
    with Store.open(default_db_path()) as store:
        assert list_tokens(store, actor=OPERATOR) == []


@pytest.mark.parametrize("email", ["vera@bank.example", "asha@bank.example"])
def test_a_viewer_or_reviewer_is_refused(tmp_path: Path, monkeypatch, email: str):
    roles = tmp_path / "roles.toml"
    roles.write_text(
        'admin = ["lead@bank.example"]\nreviewer = ["asha@bank.example"]\n'
        'viewer = ["*@bank.example"]\n'
    )
    monkeypatch.setenv(ROLES_ENV, str(roles))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    at.run()
    assert not at.exception
    assert any("needs the admin role" in c.value for c in at.caption)
    assert not at.text_input and not at.dataframe and not at.button


def test_the_page_is_in_the_apps_navigation():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page("pages/tokens.py").run()
    assert not at.exception
    assert [t.value for t in at.title] == ["API tokens"]
