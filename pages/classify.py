"""Classify page: route one typed complaint, or a whole file, with the active model."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from core.access import Permission
from core.charts.results import probability_chart
from core.checks import MAX_COMPLAINT_CHARS
from core.data.limits import DataError
from core.errors import UserError
from core.jobs import Job
from core.models.classify import classify_one, routed_predictions
from core.models.flagging import REASON_TEXT, UNKNOWN, UNSURE
from core.models.registry import LoadedModel
from core.review.triage import enqueue_uncertain, triage_batch_id
from core.tasks.classify import ClassifiedFile, classify_in_background
from ui.auth import allowed, current_actor
from ui.downloads import render_table_downloads
from ui.figures import show_chart
from ui.jobs import (
    JobProgress,
    counted,
    describe_job,
    get_job_queue,
    job_requester,
    render_unfinished,
    run_short,
)
from ui.lstm import choose_lstm, render_lstm_prediction
from ui.safe import md_escape
from ui.state import CLASSIFY_JOB, get_store
from ui.uploads import pick_text_column, read_upload
from ui.widgets import require_model, shown_frame

ClassifyJob = Job[ClassifiedFile | None]


@dataclass(frozen=True)
class ClassifyRun:
    """A file being classified in the background, and what the result will be called."""

    job: ClassifyJob
    file_name: str
    text_col: str
    threshold: float
    # The finished job's summary, kept here once seen: the queue keeps the result objects of
    # its newest finished jobs only, while the file stays until this session ends.
    classified: ClassifiedFile | None = None


def render_single(model: LoadedModel, threshold: float) -> None:
    with st.form("classify.one"):
        text = st.text_area(
            "Complaint", key="classify.text", height=140, max_chars=MAX_COMPLAINT_CHARS,
            placeholder="e.g. I paid by card, not by UPI, and the amount was debited twice.",
        )  # fmt: skip
        lstm = choose_lstm("classify", model)  # a saved LSTM beside (none: no selector)
        submitted = st.form_submit_button("Classify", type="primary")
    if not submitted:
        return
    if not text.strip():
        st.error("Type a complaint first.")
        return
    try:
        routed = run_short(
            lambda cancel: classify_one(model, text, review_threshold=threshold),
            title="Classify one complaint", kind="classify-one",
        )  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    row = routed.row
    decision, neural, bow = st.columns(3)
    decision.metric("Decision", md_escape(row["predicted_label"]), f"{row['confidence']:.0%} sure",
                    delta_color="off")  # fmt: skip
    neural.metric(model.neural_name, md_escape(row["transformer_label"]),
                       f"{row['transformer_confidence']:.0%} sure", delta_color="off")  # fmt: skip
    bow.metric("Bag of words", md_escape(row["bow_label"]), f"{row['bow_confidence']:.0%} sure",
               delta_color="off")  # fmt: skip
    render_lstm_prediction(lstm, text)
    st.caption(f"The decision is made by {model.blend.describe()}, as this model's validation "
               f"rows chose (Train page, card). The {model.neural_name.lower()} runs as "
               f"{model.describe_routing()}.")  # fmt: skip
    if row["needs_review"]:
        why = review_explanation(row, threshold)
        st.warning(f"Needs review: {why}.")
    else:
        st.success("Confident enough to route.")
    show_chart(probability_chart(routed.probabilities), stem="desk-probabilities",
               key="classify.figure.probabilities", width="stretch")  # fmt: skip


def review_explanation(row: pd.Series, threshold: float) -> str:
    """Why one routed complaint goes to a person, in words (labels escaped)."""
    reason = str(row["review_reason"])
    if reason == UNKNOWN:
        return (f"{REASON_TEXT[UNKNOWN]} (unknown-desk score {row['unknown_desk_score']:.2f}: "
                f"less like any desk than {row['unknown_desk_score']:.0%} of the complaints this "
                "model was checked on)")  # fmt: skip
    if reason == UNSURE:
        # the decision's probabilities, whoever decides (core.models.classify)
        decision = {str(c)[len("prob_") :]: float(row[c]) for c in row.index
                    if str(c).startswith("prob_")}  # fmt: skip
        first, second = sorted(decision, key=decision.get, reverse=True)[:2]
        return (f"{REASON_TEXT[UNSURE]}: {md_escape(first)} {decision[first]:.0%} or "
                f"{md_escape(second)} {decision[second]:.0%}, below {threshold:.0%} "
                "confidence")  # fmt: skip
    return REASON_TEXT.get(reason, reason)


def render_file(model: LoadedModel, threshold: float) -> None:
    upload = st.file_uploader(
        "Complaints to classify (CSV, TSV, XLSX or Parquet)",
        type=["csv", "tsv", "xlsx", "parquet"], key="classify.upload",
    )  # fmt: skip
    run: ClassifyRun | None = st.session_state.get(CLASSIFY_JOB)
    if upload is not None:
        try:
            table = read_upload(upload).table
        except DataError as exc:
            st.error(md_escape(exc))
            return
        text_col = pick_text_column(table, key=f"classify.col.{upload.name}")
        busy = run is not None and run.job.snapshot().status.active
        ready = text_col is not None and not busy
        if st.button(f"Classify {len(table):,} rows", key="classify.start", disabled=not ready):
            run = start(model, table, text_col, threshold, upload.name) or run
            st.session_state[CLASSIFY_JOB] = run
    if run is not None:
        render_run(run)


def start(
    model: LoadedModel, table: pd.DataFrame, text_col: str, threshold: float, file_name: str
) -> ClassifyRun | None:
    """Queue the file's classification; None (with the reason shown) when refused."""
    try:
        job = classify_in_background(
            model, table, text_col=text_col, review_threshold=threshold,
            queue=get_job_queue(), requester=job_requester(),
        )  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return None
    return ClassifyRun(job, file_name, text_col, threshold)


