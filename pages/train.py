"""Train page: fine-tune a transformer and its bag-of-words baseline; save, load, manage models."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from core.access import AccessDenied, Actor, Permission
from core.charts.results import (
    confusion_chart,
    f1_comparison_chart,
    training_curve_chart,
    validation_curve_chart,
)
from core.jobs import BackgroundJob, JobSnapshot, JobStatus
from core.models.card import model_folder
from core.models.registry import delete_model, list_models, rename_model
from core.models.training_job import SavedTraining, TrainingRun, start_training
from core.models.transformer.backbone import find_backbone
from core.models.transformer.config import (
    MINILM,
    TINY,
    TrainConfig,
    backbone_defaults,
    backbone_label,
)
from core.models.transformer.loop import TrainProgress
from core.models.transformer.training import TrainResult
from core.paths import models_dir
from ui.auth import allowed, current_actor
from ui.datasets import require_dataset
from ui.jobs import JobProgress, get_job_queue, job_requester, queued_progress, render_job_progress
from ui.safe import md_escape
from ui.state import TRAIN_JOB, ActiveDataset, get_active_model, set_active_model

ACTIVATED_KEY = "train.activated"  # int: id of the finished training made the active model


def render_saved_models(actor: Actor) -> None:
    summaries = list_models(models_dir())
    if not summaries:
        st.caption("No saved models yet.")  # a name, never the server's models path
        return
    table = pd.DataFrame(
        [
            {
                "name": s.name, "created": s.created_at, "backbone": backbone_label(s.backbone),
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
    except (ValueError, OSError) as exc:
        st.error(md_escape(error_text(exc)))
        return
    st.rerun()


def error_text(exc: ValueError | OSError) -> str:
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
    st.session_state["train.model_name"] = default_model_name(backbone)


@dataclass(frozen=True)
class TrainRequest:
    """What the form asks for: the settings, and the name the model is saved under."""

    config: TrainConfig
    model_name: str


def default_model_name(backbone: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{backbone if backbone in (MINILM, TINY) else 'custom'}-{stamp}"


def render_train_form(active: ActiveDataset) -> TrainRequest | None:
    """The TrainConfig form and the model's name; returns them when submitted."""
    left, right = st.columns([1, 2])
    choice = left.selectbox(
        "Backbone", [MINILM, TINY, "other"], key="train.backbone", on_change=_follow_backbone,
        format_func={MINILM: "MiniLM-L6 (bundled, pretrained)", TINY: "Tiny transformer (from "
                     "scratch, seconds)", "other": "A saved model or a Hugging Face id"}.get,
    )  # fmt: skip
    custom = right.text_input(
        "Saved model name or id", key="train.custom", disabled=choice != "other",
        help="The name of a saved transformers model, or the id of a model already in the "
        "Hugging Face cache. Nothing is downloaded.",
    )  # fmt: skip
    # The learning rate and the model name follow the backbone (_follow_backbone); a widget
    # given both a default and a session-state value makes Streamlit warn, so their first
    # values come from here alone.
    st.session_state.setdefault("train.lr", backbone_defaults(MINILM).lr)
    st.session_state.setdefault("train.epochs", backbone_defaults(MINILM).epochs)
    last: TrainingRun | None = st.session_state.get(TRAIN_JOB)
    if last is not None and st.session_state.get("train.model_name") == last.model_name:
        st.session_state["train.model_name"] = default_model_name(choice)  # that name is taken
    st.session_state.setdefault("train.model_name", default_model_name(choice))
    with st.form("train.form"):
        c = st.columns(4)
        pooling = c[0].selectbox("Pooling", ["mean", "cls"], key="train.pooling")
        epochs = c[1].number_input("Epochs", 1, 50, key="train.epochs")
        lr = c[2].number_input("Learning rate", 1e-6, 1e-1, format="%.0e", key="train.lr")
        batch_size = c[3].number_input("Batch size", 1, 256, 16, key="train.batch")
        c = st.columns(4)
        max_length = c[0].number_input("Max length (tokens)", 8, 512, 128, key="train.maxlen")
        val_fraction = c[1].slider("Validation share", 0.1, 0.5, 0.2, 0.05, key="train.val")
        seed = c[2].number_input("Seed", 0, 2**31 - 1, 0, key="train.seed")
        max_steps = c[3].number_input(
            "Stop after steps (0 = no limit)", 0, 1_000_000, 0, key="train.max_steps"
        )
        c = st.columns(4)
        patience = c[0].number_input("Early-stopping patience", 1, 20, 2, key="train.patience")
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
        submitted = st.form_submit_button("Start training", type="primary")
    if not submitted:
        return None
    try:
        backbone = choice
        if choice == "other":
            backbone = find_backbone(custom, models_root=models_dir())
        config = TrainConfig(
            backbone=backbone, pooling=pooling, epochs=int(epochs), lr=float(lr),
            batch_size=int(batch_size), max_length=int(max_length),
            val_fraction=float(val_fraction), seed=int(seed), patience=int(patience),
            max_steps=int(max_steps) or None, class_weights=class_weights, device=device,
            positional_encoding=bool(positional),
        )  # fmt: skip
        return TrainRequest(config, model_name)
    except ValueError as exc:
        st.error(md_escape(exc))
        return None


