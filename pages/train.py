"""Train page: fine-tune a transformer and its bag-of-words baseline; save, load, manage models."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from core.access import AccessDenied, Actor, Permission
from core.charts.results import (
    confusion_chart,
    f1_comparison_chart,
)
from core.errors import UserError
from core.jobs import JobStatus
from core.models.blend import BLEND
from core.models.card import model_folder
from core.models.registry import delete_model, list_models, models_of_dataset, rename_model
from core.models.training_job import SavedTraining
from core.models.transformer.backbone import check_positions, find_backbone
from core.models.transformer.config import (
    FULL,
    MINILM,
    QUICK,
    TINY,
    TrainConfig,
    backbone_defaults,
    backbone_label,
)
from core.models.transformer.training import TrainResult
from core.paths import models_dir
from core.tasks.training import TrainingRun
from ui.auth import allowed, current_actor
from ui.datasets import require_dataset
from ui.jobs import render_job_progress
from ui.safe import md_escape
from ui.state import TRAIN_JOB, ActiveDataset, get_active_model, set_active_model
from ui.training import (
    QUICK_MODEL_NOTE,
    activate_once,
    default_model_name,
    describe_training,
    estimate_job,
    render_estimate_wait,
    start_training_job,
)

RECIPE_KEY = "train.recipe"


def render_saved_models(actor: Actor) -> None:
    summaries = list_models(models_dir())
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
    if recipe == QUICK and st.session_state.get("train.backbone") == TINY:
        st.session_state["train.backbone"] = MINILM  # the tiny model has nothing pretrained
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
    prefix = backbone if backbone in (MINILM, TINY) else "custom"
    return default_model_name(f"{prefix}-quick" if recipe == QUICK else prefix)


def render_recipe(active: ActiveDataset) -> str:
    """Quick or full; quick comes first for a data set no saved model was trained on."""
    has_model = bool(models_of_dataset(models_dir(), active.dataset.fingerprint))
    st.session_state.setdefault(RECIPE_KEY, FULL if has_model else QUICK)
    return st.radio(
        "Recipe", [QUICK, FULL], key=RECIPE_KEY, on_change=_follow_recipe, horizontal=True,
        format_func={QUICK: "Quick model (about a minute)", FULL: "Full fine-tuning"}.get,
        help="Quick: the pretrained encoder stays frozen, reads every complaint once, and a "
        "linear head learns the desks; good routing by topic, little word order. Full: every "
        "weight is fine-tuned; best accuracy, learns word order, takes minutes on a CPU.",
    )  # fmt: skip


def render_train_form(active: ActiveDataset) -> TrainRequest | None:
    """The TrainConfig settings, the estimated duration and the model's name; returns them when
    Start is clicked. No st.form: the estimate follows every change."""
    recipe = render_recipe(active)
    quick = recipe == QUICK
    left, right = st.columns([1, 2])
    backbones = [MINILM, "other"] if quick else [MINILM, TINY, "other"]
    choice = left.selectbox(
        "Backbone", backbones, key="train.backbone", on_change=_follow_backbone,
        format_func={MINILM: "MiniLM-L6 (bundled, pretrained)", TINY: "Tiny transformer (from "
                     "scratch, seconds)", "other": "A saved model or a Hugging Face id"}.get,
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
    pooling = c[0].selectbox("Pooling", ["mean", "cls"], key="train.pooling", disabled=quick)
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
    if result.config.recipe == QUICK:
        st.info(QUICK_MODEL_NOTE, icon=":material/bolt:")
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
    st.altair_chart(f1_comparison_chart({name: rep for name, rep, _ in rows}), width="stretch")
    left, right = st.columns(2)
    left.altair_chart(confusion_chart(rows[0][1], title="Transformer"), width="stretch")
    right.altair_chart(confusion_chart(rows[1][1], title="Bag of words"), width="stretch")


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
with st.expander("Saved models", expanded=model is None):
    render_saved_models(actor)


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
