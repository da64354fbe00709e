"""The Train page's "Retrain from corrections" section: pick a saved data set, preview what its
next version changes and whose work that is, then build it and queue the challenger's training
(core.tasks.retrain) and follow it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.data.saved import datasets_root, find_by_fingerprint, list_datasets
from core.errors import UserError
from core.jobs import JobStatus
from core.models.card import read_card
from core.models.transformer.config import backbone_label
from core.paths import models_dir
from core.review.corrections import CorrectionPlan, next_version_name, plan_corrections
from core.review.live import checked_live_folder, live_model
from core.review.store import Store
from core.tasks.retrain import RetrainRequest, RetrainRun, recipe_source, start_retrain
from ui.auth import allowed
from ui.jobs import get_job_queue, job_requester, render_job_progress
from ui.safe import md_escape
from ui.state import get_store
from ui.training import describe_training, toast_cancelling

RETRAIN_RUN = "train.retrain.run"  # RetrainRun: this session's retraining (page-private)


def render_retrain_section(actor: Actor, active_folder: Path | None) -> None:
    """The heading, what retraining does, and (admins: data and training) the section."""
    st.subheader("Retrain from corrections")
    st.write(
        "Build the next version of a saved data set from the team's review work (relabels and "
        "exclusions from Label audit, verdicts from the Triage queue), then train a challenger "
        "on it with the live model's recipe, settings and split. See every change before it "
        "starts."
    )
    if allowed(actor, Permission.MANAGE_DATA, "Retraining from corrections") and allowed(
        actor, Permission.TRAIN, "Retraining from corrections"
    ):
        render_retrain(actor, active_folder)


def render_retrain(actor: Actor, active_folder: Path | None) -> None:
    """Pick a saved data set, preview what its next version changes and whose work that is,
    then build it and queue the challenger's training (admins; core checks the role again)."""
    saved = list_datasets(datasets_root())
    if not saved:
        st.caption("No saved data sets yet: save one on the Data page to build its next version.")
        return
    try:
        store = get_store()
    except UserError as exc:
        st.error(f"The review store cannot be used: {md_escape(exc)}")
        return
    names = [s.name for s in saved]
    default = default_parent(store, names, active_folder)
    parent = st.selectbox(
        "Data set to correct", names, index=names.index(default), key="train.retrain.parent",
        help="Defaults to the data set the live model was trained on.",
    )  # fmt: skip
    try:
        plan = plan_corrections(store, datasets_root(), parent, actor=actor)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    render_plan(plan)
    running = st.session_state.get(RETRAIN_RUN)
    busy = running is not None and running.training.job.snapshot().status.active
    if plan.already_built_as is None and plan.changes and not busy:
        render_retrain_start(store, plan, active_folder)
    if running is not None:
        render_retrain_run(running)


def default_parent(store: Store, names: list[str], active_folder: Path | None) -> str:
    """The data set the live model (else the active model) was trained on, when it is saved
    and listed; else the newest saved data set."""
    for folder in (_live_folder(store), active_folder):
        found = _trained_on(folder)
        if found in names:
            return found
    return names[0]


def _live_folder(store: Store) -> Path | None:
    live = live_model(store)
    if live is None:
        return None
    try:
        return checked_live_folder(live, models_dir())
    except UserError:  # gone or saved again: the sidebar says so; no default from it
        return None


def _trained_on(folder: Path | None) -> str | None:
    if folder is None:
        return None
    try:
        fingerprint = str(read_card(folder).get("data_fingerprint", ""))
    except UserError:
        return None
    found = find_by_fingerprint(datasets_root(), fingerprint) if fingerprint else None
    return None if found is None else found.name


def render_plan(plan: CorrectionPlan) -> None:
    """The preview: counts, whose decisions, desk counts before and after, stale decisions."""
    render_plan_counts(plan)
    if plan.by_reviewer:
        st.dataframe(
            pd.DataFrame({"reviewer": list(plan.by_reviewer),
                          "changes": list(plan.by_reviewer.values())}),
            hide_index=True, width="stretch",
        )  # fmt: skip
    st.dataframe(desks_frame(plan), hide_index=True, width="stretch")
    if plan.stale:
        render_stale(plan)
    if plan.already_built_as is not None:
        st.info(
            f"These corrections were already built as {md_escape(plan.already_built_as)}: "
            "retrain from that data set, or record new decisions first."
        )
    elif not plan.changes:
        st.info(
            "No corrections to apply yet: record relabels or exclusions on Label audit, or "
            "triage verdicts, first."
        )


