"""A training as every page shows it: its progress and curves, the duration estimate before it
starts, the first model one click away on a page that needs a model, and what a quick model can
and cannot show."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import streamlit as st

from core.access import Permission
from core.charts.results import training_curve_chart, validation_curve_chart
from core.errors import UserError
from core.jobs import Job, JobSnapshot, JobStatus
from core.models.transformer.config import EMBED_PHASE, HEAD_PHASE, QUICK, TRAIN_PHASE, TrainConfig
from ui.auth import current_actor
from ui.figures import show_chart
from ui.jobs import (
    JobProgress,
    get_job_queue,
    idle_progress,
    job_requester,
    queued_progress,
    render_job_progress,
)
from ui.safe import md_escape
from ui.state import TRAIN_JOB, ActiveDataset, get_store, set_active_model

if TYPE_CHECKING:
    from core.models.registry import LoadedModel
    from core.models.training_job import SavedTraining
    from core.models.transformer.estimate import DurationEstimate
    from core.tasks.training import EstimateBoard, TrainingRun

# Settings that change what one epoch costs; epochs and the step limit rescale an estimate.
_TIMING_FIELDS = ("backbone", "recipe", "pooling", "batch_size", "max_length", "val_fraction",
                  "seed", "device", "positional_encoding", "class_weights")  # fmt: skip
ESTIMATE_TTL_S = 600  # the machine's load changes: time again after ten minutes
ESTIMATE_KEY = "train.estimate"  # Job: the estimate this session's Train page shows last
ACTIVATED_KEY = "train.activated"  # int: id of the finished training made the active model

QUICK_MODEL_NOTE = (
    "This is a **quick model**: the pretrained encoder was not trained on your desks, only a "
    'linear head on top of it. It routes by topic well, but it tells word-order twins ("paid '
    'by card, not by UPI" against "paid by UPI, not by card") apart only partly, and its '
    "attention maps are the pretrained model's, not learned for your desks. Fine-tune it fully "
    "on the Train page for the best accuracy and for word order."
)


def describe_training(job: Job[SavedTraining]) -> JobProgress | None:
    """Step (or rows embedded), epoch, loss and time left, with the curves so far; None once
    training has ended."""
    snapshot = job.snapshot()
    if snapshot.status is not JobStatus.RUNNING:
        return idle_progress(snapshot)
    latest = snapshot.latest
    if latest is None:
        return JobProgress(0.0, "Loading the backbone and preparing batches…")
    eta = _minutes_or_seconds(snapshot.eta_s)
    if latest.phase == EMBED_PHASE:
        text = f"Embedding complaints: {latest.done:,.0f}/{latest.total:,.0f}{eta}"
        return JobProgress(latest.fraction, text)
    if latest.phase == HEAD_PHASE:
        return JobProgress(1.0, "Fitting the linear head and the bag of words…")
    metrics = latest.detail  # core.models.transformer.loop.StepMetrics
    return JobProgress(
        latest.fraction,
        f"Step {latest.done:.0f}/{latest.total:.0f} · epoch {metrics.epoch} · "
        f"loss {metrics.loss:.3f}{eta}",
        details=lambda: render_curves(snapshot),
    )


def toast_cancelling() -> None:
    """What a Cancel click says at once: the loop stops at its next check, not now."""
    st.toast("Cancelling at the next step…")


def _minutes_or_seconds(eta_s: float | None) -> str:
    if eta_s is None:
        return ""
    return f" · about {eta_s / 60:.1f} min left" if eta_s >= 60 else f" · about {eta_s:.0f} s left"


def render_curves(snapshot: JobSnapshot[SavedTraining]) -> None:
    points = [(p.done, p.detail) for p in snapshot.history if p.phase == TRAIN_PHASE]
    left, right = st.columns(2)
    show_chart(
        training_curve_chart([step for step, _ in points], [m.loss for _, m in points]),
        stem="training-loss", key="training.figure.loss", container=left, width="stretch",
    )  # fmt: skip
    epochs = {m.epoch - 1: m for _, m in points if m.val_accuracy is not None}
    if epochs:
        show_chart(
            validation_curve_chart(
                list(epochs), [m.val_accuracy for m in epochs.values()],
                [m.val_macro_f1 for m in epochs.values()],
            ),
            stem="validation-scores", key="training.figure.validation", container=right,
            width="stretch",
        )  # fmt: skip


@st.cache_resource(show_spinner=False)
def _estimate_board() -> EstimateBoard:
    """The server's one board of training-time estimates, shared by every session."""
    from core.tasks.training import EstimateBoard

    return EstimateBoard(ttl_s=ESTIMATE_TTL_S)


def estimate_job(active: ActiveDataset, config: TrainConfig) -> Job[DurationEstimate]:
    """The estimate of training `config` on `active` on this server, started on the heavy lane
    (where the training would run) unless one with the same timing settings is running or was
    made in the last ten minutes. UserError when the queue refuses it."""
    from core.tasks.training import start_estimate

    fields = asdict(config)
    timing = repr([(name, fields[name]) for name in _TIMING_FIELDS])
    key = f"{active.dataset.fingerprint}:{timing}"
    job = _estimate_board().job(
        key,
        lambda: start_estimate(active.dataset, config, queue=get_job_queue(),
                               requester=job_requester()),
    )  # fmt: skip
    previous = st.session_state.get(ESTIMATE_KEY)
    if previous is not None and previous is not job and previous.status.active:
        # Settings changed before it ended: nobody here waits for it any more, and a training
        # started now must not queue behind estimates of settings no page shows.
        previous.cancel()
    st.session_state[ESTIMATE_KEY] = job
    return job


def render_estimate_wait(job: Job) -> None:
    """While the estimate is queued or running: a line that says so, polled until it ends (then
    the page reruns to show it)."""
    st.fragment(_estimate_wait, run_every=1.0)(job)


def _estimate_wait(job: Job) -> None:
    snapshot = job.snapshot()
    if not snapshot.status.active:
        st.rerun()
    if snapshot.status is JobStatus.QUEUED:
        st.caption(queued_progress(snapshot).text.replace("Waiting", "Duration estimate waiting"))
    else:
        st.caption("Timing a few training steps on this server for the duration estimate…")


def default_model_name(prefix: str) -> str:
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def start_training_job(
    active: ActiveDataset, config: TrainConfig, model_name: str
) -> TrainingRun | None:
    """Queue the training as this session's training; None (with the reason shown) when the
    queue or the role refuses."""
    from core.paths import models_dir
    from core.tasks.training import start_training

    try:
        run = start_training(
            active.dataset, config, dataset_name=active.name, models_root=models_dir(),
            model_name=model_name, queue=get_job_queue(), requester=job_requester(),
            store=get_store(),
        )  # fmt: skip
    except UserError as exc:
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
    from core.models.transformer.config import quick_backbone
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
            config = TrainConfig(recipe=QUICK, backbone=quick_backbone())
            if start_training_job(target, config, default_model_name("quick")):
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
