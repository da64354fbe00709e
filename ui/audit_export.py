"""The Label audit page's corrected data set: decisions saved under the data set's legacy
fingerprint carried over on request, then the data set with every decision applied, to download.
Session key: "audit.carry_over" (SaveOutcome of the last carry-over, shown once)."""

from __future__ import annotations

import sqlite3

import streamlit as st

from core.access import Actor, Permission
from core.data.dataset import Dataset
from core.data.export import safe_file_stem
from core.errors import UserError
from core.review.records import ReviewDecision
from core.review.relabel import apply_decisions, plan_carry_over
from core.review.store import Store
from ui.auth import allowed, current_actor
from ui.downloads import render_table_downloads
from ui.errors import guarded
from ui.safe import md_escape
from ui.state import ActiveDataset
from ui.widgets import SaveOutcome, remember_save, render_last_save

CARRY_OVER_KEY = "audit.carry_over"


def render_audit_export(active: ActiveDataset, store: Store, actor: Actor) -> None:
    """For those who may decide: the carry-over of legacy decisions, then the downloads."""
    if allowed(actor, Permission.DECIDE, "Exporting the corrected data set"):
        render_carry_over(active.dataset, store, actor)
        render_export(active, store, actor)


def render_carry_over(dataset: Dataset, store: Store, actor: Actor) -> None:
    """Decisions saved under the data set's legacy fingerprint: never applied silently, never lost.

    Those whose row still holds the same complaint and label can be carried over with a click;
    the others are named so the reviewer can decide those rows again.
    """
    render_last_save(CARRY_OVER_KEY)
    legacy = store.decisions(dataset.legacy_fingerprint)
    if not legacy:
        return
    plan = plan_carry_over(dataset, legacy, store.decisions(dataset.fingerprint), actor=actor)
    if plan.mismatched:
        rows = ", ".join(map(str, plan.mismatched_rows[:10]))
        more = " …" if len(plan.mismatched_rows) > 10 else ""
        st.warning(
            f"{len(plan.mismatched)} decisions saved before row numbers were part of a data "
            f"set's fingerprint no longer match their rows ({rows}{more}): the complaint or label "
            "there is different now, so they are not applied. Review these rows again."
        )
    if plan.pending:
        st.warning(
            f"{len(plan.pending)} decisions were saved on this data set before row numbers were "
            "part of its fingerprint. Their rows still hold the same complaints and labels; they "
            "are not applied until you carry them over."
        )
        st.button(
            f"Carry over {len(plan.pending)} decisions",
            key="audit.carry_over_button",
            on_click=guarded(carry_over),
            args=(store, plan.pending),
        )


def carry_over(store: Store, pending: tuple[ReviewDecision, ...]) -> None:
    """Button callback: store the carried-over copies (each its own transaction, in order), as
    the actor signed in at the click."""
    actor = current_actor()
    try:
        for decision in pending:
            store.record_decision(decision, actor=actor)
    except (UserError, sqlite3.Error) as exc:
        remember_save(CARRY_OVER_KEY, SaveOutcome(False, f"Not all carried over: {exc}"))
        return
    remember_save(CARRY_OVER_KEY, SaveOutcome(True, f"Carried over {len(pending)} decisions."))


def render_export(active: ActiveDataset, store: Store, actor: Actor) -> None:
    """Corrected data set downloads, built from the store (not the session), formula-safe."""
    dataset = active.dataset
    try:
        corrected = apply_decisions(
            dataset, store.latest_decisions(dataset.fingerprint), actor=actor
        )
    except UserError as exc:
        st.error(f"The corrected data set cannot be built: {md_escape(exc)}")
        return
    stem = "corrected-" + safe_file_stem(active.name)
    render_table_downloads(
        corrected, stem, label="Download the corrected data set ({fmt})",
        keys=("audit.export_csv", "audit.export_xlsx"),
    )  # fmt: skip
    st.caption(
        "Relabelled rows carry the new label; `original_label` keeps the old one and `review` "
        "says what changed. Excluded rows stay in this file, marked `excluded` in `review`; the "
        "next version built on Train leaves them out. Cells a spreadsheet would run as formulas "
        "are prefixed with '."
    )