def describe_training(job: BackgroundJob[TrainProgress, SavedTraining]) -> JobProgress | None:
    """Step, epoch, loss and time left, with the curves so far; None once training has ended."""
    snapshot = job.snapshot()
    if snapshot.status is JobStatus.QUEUED:
        return queued_progress(snapshot)
    if snapshot.status is not JobStatus.RUNNING:
        return None
    latest = snapshot.latest
    if latest is None:
        return JobProgress(0.0, "Loading the backbone and preparing batches…")
    eta = f"{latest.eta_s / 60:.1f} min" if latest.eta_s >= 60 else f"{latest.eta_s:.0f} s"
    return JobProgress(
        min(latest.step / latest.total_steps, 1.0),
        f"Step {latest.step}/{latest.total_steps} · epoch {latest.epoch} · "
        f"loss {latest.loss:.3f} · about {eta} left",
        details=lambda: render_curves(snapshot),
    )


def _toast_cancelling() -> None:
    st.toast("Cancelling at the next step…")


def render_curves(snapshot: JobSnapshot[TrainProgress, SavedTraining]) -> None:
    history = snapshot.history
    left, right = st.columns(2)
    left.altair_chart(
        training_curve_chart([p.step for p in history], [p.loss for p in history]),
        width="stretch",
    )
    epochs = {p.epoch - 1: p for p in history if p.val_accuracy is not None}
    if epochs:
        right.altair_chart(
            validation_curve_chart(
                list(epochs), [p.val_accuracy for p in epochs.values()],
                [p.val_macro_f1 for p in epochs.values()],
            ),
            width="stretch",
        )  # fmt: skip


def render_result(run: TrainingRun, saved: SavedTraining) -> None:
    result: TrainResult = saved.result
    folder = saved.folder
    assert folder is not None  # a finished, not cancelled, training is saved
    if st.session_state.get(ACTIVATED_KEY) != run.job.id:  # once: later the user may switch
        st.session_state[ACTIVATED_KEY] = run.job.id
        set_active_model(folder)
    st.success(
        f"Trained in {result.train_seconds:.0f} s on {md_escape(result.device)}; best epoch "
        f"{result.best_epoch}. Saved as {md_escape(folder.name)} and made your active model."
    )
    rows = [("Transformer", result.transformer_report, result.transformer_twin_report),
            ("Bag of words", result.baseline_report, result.baseline_twin_report)]  # fmt: skip
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
    else:
        render_result(run, snapshot.result)


def start(active: ActiveDataset, request: TrainRequest) -> TrainingRun | None:
    """Queue the training; None (with the reason shown) when the queue or the role refuses."""
    try:
        run = start_training(
            active.dataset, request.config, dataset_name=active.name,
            models_root=models_dir(), model_name=request.model_name,
            queue=get_job_queue(), requester=job_requester(),
        )  # fmt: skip
    except (ValueError, AccessDenied) as exc:
        st.error(md_escape(exc))
        return None
    return run


st.title("Train")
st.write(
    "Fine-tune a transformer on the active data set; a bag-of-words baseline is trained on the "
    "same split so the two can be compared. Or load a saved model."
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
        run = start(active, request) or run
        st.session_state[TRAIN_JOB] = run
if run is not None:
    render_job(run)
