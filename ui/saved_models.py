"""The Train page's "Saved models" section: the model in use, the saved models' table (a model
the loader would refuse is marked and not offered), and using, renaming and deleting one
(admins; never the live model)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from core.access import AccessDenied, Actor, Permission
from core.errors import UserError
from core.models.card import model_folder
from core.models.registry import LoadedModel, ModelSummary
from core.models.transformer.config import backbone_label
from core.paths import models_dir
from core.review.library import delete_recorded, rename_recorded
from ui.auth import allowed
from ui.safe import md_escape
from ui.state import get_live_status, get_store, model_refusal, saved_models, set_active_model
from ui.widgets import render_live_model_history, render_not_live_notice


def render_saved_models_section(actor: Actor, model: LoadedModel | None) -> None:
    """The active model's name, a notice when it is not the live one, and the saved models
    (open until a model is active)."""
    if model is not None:
        st.caption(f"Active model: {md_escape(model.path.name)}")
    render_not_live_notice(model, key="train.use_live")
    with st.expander("Saved models", expanded=model is None):
        render_saved_models(actor)
        st.markdown("**The live model**")
        render_live_model_history(actor)


def render_saved_models(actor: Actor) -> None:
    """The table, the pick, Use, and (admins) Rename and Delete."""
    summaries = saved_models()
    if not summaries:
        st.caption("No saved models yet.")  # a name, never the server's models path
        return
    refusals = {s.name: model_refusal(s.path) for s in summaries}
    st.dataframe(models_frame(summaries, refusals), hide_index=True, width="stretch")
    names = [s.name for s in summaries]
    name = st.selectbox("Model", names, key="train.pick")
    refused = refusals.get(name) is not None
    if refused:  # still listed, so that an admin can rename or delete it
        st.caption(md_escape(f"Cannot be loaded: {refusals[name]}"))
    load, rename, delete = st.columns(3)
    if load.button("Use this model", key="train.load", type="primary", disabled=refused):
        set_active_model(model_folder(models_dir(), name))
        st.rerun()
    if not allowed(actor, Permission.MANAGE_MODELS, "Renaming and deleting models"):
        return
    live = get_live_status().live
    if live is not None and live.name == name:  # the team routes with it: never pull it away
        st.caption(f"{md_escape(name)} is the live model: promote another before renaming or "
                   "deleting it.")  # fmt: skip
        return
    render_rename_delete(actor, name, rename, delete)


def models_frame(summaries: list[ModelSummary], refusals: dict[str, str | None]) -> pd.DataFrame:
    """One row per saved model: when, what, both models' validation accuracy, and its status:
    empty, or "cannot be loaded: <why>" for a model the loader would refuse (`refusals`, by
    name)."""
    return pd.DataFrame(
        [
            {
                "name": s.name, "created": s.created_at, "backbone": backbone_label(s.backbone),
                "recipe": s.recipe,
                "desks": len(s.labels), "transformer accuracy": s.neural_accuracy,
                "bag-of-words accuracy": s.bow_accuracy,
                "status": _status(refusals.get(s.name)),
            }
            for s in summaries
        ]
    )  # fmt: skip


def _status(refusal: str | None) -> str:
    return "" if refusal is None else f"cannot be loaded: {refusal}"


def render_rename_delete(actor: Actor, name: str, rename, delete) -> None:
    """The Rename and Delete popovers of model `name`, in the columns given."""
    with rename.popover("Rename"):
        new_name = st.text_input("New name", key="train.new_name")
        if st.button("Rename", key="train.rename") and new_name:
            apply_registry_change(
                lambda: rename_recorded(get_store(), models_dir(), name, new_name, actor=actor)
            )
    with delete.popover("Delete"):
        st.write("This removes the model folder for every user.")
        if st.button("Delete for good", key="train.delete"):
            apply_registry_change(
                lambda: delete_recorded(get_store(), models_dir(), name, actor=actor)
            )


def apply_registry_change(change: Callable[[], object]) -> None:
    try:
        change()
    except (UserError, OSError) as exc:
        st.error(md_escape(error_text(exc)))
        return
    st.rerun()


def error_text(exc: UserError | OSError) -> str:
    """What a visitor is told: our own messages name models, never paths; an OSError's text
    holds the server's path, so only its reason is shown (AccessDenied, an OSError too, holds
    none)."""
    if isinstance(exc, OSError) and not isinstance(exc, AccessDenied):
        return f"the models folder could not be changed ({exc.strerror or type(exc).__name__})"
    return str(exc)
