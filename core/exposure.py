"""Whether the server may listen where it is told to, and whom it answers: without sign-in
([auth] in secrets.toml) only on loopback, unless the operator explicitly allows a trusted
network; with sign-in only with a cookie secret nobody can guess; and only to requests addressed
to an allowed host name (DNS rebinding).

Pure functions over the launch's arguments, environment and TOML files, so the launcher refuses
before the server starts and app.py refuses again at run time with the same rule and message.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.errors import UserError
from core.roles import (
    UNVERIFIED_ISSUERS_ENV,
    load_roles,
    roles_path,
    shared_tenant,
    unverified_email_issuers,
)

ALLOW_PUBLIC_ENV = "GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC"
ALLOWED_HOSTS_ENV = "GRIEVANCE_LENS_ALLOWED_HOSTS"
ADDRESS_FLAG = "--server.address"
SECRETS_FLAG = "--secrets.files"
# `streamlit run` takes each option from its own variable (STREAMLIT_SERVER_ADDRESS), else from
# click's auto_envvar_prefix variable for the run command (STREAMLIT_RUN_SERVER_ADDRESS), in this
# order; an empty value counts as unset (click.core.Option.resolve_envvar_value).
ADDRESS_ENVS = ("STREAMLIT_SERVER_ADDRESS", "STREAMLIT_RUN_SERVER_ADDRESS")
SECRETS_ENVS = ("STREAMLIT_SECRETS_FILES", "STREAMLIT_RUN_SECRETS_FILES")
ADDRESS_ENV, SECRETS_ENV = ADDRESS_ENVS[0], SECRETS_ENVS[0]
# .streamlit/secrets.toml.example's value: a copy left as it is must not start a server.
COOKIE_SECRET_PLACEHOLDER = "replace-with-a-long-random-string"
MIN_COOKIE_SECRET = 32  # characters; token_hex(32) gives 64
GENERATE_SECRET = 'python -c "import secrets; print(secrets.token_hex(32))"'
# A host name as browsers send it: ASCII labels (IDNs arrive as xn--), no port, no wildcard.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*", re.ASCII)


def is_loopback(address: str | None) -> bool:
    """127.0.0.0/8, ::1 (also bracketed or IPv4-mapped) and `localhost`; an empty or missing
    address means every interface, which is not loopback. Other names are not resolved."""
    host = (address or "").strip().lower().removeprefix("[").removesuffix("]")
    if host in ("localhost", "localhost."):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def allows_public(environ: Mapping[str, str]) -> bool:
    """Whether the operator set GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC=1."""
    return environ.get(ALLOW_PUBLIC_ENV, "").strip() == "1"


def exposure_error(address: str | None, *, auth_configured: bool, allow_public: bool) -> str | None:
    """Why a server on `address` must not start (one line saying what to do), or None."""
    if auth_configured or allow_public or is_loopback(address):
        return None
    where = address.strip() if address and address.strip() else "every interface"
    return (
        f"the server would listen on {where} without sign-in, so anyone who can reach it would "
        "be admin: listen on 127.0.0.1 (server.address in .streamlit/config.toml), configure "
        "sign-in ([auth] in .streamlit/secrets.toml, see .streamlit/secrets.toml.example), or "
        f"set {ALLOW_PUBLIC_ENV}=1 on a trusted network"
    )


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of `flag` in `argv`, as `--flag VALUE` or `--flag=VALUE`, in order."""
    values = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1 :])
    return values


def _from_environment(environ: Mapping[str, str], names: Sequence[str]) -> str | None:
    """The first of the variables `names` that is set and not empty, as click reads them."""
    return next((environ[name] for name in names if environ.get(name)), None)


def config_value(
    configs: Sequence[Mapping[str, Any]], section: str, key: str, environ: Mapping[str, str]
) -> Any:
    """`section.key` from the last of `configs` (config.toml documents, lowest precedence first)
    that sets it, or None; `"env:NAME"` is NAME's value, as Streamlit reads it (the text itself
    when NAME is unset)."""
    value = None
    for config in configs:
        table = config.get(section)
        if isinstance(table, Mapping) and key in table:
            value = table[key]
    if isinstance(value, str) and value.startswith("env:"):
        return environ.get(value.removeprefix("env:"), value)
    return value


def launch_address(
    argv: Sequence[str], environ: Mapping[str, str], configs: Sequence[Mapping[str, Any]]
) -> str | None:
    """The address Streamlit will listen on: the last --server.address flag, else
    STREAMLIT_SERVER_ADDRESS, else STREAMLIT_RUN_SERVER_ADDRESS, else server.address in
    `configs` (see config_value); None means every interface."""
    flags = flag_values(argv, ADDRESS_FLAG)
    if flags:
        return flags[-1]
    address = _from_environment(environ, ADDRESS_ENVS)
    if address is not None:
        return address
    value = config_value(configs, "server", "address", environ)
    return None if value is None else str(value)


