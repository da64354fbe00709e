"""Order probes page: perturb a complaint and watch both models, and scan a data set for the
complaints where word order decides the desk."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.analysis.order_ablation import OrderAblation, order_ablation_of
from core.analysis.perturbations import ProbeConfig
from core.analysis.probe_compare import (
    DEMO_DESKS,
    DEMO_TEXT,
    ProbeResult,
    bow_is_order_blind,
    order_demo,
    run_probes,
)
from core.analysis.probe_scan import ScanConfig, ScanResult, bow_ceiling, twin_groups
from core.charts.probe_tables import (
    capped_frame,
    kind_stats_table,
    one_right_table,
    order_ablation_table,
    probe_table,
    twin_table,
)
from core.charts.probes import capped_chart, flip_rate_chart, probe_shift_chart
from core.checks import MAX_COMPLAINT_CHARS
from core.data.dataset import Dataset
from core.errors import UserError
from core.jobs import Job, JobSnapshot, JobStatus
from core.models.registry import LoadedModel
from core.tasks.probes import start_scan
from ui.auth import allowed, current_actor
from ui.caches import ABLATIONS, PROBES
from ui.datasets import require_dataset
from ui.figures import show_chart
from ui.jobs import (
    JobProgress,
    counted,
    describe_job,
    get_job_queue,
    job_requester,
    render_job_progress,
    run_short_cached,
)
from ui.safe import md_escape
from ui.state import get_probe_scan, set_probe_scan
from ui.widgets import require_model, shown_frame, shown_text

SHIFT_FORMAT = "%+.3f"


def probed(model: LoadedModel, text: str, config: ProbeConfig) -> ProbeResult:
    """Both models on `text` and its perturbations: on the short lane, kept in the probe cache."""
    return run_short_cached(
        PROBES, ("probe", model.key, text, config),
        lambda cancel: run_probes(model.neural, model.bow, text, config, cancel=cancel),
        title="Probe one complaint", kind="probe",
        spinner="Running both models on the perturbations…",
    )  # fmt: skip


def demonstrated(model: LoadedModel) -> ProbeResult:
    return run_short_cached(
        PROBES, ("demo", model.key),
        lambda cancel: order_demo(model.neural, model.bow),
        title="Word-order demonstration", kind="probe",
    )  # fmt: skip


def ablated(model: LoadedModel, text: str) -> OrderAblation:
    """The positional ablation of `text`: on the short lane (three passes of the transformer),
    kept in the ablation cache, so a rerun of the page costs no model call."""
    return run_short_cached(
        ABLATIONS, (model.key, text),
        lambda cancel: order_ablation_of(model.neural, text),  # as the model predicts
        title="Positional ablation", kind="probe",
    )  # fmt: skip


@st.cache_data(max_entries=4, show_spinner="Grouping the complaints by their bag of words…")
def twins_of(_dataset: Dataset, fingerprint: str) -> tuple:
    return twin_groups(_dataset.texts, _dataset.labels, _dataset.rows)


# ---------------------------------------------------------------------------------- one complaint


def render_bow_note(model: LoadedModel) -> None:
    if bow_is_order_blind(model.bow):
        st.info(
            "Rows marked *same bag of words* contain exactly the same words as the complaint, "
            "only in another order. The bag of words sees only which words occur and how "
            "often, so on those rows it **cannot** change its answer, by construction. Any change "
            "there is the transformer reading word order."
        )
    else:
        st.info(
            "This bag of words also counts pairs of neighbouring words (bigrams), so reordering "
            "can move it a little; a pure bag of words could not change on the *same bag of words* "
            "rows."
        )


def render_probe_form() -> tuple[str, ProbeConfig]:
    with st.form("probes.form"):
        text = st.text_area(
            "Complaint", value=DEMO_TEXT, key="probes.text", height=100,
            max_chars=MAX_COMPLAINT_CHARS,
        )  # fmt: skip
        left, middle, right = st.columns(3)
        shuffles = left.number_input("Random shuffles", 0, 10, 2, key="probes.shuffles")
        seed = middle.number_input("Seed", 0, 2**31 - 1, 0, key="probes.seed")
        invariance = right.checkbox("Typo, please, punctuation", True, key="probes.invariance")
        st.form_submit_button("Probe", type="primary")
    config = ProbeConfig(n_shuffles=int(shuffles), invariance=invariance, seed=int(seed))
    return text, config


def render_probe_result(result: ProbeResult) -> None:
    t, b = result.neural, result.bow
    left, right = st.columns(2)
    left.metric("Transformer on the original", md_escape(t.label))
    right.metric("Bag of words on the original", md_escape(b.label))
    if not result.outcomes:
        st.info("No perturbation applies to this complaint; try a longer one.")
        return
    st.dataframe(
        probe_table(result),
        hide_index=True,
        width="stretch",
        column_config={
            "transformer shift": st.column_config.NumberColumn(format=SHIFT_FORMAT),
            "bag-of-words shift": st.column_config.NumberColumn(format=SHIFT_FORMAT),
        },
    )
    show_chart(probe_shift_chart(result), stem="probe-shifts", key="probes.figure.shifts",
               width="stretch")  # fmt: skip


def render_ablation(model: LoadedModel, text: str) -> None:
    st.markdown("**Positional ablation**")
    st.caption(
        "The same wordpieces with their position ids shuffled, or all at one position: how much "
        "the transformer's answer owes to where the words stand."
    )
    try:
        result = ablated(model, text)
    except UserError as exc:
        st.info(f"Not available for this model: {md_escape(exc)}")
        return
    st.dataframe(order_ablation_table(result), hide_index=True, width="stretch")


def render_one_complaint(model: LoadedModel) -> None:
    st.subheader("Probe one complaint")
    text, config = render_probe_form()
    st.text(shown_text(text))  # as given (or masked), never interpreted
    try:
        result = probed(model, text, config)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    render_bow_note(model)
    main, side = st.columns([3, 2])
    with main:
        render_probe_result(result)
    with side:
        render_ablation(model, text)


# ---------------------------------------------------------------------------------- demonstration


def render_demo(model: LoadedModel) -> None:
    st.subheader("Paid by card, not by UPI")
    try:
        result = demonstrated(model)
    except UserError as exc:  # e.g. the short lane timed out on a very busy server
        st.error(md_escape(exc))
        return
    rows = [(result.text, result.neural, result.bow)]
    rows += [(o.perturbation.text, o.neural, o.bow) for o in result.outcomes]
    frame = pd.DataFrame(
        [
            {"complaint": text, "a reader's desk": DEMO_DESKS.get(text, ""),
             "transformer": t.label, "bag of words": b.label}
            for text, t, b in rows
        ]
    )  # fmt: skip
    st.dataframe(frame, hide_index=True, width="stretch")
    st.caption(
        "Both complaints have exactly the same words. The bag of words must give them the same "
        "desk, so it gets at most one of them right; a model that reads order can get both."
    )


# ---------------------------------------------------------------------------------- data set scan


def render_twins(dataset: Dataset) -> None:
    groups = twins_of(dataset, dataset.fingerprint)
    ceiling = bow_ceiling(groups, len(dataset))
    cols = st.columns(3)
    cols[0].metric("Same-bag groups with several desks", f"{len(groups):,}")
    capped = sum(len(g.labels) - g.reachable for g in groups)
    cols[1].metric("Rows out of a bag of words' reach", f"{capped:,}")
    cols[2].metric("Best possible bag-of-words accuracy", f"{ceiling:.1%}")
    if not groups:
        st.caption("No two complaints share a bag of words with different desks.")
        return
    left, right = st.columns([3, 2])
    left.dataframe(shown_frame(twin_table(groups)), hide_index=True, width="stretch", height=260)
    show_chart(capped_chart(capped_frame(groups)), stem="bag-of-words-ceiling",
               key="probes.figure.capped", container=right, width="stretch")  # fmt: skip


def render_scan_form(model: LoadedModel, dataset: Dataset) -> None:
    with st.form("probes.scan_form"):
        cols = st.columns(3)
        max_rows = cols[0].number_input("Rows to classify", 20, 5000, 400, 20, key="probes.rows")
        perturb_rows = cols[1].number_input("Rows to perturb", 0, 500, 40, 10, key="probes.prows")
        seed = cols[2].number_input("Seed", 0, 2**31 - 1, 0, key="probes.scan_seed")
        submitted = st.form_submit_button("Scan with both models", type="primary")
    if submitted:
        config = ScanConfig(max_rows=int(max_rows), perturb_rows=int(perturb_rows), seed=int(seed))
        try:
            run = start_scan(
                model.neural, model.bow, dataset, config,
                model_path=model.key, dataset_fingerprint=dataset.fingerprint,
                queue=get_job_queue(), requester=job_requester(),
            )  # fmt: skip
        except UserError as exc:
            st.error(md_escape(exc))
            return
        set_probe_scan(run)


def describe_scan(job: Job[ScanResult]) -> JobProgress | None:
    """The scan's phase, texts done and time left; None once it has ended."""

    def text(snapshot: JobSnapshot, eta: str) -> str:
        latest = snapshot.latest
        if latest is None:
            return "starting"
        return f"{latest.phase}: {counted(latest)} texts{eta}"

    return describe_job(job, text)


