"""A training as every page shows it: its progress and curves, the duration estimate before it
starts, the first model one click away on a page that needs a model, and what a quick model can
and cannot show."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import streamlit as st

from core.access import AccessDenied, Permission
from core.charts.results import training_curve_chart, validation_curve_chart
from core.jobs import BackgroundJob, JobSnapshot, JobStatus
from core.models.transformer.config import QUICK, TrainConfig
from ui.auth import current_actor
from ui.jobs import (
    JobProgress,
    get_job_queue,
    idle_progress,
    job_requester,
    render_job_progress,
    run_short,
)
from ui.safe import md_escape
from ui.state import TRAIN_JOB, ActiveDataset, set_active_model

if TYPE_CHECKING:
    from core.models.registry import LoadedModel
    from core.models.training_job import SavedTraining, TrainingRun
    from core.models.transformer.estimate import DurationEstimate
    from core.models.transformer.loop import TrainProgress

# Settings that change what one epoch costs; epochs and the step limit rescale an estimate.
_TIMING_FIELDS = ("backbone", "recipe", "pooling", "batch_size", "max_length", "val_fraction",
                  "seed", "device", "positional_encoding", "class_weights")  # fmt: skip
ESTIMATE_TTL_S = 600  # the machine's load changes: time again after ten minutes
ACTIVATED_KEY = "train.activated"  # int: id of the finished training made the active model

QUICK_MODEL_NOTE = (
    "This is a **quick model**: the pretrained encoder was not trained on your desks, only a "
    'linear head on top of it. It routes by topic well, but it tells word-order twins ("paid '
    'by card, not by UPI" against "paid by UPI, not by card") apart only partly, and its '
    "attention maps are the pretrained model's, not learned for your desks. Fine-tune it fully "
    "on the Train page for the best accuracy and for word order."
)


def describe_training(job: BackgroundJob[TrainProgress, SavedTraining]) -> JobProgress | None:
    """Step (or rows embedded), epoch, loss and time left, with the curves so far; None once
    training has ended."""
    snapshot = job.snapshot()
    if snapshot.status is not JobStatus.RUNNING:
        return idle_progress(snapshot)
    latest = snapshot.latest
    if latest is None:
        return JobProgress(0.0, "Loading the backbone and preparing batches…")
    eta = f"{latest.eta_s / 60:.1f} min" if latest.eta_s >= 60 else f"{latest.eta_s:.0f} s"
    fraction = min(latest.step / latest.total_steps, 1.0)
    if latest.phase == "embed":
        text = f"Embedding complaints: {latest.step:,}/{latest.total_steps:,} · about {eta} left"
        return JobProgress(fraction, text)
    if latest.phase == "head":
        return JobProgress(1.0, "Fitting the linear head and the bag of words…")
    return JobProgress(
        fraction,
        f"Step {latest.step}/{latest.total_steps} · epoch {latest.epoch} · "
        f"loss {latest.loss:.3f} · about {eta} left",
        details=lambda: render_curves(snapshot),
    )


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


@st.cache_data(show_spinner="Timing a few training steps on this server…", ttl=ESTIMATE_TTL_S,
               max_entries=32)  # fmt: skip
def _cached_estimate(_active: ActiveDataset, fingerprint: str, timing: str, _config: TrainConfig):
    """The estimate of one epoch's cost, cached by the data set and the settings that change
    it (`timing`), whoever asks: timing again costs seconds of the shared server."""
    from core.models.training_job import estimate_training

    return run_short(
        lambda: estimate_training(_active.dataset, _config), title="Estimate training time",
        kind="estimate",
    )  # fmt: skip


def training_estimate(active: ActiveDataset, config: TrainConfig) -> DurationEstimate:
    """How long training `config` on `active` will take here (ValueError if it cannot run)."""
    fields = asdict(config)
    timing = repr([(name, fields[name]) for name in _TIMING_FIELDS])
    estimate = _cached_estimate(active, active.dataset.fingerprint, timing, config)
    return estimate.for_budget(config.epochs, config.max_steps)


def default_model_name(prefix: str) -> str:
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def start_training_job(
    active: ActiveDataset, config: TrainConfig, model_name: str
) -> TrainingRun | None:
    """Queue the training as this session's training; None (with the reason shown) when the
    queue or the role refuses."""
    from core.models.training_job import start_training
    from core.paths import models_dir

    try:
        run = start_training(
            active.dataset, config, dataset_name=active.name, models_root=models_dir(),
            model_name=model_name, queue=get_job_queue(), requester=job_requester(),
        )  # fmt: skip
    except (ValueError, AccessDenied) as exc:
        st.error(md_escape(exc))
        return None
    st.session_state[TRAIN_JOB] = run
    return run


def activate_once(run: TrainingRun) -> bool:
    """Make a finished training's model this session's active model, once: later the user may
    switch, or the model may be deleted, and must not be switched back."""
    snapshot = run.job.snapshot()
    if snapshot.status is not JobStatus.DONE or st.session_state.get(ACTIVATED_KEY) == run.job.id:
        return False
    st.session_state[ACTIVATED_KEY] = run.job.id
    if snapshot.result.folder is None:
        return False
    set_active_model(snapshot.result.folder)
    return True


def render_first_model(active: ActiveDataset | None, page_key: str, *, stop: bool = True) -> None:
    """When no model is active: a saved model of this data set to use, or a quick model built
    in the background (about a minute), with its progress; the page reruns with the model
    active once it is saved. `stop`: a page that needs a model stops here."""
    from core.models.registry import models_of_dataset
    from core.paths import models_dir
    from ui.datasets import use_demo_dataset

    run: TrainingRun | None = st.session_state.get(TRAIN_JOB)
    if run is not None and run.job.snapshot().status.active:
        st.info(f"Building model {md_escape(run.model_name)} on {md_escape(run.dataset_name)}.")
        render_job_progress(run.job, describe=describe_training, key=f"{page_key}.first.cancel",
                            every=1.0, cancel_label="Cancel")  # fmt: skip
        _stop_if(stop)
        return
    if run is not None and activate_once(run):
        st.rerun()
    if run is not None and run.job.snapshot().status is JobStatus.FAILED:
        st.error(f"Training {md_escape(run.model_name)} failed: "
                 f"{md_escape(run.job.snapshot().error)}")  # fmt: skip
    st.info("No model is active. Train one or load a saved one on the Train page.")
    saved_models = models_of_dataset(models_dir(), active.dataset.fingerprint) if active else []
    if saved_models:
        newest = saved_models[0]
        label = f"Use {md_escape(newest.name)}, trained on this data set"
        if st.button(label, key=f"{page_key}.first.use", type="primary"):
            set_active_model(newest.path)
            st.rerun()
    elif current_actor().can(Permission.TRAIN):
        what = md_escape(active.name) if active else "the demo data"
        st.write(
            f"Or build a **quick model** on {what} now: the bundled MiniLM reads every complaint "
            "once and a linear head learns the desks. It takes about a minute; you can classify "
            "and explain as soon as it is saved, and fine-tune fully later."
        )
        if st.button("Build a quick model", key=f"{page_key}.first.quick", type="primary"):
            target = active if active is not None else use_demo_dataset()
            if start_training_job(target, TrainConfig(recipe=QUICK), default_model_name("quick")):
                st.rerun()  # else the refusal stays on screen
    st.page_link("pages/train.py", label="Go to Train", icon=":material/model_training:")
    _stop_if(stop)


def _stop_if(stop: bool) -> None:
    if stop:
        st.stop()


def render_quick_model_note(model: LoadedModel) -> None:
    """What a quick model can and cannot show, on every page that uses it."""
    from core.models.registry import card_recipe

    if card_recipe(model.card) == QUICK:
        st.info(QUICK_MODEL_NOTE, icon=":material/bolt:")
