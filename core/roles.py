"""Who may sign in, and with which role: the roles file (TOML lists of e-mail addresses and
`*@domain` patterns per role) and the rule that turns a signed-in identity into an Actor.

The roles file is configuration (trusted, like .streamlit/); the identity comes from the OpenID
provider through Streamlit's sign-in. Nobody gets in unless the file lists them, so a missing or
malformed file is an error that says what to fix, never "everyone is a viewer".
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.access import Actor, Role
from core.errors import UserError
from core.paths import ROOT

ROLES_ENV = "GRIEVANCE_LENS_ROLES"
DEFAULT_ROLES = ROOT / "data" / "roles.toml"
EXAMPLE = "data/roles.toml.example"
MAX_ROLES_BYTES = 1_000_000  # a roles file lists people, not a directory dump
# One address: something before and after a single "@", no spaces. Providers have checked the
# address itself; this only catches typos in the file (a missing "@", a stray space).
_ADDRESS = re.compile(r"[^@\s*]+@[^@\s*]+")
_DOMAIN_PATTERN = re.compile(r"\*@[^@\s*]+")


class RolesError(UserError):
    """The roles file is missing or malformed; the message says what to fix (one line)."""


class SignInRefused(UserError, PermissionError):
    """A signed-in identity that may not use the app; the message says why and what to do."""


@dataclass(frozen=True)
class RoleRules:
    """The roles file, parsed: per role, exact addresses and `*@domain` patterns, lower case."""

    admin: tuple[str, ...] = ()
    reviewer: tuple[str, ...] = ()
    viewer: tuple[str, ...] = ()

    def patterns(self, role: Role) -> tuple[str, ...]:
        return getattr(self, role.label)

    def role_for(self, email: str) -> Role | None:
        """The highest role whose list matches `email` (case-insensitive), or None."""
        address = email.strip().lower()
        for role in sorted(Role, reverse=True):
            if any(_matches(pattern, address) for pattern in self.patterns(role)):
                return role
        return None


def _matches(pattern: str, address: str) -> bool:
    """`*@bank.com` matches every address at exactly bank.com (not at sub.bank.com); anything
    else matches only itself."""
    if pattern.startswith("*@"):
        local, _, domain = address.rpartition("@")
        return bool(local) and "@" not in local and domain == pattern[2:]
    return address == pattern


def roles_path() -> Path:
    """$GRIEVANCE_LENS_ROLES when set, else <repo>/data/roles.toml."""
    value = os.environ.get(ROLES_ENV, "").strip()
    return Path(value) if value else DEFAULT_ROLES


def load_roles(path: Path) -> RoleRules:
    """The roles file at `path`, parsed; RolesError (one line) when it is missing or malformed."""
    if not path.is_file():
        raise RolesError(
            f"sign-in is on but there is no roles file at {path}: copy {EXAMPLE} there and list "
            f"who may sign in (or point {ROLES_ENV} at your roles file)"
        )
    if path.stat().st_size > MAX_ROLES_BYTES:
        raise RolesError(f"the roles file {path} is over {MAX_ROLES_BYTES:,} bytes; list people")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RolesError(f"the roles file {path} is not UTF-8 text ({exc.reason})") from exc
    return parse_roles(text, source=f"the roles file {path}")


def parse_roles(text: str, *, source: str = "the roles file") -> RoleRules:
    """Parse `admin = [...]`, `reviewer = [...]`, `viewer = [...]` (each optional, at least one
    person in all); RolesError names the key or entry to fix."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RolesError(f"{source} is not valid TOML ({exc}); see {EXAMPLE}") from exc
    names = {role.label for role in Role}
    unknown = sorted(set(document) - names)
    if unknown:
        raise RolesError(
            f"{source} has the key {unknown[0]!r}; the only keys are admin, reviewer and viewer"
        )
    rules = RoleRules(**{key: _entries(document[key], key, source) for key in document})
    if not any(rules.patterns(role) for role in Role):
        raise RolesError(
            f"{source} lists nobody; add e-mail addresses under admin, reviewer or viewer"
        )
    return rules


def _entries(value: object, key: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RolesError(f'{source}: {key} must be a list of strings, e.g. {key} = ["a@bank.com"]')
    entries = tuple(item.strip().lower() for item in value)
    for entry in entries:
        if not (_ADDRESS.fullmatch(entry) or _DOMAIN_PATTERN.fullmatch(entry)):
            raise RolesError(
                f"{source}: {entry!r} under {key} is neither an e-mail address nor a *@domain "
                "pattern"
            )
    return entries


def actor_for_claims(claims: Mapping[str, object], rules: RoleRules) -> Actor:
    """The Actor behind a signed-in identity (the provider's claims, as in st.user).

    The e-mail claim decides: it is the user name in every decision and trail event, matched
    case-insensitively, in lower case. An address the provider marks unverified
    (`email_verified` false) is refused, as is one the roles file does not list.
    """
    email = claims.get("email")
    if not isinstance(email, str) or not _ADDRESS.fullmatch(email.strip()):
        raise SignInRefused(
            "your sign-in did not include an e-mail address; ask the operator to have the "
            "provider send the email claim"
        )
    address = email.strip().lower()
    if claims.get("email_verified") in (False, "false"):
        raise SignInRefused(
            f"{address} is not verified with your sign-in provider; verify it first"
        )
    role = rules.role_for(address)
    if role is None:
        raise SignInRefused(
            f"{address} is not on the list of people who may use Grievance Lens; ask an admin "
            "to add you to the roles file"
        )
    return Actor(address, role, signed_in=True)