def render_scan_result(result: ScanResult) -> None:
    if result.cancelled:
        st.warning("The scan was cancelled; these are the results so far.")
    if result.neural_accuracy is not None:
        cols = st.columns(3)
        cols[0].metric("Rows classified", f"{len(result.scanned):,}")
        cols[1].metric("Transformer accuracy", f"{result.neural_accuracy:.1%}")
        cols[2].metric("Bag-of-words accuracy", f"{result.bow_accuracy:.1%}")
        st.caption(
            "On a sample (same-bag twins first). Rows the models were trained on flatter both."
        )
        only_t, only_b = st.tabs(
            [
                f"Only the transformer is right ({len(result.neural_only)})",
                f"Only the bag of words is right ({len(result.bow_only)})",
            ]
        )
        only_t.dataframe(shown_frame(one_right_table(result.neural_only)), hide_index=True)
        only_b.dataframe(shown_frame(one_right_table(result.bow_only)), hide_index=True)
    if result.kind_stats:
        st.markdown("**Flip rates over the perturbations**")
        left, right = st.columns([3, 2])
        left.dataframe(kind_stats_table(result.kind_stats), hide_index=True, width="stretch")
        show_chart(flip_rate_chart(result.kind_stats), stem="flip-rates",
                   key="probes.figure.flips", container=right, width="stretch")  # fmt: skip


