"""The Train page's view of this session's training: its progress while it runs, how it ended,
and once saved, both models' scores, the routing decision and the charts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.charts.results import confusion_chart, f1_comparison_chart
from core.jobs import JobStatus
from core.metrics import EvalReport
from core.models.blend import BLEND
from core.models.training_job import SavedTraining
from core.models.transformer.config import QUICK, backbone_label
from core.models.transformer.training import TrainResult
from core.tasks.training import TrainingRun
from ui.figures import show_chart
from ui.jobs import render_job_progress
from ui.safe import md_escape
from ui.training import QUICK_MODEL_NOTE, activate_once, describe_training, toast_cancelling

# (name, report, report on the word-order twins or None) per model the result table shows
ScoreRow = tuple[str, EvalReport, EvalReport | None]


def render_job(run: TrainingRun) -> None:
    """Progress while queued or running; then the outcome (the result when it is still kept)."""
    snapshot = run.job.snapshot()
    backbone = backbone_label(run.config.backbone)
    st.caption(f"On {md_escape(run.dataset_name)} with backbone {md_escape(backbone)}.")
    if snapshot.status.active:
        render_job_progress(
            run.job, describe=describe_training, key="train.cancel", every=1.0,
            cancel_label="Cancel training", on_cancel=toast_cancelling,
        )  # fmt: skip
    elif snapshot.status is JobStatus.FAILED:
        st.error(f"Training failed: {md_escape(snapshot.error)}")
    elif snapshot.status is JobStatus.CANCELLED:
        st.info("Training was cancelled; nothing was saved.")
    elif snapshot.result is None:  # finished long ago: the queue keeps only a summary
        st.info(f"Training finished and saved {md_escape(run.model_name)} (see Saved models).")
    else:
        render_result(run, snapshot.result)


def render_result(run: TrainingRun, saved: SavedTraining) -> None:
    """What was trained and saved, how the decision is made, and the scores."""
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
    render_choices(result)
    render_scores(score_rows(result))


def render_choices(result: TrainResult) -> None:
    """The recipe the data chose, the quick model's limits, the review policy and the blend."""
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
               "(a member joins only when it gets clearly more of them right: at least three "
               "rows and more than one standard error), so the decision's figures below "
               "flatter it a little.")  # fmt: skip


def score_rows(result: TrainResult) -> list[ScoreRow]:
    """Transformer, bag of words, and the blended decision when a blend decides."""
    rows = [("Transformer", result.neural_report, result.neural_twin_report),
            ("Bag of words", result.bow_report, result.bow_twin_report)]  # fmt: skip
    if result.blend.decided_by == BLEND:
        rows.append(("Decision (blend)", result.decision_report, result.decision_twin_report))
    return rows


def render_scores(rows: list[ScoreRow]) -> None:
    """The scores table, F1 per desk, and both models' confusion matrices."""
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
