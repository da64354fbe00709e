"""Small pieces of UI that several pages show the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from core.data.privacy import mask_personal_data
from ui.caches import MASKED_TEXTS
from ui.safe import md_escape
from ui.state import (
    MASK_DISPLAY,
    get_active_dataset,
    get_active_model,
    get_reviewer,
    get_store,
    set_reviewer,
)

if TYPE_CHECKING:
    import pandas as pd

    from core.access import Actor
    from core.models.registry import LoadedModel  # a type only: pages without a model need no torch
    from core.review.store import Store


def require_model() -> LoadedModel:
    """The active model with a one-line caption (and what a quick model cannot show);
    otherwise a saved model of this data set or a quick model one click away, a pointer to
    Train, and the page stops here."""
    from ui.training import render_first_model, render_quick_model_note

    model = get_active_model()
    if model is None:
        render_first_model(get_active_dataset(), "first_model")  # stops the page
    desks = ", ".join(map(str, model.card["labels"]))
    st.caption(f"Model: {md_escape(model.path.name)} · desks: {md_escape(desks)}")
    render_quick_model_note(model)
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


def render_reviewer(page_key: str, *, prompt: str, actor: Actor) -> str | None:
    """The reviewer saved with each decision: the signed-in e-mail, or a name asked once per
    session when sign-in is off (None until given)."""
    reviewer = get_reviewer(actor)
    if reviewer is not None:
        how = "signed in" if actor.signed_in else "for this session"
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


def render_mask_toggle() -> None:
    """The sidebar switch that masks personal data in every complaint text the pages show."""
    st.toggle(
        "Mask personal data in displayed text", value=True, key=MASK_DISPLAY,
        help="Card, account, phone, Aadhaar and PAN numbers, e-mail addresses and UPI ids are "
        "shown as [CARD_NO], [PHONE_NO], ... Models always read masked text.",
    )  # fmt: skip


def masking_shown() -> bool:
    """Whether the pages show complaint text masked (the sidebar toggle; on until turned off)."""
    return bool(st.session_state.get(MASK_DISPLAY, True))


# Keyed on the text itself: a table of complaints is masked once, and each rerun after that
# (every widget click) costs a look-up per row instead of a regex scan; bounded by bytes.
def _masked(text: str) -> str:
    return MASKED_TEXTS.get_or_compute(text, lambda: mask_personal_data(text))


def shown_text(text: str) -> str:
    """`text` as the pages show it: masked while the sidebar toggle is on."""
    return _masked(text) if masking_shown() and isinstance(text, str) else text


def shown_texts(texts: Iterable[str]) -> list[str]:
    """`shown_text` of each text, in order."""
    return [shown_text(text) for text in texts]


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose string columns are as `shown_text` shows them.

    Every string column, not only the complaint's: other columns of an upload (a customer's
    e-mail, a notes column) are personal data too, and labels come through unchanged.
    """
    if not masking_shown():
        return frame
    shown = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object or frame[column].dtype == "string":
            shown[column] = frame[column].map(shown_text)
    return shown