def describe_progress(job: ClassifyJob) -> JobProgress | None:
    """Rows classified so far and the time left; None once the job has ended."""
    return describe_job(
        job,
        lambda snapshot, eta: f"{counted(snapshot.latest)} complaints{eta}",
    )


def render_run(run: ClassifyRun) -> None:
    snapshot = run.job.snapshot()
    if render_unfinished(run.job, snapshot, describe=describe_progress, key="classify.cancel",
                         cancelled="Classification was cancelled."):  # fmt: skip
        return
    classified: ClassifiedFile | None = run.classified or snapshot.result
    if classified is not None and run.classified is None:
        st.session_state[CLASSIFY_JOB] = replace(run, classified=classified)
    if classified is None or not classified.path.is_file():
        st.info("This classification is no longer kept on the server; classify the file again.")
        return
    result = classified.read()  # from the session's scratch file: the queue holds no table
    render_result(result, classified, run.file_name)
    render_send_to_triage(result, run)


def render_result(result: pd.DataFrame, classified: ClassifiedFile, file_name: str) -> None:
    reasons = result["review_reason"].value_counts()
    cols = st.columns(4)
    cols[0].metric("Classified", f"{classified.rows:,}")
    cols[1].metric("Unsure", f"{int(reasons.get(UNSURE, 0)):,}",
                   help=f"{REASON_TEXT[UNSURE].capitalize()}: below the threshold")  # fmt: skip
    cols[2].metric("Unknown desk", f"{int(reasons.get(UNKNOWN, 0)):,}",
                   help=f"{REASON_TEXT[UNKNOWN].capitalize()}: unknown-desk score above the "
                   "model's threshold")  # fmt: skip
    cols[3].metric("Models disagree", f"{classified.models_disagree:,}")
    st.dataframe(shown_frame(result), hide_index=True, width="stretch")
    stem = file_name.rsplit(".", 1)[0] + "_classified"
    render_table_downloads(
        result, stem, label="Download {fmt}", keys=("classify.csv", "classify.xlsx")
    )


def render_send_to_triage(result: pd.DataFrame, run: ClassifyRun) -> None:
    unsure = int(result["needs_review"].sum())
    if unsure == 0:
        return
    if st.button(f"Send {unsure:,} flagged predictions to the triage queue", key="classify.triage"):
        texts = result[run.text_col].fillna("").astype(str).tolist()
        try:
            added = enqueue_uncertain(
                get_store(), texts, routed_predictions(result), threshold=run.threshold,
                flagged=result["needs_review"].tolist(),
                batch=triage_batch_id(run.file_name, texts), rows=range(2, len(texts) + 2),
                decided_by=str(result["decided_by"].iloc[0]), actor=current_actor(),
            )  # fmt: skip
        except UserError as exc:  # a read-only store, a role taken away, the hourly cap
            st.error(f"Not sent to the triage queue: {md_escape(exc)}")
            return
        st.success(f"{len(added):,} added to the triage queue ({unsure - len(added):,} were "
                   "already there).")  # fmt: skip
        st.page_link("pages/triage.py", label="Open the triage queue", icon=":material/inbox:")


st.title("Classify")
actor = current_actor()
model = require_model()
if st.session_state.get("classify.threshold_of") != model.key:  # a model starts at its own
    st.session_state["classify.threshold_of"] = model.key
    st.session_state["classify.threshold"] = round(model.review.confidence_threshold, 2)
threshold = st.slider(
    "Human-review threshold", 0.0, 1.0, step=0.01, key="classify.threshold",
    help="A prediction whose top probability is below this is flagged for a person to check "
    "(unsure). The starting value is this model's own, chosen on its validation rows.",
)  # fmt: skip
st.caption(f"This model flags a complaint when it is {md_escape(model.review.describe())}. "
           f"How it was chosen: {md_escape(model.review.rule)}.")  # fmt: skip
one, many = st.tabs(["One complaint", "A file"])
with one:
    render_single(model, threshold)
with many:
    if allowed(actor, Permission.RUN_JOBS, "Classifying a whole file"):
        render_file(model, threshold)
