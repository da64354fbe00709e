"""Train page: fine-tune a transformer and its bag-of-words baseline; save, load, manage models."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from core.access import AccessDenied, Actor, Permission
from core.charts.results import (
    confusion_chart,
    f1_comparison_chart,
)
from core.data.saved import datasets_root, find_by_fingerprint, list_datasets
from core.errors import UserError
from core.jobs import JobStatus
from core.models.blend import BLEND
from core.models.card import model_folder, read_card
from core.models.registry import delete_model, rename_model
from core.models.training_job import SavedTraining
from core.models.transformer.backbone import check_positions, find_backbone
from core.models.transformer.config import (
    AUTO,
    FROM_SCRATCH,
    FULL,
    LSTM,
    MINILM,
    QUICK,
    TINY,
    TrainConfig,
    backbone_defaults,
    backbone_label,
)
from core.models.transformer.recipe import FULL_MIN_ROWS_PER_DESK
from core.models.transformer.training import TrainResult
from core.paths import models_dir
from core.review.corrections import CorrectionPlan, next_version_name, plan_corrections
from core.review.live import checked_live_folder, live_model
from core.review.store import Store
from core.tasks.retrain import RetrainRun, recipe_source
from core.tasks.training import TrainingRun
from ui.auth import allowed, current_actor
from ui.compare import render_challenger_section
from ui.datasets import require_dataset
from ui.figures import show_chart
from ui.jobs import get_job_queue, job_requester, render_job_progress
from ui.safe import md_escape
from ui.state import (
    TRAIN_JOB,
    ActiveDataset,
    get_active_model,
    get_live_status,
    get_store,
    saved_models,
    set_active_model,
)
from ui.training import (
    QUICK_MODEL_NOTE,
    activate_once,
    default_model_name,
    describe_training,
    estimate_job,
    render_estimate_wait,
    start_training_job,
)
from ui.widgets import render_live_model_history, render_not_live_notice

RECIPE_KEY = "train.recipe"


def render_saved_models(actor: Actor) -> None:
    summaries = saved_models()
    if not summaries:
        st.caption("No saved models yet.")  # a name, never the server's models path
        return
    table = pd.DataFrame(
        [
            {
                "name": s.name, "created": s.created_at, "backbone": backbone_label(s.backbone),
                "recipe": s.recipe,
                "desks": len(s.labels), "transformer accuracy": s.transformer_accuracy,
                "bag-of-words accuracy": s.bow_accuracy,
            }
            for s in summaries
        ]
    )  # fmt: skip
    st.dataframe(table, hide_index=True, width="stretch")
    names = [s.name for s in summaries]
    name = st.selectbox("Model", names, key="train.pick")
    load, rename, delete = st.columns(3)
    if load.button("Use this model", key="train.load", type="primary"):
        set_active_model(model_folder(models_dir(), name))
        st.rerun()
    if not allowed(actor, Permission.MANAGE_MODELS, "Renaming and deleting models"):
        return
    live = get_live_status().live
    if live is not None and live.name == name:  # the team routes with it: never pull it away
        st.caption(f"{md_escape(name)} is the live model: promote another before renaming or "
                   "deleting it.")  # fmt: skip
        return
    with rename.popover("Rename"):
        new_name = st.text_input("New name", key="train.new_name")
        if st.button("Rename", key="train.rename") and new_name:
            apply_registry_change(lambda: rename_model(models_dir(), name, new_name, actor=actor))
    with delete.popover("Delete"):
        st.write("This removes the model folder for every user.")
        if st.button("Delete for good", key="train.delete"):
            apply_registry_change(lambda: delete_model(models_dir(), name, actor=actor))


def apply_registry_change(change) -> None:
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


def _follow_backbone() -> None:
    """A new backbone gets its own learning rate and epochs (core's defaults) and a model name
    of its own."""
    backbone = st.session_state["train.backbone"]
    defaults = backbone_defaults(backbone)
    st.session_state["train.lr"], st.session_state["train.epochs"] = defaults.lr, defaults.epochs
    st.session_state["train.patience"] = defaults.patience
    st.session_state["train.model_name"] = model_name_for(backbone, st.session_state[RECIPE_KEY])


def _follow_recipe() -> None:
    recipe = st.session_state[RECIPE_KEY]
    if recipe == QUICK and st.session_state.get("train.backbone") in FROM_SCRATCH:
        st.session_state["train.backbone"] = MINILM  # a from-scratch model has nothing pretrained
        _follow_backbone()
    st.session_state["train.model_name"] = model_name_for(
        st.session_state.get("train.backbone", MINILM), recipe
    )


@dataclass(frozen=True)
class TrainRequest:
    """What the form asks for: the settings, and the name the model is saved under."""

    config: TrainConfig
    model_name: str


def model_name_for(backbone: str, recipe: str) -> str:
    prefix = backbone if backbone in (MINILM, TINY, LSTM) else "custom"
    return default_model_name(f"{prefix}-quick" if recipe == QUICK else prefix)


def render_recipe() -> str:
    """Let the data choose (the default), quick or full."""
    st.session_state.setdefault(RECIPE_KEY, AUTO)
    return st.radio(
        "Recipe", [AUTO, QUICK, FULL], key=RECIPE_KEY, on_change=_follow_recipe, horizontal=True,
        format_func={AUTO: "Let the data choose (recommended)", QUICK: "Quick model (about a "
                     "minute)", FULL: "Full fine-tuning"}.get,
        help="Let the data choose: the quick model first, then full fine-tuning as well when "
        f"the desks have at least {FULL_MIN_ROWS_PER_DESK} training rows each (median), and "
        "whichever routes more validation rows right is kept; the result says which and why. "
        "Quick: the pretrained encoder stays frozen, reads every complaint once, and a linear "
        "head learns the desks; good routing by topic, little word order. Full: every weight is "
        "fine-tuned; learns word order, takes minutes on a CPU.",
    )  # fmt: skip


def render_pooling(container, backbone: str, *, disabled: bool) -> str:
    """Mean or [CLS] for transformers; mean or the final states for the LSTM (its own key, so
    switching backbones never leaves a choice the other one lacks)."""
    if backbone == LSTM:
        return container.selectbox(
            "Pooling", ["mean", "last"], key="train.lstm_pooling", disabled=disabled,
            help="LSTM: mean of its outputs over the words, or its final states.",
        )  # fmt: skip
    return container.selectbox("Pooling", ["mean", "cls"], key="train.pooling", disabled=disabled)


def render_train_form(active: ActiveDataset) -> TrainRequest | None:
    """The TrainConfig settings, the estimated duration and the model's name; returns them when
    Start is clicked. No st.form: the estimate follows every change."""
    recipe = render_recipe()
    quick = recipe == QUICK
    left, right = st.columns([1, 2])
    backbones = [MINILM, "other"] if quick else [MINILM, TINY, LSTM, "other"]
    choice = left.selectbox(
        "Backbone", backbones, key="train.backbone", on_change=_follow_backbone,
        format_func={MINILM: "MiniLM-L6 (bundled, pretrained)", TINY: "Tiny transformer (from "
                     "scratch, seconds)", LSTM: "LSTM (from scratch, reads in order)",
                     "other": "A saved model or a Hugging Face id"}.get,
    )  # fmt: skip
    custom = right.text_input(
        "Saved model name or id", key="train.custom", disabled=choice != "other",
        help="The name of a saved transformers model, or the id of a model already in the "
        "Hugging Face cache. Nothing is downloaded.",
    )  # fmt: skip
    # Values that follow the backbone (_follow_backbone) are set here first: a widget given
    # both a default and a session-state value makes Streamlit warn.
    st.session_state.setdefault("train.lr", backbone_defaults(MINILM).lr)
    st.session_state.setdefault("train.epochs", backbone_defaults(MINILM).epochs)
    st.session_state.setdefault("train.patience", backbone_defaults(MINILM).patience)
    last: TrainingRun | None = st.session_state.get(TRAIN_JOB)
    if last is not None and st.session_state.get("train.model_name") == last.model_name:
        st.session_state["train.model_name"] = model_name_for(choice, recipe)  # name is taken
    st.session_state.setdefault("train.model_name", model_name_for(choice, recipe))
    c = st.columns(4)
    pooling = render_pooling(c[0], choice, disabled=quick)
    epochs = c[1].number_input("Epochs", 1, 50, key="train.epochs", disabled=quick)
    lr = c[2].number_input("Learning rate", 1e-6, 1e-1, format="%.0e", key="train.lr",
                           disabled=quick)  # fmt: skip
    batch_size = c[3].number_input("Batch size", 1, 256, 16, key="train.batch", disabled=quick)
    c = st.columns(4)
    max_length = c[0].number_input("Max length (tokens)", 8, 512, 128, key="train.maxlen")
    val_fraction = c[1].slider("Validation share", 0.1, 0.5, 0.2, 0.05, key="train.val")
    seed = c[2].number_input("Seed", 0, 2**31 - 1, 0, key="train.seed")
    max_steps = c[3].number_input(
        "Stop after steps (0 = no limit)", 0, 1_000_000, 0, key="train.max_steps", disabled=quick
    )
    c = st.columns(4)
    patience = c[0].number_input("Early-stopping patience", 1, 50, key="train.patience",
                                 disabled=quick)  # fmt: skip
    class_weights = c[1].checkbox("Weight small desks", True, key="train.class_weights")
    device = c[2].selectbox("Device", ["auto", "cpu", "cuda"], key="train.device")
    positional = c[3].checkbox(
        "Positional encoding", True, key="train.positional", disabled=choice != TINY,
        help="Tiny transformer only. Off, it sees a bag of words: word order is invisible.",
    )  # fmt: skip
    model_name = st.text_input(
        "Save as", key="train.model_name",
        help="The model is saved under this name when training ends, even if you close "
        "this tab, and becomes your active model.",
    )  # fmt: skip
    try:
        backbone = find_backbone(custom, models_root=models_dir()) if choice == "other" else choice
        config = TrainConfig(
            backbone=backbone, recipe=recipe, pooling="mean" if quick else pooling,
            epochs=int(epochs), lr=float(lr), batch_size=int(batch_size),
            max_length=int(max_length), val_fraction=float(val_fraction), seed=int(seed),
            patience=int(patience), max_steps=None if quick else int(max_steps) or None,
            class_weights=class_weights, device=device, positional_encoding=bool(positional),
        )  # fmt: skip
        check_positions(config)
    except UserError as exc:
        if choice != "other" or custom.strip():
            st.error(md_escape(exc))
        config = None
    if config is not None:
        render_estimate(active, config)
    clicked = st.button("Start training", type="primary", key="train.start", disabled=not config)
    return TrainRequest(config, model_name) if clicked and config else None


def render_estimate(active: ActiveDataset, config: TrainConfig) -> None:
    """The expected duration, timed on this server before anything starts."""
    try:
        job = estimate_job(active, config)
    except UserError as exc:
        st.caption(f"No duration estimate: {md_escape(exc)}")
        return
    snapshot = job.snapshot()
    if snapshot.status.active:
        render_estimate_wait(job)
        return
    if snapshot.status is not JobStatus.DONE or snapshot.result is None:
        st.caption(f"No duration estimate: {md_escape(snapshot.error or 'it was cancelled')}")
        return
    estimate = snapshot.result.for_budget(config.epochs, config.max_steps)
    limit = " at most (early stopping may end it sooner)" if config.recipe == FULL else ""
    st.caption(
        f"Estimated duration: **{estimate.text()}**{limit} on this server as it is now "
        f"({estimate.passes:,} forward passes, timed on a few of them)."
    )


def _toast_cancelling() -> None:
    st.toast("Cancelling at the next step…")


def render_result(run: TrainingRun, saved: SavedTraining) -> None:
    result: TrainResult = saved.result
    folder = saved.folder
    assert folder is not None  # a finished, not cancelled, training is saved
    activate_once(run)
    if result.config.recipe == QUICK:
        how = f"quick model, linear head C = {result.head_strength:g}"
    else:
        how = f"best epoch {result.best_epoch}"
    st.success(
        f"Trained in {result.train_seconds:.0f} s on {md_escape(result.device)}; {how}. Saved "
        f"as {md_escape(folder.name)} and made your active model."
    )
    if saved.rename_note:
        st.info(md_escape(saved.rename_note))
    if result.recipe_choice is not None:
        st.info(f"Recipe chosen by the data: {md_escape(result.recipe_choice['reason'])}.",
                icon=":material/tune:")  # fmt: skip
    if result.config.recipe == QUICK:
        st.info(QUICK_MODEL_NOTE, icon=":material/bolt:")
    if result.review is not None:
        flagged = result.review.validation.get("flagged", float("nan"))
        st.caption(f"Review policy: a complaint goes to a person when it is "
                   f"{md_escape(result.review.describe())} ({flagged:.0%} of the validation rows). "
                   f"Chosen so: {md_escape(result.review.rule)}.")  # fmt: skip
    st.caption(f"Routing decision: {result.blend.describe()}, chosen on these validation rows "
               "(the mix that got most of them right, kept only when it gets at least one row in "
               "a hundred more right than the transformer alone), so the decision's figures "
               "below flatter it a little.")  # fmt: skip
    rows = [("Transformer", result.transformer_report, result.transformer_twin_report),
            ("Bag of words", result.baseline_report, result.baseline_twin_report)]  # fmt: skip
    if result.blend.decided_by == BLEND:
        rows.append(("Decision (blend)", result.decision_report, result.decision_twin_report))
    st.dataframe(
        pd.DataFrame(
            [
                {"model": name, "accuracy": rep.accuracy, "macro F1": rep.macro_f1,
                 "accuracy on twins": twin.accuracy if twin else None}
                for name, rep, twin in rows
            ]
        ),
        hide_index=True, width="stretch",
        column_config={c: st.column_config.NumberColumn(format="%.3f")
                       for c in ("accuracy", "macro F1", "accuracy on twins")},
    )  # fmt: skip
    show_chart(f1_comparison_chart({name: rep for name, rep, _ in rows}), stem="f1-per-desk",
               key="train.figure.f1", width="stretch")  # fmt: skip
    left, right = st.columns(2)
    show_chart(confusion_chart(rows[0][1], title="Transformer"), stem="transformer-confusion",
               key="train.figure.confusion_t", container=left, width="stretch")  # fmt: skip
    show_chart(confusion_chart(rows[1][1], title="Bag of words"), stem="bag-of-words-confusion",
               key="train.figure.confusion_b", container=right, width="stretch")  # fmt: skip


def render_job(run: TrainingRun) -> None:
    snapshot = run.job.snapshot()
    backbone = backbone_label(run.config.backbone)
    st.caption(f"On {md_escape(run.dataset_name)} with backbone {md_escape(backbone)}.")
    if snapshot.status.active:
        render_job_progress(
            run.job, describe=describe_training, key="train.cancel", every=1.0,
            cancel_label="Cancel training", on_cancel=_toast_cancelling,
        )  # fmt: skip
    elif snapshot.status is JobStatus.FAILED:
        st.error(f"Training failed: {md_escape(snapshot.error)}")
    elif snapshot.status is JobStatus.CANCELLED:
        st.info("Training was cancelled; nothing was saved.")
    elif snapshot.result is None:  # finished long ago: the queue keeps only a summary
        st.info(f"Training finished and saved {md_escape(run.model_name)} (see Saved models).")
    else:
        render_result(run, snapshot.result)


# ---------------------------------------------------------------------- retrain from corrections

RETRAIN_RUN = "train.retrain.run"  # RetrainRun: this session's retraining (page-private)


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
        render_retrain_start(store, plan, actor, active_folder)
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
    if plan.by_reviewer:
        st.dataframe(
            pd.DataFrame({"reviewer": list(plan.by_reviewer),
                          "changes": list(plan.by_reviewer.values())}),
            hide_index=True, width="stretch",
        )  # fmt: skip
    st.dataframe(desks_frame(plan), hide_index=True, width="stretch")
    if plan.stale:
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


def desks_frame(plan: CorrectionPlan) -> pd.DataFrame:
    """Complaints per desk before and after, with the change."""
    desks = sorted(plan.desks_before.keys() | plan.desks_after.keys())
    before = [plan.desks_before.get(d, 0) for d in desks]
    after = [plan.desks_after.get(d, 0) for d in desks]
    change = [a - b for a, b in zip(after, before, strict=True)]
    return pd.DataFrame({"desk": desks, "before": before, "after": after, "change": change})


def render_retrain_start(
    store: Store, plan: CorrectionPlan, actor: Actor, active_folder: Path | None
) -> None:
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
        start_retrain_job(store, plan.parent_name, new_name, challenger, active_folder)


def start_retrain_job(
    store: Store, parent: str, new_name: str, challenger: str, active_folder: Path | None
) -> None:
    """Build, save and queue, as the actor signed in at the click; a refusal is shown."""
    from core.tasks.retrain import start_retrain

    try:
        run = start_retrain(
            store, datasets_root(), models_dir(), parent, new_name=new_name.strip(),
            challenger_name=challenger.strip(), queue=get_job_queue(),
            requester=job_requester(), fallback_model=active_folder,
        )  # fmt: skip
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
            every=1.0, cancel_label="Cancel the challenger's training", on_cancel=_toast_cancelling,
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


st.title("Train")
st.write(
    "Build a transformer model on the active data set: a quick model in about a minute, or full "
    "fine-tuning for the best accuracy and word order. A bag-of-words baseline is trained on "
    "the same split so the two can be compared. Or load a saved model."
)
actor = current_actor()
model = get_active_model()
if model is not None:
    st.caption(f"Active model: {md_escape(model.path.name)}")
render_not_live_notice(model, key="train.use_live")
with st.expander("Saved models", expanded=model is None):
    render_saved_models(actor)
    st.markdown("**The live model**")
    render_live_model_history(actor)


st.subheader("Train a new model")
may_train = allowed(actor, Permission.TRAIN, "Training a model")
active = require_dataset("train") if may_train else None
run: TrainingRun | None = st.session_state.get(TRAIN_JOB)
if active is not None:
    st.caption(
        f"Data set: {md_escape(active.name)} · {len(active.dataset):,} complaints · "
        f"{len(active.dataset.classes)} desks"
    )
    busy = run is not None and run.job.snapshot().status.active
    request = None if busy else render_train_form(active)
    if busy:
        st.info("Your training is queued or running; cancel it to start another.")
    if request is not None:
        run = start_training_job(active, request.config, request.model_name) or run
        st.session_state[TRAIN_JOB] = run
if run is not None:
    render_job(run)


st.subheader("Retrain from corrections")
st.write(
    "Build the next version of a saved data set from the team's review work (relabels and "
    "exclusions from Label audit, verdicts from the Triage queue), then train a challenger on "
    "it with the live model's recipe, settings and split. See every change before it starts."
)
if allowed(actor, Permission.MANAGE_DATA, "Retraining from corrections") and allowed(
    actor, Permission.TRAIN, "Retraining from corrections"
):
    render_retrain(actor, model.path if model is not None else None)
render_challenger_section()
