"""API tokens page (admins): create a token for the intake API, see its secret once, list the
tokens and revoke one. Everything is decided and recorded in core.intake.tokens (which checks the
role again); this page only reads widgets and draws.

The secret of a token just created lives only in this session's state, under "tokens.new",
until the admin clicks "Done" or creates another: the store keeps its SHA-256 only, so it can
never be shown again. Page-private session keys: "tokens.new", "tokens.last_save" and the
widgets' "tokens.*" keys."""

from __future__ import annotations

import sqlite3

import pandas as pd
import streamlit as st

from core.access import Permission
from core.errors import UserError
from core.intake.tokens import READ, SCOPES, SUBMIT, ApiToken, NewToken, create_token, list_tokens
from core.intake.tokens import revoke_token as revoke_in_store
from core.review.store import Store
from ui.auth import allowed, current_actor
from ui.errors import guarded
from ui.safe import md_escape
from ui.widgets import SaveOutcome, remember_save, render_last_save, require_store

NEW_TOKEN = "tokens.new"  # NewToken: the token just created, with its secret (shown once)
LAST_SAVE_KEY = "tokens.last_save"
SCOPE_LABELS = {
    SUBMIT: "submit: post complaints and resolve them",
    READ: "read: read complaints and their updates",
}


def create(store: Store) -> None:
    """Button callback: create the token the form describes; its secret is kept for one showing.

    The actor is resolved at the click (a role removed since the form was drawn applies)."""
    actor = current_actor()
    st.session_state.pop(NEW_TOKEN, None)  # the previous secret goes with the next create
    name = st.session_state.get("tokens.name", "").strip()
    source = st.session_state.get("tokens.source", "").strip() or None
    scopes = st.session_state.get("tokens.scopes", [])
    try:
        new = create_token(store, name, scopes, actor=actor, source=source)
    except (UserError, sqlite3.Error) as exc:
        remember_save(LAST_SAVE_KEY, SaveOutcome(False, f"Not created: {exc}"))
        return
    st.session_state[NEW_TOKEN] = new
    for key in ("tokens.name", "tokens.source"):
        st.session_state[key] = ""


def revoke(store: Store) -> None:
    """Button callback: revoke the picked token once the box is ticked."""
    actor = current_actor()
    name = st.session_state.get("tokens.revoke_pick")
    if not name:
        return
    if not st.session_state.get("tokens.revoke_sure"):
        message = f"Not revoked: tick the box to revoke {name}."
        remember_save(LAST_SAVE_KEY, SaveOutcome(False, message))
        return
    try:
        token = revoke_in_store(store, name, actor=actor)
    except (UserError, sqlite3.Error) as exc:
        remember_save(LAST_SAVE_KEY, SaveOutcome(False, f"Not revoked: {exc}"))
        return
    st.session_state["tokens.revoke_sure"] = False
    message = f"Revoked {token.name}: its next request is refused (401)."
    remember_save(LAST_SAVE_KEY, SaveOutcome(True, message))


def render_new_secret() -> None:
    """The secret of the token just created, once, with the warning that it is not kept."""
    new: NewToken | None = st.session_state.get(NEW_TOKEN)
    if new is None:
        return
    st.success(
        f"Created {md_escape(new.token.name)} for source {md_escape(new.token.source)} "
        f"({md_escape(', '.join(new.token.scopes))}).",
        icon=":material/key:",
    )
    st.warning(
        "Copy the secret now: it is not stored (only its SHA-256 is) and cannot be shown again. "
        "Callers send it as `Authorization: Bearer <secret>`. Lost, it is revoked and replaced."
    )
    st.code(new.secret, language=None)
    if st.button("Done: I have copied it", key="tokens.done"):
        st.session_state.pop(NEW_TOKEN, None)
        st.rerun()


def render_create_form(store: Store) -> None:
    with st.form("tokens.create"):
        st.text_input(
            "Name (1 to 64 letters, digits, '.', '_' or '-'; never reused)", key="tokens.name"
        )
        st.multiselect(
            "Scopes", list(SCOPES), default=[SUBMIT], key="tokens.scopes",
            format_func=lambda scope: SCOPE_LABELS.get(scope, scope),
        )  # fmt: skip
        st.text_input(
            "Source: the bank's system it speaks for (empty: the token's name)",
            key="tokens.source",
            help="A token reads only its source's complaints. To rotate a key, create a second "
            "token of the same source, switch the caller over, then revoke the first.",
        )
        st.form_submit_button(
            "Create token", type="primary", on_click=guarded(create), args=(store,)
        )


def tokens_frame(tokens: list[ApiToken]) -> pd.DataFrame:
    """One row per token, oldest first; never a secret (the store has none)."""
    return pd.DataFrame(
        {
            "name": [t.name for t in tokens],
            "source": [t.source for t in tokens],
            "scopes": [", ".join(t.scopes) for t in tokens],
            "created by": [t.created_by for t in tokens],
            "created at (UTC)": [t.created_at[:16].replace("T", " ") for t in tokens],
            "revoked": [_revoked(t) for t in tokens],
        }
    )


def _revoked(token: ApiToken) -> str:
    if token.revoked_at is None:
        return ""
    return f"{token.revoked_at[:16].replace('T', ' ')} by {token.revoked_by}"


def render_tokens(store: Store, tokens: list[ApiToken]) -> None:
    st.subheader(f"Tokens ({len(tokens):,})")
    if not tokens:
        st.write("No token yet: the intake API refuses every request until one is created.")
        return
    st.dataframe(tokens_frame(tokens), hide_index=True, width="stretch")
    active = [t.name for t in tokens if t.active]
    if not active:
        st.caption("Every token is revoked.")
        return
    with st.form("tokens.revoke"):
        st.selectbox("Token to revoke", active, key="tokens.revoke_pick")
        st.checkbox(
            "Yes, revoke it: the system using it is refused from its next request",
            key="tokens.revoke_sure",
        )
        st.form_submit_button("Revoke the chosen token", on_click=guarded(revoke), args=(store,))


st.title("API tokens")
st.write(
    "The bank's systems post complaints to the intake API with a token; the live model routes "
    "each one as it arrives. Create a token per system, give its secret to that system's "
    "owner, and revoke it when it is no longer used or may have leaked."
)
actor = current_actor()
if not allowed(actor, Permission.MANAGE_TOKENS, "Managing the intake API's tokens"):
    st.stop()
store = require_store()
render_last_save(LAST_SAVE_KEY)
render_new_secret()
st.subheader("Create a token")
render_create_form(store)
render_tokens(store, list_tokens(store, actor=actor))
