"""Who may sign in, and with which role: the roles file (TOML lists of e-mail addresses and
`*@domain` patterns per role) and the rule that turns a signed-in identity into an Actor.

The roles file is configuration (trusted, like .streamlit/); the identity comes from the OpenID
provider through Streamlit's sign-in. Nobody gets in unless the file lists them, so a missing or
malformed file is an error that says what to fix, never "everyone is a viewer". An e-mail counts
only when the provider says it is verified, and addresses compare exactly but for the case of
ASCII letters, with plain-ASCII domains; a local part that is not plain ASCII matches only an
entry that spells it exactly, never a `*@domain` pattern, so no look-alike character (fullwidth,
circled, a ligature) can borrow a listed address or a listed domain.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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
# Microsoft Entra ID sends no `email_verified`; its issuers can be trusted without it, one by one.
UNVERIFIED_ISSUERS_ENV = "GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS"
# Entra's shared endpoints: an issuer or metadata URL with one of these as a path segment speaks
# for every tenant (anyone can make one), not for the bank's.
SHARED_TENANTS = frozenset({"common", "organizations", "consumers", "{tenantid}"})
# Case folding for ASCII letters only: str.lower() and casefold() also map look-alikes (the
# Kelvin sign, fullwidth and circled letters, ligatures) onto ASCII, which is what must not happen.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


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
        """The highest role whose list matches `email` (in normal form, see `normal_address`),
        or None; an address whose domain is not plain ASCII matches nothing, and one whose local
        part is not plain ASCII matches only an entry that spells it exactly (no pattern)."""
        address = normal_address(email)
        if address is None:
            return None
        for role in sorted(Role, reverse=True):
            if any(_matches(pattern, address) for pattern in self.patterns(role)):
                return role
        return None


def normal_address(text: str) -> str | None:
    """`text` in the form addresses are compared in: without surrounding spaces, ASCII letters
    in lower case and every other character exactly as written; None when its domain (after the
    last "@") is not plain ASCII.

    No Unicode folding: NFKC and case folding turn look-alikes into the ASCII letters they
    imitate (fullwidth and circled letters, the ligature U+FB01 into "fi", the Kelvin sign
    into "k"), so a look-alike would sign in as the address it imitates. International domains
    arrive in their xn-- form; a local part that is not plain ASCII matches only an entry that
    spells it exactly (`_matches`).
    """
    raw = text.strip()
    if not raw.rpartition("@")[2].isascii():
        return None
    return raw.translate(_ASCII_LOWER)


def plain_local_part(address: str) -> bool:
    """Whether the local part of `address` (before its last "@") is printable ASCII: the only
    local parts a `*@domain` pattern admits."""
    local = address.rpartition("@")[0]
    return local.isascii() and local.isprintable()


def _matches(pattern: str, address: str) -> bool:
    """`*@bank.com` matches every address at exactly bank.com (not at sub.bank.com) whose local
    part is plain ASCII; anything else matches only itself."""
    if pattern.startswith("*@"):
        local, _, domain = address.rpartition("@")
        plain = bool(local) and "@" not in local and plain_local_part(address)
        return plain and domain == pattern[2:]
    return address == pattern


def roles_path() -> Path:
    """$GRIEVANCE_LENS_ROLES when set, else <repo>/data/roles.toml."""
    value = os.environ.get(ROLES_ENV, "").strip()
    return Path(value) if value else DEFAULT_ROLES


@dataclass(frozen=True)
class RolesFile:
    """The roles file's bytes as read once, known by their SHA-256 `digest`: two reads are
    equal when the content is, whatever the file's modification time and size say."""

    path: Path
    digest: str
    data: bytes = field(repr=False, compare=False)


def read_roles_file(path: Path) -> RolesFile:
    """The bytes of the roles file at `path`; RolesError (one line) when it is missing or over
    MAX_ROLES_BYTES (checked before reading)."""
    if not path.is_file():
        raise RolesError(
            f"sign-in is on but there is no roles file at {path}: copy {EXAMPLE} there and list "
            f"who may sign in (or point {ROLES_ENV} at your roles file)"
        )
    if path.stat().st_size > MAX_ROLES_BYTES:
        raise RolesError(f"the roles file {path} is over {MAX_ROLES_BYTES:,} bytes; list people")
    with path.open("rb") as handle:
        data = handle.read(MAX_ROLES_BYTES + 1)  # it may have grown since the stat
    if len(data) > MAX_ROLES_BYTES:
        raise RolesError(f"the roles file {path} is over {MAX_ROLES_BYTES:,} bytes; list people")
    return RolesFile(path, hashlib.sha256(data).hexdigest(), data)


def parse_roles_file(file: RolesFile) -> RoleRules:
    """`file` parsed (see parse_roles); RolesError when it is not UTF-8 or malformed."""
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RolesError(f"the roles file {file.path} is not UTF-8 text ({exc.reason})") from exc
    return parse_roles(text, source=f"the roles file {file.path}")


