"""Explain page: for one complaint, what each model relied on, word by word, and every head's
attention."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.analysis.explain import AttentionMaps, ExplainConfig, Explanation
from core.analysis.lstm_explain import explain_any
from core.analysis.probe_compare import DEMO_TEXT
from core.analysis.story import TOP_HEADS
from core.charts.attention_maps import (
    attention_grid_chart,
    attention_head_chart,
    cls_attention_chart,
    rollout_chart,
)
from core.charts.explain import explanation_chart, word_scores_chart
from core.charts.explain_html import escaped_explanation_document, escaped_highlight_html
from core.charts.word_strip import WordRow, word_strip_chart
from core.checks import MAX_COMPLAINT_CHARS
from core.data.dataset import Dataset
from core.errors import UserError
from core.jobs import Job, JobStatus
from core.models.blend import BLEND, FROZEN, Blend
from core.models.classifier import Prediction
from core.models.registry import LoadedModel
from core.tasks.probes import ReviewRun, start_review
from ui.auth import allowed, current_actor
from ui.caches import EXPLANATIONS
from ui.datasets import require_dataset
from ui.figures import render_chart_images, show_chart
from ui.jobs import (
    JobProgress,
    counted,
    describe_job,
    get_job_queue,
    job_requester,
    render_job_progress,
    run_short_cached,
)
from ui.lstm import is_lstm_model, render_lstm_beside, render_lstm_explanation
from ui.presenter import presenter_on, render_explain_story
from ui.safe import md_escape
from ui.state import (
    EXPLAIN_PICKED,
    EXPLAIN_SOURCE,
    EXPLAIN_TEXT,
    EXPLAIN_TYPED,
    explain_row,
    get_explain_review,
    set_explain_review,
)
from ui.widgets import require_model, shown_frame, shown_text

PREDICTED = "the transformer's prediction"
ATTENTION_TABS = ["Every head", "One head", "[CLS] row", "Rollout"]
ATTENTION_WIDGETS = ("explain.layer", "explain.head")
# The explanation whose pictures were asked for ("<key>.prepared", ui.figures), and those keys.
PICTURES_FOR = "explain.pictures_for"
PICTURE_KEYS = (
    *(
        f"explain.figure.{name}"
        for name in ("strip", "bars", "all", "grid", "head", "cls", "rollout")
    ),
    *(f"explain.story.head{rank}" for rank in range(1, TOP_HEADS + 1)),  # ui.presenter
)
REVIEW_SIZES = (30, 60, 120, 240)  # rows both models classify for the picker (a background job)
CONVERGED = ExplainConfig.max_relative_delta  # the integration adds steps until |delta| fits


def explained(model: LoadedModel, text: str, target: str | None, max_steps: int) -> Explanation:
    """On the short lane; kept in the explanation cache per (model, text, target, step limit)."""
    config = ExplainConfig(target=target, max_steps=max_steps)
    return run_short_cached(
        EXPLANATIONS, (model.key, text, config),
        lambda cancel: explain_any(
            model.neural, model.bow, text, config, cancel=cancel, decider=model.scorer
        ),
        title="Explain one complaint", kind="explain", spinner="Explaining…",
    )  # fmt: skip


def render_typed() -> str | None:
    """The typed complaint (the form keeps the last one explained; an example to start with)."""
    with st.form("explain.typed"):
        text = st.text_area(
            "Complaint", value=DEMO_TEXT, key=EXPLAIN_TEXT, height=110,
            max_chars=MAX_COMPLAINT_CHARS,
        )  # fmt: skip
        st.form_submit_button("Explain", type="primary")
    return text if text.strip() else None


def _requested_position(dataset: Dataset) -> int:
    """Position of the `?row=N` row in the data set, or -1."""
    row = explain_row()
    return dataset.rows.index(row) if row is not None and row in dataset.rows else -1


def current_review(
    model: LoadedModel, dataset: Dataset, size: int, include: tuple[int, ...]
) -> ReviewRun:
    """This session's classified sample for (model, data set, size, row), started if missing."""
    run = get_explain_review()
    wanted = (model.key, dataset.fingerprint, size, include)
    if (
        run is None
        or (run.model_path, run.dataset_fingerprint, run.max_rows, run.include) != wanted
    ):
        run = start_review(
            model.neural, model.bow, dataset, max_rows=size, include=include,
            model_path=model.key, dataset_fingerprint=dataset.fingerprint,
            queue=get_job_queue(), requester=job_requester(),
        )  # fmt: skip
        set_explain_review(run)
    return run