def secrets_paths(
    argv: Sequence[str],
    environ: Mapping[str, str],
    defaults: Sequence[Path],
    configs: Sequence[Mapping[str, Any]] = (),
) -> list[Path]:
    """The secrets files Streamlit will read: --secrets.files flags, else
    STREAMLIT_SECRETS_FILES, else STREAMLIT_RUN_SECRETS_FILES (separated by spaces), else
    secrets.files in `configs`, else `defaults` (~/.streamlit and the project's .streamlit)."""
    flags = flag_values(argv, SECRETS_FLAG)
    if flags:
        return [Path(value) for value in flags]
    value = _from_environment(environ, SECRETS_ENVS)
    if value is not None and value.split():
        return [Path(item) for item in value.split()]
    files = config_value(configs, "secrets", "files", environ)
    if isinstance(files, str):
        files = [files]
    if isinstance(files, list):
        return [Path(str(item)) for item in files]
    return list(defaults)


def auth_section(secrets: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The [auth] section Streamlit signs in with, or None: a later secrets document replaces an
    earlier one's whole section (Streamlit merges them key by key at the top), and an empty or
    malformed one means no sign-in."""
    auth = None
    for doc in secrets:
        if "auth" in doc:
            auth = doc["auth"]
    return auth if isinstance(auth, Mapping) and auth else None


def auth_configured(secrets: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the secrets documents sign people in (see auth_section)."""
    return auth_section(secrets) is not None


def cookie_secret_error(auth: Mapping[str, Any]) -> str | None:
    """Why the [auth] section's cookie_secret must not sign sessions (one line), or None.

    Whoever knows it can sign a session cookie for any e-mail, so the example's placeholder and
    anything shorter than MIN_COOKIE_SECRET characters are refused.
    """
    secret = auth.get("cookie_secret")
    how = f"generate one with {GENERATE_SECRET} and put it in [auth] cookie_secret"
    if not isinstance(secret, str):
        return f"the [auth] section in the secrets file has no cookie_secret: {how}"
    if secret == COOKIE_SECRET_PLACEHOLDER:
        return (
            "[auth] cookie_secret is the example's placeholder, with which anyone could sign a "
            f"session for any e-mail: {how}"
        )
    if len(secret) < MIN_COOKIE_SECRET:
        return (
            f"[auth] cookie_secret is too short ({len(secret)} of at least {MIN_COOKIE_SECRET} "
            f"characters) to keep signed-in sessions from being forged: {how}"
        )
    return None


def shared_metadata_error(auth: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """With issuers trusted without `email_verified` (UserError when that setting is
    malformed), why a server_metadata_url in [auth] (or a provider's table in it) must not be
    used: Entra's `common` or `organizations` endpoint lets any tenant sign in."""
    if not unverified_email_issuers(environ):
        return None
    tables = [auth, *(value for value in auth.values() if isinstance(value, Mapping))]
    for table in tables:
        url = table.get("server_metadata_url")
        if isinstance(url, str) and shared_tenant(url):
            return (
                f"[auth] server_metadata_url {url} lets any Entra tenant sign in, and "
                f"{UNVERIFIED_ISSUERS_ENV} is set: use your tenant-specific "
                "https://login.microsoftonline.com/<tenant-id>/v2.0/.well-known/"
                "openid-configuration"
            )
    return None


def read_toml_files(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The TOML documents among `paths` that are files (others are skipped), in order;
    UserError naming the file when one is not valid TOML."""
    documents = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            documents.append(tomllib.loads(path.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path} is not valid TOML ({exc}); fix or remove it") from exc
    return documents


@dataclass(frozen=True)
class Launch:
    """What `streamlit run` will use, read the way Streamlit reads it, before it starts."""

    address: str | None  # None: every interface
    auth: Mapping[str, Any] | None  # the [auth] section; None: no sign-in


def streamlit_folders() -> list[Path]:
    """The .streamlit folders Streamlit reads, lowest precedence first: the user's, the working
    directory's, and the project's (beside app.py); the launcher and the intake API read the
    same ones to know whether sign-in is configured."""
    from core.paths import ROOT

    folders = [Path.home() / ".streamlit", Path.cwd() / ".streamlit", ROOT / ".streamlit"]
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def read_launch(
    argv: Sequence[str], environ: Mapping[str, str], *, folders: Sequence[Path]
) -> Launch:
    """The address and [auth] section of `streamlit run` with `argv` and `environ`.

    `folders` are the .streamlit folders Streamlit reads config.toml and secrets.toml from,
    lowest precedence first (~/.streamlit, then the project's). UserError (one line) when a
    config or secrets file is not valid TOML.
    """
    configs = read_toml_files([folder / "config.toml" for folder in folders])
    defaults = [folder / "secrets.toml" for folder in folders]
    secrets = read_toml_files(secrets_paths(argv, environ, defaults, configs))
    return Launch(launch_address(argv, environ, configs), auth_section(secrets))


def launch_refusal(launch: Launch, environ: Mapping[str, str]) -> str | None:
    """Why `launch` must not start (one line), or None.

    Without sign-in: the loopback rule. With it: the cookie secret, the issuers trusted without
    `email_verified`, and the roles file, which must load (otherwise nobody could get in, and
    the operator learns it now); UserError (one line) when a setting or the roles file is bad.
    """
    signed = launch.auth is not None
    refusal = exposure_error(
        launch.address, auth_configured=signed, allow_public=allows_public(environ)
    )
    if refusal is not None or launch.auth is None:
        return refusal
    refusal = cookie_secret_error(launch.auth) or shared_metadata_error(launch.auth, environ)
    if refusal is None:
        load_roles(roles_path())
    return refusal


def launch_error(
    argv: Sequence[str], environ: Mapping[str, str], *, folders: Sequence[Path]
) -> str | None:
    """Why `streamlit run` with `argv` must not start (one line), or None: read_launch, then
    launch_refusal. UserError (one line) when a config, secrets or roles file cannot be used."""
    return launch_refusal(read_launch(argv, environ, folders=folders), environ)


@dataclass(frozen=True)
class HostRule:
    """The host names requests may be addressed to: loopback names always, plus `names`
    (canonical, see canonical_host). A page on another name that the attacker rebinds to this
    server's address (DNS rebinding) sends that name as Host, and is refused."""

    names: frozenset[str] = frozenset()

    def allows(self, header: str | None) -> bool:
        """Whether a request whose Host header is `header` may be served."""
        name = host_name(header)
        return name is not None and (is_loopback(name) or name in self.names)


def canonical_host(name: str) -> str | None:
    """`name` (a host name or IP address, IPv6 bare or bracketed, no port) as compared: lower
    case, without a trailing dot, an IP address in its short form; None when it is none of
    these or an unspecified address (0.0.0.0, ::), which no browser should be sent to."""
    text = name.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.removesuffix(".")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text if _HOST_NAME.fullmatch(text) else None
    return None if ip.is_unspecified else str(ip)


def host_name(header: str | None) -> str | None:
    """The canonical name in a Host header (`name`, `name:port`, `[ipv6]:port`), or None when
    it is missing or malformed."""
    if not header:
        return None
    if header.startswith("["):
        inside, closed, port = header[1:].partition("]")
        if not closed or ":" not in inside:  # brackets hold an IPv6 address only
            return None
        if port and not port.startswith(":"):
            return None
        port = port[1:]
    else:
        inside, _, port = header.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        return None
    return canonical_host(inside)


def host_rule(launch: Launch, environ: Mapping[str, str]) -> HostRule:
    """The host names `launch` answers to besides loopback: those in
    GRIEVANCE_LENS_ALLOWED_HOSTS, the address it listens on when that is one address, and with
    sign-in the host of [auth] redirect_uri. UserError (one line) for a malformed setting."""
    names = set(allowed_hosts_setting(environ))
    listen = canonical_host(launch.address or "")
    if listen is not None:
        names.add(listen)
    redirect = redirect_host(launch.auth) if launch.auth is not None else None
    if redirect is not None:
        names.add(redirect)
    return HostRule(frozenset(names))


def host_refusal(host: str | None, launch: Launch, environ: Mapping[str, str]) -> str | None:
    """Why a request whose Host header is `host` must not be served by `launch` (one line), or
    None when `host_rule` allows it."""
    try:
        rule = host_rule(launch, environ)
    except UserError as exc:  # a malformed GRIEVANCE_LENS_ALLOWED_HOSTS
        return str(exc)
    if rule.allows(host):
        return None
    shown = "no host name" if not host else f"the host name {host[:100]!r}"
    return f"it does not answer to {shown}; open it at the address you were given"


def allowed_hosts_setting(environ: Mapping[str, str]) -> list[str]:
    """GRIEVANCE_LENS_ALLOWED_HOSTS: comma-separated host names, canonical; UserError for an
    entry with a scheme, a port or a wildcard."""
    names = []
    for entry in environ.get(ALLOWED_HOSTS_ENV, "").split(","):
        if not entry.strip():
            continue
        name = canonical_host(entry)
        if name is None:
            raise UserError(
                f"{ALLOWED_HOSTS_ENV} lists {entry.strip()!r}, which is not a host name; list "
                "names such as lens.bank.example, separated by commas (no scheme, port or "
                "wildcard)"
            )
        names.append(name)
    return names


def redirect_host(auth: Mapping[str, Any]) -> str | None:
    """The host of [auth] redirect_uri (Streamlit fills in `{port}`), canonical, or None."""
    uri = auth.get("redirect_uri")
    if not isinstance(uri, str):
        return None
    try:
        host = urlsplit(uri.replace("{port}", "0")).hostname
    except ValueError:  # a malformed IPv6 address: Streamlit refuses the sign-in itself
        return None
    return canonical_host(host) if host else None