def load_roles(path: Path) -> RoleRules:
    """The roles file at `path`, parsed; RolesError (one line) when it is missing or malformed."""
    return parse_roles_file(read_roles_file(path))


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
    return tuple(_entry(item, key, source) for item in value)


def _entry(item: str, key: str, source: str) -> str:
    """One address or `*@domain` pattern in normal form (see `normal_address`)."""
    entry = normal_address(item)
    if entry is None:
        raise RolesError(
            f"{source}: {item.strip()!r} under {key} has a domain that is not plain ASCII; "
            "write international domains in their xn-- form"
        )
    if not (_ADDRESS.fullmatch(entry) or _DOMAIN_PATTERN.fullmatch(entry)):
        raise RolesError(
            f"{source}: {entry!r} under {key} is neither an e-mail address nor a *@domain pattern"
        )
    return entry


def unverified_email_issuers(environ: Mapping[str, str]) -> frozenset[str]:
    """The issuers (exact `iss` values) whose e-mail is trusted without `email_verified`:
    GRIEVANCE_LENS_UNVERIFIED_EMAIL_ISSUERS, comma-separated; empty when unset.

    UserError (one line) for an entry that is not an https URL or names one of Entra's shared
    endpoints (`common`, `organizations`): only one tenant's own issuer may be trusted so.
    """
    entries = (part.strip() for part in environ.get(UNVERIFIED_ISSUERS_ENV, "").split(","))
    issuers = frozenset(entry for entry in entries if entry)
    for issuer in sorted(issuers):
        _check_issuer(issuer)
    return issuers


def _check_issuer(issuer: str) -> None:
    url = urlsplit(issuer)
    if url.scheme != "https" or not url.netloc:
        raise UserError(
            f"{UNVERIFIED_ISSUERS_ENV} lists {issuer!r}; list https issuer URLs exactly as the "
            "iss claim has them, separated by commas"
        )
    if shared_tenant(issuer):
        raise UserError(
            f"{UNVERIFIED_ISSUERS_ENV} lists {issuer!r}, which speaks for every tenant; list "
            "your tenant's own issuer, https://login.microsoftonline.com/<tenant-id>/v2.0"
        )


def shared_tenant(url: str) -> bool:
    """Whether `url` (an issuer or a metadata URL) is one of Entra's shared, any-tenant ones."""
    segments = urlsplit(url).path.lower().split("/")
    return any(segment in SHARED_TENANTS for segment in segments)


def actor_for_claims(
    claims: Mapping[str, object],
    rules: RoleRules,
    *,
    unverified_issuers: frozenset[str] = frozenset(),
) -> Actor:
    """The Actor behind a signed-in identity (the provider's claims, as in st.user).

    The e-mail claim decides: it is the user name in every decision and trail event, in normal
    form (`normal_address`). It counts only when `email_verified` is true (True, or "true" in
    any case); a claim that is missing passes only for an issuer (`iss`) in
    `unverified_issuers` (see `unverified_email_issuers`). An address that is unverified, has a
    domain that is not plain ASCII, or is not in the roles file is refused; one whose local part
    is not plain ASCII is in it only when listed exactly (see `RoleRules.role_for`).
    """
    email = claims.get("email")
    address = normal_address(email) if isinstance(email, str) else ""
    if address is None:
        raise SignInRefused(
            f"the domain of {str(email).strip()} is not plain ASCII; sign in with your "
            "organisation's own address"
        )
    if not _ADDRESS.fullmatch(address):
        raise SignInRefused(
            "your sign-in did not include an e-mail address; ask the operator to have the "
            "provider send the email claim"
        )
    _check_verified(claims, address, unverified_issuers)
    role = rules.role_for(address)
    if role is None and not plain_local_part(address):
        raise SignInRefused(
            f"{address} is not on the list of people who may use Grievance Lens: its part before "
            'the "@" is not plain ASCII, so only the roles file naming this exact address admits '
            "it (a *@domain pattern does not); ask an admin to add it, or sign in with your "
            "plain-ASCII address"
        )
    if role is None:
        raise SignInRefused(
            f"{address} is not on the list of people who may use Grievance Lens; ask an admin "
            "to add you to the roles file"
        )
    return Actor(address, role, signed_in=True)


def _check_verified(
    claims: Mapping[str, object], address: str, unverified_issuers: frozenset[str]
) -> None:
    """SignInRefused unless the provider vouches for `address` (see actor_for_claims)."""
    if "email_verified" not in claims:
        issuer = claims.get("iss")
        if isinstance(issuer, str) and issuer in unverified_issuers:
            return
        raise SignInRefused(
            f"your sign-in provider did not say whether {address} is verified; ask the operator "
            f"to have it send the email_verified claim (see {UNVERIFIED_ISSUERS_ENV} in the README)"
        )
    verified = claims["email_verified"]
    if verified is True or (isinstance(verified, str) and verified.lower() == "true"):
        return
    raise SignInRefused(f"{address} is not verified with your sign-in provider; verify it first")
