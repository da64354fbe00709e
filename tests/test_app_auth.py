"""AppTest for sign-in and roles (ui.auth): without [auth] the one local user is admin; with it a
visitor sees only the sign-in page, an unlisted e-mail is refused, and each page hides what the
signed-in role may not do. The real OpenID flow runs in tests/browser/test_sign_in.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.models.classifier import Prediction
from core.review.store import Store, default_db_path
from core.review.triage import enqueue_uncertain
from core.roles import ROLES_ENV
from tests.helpers import AUTH
from ui.safe import md_escape

ROOT = Path(__file__).resolve().parent.parent
ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example"]
viewer = ["*@bank.example"]
"""


@pytest.fixture()
def roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A roles file at $GRIEVANCE_LENS_ROLES and a store of the test's own."""
    path = tmp_path / "roles.toml"
    path.write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(path))
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    return path


def signed(script: str, email: str | None, **claims: object) -> AppTest:
    """`script` (app.py or a page) with [auth] on, as `email` (None: not signed in), whose
    provider says it is verified unless `claims` say otherwise."""
    at = AppTest.from_file(str(ROOT / script), default_timeout=60)
    at.secrets["auth"] = AUTH
    user = {"is_logged_in": True, "email": email, "email_verified": True, **claims}
    at.user = {"is_logged_in": False} if email is None else user
    return at.run()


def texts(at: AppTest) -> str:
    parts = [*at.title, *at.markdown, *at.caption, *at.error, *at.info]
    return "\n".join(str(part.value) for part in parts)


def test_without_auth_the_local_user_is_admin_and_nothing_asks_to_sign_in():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert [b.label for b in at.button if b.label in ("Sign in", "Sign out")] == []
    assert "Signed in as" not in texts(at)
    assert at.sidebar.toggle  # the frame is there


def test_a_visitor_sees_the_sign_in_page_and_nothing_else(roles: Path):
    at = signed("app.py", None)
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"]
    assert [t.value for t in at.title] == ["Grievance Lens"]
    assert not at.sidebar.toggle and not at.sidebar.caption and not at.tabs
    assert "Data set" not in texts(at) and "Validation report" not in texts(at)


def test_a_signed_in_email_the_roles_file_does_not_list_is_refused(roles: Path):
    at = signed("app.py", "stranger@elsewhere.example")
    assert [b.label for b in at.button] == ["Sign out"]
    assert "is not on the list of people who may use Grievance Lens" in at.error[0].value
    assert not at.sidebar.toggle


def test_a_missing_roles_file_lets_nobody_in(roles: Path):
    roles.unlink()
    at = signed("app.py", "lead@bank.example")
    assert "there is no roles file at" in at.error[0].value
    assert md_escape("roles.toml.example") in at.error[0].value
    assert [b.label for b in at.button] == ["Sign out"]


def test_the_sidebar_shows_the_signed_in_user_and_role(roles: Path):
    at = signed("app.py", "Asha@Bank.example")
    assert not at.exception
    assert f"Signed in as {md_escape('asha@bank.example')} (reviewer)" in texts(at.sidebar)
    assert "Sign out" in [b.label for b in at.sidebar.button]


@pytest.fixture()
def public_address():
    """server.address set to every interface for the test, as `--server.address 0.0.0.0`."""
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield
    config.set_option("server.address", before)


def test_a_public_address_without_auth_is_refused_at_run_time(
    public_address: None, monkeypatch: pytest.MonkeyPatch
):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert "Grievance Lens will not serve" in at.error[0].value
    assert not at.sidebar.toggle and not at.button
    monkeypatch.setenv("GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC", "1")
    assert not at.run().error and at.sidebar.toggle


def test_a_viewer_cannot_train_or_manage_models(roles: Path):
    at = signed("pages/train.py", "vera@bank.example")
    assert not at.exception
    captions = texts(at)
    assert "Training a model needs the admin role; you are a viewer." in captions
    labels = [b.label for b in at.button]
    assert "Start training" not in labels and "Delete for good" not in labels


def _queue() -> list[int]:
    predictions = [
        Prediction("UPI Dispute", {"UPI Dispute": 0.4, "Other": 0.6}, True),
        Prediction("Other", {"Other": 0.3, "Card Fraud": 0.7}, True),
    ]
    with Store.open(default_db_path()) as store:
        return enqueue_uncertain(
            store, ["upi failed", "unknown charge"], predictions, threshold=0.5, batch="b.csv",
            actor=OPERATOR,
        )  # fmt: skip


def test_a_viewer_sees_the_queue_but_no_verdict_buttons(roles: Path):
    _queue()
    at = signed("pages/triage.py", "vera@bank.example")
    assert "Confirming or correcting predictions needs the reviewer role" in texts(at)
    assert not [b for b in at.button if b.label.startswith("Confirm")]
    assert not at.text_input  # no reviewer-name form either


def test_a_reviewer_decides_under_their_email_with_no_name_to_type(roles: Path):
    _queue()
    at = signed("pages/triage.py", "asha@bank.example")
    assert not at.text_input
    assert f"Reviewing as **{md_escape('asha@bank.example')}** (signed in)." in texts(at)
    next(b for b in at.button if b.label.startswith("Confirm")).click().run()
    assert not at.exception
    with Store.open(default_db_path()) as store:
        (decided,) = [i for i in store.triage_items() if i.status != "open"]
    assert decided.reviewer == "asha@bank.example"


def test_an_email_the_provider_does_not_call_verified_is_refused(roles: Path):
    at = signed("app.py", "lead@bank.example", email_verified="False")
    assert md_escape("lead@bank.example is not verified") in at.error[0].value
    assert [b.label for b in at.button] == ["Sign out"] and not at.sidebar.toggle


def test_an_issuer_named_in_the_setting_needs_no_email_verified(
    roles: Path, monkeypatch: pytest.MonkeyPatch
):
    entra = "https://login.microsoftonline.com/0b5d3a1c-0000-4000-8000-00000000cafe/v2.0"
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "lead@bank.example", "iss": entra}
    assert "did not say whether" in at.run().error[0].value
    monkeypatch.setenv("GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS", entra)
    assert not at.run().error and at.sidebar.toggle
    monkeypatch.setenv(
        "GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS", "https://login.microsoftonline.com/common/v2.0"
    )
    assert "speaks for every tenant" in at.run().error[0].value


def test_a_role_change_applies_even_when_size_and_time_stay_the_same(roles: Path):
    """The roles file is known by its content: an edit that keeps the size and modification
    time (a copy with preserved times, a coarse file system clock) still applies."""
    import os

    from core.access import Role
    from ui.auth import _roles

    roles.write_text('admin = ["lead@bank.example"]\n')
    stat = roles.stat()
    assert _roles(roles).role_for("lead@bank.example") is Role.ADMIN
    roles.write_text('admin = ["head@bank.example"]\n')  # same size
    os.utime(roles, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert roles.stat().st_size == stat.st_size
    assert _roles(roles).role_for("lead@bank.example") is None
