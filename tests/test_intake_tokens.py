"""The intake API's tokens (core.intake.tokens): created by an admin with a secret shown once and
stored only as its SHA-256, names and scopes checked, revoked at once, every change in the
trail."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from core.access import OPERATOR, AccessDenied, Actor, Role
from core.errors import UserError
from core.intake.tokens import (
    READ,
    SUBMIT,
    TOKEN_PREFIX,
    authenticate,
    create_token,
    list_tokens,
    revoke_token,
    token_actor,
)
from core.review.store import Store

REVIEWER = Actor("rev@example.com", Role.REVIEWER, signed_in=True)


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def test_a_new_token_s_secret_is_shown_once_and_stored_only_as_its_hash(store: Store):
    new = create_token(store, "core-banking", [READ, SUBMIT], actor=OPERATOR)
    assert new.secret.startswith(TOKEN_PREFIX) and len(new.secret) >= 40
    token = new.token
    assert (token.name, token.source, token.scopes) == (
        "core-banking",
        "core-banking",
        (SUBMIT, READ),
    )
    assert token.created_by == OPERATOR.user and token.active and token.revoked_at is None
    assert token.actor == token_actor("core-banking") == "token:core-banking"
    assert "secret" not in str(token.to_json()) and new.secret not in str(token.to_json())

    rows = store.query("SELECT * FROM api_tokens")
    assert len(rows) == 1
    assert new.secret not in " ".join(str(v) for v in rows[0])
    digest = hashlib.sha256(new.secret.encode("ascii")).hexdigest()
    assert store.query("SELECT secret_sha256 FROM api_tokens")[0][0] == digest

    other = create_token(store, "core-banking-2", [READ], actor=OPERATOR, source="core-banking")
    assert other.secret != new.secret and other.token.source == "core-banking"
    assert other.token.scopes == (READ,)


def test_authenticate_finds_the_active_token_of_a_secret_only(store: Store):
    new = create_token(store, "web", ["submit"], actor=OPERATOR)
    found = authenticate(store, new.secret)
    assert found is not None and found.name == "web" and found.id == new.token.id
    assert found.scopes == (SUBMIT,)
    for secret in (
        None,
        "",
        new.secret + "x",
        new.secret[:-1] + ("A" if new.secret[-1] != "A" else "B"),
        new.secret[len(TOKEN_PREFIX) :],  # without the prefix
        " " + new.secret,
        "glk_short",
        "glk_" + "a" * 101,
        "glk_" + "é" * 30,
    ):
        assert authenticate(store, secret) is None, secret
    revoke_token(store, "web", actor=OPERATOR)
    assert authenticate(store, new.secret) is None


def test_revoking_is_at_once_and_once(store: Store):
    create_token(store, "a", [READ], actor=OPERATOR)
    create_token(store, "b", [READ, SUBMIT], actor=OPERATOR)
    revoked = revoke_token(store, "a", actor=OPERATOR)
    assert not revoked.active and revoked.revoked_by == OPERATOR.user and revoked.revoked_at
    with pytest.raises(UserError, match="token a was revoked already"):
        revoke_token(store, "a", actor=OPERATOR)
    with pytest.raises(UserError, match="no token named zzz"):
        revoke_token(store, "zzz", actor=OPERATOR)
    listed = list_tokens(store, actor=OPERATOR)
    assert [(t.name, t.active) for t in listed] == [("a", False), ("b", True)]
    assert listed[0].revoked_at == revoked.revoked_at
    assert store.query("SELECT count(*) FROM api_token_revocations")[0][0] == 1


def test_names_are_never_reused_even_after_revoking(store: Store):
    create_token(store, "web", [READ], actor=OPERATOR)
    revoke_token(store, "web", actor=OPERATOR)
    with pytest.raises(UserError, match="a token named web exists already"):
        create_token(store, "web", [READ], actor=OPERATOR)
    assert store.query("SELECT count(*) FROM api_tokens")[0][0] == 1


@pytest.mark.parametrize(
    "name", ["", "-web", ".web", "web token", "web/1", "a" * 65, "wéb", "web\n", None, 7]
)
def test_bad_names_and_sources_are_refused(store: Store, name: object):
    with pytest.raises(UserError, match="token name"):
        create_token(store, name, [READ], actor=OPERATOR)  # type: ignore[arg-type]
    if name is not None:  # source=None is the default: the token's name
        with pytest.raises(UserError, match="source"):
            create_token(store, "ok", [READ], actor=OPERATOR, source=name)  # type: ignore[arg-type]
    assert store.query("SELECT count(*) FROM api_tokens")[0][0] == 0


def test_good_names_are_kept_as_given(store: Store):
    for name in ("a", "A1", "core_banking.v2-east", "9" + "x" * 63):
        assert create_token(store, name, [READ], actor=OPERATOR).token.name == name


@pytest.mark.parametrize(
    ("scopes", "unknown"),
    [([], "none"), (["", " "], "none"), (["admin"], "admin"), (["read", "write"], "write")],
)
def test_unknown_or_no_scopes_are_refused(store: Store, scopes: list[str], unknown: str):
    with pytest.raises(
        UserError, match=f"scopes must be one or more of submit, read.*got {unknown}"
    ):
        create_token(store, "web", scopes, actor=OPERATOR)


def test_scopes_are_trimmed_deduplicated_and_in_canonical_order(store: Store):
    new = create_token(store, "web", [" read", "submit ", "read"], actor=OPERATOR)
    assert new.token.scopes == (SUBMIT, READ)
    assert authenticate(store, new.secret).scopes == (SUBMIT, READ)  # type: ignore[union-attr]


def test_only_an_admin_manages_tokens(store: Store):
    with pytest.raises(AccessDenied, match="manage tokens needs the"):
        create_token(store, "web", [READ], actor=REVIEWER)
    create_token(store, "web", [READ], actor=OPERATOR)
    with pytest.raises(AccessDenied):
        revoke_token(store, "web", actor=REVIEWER)
    with pytest.raises(AccessDenied):
        list_tokens(store, actor=REVIEWER)
    assert store.query("SELECT count(*) FROM api_tokens")[0][0] == 1


def test_every_change_is_a_trail_event_naming_the_admin(store: Store):
    create_token(store, "web", [SUBMIT], actor=OPERATOR, source="bank")
    revoke_token(store, "web", actor=OPERATOR)
    rows = store.query(
        "SELECT action, actor, details FROM trail WHERE action LIKE 'token.%' ORDER BY id"
    )
    assert [(r[0], r[1]) for r in rows] == [
        ("token.created", OPERATOR.user),
        ("token.revoked", OPERATOR.user),
    ]
    assert json.loads(rows[0][2]) == {"name": "web", "source": "bank", "scopes": ["submit"]}
    assert json.loads(rows[1][2]) == {"name": "web"}