def describe_review(job: Job[pd.DataFrame | None]) -> JobProgress | None:
    """Rows of the sample classified so far and the time left; None once it has ended."""
    return describe_job(
        job,
        lambda snapshot, eta: f"Classifying the sample: {counted(snapshot.latest)}{eta}",
    )


def render_row_choice(frame: pd.DataFrame, dataset: Dataset, requested: int) -> str:
    st.caption(
        f"A sample of {len(frame):,} of {len(dataset):,} complaints (same-bag twins first), "
        "misclassified ones first. Rows the models were trained on look easier than they are."
    )
    st.dataframe(
        shown_frame(frame.drop(columns="position")), hide_index=True, width="stretch", height=220
    )
    rows = frame["row"].tolist()
    index = rows.index(dataset.rows[requested]) if requested >= 0 else 0
    wrong = dict(zip(rows, frame["wrong"], strict=True))
    row = st.selectbox(
        "Row", rows, index=index, key="explain.row",
        format_func=lambda r: f"row {r}" + (f" · wrong: {wrong[r]}" if wrong[r] else ""),
    )  # fmt: skip
    position = int(frame.loc[frame["row"] == row, "position"].iloc[0])
    st.caption(f"Given desk: {md_escape(dataset.labels[position])}")
    return dataset.texts[position]


def render_picked(model: LoadedModel, actor: Actor) -> str | None:
    active = require_dataset("explain")
    if active is None:
        return None
    if not allowed(actor, Permission.RUN_JOBS, "Classifying a sample of the data set"):
        st.info("Type a complaint to explain it instead.")
        return None
    dataset = active.dataset
    requested = _requested_position(dataset)
    size = st.select_slider("Rows to classify", REVIEW_SIZES, value=60, key="explain.size")
    run = current_review(model, dataset, size, (requested,) if requested >= 0 else ())
    snapshot = run.job.snapshot()
    if snapshot.status.active:
        render_job_progress(
            run.job, describe=describe_review, key="explain.cancel_review", every=0.5
        )
        return None
    if snapshot.status is JobStatus.FAILED:
        st.error(md_escape(snapshot.error))
        return None
    if snapshot.result is None:
        why = "is no longer kept on the server" if snapshot.result_dropped else "was cancelled"
        st.info(f"The classified sample {why}; change the number of rows to start again.")
        return None
    return render_row_choice(snapshot.result, dataset, requested)


def render_target(model: LoadedModel) -> str | None:
    options = [PREDICTED] + model.classes
    choice = st.selectbox("Explain the desk", options, key="explain.target")
    return None if choice == PREDICTED else choice


def explained_frozen(
    model: LoadedModel, text: str, target: str | None, max_steps: int
) -> Explanation | None:
    """The frozen encoder's own explanation where it carries the decision (a blend of both
    recipes, core.models.blend), for the desk the transformer's explanation is for; cached like
    `explained`. None for other models."""
    if model.frozen is None or FROZEN not in model.blend.carrying:
        return None
    config = ExplainConfig(target=target, max_steps=max_steps)
    frozen = model.frozen
    return run_short_cached(
        EXPLANATIONS, (model.key, FROZEN, text, config),
        lambda cancel: explain_any(
            frozen.neural, model.bow, text, config, cancel=cancel, decider=frozen.scorer
        ),
        title="Explain one complaint (frozen encoder)", kind="explain", spinner="Explaining…",
    )  # fmt: skip


def render_predictions(expl: Explanation, blend: Blend, f: Prediction | None = None) -> None:
    """Each member's answer and the decision; `f`: the frozen encoder's, where it has a share."""
    t, b = expl.neural, expl.bow
    decision = blend.decide(t, b, f)
    metrics = st.columns(4 if f is not None else 3)
    metrics[0].metric("Decision", md_escape(decision.label))
    metrics[1].metric("Transformer", md_escape(t.label))
    if f is not None:
        metrics[2].metric("Frozen encoder", md_escape(f.label))
    metrics[-1].metric("Bag of words", md_escape(b.label))
    shown = [name for name in blend.carrying if name != FROZEN or f is not None]
    st.caption(f"The decision is made by {blend.describe()}; it is carried by the "
               f"{' and the '.join(shown)}. The words below show why each model gave its own "
               "answer.")  # fmt: skip
    columns = {
        "desk": list(t.probabilities),
        "transformer": list(t.probabilities.values()),
        "bag of words": [b.probabilities[d] for d in t.probabilities],
    }
    if f is not None:
        columns[FROZEN] = [f.probabilities[d] for d in t.probabilities]
    if blend.decided_by == BLEND:
        columns["decision"] = [decision.probabilities[d] for d in t.probabilities]
    frame = pd.DataFrame(columns)
    st.dataframe(frame, hide_index=True, column_config=_probability_columns())


