"""Small pieces of UI that several pages show the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from core.data.privacy import mask_personal_data
from core.errors import UserError
from ui.caches import MASKED_TEXTS
from ui.safe import md_escape
from ui.state import (
    MASK_DISPLAY,
    get_active_dataset,
    get_active_model,
    get_live_status,
    get_reviewer,
    get_store,
    is_live_model,
    saved_models,
    set_reviewer,
    use_live_model,
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
    render_not_live_notice(model)
    render_quick_model_note(model)
    return model


def render_not_live_notice(model: LoadedModel | None, *, key: str = "live_model.use") -> None:
    """Say plainly when a model is live and `model` (this session's) is not it, with a button
    back to the live model; nothing when they agree or no model is live. Every page that uses
    the active model shows it (require_model does)."""
    status = get_live_status()
    if model is None or status.live is None or is_live_model(model, status):
        return
    st.warning(
        f"You are using {md_escape(model.path.name)}, not the live model "
        f"{md_escape(status.live.name)}.",
        icon=":material/alt_route:",
    )
    if status.folder is not None and st.button("Use the live model", key=key):
        use_live_model()
        st.rerun()


def render_live_model_status() -> None:
    """The sidebar's line on the team's live model: which one, since when and by whom, or why
    it cannot be used."""
    from core.review.live import format_since

    status = get_live_status()
    live = status.live
    if live is None:
        st.caption(md_escape(f"Live model: {status.problem}") if status.problem else
                   "No live model yet (an admin promotes one).")  # fmt: skip
        return
    st.caption(
        f"Live model: {md_escape(live.name)}, since {format_since(live.since)} "
        f"(by {md_escape(live.promoted_by)})"
    )
    if status.problem:
        st.caption(f":material/warning: {md_escape(status.problem)}")


ROLLED_BACK = "live_model.rolled_back"  # SaveOutcome of the last promotion made below


def render_live_model_history(actor: Actor, *, limit: int = 20) -> None:
    """The team's promotions, newest first (who, when, why), and for an admin a form to promote
    another saved model without a comparison: the rollback, recorded like any promotion."""
    import pandas as pd

    from core.access import Permission
    from core.review.live import format_since, promotion_history, promotions_with_report
    from ui.auth import allowed

    store = require_store()
    history = promotion_history(store, limit=limit)
    render_last_save(ROLLED_BACK)
    if not history:
        st.caption("No model has been promoted yet.")
    else:
        compared = promotions_with_report(store, history)
        rows = [{"since": format_since(m.since), "model": m.name, "by": m.promoted_by,
                 "reason": m.reason, "before": m.previous or "",
                 "with a comparison": m.event_id in compared} for m in history]  # fmt: skip
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if allowed(actor, Permission.MANAGE_MODELS, "Promoting a model"):
        _render_rollback_form(store, actor, history[0].previous if history else None)


def _render_rollback_form(store: Store, actor: Actor, previous: str | None) -> None:
    from core.paths import models_dir
    from core.review.live import promote_model

    names = [s.name for s in saved_models()]
    if not names:
        return
    with st.form("live_model.rollback"):
        index = names.index(previous) if previous in names else 0
        name = st.selectbox("Model to make live", names, index=index, key="live_model.pick")
        reason = st.text_input("Why (kept in the trail)", key="live_model.reason")
        submitted = st.form_submit_button("Promote to live")
    if not submitted:
        return
    try:
        promote_model(store, models_dir(), name, reason=reason, actor=actor)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    remember_save(ROLLED_BACK, SaveOutcome(True, f"{name} is now the team's live model."))
    st.rerun()


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