def render_plan_counts(plan: CorrectionPlan) -> None:
    """What the next version changes, in four figures and a line on its size."""
    counts = plan.counts()
    cols = st.columns(4)
    cols[0].metric("Relabelled", f"{counts['relabelled']:,}")
    cols[1].metric("Excluded", f"{counts['excluded']:,}")
    cols[2].metric("Added from triage", f"{counts['added']:,}")
    cols[3].metric("Stale (not applied)", f"{counts['stale']:,}")
    st.caption(
        f"{md_escape(plan.parent_name)}: {counts['rows_before']:,} complaints now, "
        f"{counts['rows_after']:,} in the next version. Triage verdicts not added: "
        f"{counts['verdicts_already_folded']:,} already in this data set's versions, "
        f"{counts['verdicts_already_rows']:,} whose complaint is already a row."
    )


def render_stale(plan: CorrectionPlan) -> None:
    """The decisions left out because their rows changed since they were made."""
    st.warning(
        f"{len(plan.stale)} decisions are not applied: their rows no longer hold the "
        "complaint or label they were made on. Review those rows again on Label audit."
    )
    st.dataframe(
        pd.DataFrame({"decision": [s.decision_id for s in plan.stale],
                      "row": [s.row for s in plan.stale],
                      "reason": [s.reason for s in plan.stale],
                      "reviewer": [s.reviewer for s in plan.stale]}),
        hide_index=True, width="stretch",
    )  # fmt: skip


def desks_frame(plan: CorrectionPlan) -> pd.DataFrame:
    """Complaints per desk before and after, with the change."""
    desks = sorted(plan.desks_before.keys() | plan.desks_after.keys())
    before = [plan.desks_before.get(d, 0) for d in desks]
    after = [plan.desks_after.get(d, 0) for d in desks]
    change = [a - b for a, b in zip(after, before, strict=True)]
    return pd.DataFrame({"desk": desks, "before": before, "after": after, "change": change})


def render_retrain_start(store: Store, plan: CorrectionPlan, active_folder: Path | None) -> None:
    """Where the recipe comes from, the names, and the button that starts it all."""
    try:
        recipe = recipe_source(store, models_dir(), fallback=active_folder)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    whose = "the live model" if recipe.live else "your active model (no model is live yet)"
    split = "keeps its split" if recipe.split else "draws a fresh split (its card has none)"
    st.caption(
        f"The challenger trains with the recipe and settings of {whose} "
        f"{md_escape(recipe.name)} ({recipe.config.recipe}, "
        f"{md_escape(backbone_label(recipe.config.backbone))}) and {split}."
    )
    left, right = st.columns(2)
    new_name = left.text_input(
        "Save the new version as", next_version_name(datasets_root(), plan.parent_name),
        key=f"train.retrain.name.{plan.parent_name}",
    )  # fmt: skip
    challenger = right.text_input(
        "Save the challenger as", f"{new_name}-challenger",
        key=f"train.retrain.challenger.{new_name}",
    )  # fmt: skip
    if st.button("Build the version and train the challenger", type="primary",
                 key="train.retrain.start"):  # fmt: skip
        request = RetrainRequest(plan.parent_name, new_name.strip(), challenger.strip(),
                                 active_folder)  # fmt: skip
        start_retrain_job(store, request)


def start_retrain_job(store: Store, request: RetrainRequest) -> None:
    """Build, save and queue, as the actor signed in at the click; a refusal is shown."""
    try:
        run = start_retrain(store, datasets_root(), models_dir(), request,
                            queue=get_job_queue(), requester=job_requester())  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    st.session_state[RETRAIN_RUN] = run
    st.rerun()


def render_retrain_run(run: RetrainRun) -> None:
    """The version saved and the challenger's training, with the training progress."""
    snapshot = run.training.job.snapshot()
    st.caption(
        f"Saved {md_escape(run.dataset.name)} ({run.dataset.rows:,} complaints) from "
        f"{md_escape(run.plan.parent_name)}; challenger {md_escape(run.training.model_name)} "
        f"with the recipe of {md_escape(run.recipe.name)}"
        f"{', the split inherited' if run.split_inherited else ', a fresh split'}."
    )
    if snapshot.status.active:
        render_job_progress(
            run.training.job, describe=describe_training, key="train.retrain.cancel",
            every=1.0, cancel_label="Cancel the challenger's training", on_cancel=toast_cancelling,
        )  # fmt: skip
    elif snapshot.status is JobStatus.FAILED:
        st.error(f"The challenger's training failed: {md_escape(snapshot.error)}")
    elif snapshot.status is JobStatus.CANCELLED:
        st.info("The challenger's training was cancelled; the new version stays saved.")
    else:
        st.success(
            f"Challenger {md_escape(run.training.model_name)} is saved. Compare it with the "
            "live model below before promoting it."
        )
