"""The intake API's tokens: created by an admin (Tokens page, `python -m core token create`),
shown once, stored only as the SHA-256 of their secret, revoked by a row of their own; every
change is one transaction with its trail event.

A token has a `name` (unique forever: the trail names it), `scopes` (`submit`: post complaints
and resolve them; `read`: read complaints and updates) and a `source`, the bank's system it
speaks for (default: its name). Complaints are idempotent on (source, caller's id) and a token
reads only its source's complaints, so rotating a key is: create a second token of the same
source, switch the caller over, revoke the first. Secrets are 256 random bits, so one fast hash
is enough (a slow password hash protects guessable secrets; these are not guessable).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from core.access import Actor, Permission
from core.errors import UserError
from core.review.chain import insert_chained
from core.review.store import Store, append_event, utc_now

__all__ = [
    "READ", "SCOPES", "SUBMIT", "TOKEN_PREFIX", "ApiToken", "NewToken", "authenticate",
    "create_token", "list_tokens", "revoke_token", "token_actor",
]  # fmt: skip

SUBMIT, READ = "submit", "read"
SCOPES = (SUBMIT, READ)
TOKEN_PREFIX = "glk_"  # recognisable in a leaked config file or a secret scanner's rules
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", re.ASCII)
_SECRET = re.compile(r"glk_[A-Za-z0-9_-]{20,100}", re.ASCII)
_COLUMNS = (
    "t.id, t.name, t.source, t.scopes, t.created_by, t.created_at, r.created_at, r.revoked_by"
)
_JOIN = "api_tokens AS t LEFT JOIN api_token_revocations AS r ON r.token_id = t.id"


@dataclass(frozen=True)
class ApiToken:
    """One token as the store knows it (never its secret)."""

    id: int
    name: str
    source: str
    scopes: tuple[str, ...]
    created_by: str
    created_at: str
    revoked_at: str | None = None
    revoked_by: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def actor(self) -> str:
        """How the trail names what this token did: "token:NAME"."""
        return token_actor(self.name)

    def to_json(self) -> dict:
        return {
            "name": self.name, "source": self.source, "scopes": list(self.scopes),
            "created_by": self.created_by, "created_at": self.created_at,
            "revoked_at": self.revoked_at, "revoked_by": self.revoked_by,
        }  # fmt: skip


@dataclass(frozen=True)
class NewToken:
    """A token just created, with the secret the caller sends: shown this once, never stored."""

    token: ApiToken
    secret: str


def token_actor(name: str) -> str:
    return f"token:{name}"


def create_token(
    store: Store,
    name: str,
    scopes: Iterable[str],
    *,
    actor: Actor,
    source: str | None = None,
) -> NewToken:
    """Create token `name` with `scopes` for `source` (default: `name`); `actor` needs
    MANAGE_TOKENS (admin). The secret is returned once; the store keeps its SHA-256."""
    actor.require(Permission.MANAGE_TOKENS)
    name = _checked_name(name, "token name")
    source = name if source is None else _checked_name(source, "source")
    chosen = _checked_scopes(scopes)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = utc_now()
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM api_tokens WHERE name = ?", (name,)).fetchone():
            raise UserError(
                f"a token named {name} exists already (names are never reused, so the trail "
                "stays unambiguous); choose another name"
            )
        values = {
            "name": name, "source": source, "scopes": ",".join(chosen),
            "secret_sha256": _digest(secret), "created_by": actor.user, "created_at": now,
        }  # fmt: skip
        token_id = insert_chained(conn, "api_tokens", values)
        details = {"name": name, "source": source, "scopes": list(chosen)}
        append_event(conn, "token.created", token_id, actor.user, details, now)
    token = ApiToken(token_id, name, source, chosen, actor.user, now)
    return NewToken(token, secret)


def list_tokens(store: Store, *, actor: Actor) -> list[ApiToken]:
    """Every token, active and revoked, oldest first; `actor` needs MANAGE_TOKENS."""
    actor.require(Permission.MANAGE_TOKENS)
    return [_token(r) for r in store.query(f"SELECT {_COLUMNS} FROM {_JOIN} ORDER BY t.id")]


def revoke_token(store: Store, name: str, *, actor: Actor) -> ApiToken:
    """Revoke token `name` at once (its next request gets 401); `actor` needs MANAGE_TOKENS."""
    actor.require(Permission.MANAGE_TOKENS)
    name = _checked_name(name, "token name")
    now = utc_now()
    with store.transaction() as conn:
        found = conn.execute(f"SELECT {_COLUMNS} FROM {_JOIN} WHERE t.name = ?", (name,))
        row = found.fetchone()
        if row is None:
            raise UserError(f"no token named {name}; `python -m core token list` shows them")
        token = _token(row)
        if not token.active:
            raise UserError(f"token {name} was revoked already, on {token.revoked_at[:16]} UTC")
        revocation = {"token_id": token.id, "revoked_by": actor.user, "created_at": now}
        insert_chained(conn, "api_token_revocations", revocation)
        append_event(conn, "token.revoked", token.id, actor.user, {"name": name}, now)
    return ApiToken(**{**token.__dict__, "revoked_at": now, "revoked_by": actor.user})


def authenticate(store: Store, secret: str | None) -> ApiToken | None:
    """The active token whose secret is `secret`, or None (unknown, malformed or revoked)."""
    if not secret or not _SECRET.fullmatch(secret):
        return None
    rows = store.query(
        f"SELECT {_COLUMNS} FROM {_JOIN} WHERE t.secret_sha256 = ?", (_digest(secret),)
    )
    token = _token(rows[0]) if rows else None
    return token if token is not None and token.active else None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _checked_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise UserError(
            f"{what} {str(value)[:80]!r}: use 1 to 64 ASCII letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def _checked_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    given = [s.strip() for s in scopes if isinstance(s, str) and s.strip()]
    unknown = sorted(set(given) - set(SCOPES))
    if unknown or not given:
        raise UserError(
            f"scopes must be one or more of {', '.join(SCOPES)} (comma-separated); got "
            f"{', '.join(unknown) or 'none'}"
        )
    return tuple(s for s in SCOPES if s in given)


def _token(row: tuple) -> ApiToken:
    scopes = tuple(s for s in str(row[3]).split(",") if s)
    return ApiToken(row[0], row[1], row[2], scopes, row[4], row[5], row[6], row[7])
