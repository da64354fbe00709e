"""Who is using the app, and what the page may offer them.

With an [auth] section in .streamlit/secrets.toml everyone signs in with Streamlit's OpenID
Connect (st.login) and gets the role the roles file gives their e-mail (core.roles); without it
the server must listen on loopback (core.exposure) and its one user is admin (LOCAL_USER).
`current_actor()` is the one place pages and app.py get the actor from: it resolves it afresh on
every call (a role changed in the roles file applies at the next click), and stops the page with
a sign-in page or a refusal when nobody may act. Hiding a button is a courtesy; the check that
counts is the `actor.require(...)` in the core function the button calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

import streamlit as st

from core.access import LOCAL_USER, Actor, Permission, needed_role
from core.errors import UserError
from core.exposure import Launch, allows_public, exposure_error, host_refusal
from core.roles import (
    RoleRules,
    RolesFile,
    actor_for_claims,
    parse_roles_file,
    read_roles_file,
    roles_path,
    unverified_email_issuers,
)
from ui.safe import md_escape

APP_TITLE = "Grievance Lens"


def auth_configured() -> bool:
    """Whether the secrets have an [auth] section: then everyone signs in.

    A secrets file Streamlit cannot parse counts as none, so a server with one is held to the
    loopback rule instead of being opened to everyone.
    """
    return st.secrets.load_if_toml_exists() and bool(st.secrets.get("auth"))


def current_actor() -> Actor:
    """Who this run acts as; the page stops here (after saying why) when nobody may act.

    Without [auth]: LOCAL_USER, when the server listens on loopback or the operator allowed a
    trusted network (GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC=1). With [auth]: a visitor who
    is not signed in gets the sign-in page and nothing else; a signed-in e-mail the roles file
    does not list, or a roles file that cannot be read, gets a refusal and a sign-out button;
    everyone else is Actor(e-mail, role, signed_in=True).
    """
    signed = auth_configured()
    address = st.get_option("server.address")
    refusal = exposure_error(
        address, auth_configured=signed, allow_public=allows_public(os.environ)
    )
    refusal = refusal or _foreign_host(address, signed)
    if refusal is not None:
        _stop_with(lambda: st.error(md_escape(f"Grievance Lens will not serve: {refusal}.")))
    if not signed:
        return LOCAL_USER
    if not st.user.is_logged_in:
        _stop_with(render_sign_in)
    try:
        issuers = unverified_email_issuers(os.environ)
        return actor_for_claims(st.user.to_dict(), _roles(roles_path()), unverified_issuers=issuers)
    except UserError as exc:  # the roles file, the issuer setting, or this identity
        reason = str(exc)
    _stop_with(lambda: render_refusal(reason))


def _foreign_host(address: str | None, signed: bool) -> str | None:
    """Why this request's Host is refused (DNS rebinding), or None. The launcher's middleware
    (ui.hosts) refuses such requests before Streamlit sees them; this is the same rule again for
    a server started by hand (`streamlit run app.py`), where no page is drawn for a foreign
    name. A run without a request (AppTest) has no Host to check."""
    headers = st.context.headers
    if not headers:
        return None
    launch = Launch(address or None, dict(st.secrets["auth"]) if signed else None)
    return host_refusal(headers.get("Host"), launch, os.environ)


def _stop_with(render: Callable[[], None]) -> NoReturn:
    """Show `render`'s page alone and end this run: no navigation, no sidebar data."""
    st.title(APP_TITLE)
    render()
    st.stop()


def _roles(path: Path) -> RoleRules:
    """The roles file, parsed again only when its content changed: a read and a SHA-256 per
    call (the file is at most 1 MB), not a parse. Modification time and size are not enough:
    an edit can keep both (a copy with preserved times, a coarse file system clock)."""
    return _parsed_roles(read_roles_file(path))


@lru_cache(maxsize=4)
def _parsed_roles(file: RolesFile) -> RoleRules:
    return parse_roles_file(file)  # keyed by path and digest (RolesFile compares those)


def render_sign_in() -> None:
    st.write("Sign in with your organisation's account to route and review complaints.")
    st.button("Sign in", key="auth.sign_in", type="primary", on_click=st.login)


def render_refusal(reason: str) -> None:
    st.error(md_escape(f"You cannot use Grievance Lens: {reason}."))
    st.button("Sign out", key="auth.sign_out_refused", on_click=st.logout)


def render_account(actor: Actor) -> None:
    """The signed-in user, their role and a sign-out button (the sidebar shows it)."""
    if not actor.signed_in:
        return
    st.caption(f"Signed in as {md_escape(actor.user)} ({actor.role.label})")
    st.button("Sign out", key="auth.sign_out", on_click=st.logout)


def allowed(actor: Actor, permission: Permission, what: str) -> bool:
    """Whether `actor` may do `what`; if not, a caption says which role it needs."""
    if actor.can(permission):
        return True
    needed = needed_role(permission).label
    st.caption(f"{what} needs the {needed} role; you are a {actor.role.label}.")
    return False
