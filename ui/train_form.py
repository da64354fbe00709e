"""The Train page's "Train a new model" section: the recipe, backbone and TrainConfig settings,
the duration estimate before anything starts, the name to save under, and this session's
training once started (ui.train_result)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from core.access import Actor, Permission
from core.errors import UserError
from core.jobs import JobStatus
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
)
from core.models.transformer.recipe import FULL_MIN_ROWS_PER_DESK
from core.paths import models_dir
from core.tasks.training import TrainingRun
from ui.auth import allowed
from ui.datasets import require_dataset
from ui.errors import guarded
from ui.safe import md_escape
from ui.state import TRAIN_JOB, ActiveDataset
from ui.train_result import render_job
from ui.training import (
    default_model_name,
    estimate_job,
    render_estimate_wait,
    start_training_job,
)

RECIPE_KEY = "train.recipe"


@dataclass(frozen=True)
class TrainRequest:
    """What the form asks for: the settings, and the name the model is saved under."""

    config: TrainConfig
    model_name: str


def render_training_section(actor: Actor) -> None:
    """The form (trainers, on a loaded or demo data set) unless a training of this session is
    busy, then that training's progress or result."""
    st.subheader("Train a new model")
    may_train = allowed(actor, Permission.TRAIN, "Training a model")
    active = require_dataset("train") if may_train else None
    run: TrainingRun | None = st.session_state.get(TRAIN_JOB)
    if active is not None:
        run = render_form_or_busy(active, run)
    if run is not None:
        render_job(run)


def render_form_or_busy(active: ActiveDataset, run: TrainingRun | None) -> TrainingRun | None:
    """The data set, then the form (or a note that a training is busy); the session's training,
    a new one when Start was clicked and the queue took it."""
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
    return run


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


def model_name_for(backbone: str, recipe: str) -> str:
    prefix = backbone if backbone in (MINILM, TINY, LSTM) else "custom"
    return default_model_name(f"{prefix}-quick" if recipe == QUICK else prefix)


def render_train_form(active: ActiveDataset) -> TrainRequest | None:
    """The TrainConfig settings, the estimated duration and the model's name; returns them when
    Start is clicked. No st.form: the estimate follows every change."""
    recipe = render_recipe()
    choice, custom = render_backbone(recipe)
    _seed_followed_values(choice, recipe)
    settings = render_settings(choice, quick=recipe == QUICK)
    model_name = st.text_input(
        "Save as", key="train.model_name",
        help="The model is saved under this name when training ends, even if you close "
        "this tab, and becomes your active model.",
    )  # fmt: skip
    config = _config_or_error(choice, custom, recipe, settings)
    if config is not None:
        render_estimate(active, config)
    clicked = st.button("Start training", type="primary", key="train.start", disabled=not config)
    return TrainRequest(config, model_name) if clicked and config else None


def render_recipe() -> str:
    """Let the data choose (the default), quick or full."""
    st.session_state.setdefault(RECIPE_KEY, AUTO)
    return st.radio(
        "Recipe", [AUTO, QUICK, FULL], key=RECIPE_KEY, on_change=guarded(_follow_recipe),
        horizontal=True,
        format_func={AUTO: "Let the data choose (recommended)", QUICK: "Quick model (about a "
                     "minute)", FULL: "Full fine-tuning"}.get,
        help="Let the data choose: the quick model first, then full fine-tuning as well when "
        f"the desks have at least {FULL_MIN_ROWS_PER_DESK} training rows each (median), and "
        "whichever routes more validation rows right is kept; the result says which and why. "
        "Quick: the pretrained encoder stays frozen, reads every complaint once, and a linear "
        "head learns the desks; good routing by topic, little word order. Full: every weight is "
        "fine-tuned; learns word order, takes minutes on a CPU.",
    )  # fmt: skip


def render_backbone(recipe: str) -> tuple[str, str]:
    """The backbone choice (a quick model needs a pretrained one) and, for "other", the saved
    model name or Hugging Face id typed."""
    left, right = st.columns([1, 2])
    quick = recipe == QUICK
    backbones = [MINILM, "other"] if quick else [MINILM, TINY, LSTM, "other"]
    choice = left.selectbox(
        "Backbone", backbones, key="train.backbone", on_change=guarded(_follow_backbone),
        format_func={MINILM: "MiniLM-L6 (bundled, pretrained)", TINY: "Tiny transformer (from "
                     "scratch, seconds)", LSTM: "LSTM (from scratch, reads in order)",
                     "other": "A saved model or a Hugging Face id"}.get,
    )  # fmt: skip
    custom = right.text_input(
        "Saved model name or id", key="train.custom", disabled=choice != "other",
        help="The name of a saved transformers model, or the id of a model already in the "
        "Hugging Face cache. Nothing is downloaded.",
    )  # fmt: skip
    return choice, custom


def _seed_followed_values(choice: str, recipe: str) -> None:
    """Values that follow the backbone (_follow_backbone) are set here first: a widget given
    both a default and a session-state value makes Streamlit warn."""
    st.session_state.setdefault("train.lr", backbone_defaults(MINILM).lr)
    st.session_state.setdefault("train.epochs", backbone_defaults(MINILM).epochs)
    st.session_state.setdefault("train.patience", backbone_defaults(MINILM).patience)
    last: TrainingRun | None = st.session_state.get(TRAIN_JOB)
    if last is not None and st.session_state.get("train.model_name") == last.model_name:
        st.session_state["train.model_name"] = model_name_for(choice, recipe)  # name is taken
    st.session_state.setdefault("train.model_name", model_name_for(choice, recipe))


def render_settings(choice: str, *, quick: bool) -> dict[str, Any]:
    """The settings' widgets, three rows of four; TrainConfig's keyword arguments but the
    backbone and recipe (a quick model trains no weights, so its loop settings are off)."""
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
    return dict(
        pooling="mean" if quick else pooling, epochs=int(epochs), lr=float(lr),
        batch_size=int(batch_size), max_length=int(max_length), val_fraction=float(val_fraction),
        seed=int(seed), patience=int(patience),
        max_steps=None if quick else int(max_steps) or None, class_weights=class_weights,
        device=device, positional_encoding=bool(positional),
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


def _config_or_error(
    choice: str, custom: str, recipe: str, settings: dict[str, Any]
) -> TrainConfig | None:
    """The TrainConfig, or None with the refusal shown (not while "other" is still blank)."""
    try:
        backbone = find_backbone(custom, models_root=models_dir()) if choice == "other" else choice
        config = TrainConfig(backbone=backbone, recipe=recipe, **settings)
        check_positions(config)
    except UserError as exc:
        if choice != "other" or custom.strip():
            st.error(md_escape(exc))
        return None
    return config


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
