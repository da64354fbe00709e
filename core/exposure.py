"""Whether the server may listen where it is told to: without sign-in ([auth] in secrets.toml)
only on loopback, unless the operator explicitly allows a trusted network.

Pure functions over the launch's arguments, environment and TOML files, so the launcher refuses
before the server starts and app.py refuses again at run time with the same rule and message.
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.roles import load_roles, roles_path

ALLOW_PUBLIC_ENV = "GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC"
ADDRESS_FLAG = "--server.address"
ADDRESS_ENV = "STREAMLIT_SERVER_ADDRESS"
SECRETS_FLAG = "--secrets.files"
SECRETS_ENV = "STREAMLIT_SECRETS_FILES"


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


def launch_address(
    argv: Sequence[str], environ: Mapping[str, str], configs: Sequence[Mapping[str, Any]]
) -> str | None:
    """The address Streamlit will listen on: the last --server.address flag, else
    STREAMLIT_SERVER_ADDRESS, else the last of `configs` (config.toml documents, lowest
    precedence first) that sets server.address; None means every interface."""
    flags = flag_values(argv, ADDRESS_FLAG)
    if flags:
        return flags[-1]
    if ADDRESS_ENV in environ:
        return environ[ADDRESS_ENV]
    address = None
    for config in configs:
        server = config.get("server")
        if isinstance(server, Mapping) and "address" in server:
            address = str(server["address"])
    return address


def secrets_paths(
    argv: Sequence[str], environ: Mapping[str, str], defaults: Sequence[Path]
) -> list[Path]:
    """The secrets files Streamlit will read: --secrets.files flags, else STREAMLIT_SECRETS_FILES
    (separated by spaces), else `defaults` (~/.streamlit and the project's .streamlit)."""
    flags = flag_values(argv, SECRETS_FLAG)
    if flags:
        return [Path(value) for value in flags]
    if environ.get(SECRETS_ENV, "").strip():
        return [Path(value) for value in environ[SECRETS_ENV].split()]
    return list(defaults)


def auth_configured(secrets: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any secrets document has a non-empty [auth] section (Streamlit's sign-in)."""
    return any(isinstance(doc.get("auth"), Mapping) and bool(doc["auth"]) for doc in secrets)


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


def launch_error(
    argv: Sequence[str], environ: Mapping[str, str], *, folders: Sequence[Path]
) -> str | None:
    """Why `streamlit run` with `argv` must not start (one line), or None.

    `folders` are the .streamlit folders Streamlit reads config.toml and secrets.toml from,
    lowest precedence first (~/.streamlit, then the project's). With sign-in on, the roles file
    must load too: otherwise nobody could get in, and the operator learns it now. UserError (one
    line) when a config, secrets or roles file cannot be used.
    """
    configs = read_toml_files([folder / "config.toml" for folder in folders])
    defaults = [folder / "secrets.toml" for folder in folders]
    secrets = read_toml_files(secrets_paths(argv, environ, defaults))
    signed = auth_configured(secrets)
    address = launch_address(argv, environ, configs)
    refusal = exposure_error(address, auth_configured=signed, allow_public=allows_public(environ))
    if refusal is None and signed:
        load_roles(roles_path())
    return refusal
