"""Small pieces of UI that several pages show the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from ui.safe import md_escape
from ui.state import (
    get_active_model,
    get_reviewer,
    get_store,
    reviewer_from_login,
    set_reviewer,
)

if TYPE_CHECKING:
    from core.models.registry import LoadedModel  # a type only: pages without a model need no torch
    from core.review.store import Store


def require_model() -> LoadedModel:
    """The active model with a one-line caption; otherwise a pointer to Train, and the page
    stops here."""
    model = get_active_model()
    if model is None:
        st.info("No model is active. Train one or load a saved one on the Train page.")
        st.page_link("pages/train.py", label="Go to Train", icon=":material/model_training:")
        st.stop()
    desks = ", ".join(map(str, model.card["labels"]))
    st.caption(f"Model: {md_escape(model.path.name)} · desks: {md_escape(desks)}")
    return model


def require_store() -> Store:
    """The review store, with a warning when it is read-only; a store that cannot be opened
    (corrupt, tampered, unreadable) is a one-line error and the page stops here."""
    from core.review.store import StoreError

    try:
        store = get_store()
    except StoreError as exc:
        st.error(f"The review store cannot be used: {md_escape(exc)}")
        st.stop()
    if store.read_only:
        st.warning(
            "The review store is read-only (its file or folder is not writable): decisions are "
            "shown but cannot be saved."
        )
    return store


def render_reviewer(page_key: str, *, prompt: str) -> str | None:
    """The reviewer's name: from the login, or asked once per session (None until given)."""
    reviewer = get_reviewer()
    if reviewer is not None:
        how = "signed in" if reviewer_from_login() else "for this session"
        st.caption(f"Reviewing as **{md_escape(reviewer)}** ({how}).")
        return reviewer
    with st.form(f"{page_key}.reviewer_form"):
        name = st.text_input(prompt, key=f"{page_key}.reviewer_name")
        if st.form_submit_button("Start reviewing") and name.strip():
            set_reviewer(name)
            st.rerun()
    return None


@dataclass(frozen=True)
class SaveOutcome:
    """What happened to the last review the user submitted, shown once after the rerun."""

    saved: bool
    message: str


def remember_save(key: str, outcome: SaveOutcome) -> None:
    st.session_state[key] = outcome


def render_last_save(key: str) -> None:
    """Show (once) the outcome stored under `key` by `remember_save`."""
    outcome = st.session_state.pop(key, None)
    if outcome is None:
        return
    if outcome.saved:
        st.success(md_escape(outcome.message), icon=":material/check:")
    else:
        st.error(md_escape(outcome.message))