def frozen_word_row(frozen: Explanation | None) -> WordRow | None:
    """The frozen encoder's Integrated Gradients as one more row of the word grid."""
    if frozen is None:
        return None
    words = tuple(w.text for w in frozen.words)
    return WordRow(f"{FROZEN} (Integrated Gradients)", words, tuple(frozen.neural_scores),
                   tuple(frozen.neural_seen), frozen.neural.label)  # fmt: skip


def _probability_columns() -> dict:
    return {
        c: st.column_config.ProgressColumn(c, min_value=0.0, max_value=1.0, format="%.3f")
        for c in ("transformer", FROZEN, "bag of words", "decision")
    }


def render_words(expl: Explanation, extra: WordRow | None = None) -> None:
    st.subheader("Word by word")
    # Raw HTML is justified here only: a two-row, word-aligned colour highlight that no Streamlit
    # element draws. Every word, label and tooltip in it is html.escape'd by the builder.
    st.html(escaped_highlight_html(expl, extra=extra))  # every string inside is html.escape'd
    render_chart_images(  # the same strip drawn as a picture for a deck, built on a click
        lambda: word_strip_chart(expl, extra=extra), stem="word-strip",
        key="explain.figure.strip", label="Word strip",
    )  # fmt: skip
    relative = expl.relative_delta
    share = "n/a" if relative is None else f"{relative:.1%}"
    st.caption(
        f"Transformer: Integrated Gradients on the word embeddings ({expl.tokens.n_steps} steps, "
        f"added where the path needed them until the delta was at most {CONVERGED:.0%} of the "
        f"gap; PAD baseline keeping [CLS]/[SEP]); convergence delta {expl.delta:+.4f}, {share} of "
        f"the logit gap {expl.logit_gap:+.3f}. Bag of words: each word's share of its "
        "centred logit. Both rows are in log-odds against the average desk, each row scaled to "
        "its own largest value. Grey dashed words were cut off by the transformer's length limit."
    )
    if relative is not None and relative > CONVERGED:
        st.warning(
            f"The attributions did not converge within {expl.tokens.n_steps} steps "
            f"(delta {relative:.1%} of the logit gap); raise the step limit."
        )
    # Built only while open: a closed expander's chart would be sent and drawn all the same.
    with st.expander("Scores as bars", key="explain.bars", on_change="rerun") as bars:
        if bars.open:
            show_chart(word_scores_chart(expl), stem="word-scores", key="explain.figure.bars",
                       width="stretch")  # fmt: skip
    st.download_button(
        "Download the explanation (HTML)",
        escaped_explanation_document(expl, extra=extra),
        file_name="explanation.html",
        mime="text/html",
        key="explain.download",
    )
    render_chart_images(
        lambda: explanation_chart(expl, extra=extra), stem="explanation",
        key="explain.figure.all", label="The whole explanation",
    )  # fmt: skip


def render_attention(expl: Explanation) -> None:
    maps = expl.attention
    st.subheader("Attention")
    st.caption(
        f"{maps.n_layers} layers × {maps.n_heads} heads over {len(maps.tokens)} tokens. Attention "
        "shows where each token looks, not why the model decided: read it beside the attributions."
    )
    # Lazy tabs: only the open tab's chart is built and sent to the browser (MiniLM's grid alone
    # is 41,472 cells); opening another tab reruns the page, which finds the explanation cached.
    keep_widget_state(ATTENTION_WIDGETS + (f"explain.grid_layers.{maps.n_layers}",))
    tabs = st.tabs(ATTENTION_TABS, key="explain.attention", on_change="rerun")
    views = (render_grid, render_one_head, render_cls_row, render_rollout)
    for tab, view in zip(tabs, views, strict=True):
        if tab.open:
            with tab:
                view(maps)