def render_scan(model: LoadedModel, actor: Actor) -> None:
    st.subheader("Scan a data set")
    active = require_dataset("probes")
    if active is None:
        return
    dataset = active.dataset
    st.caption(f"Data set: {md_escape(active.name)} · {len(dataset):,} complaints")
    render_twins(dataset)
    if allowed(actor, Permission.RUN_JOBS, "Scanning a data set"):
        render_scan_form(model, dataset)
    run = get_probe_scan()
    if run is None or run.dataset_fingerprint != dataset.fingerprint:
        return
    if run.model_path != model.key:
        st.caption("The last scan used another model; scan again for this one.")
        return
    snapshot = run.job.snapshot()
    if snapshot.status.active:
        render_job_progress(run.job, describe=describe_scan, key="probes.cancel", every=0.5)
    elif snapshot.status is JobStatus.FAILED:
        st.error(md_escape(snapshot.error))
    elif snapshot.result is not None:
        render_scan_result(snapshot.result)
    elif snapshot.result_dropped:  # the queue keeps only its newest finished jobs' results
        st.info("This scan is no longer kept on the server; run it again.")


st.title("Order probes")
st.write("Where word order decides the desk, and which model notices.")
actor = current_actor()
model = require_model()
st.caption(f"This model routes with {model.blend.describe()}; the probes below test the "
           "transformer and the bag of words each on its own.")  # fmt: skip
render_one_complaint(model)
render_demo(model)
render_scan(model, actor)