def keep_widget_state(keys: tuple[str, ...]) -> None:
    """Keep these widgets' values while their tab is closed (Streamlit forgets the value of a
    widget that a run does not draw)."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def render_grid(maps: AttentionMaps) -> None:
    """The heads of the layers picked (the last by default): a browser draws one layer of MiniLM
    (6,912 cells) in a blink and all six (41,472) in about a second: more layers are a choice."""
    key = f"explain.grid_layers.{maps.n_layers}"  # a model with other layers starts afresh
    picked = st.pills(
        "Layers", range(1, maps.n_layers + 1), selection_mode="multi", key=key,
        default=None if key in st.session_state else [maps.n_layers],
    )  # fmt: skip
    if not picked:
        st.info("Pick one or more layers to draw their heads.")
        return
    chart = attention_grid_chart(maps, layers=[layer - 1 for layer in picked])
    every = len(picked) == maps.n_layers
    stem = "attention-grid" if every else "attention-grid-layers-" + "-".join(map(str, picked))
    # its natural width, or the column's if narrower
    show_chart(chart, stem=stem, key="explain.figure.grid", width=chart.width)


def render_one_head(maps: AttentionMaps) -> None:
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(1, maps.n_layers + 1), key="explain.layer")
    head = right.selectbox("Head", range(1, maps.n_heads + 1), key="explain.head")
    one = attention_head_chart(maps, layer - 1, head - 1)
    show_chart(one, stem=f"attention-layer-{layer}-head-{head}", key="explain.figure.head")


def render_cls_row(maps: AttentionMaps) -> None:
    if maps.has_cls:
        show_chart(cls_attention_chart(maps), stem="attention-cls-row", key="explain.figure.cls")
    else:
        st.info("This model has no [CLS] token: it averages all tokens instead.")


def render_rollout(maps: AttentionMaps) -> None:
    show_chart(rollout_chart(maps), stem="attention-rollout", key="explain.figure.rollout")


def forget_old_pictures(explained_for: tuple) -> None:
    """Pictures asked for (PNG and SVG) belong to one explanation: when another is shown, drop
    them here, so that no run pays for building the old pictures again (the whole explanation
    as one picture: tenths of a second) only to find that they changed (ui.figures)."""
    if st.session_state.get(PICTURES_FOR) == explained_for:
        return
    for key in PICTURE_KEYS:
        st.session_state.pop(f"{key}.prepared", None)
    st.session_state[PICTURES_FOR] = explained_for


def render_explanation(
    model: LoadedModel, text: str, target: str | None, max_steps: int, *, presenting: bool = False
) -> None:
    st.text(shown_text(text))  # as given (or masked), never interpreted
    forget_old_pictures((model.key, text, target, max_steps))
    try:
        expl = explained(model, text, target, max_steps)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    if is_lstm_model(model):  # no attention heads: its gradient × input and the bag of words
        render_lstm_explanation(expl, model.blend)
        return
    if presenting:  # the story of the complaint in order; every detail still follows below
        render_explain_story(model, text, expl)
    try:  # the frozen encoder's own reasons, where it carries the decision
        frozen = explained_frozen(model, text, target, max_steps)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    # its answer where the decision reads it: its explanation's, where it carries the decision
    said = frozen.neural if frozen is not None else model.frozen_prediction(text)
    render_predictions(expl, model.blend, said)
    beside = render_lstm_beside(model, text, expl)  # the LSTM's row, if one is chosen
    render_words(expl, beside or frozen_word_row(frozen))
    render_attention(expl)


st.title("Explain")
st.write("What each model relied on for one complaint, and where every attention head looks.")
actor = current_actor()  # the frame's check again: a page reached without app.py stops here too
presenting = presenter_on("explain")
model = require_model()
source = st.radio(
    "Where the complaint comes from", [EXPLAIN_TYPED, EXPLAIN_PICKED],
    index=1 if explain_row() else 0, horizontal=True, key=EXPLAIN_SOURCE,
)  # fmt: skip
text = render_typed() if source == EXPLAIN_TYPED else render_picked(model, actor)
if text is None:
    st.stop()
left, right = st.columns([2, 1])
with left:
    target = render_target(model)
max_steps = right.slider(
    "Step limit", 16, 256, ExplainConfig.max_steps, 8, key="explain.steps",
    help=f"Integration steps spent at most; steps are added until the convergence delta is at "
    f"most {CONVERGED:.0%} of the logit gap. A higher limit is slower only where it is needed.",
)  # fmt: skip
render_explanation(model, text, target, max_steps, presenting=presenting)
