"""The LSTM on the pages: a saved LSTM shown beside the bag of words (Classify, Explain), an
active model that is itself an LSTM explained without attention (Explain), and the Attention
lab's trained comparison of the order models run as a job. Pages call one function each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.access import Permission
from core.errors import UserError
from core.jobs import Job, JobStatus
from core.paths import models_dir
from ui.auth import allowed, current_actor
from ui.caches import EXPLANATIONS
from ui.datasets import DEMO_NAME, use_demo_dataset
from ui.figures import render_chart_images, show_chart
from ui.jobs import (
    JobProgress,
    counted,
    describe_job,
    get_job_queue,
    job_requester,
    render_job_progress,
    run_short,
    run_short_cached,
)
from ui.safe import md_escape
from ui.state import get_active_dataset, load_shared_model, saved_models

if TYPE_CHECKING:  # types only: a page without an LSTM imports no torch through this module
    from core.analysis.explain import Explanation
    from core.analysis.lstm_explain import LstmWordScores
    from core.charts.word_strip import WordRow
    from core.lab.order_models import OrderModels
    from core.models.blend import Blend
    from core.models.classifier import Prediction
    from core.models.registry import LoadedModel, ModelSummary

NO_LSTM = "None"
LSTM_ROW = "LSTM (gradient x input)"
LSTM_NOTE = (
    "A bidirectional LSTM trained from scratch on the same words: it reads word order, one word "
    "after the other, where the bag of words cannot."
)
# Page-local session keys of the Attention lab's trained comparison.
READERS_RUN = "attention.readers_run"  # OrderModelsRun: the comparison on the queue (or finished)
READERS_RESULTS = "attention.readers_results"  # dict: data set fingerprint -> OrderModels


# --------------------------------------------------------------------------- the LSTM beside


def saved_lstms(exclude: LoadedModel | None = None) -> list[ModelSummary]:
    """The saved models whose backbone is the LSTM, newest first, without `exclude`."""
    from core.models.transformer.config import LSTM

    skip = None if exclude is None else exclude.path.name
    return [s for s in saved_models() if s.backbone == LSTM and s.name != skip]


def choose_lstm(page_key: str, active: LoadedModel) -> LoadedModel | None:
    """An "LSTM beside" selector of the saved LSTMs (nothing when none is saved) and the chosen
    one, loaded through the shared model cache; None when none is chosen or it cannot load."""
    from core.models.card import card_digest

    names = [s.name for s in saved_lstms(exclude=active)]
    if not names:
        return None
    choice = st.selectbox(
        "LSTM beside", [NO_LSTM, *names], key=f"{page_key}.lstm",
        help="A saved LSTM (trained with the backbone lstm) to show beside the bag of words.",
    )  # fmt: skip
    if choice == NO_LSTM:
        return None
    folder = models_dir() / choice
    digest = card_digest(folder)
    try:
        if digest is None:
            raise UserError(f"model {choice!r} is no longer saved; pick another")
        return load_shared_model(str(folder), digest)
    except UserError as exc:
        st.error(md_escape(exc))
        return None


def lstm_prediction(lstm: LoadedModel, text: str) -> Prediction:
    """The LSTM's answer for one complaint, on its runtime (as Classify shows every model's)."""
    from core.checks import check_complaint
    from core.models.classifier import Prediction

    text = check_complaint(text, purpose="classify")
    pred_probs = lstm.neural.predict_proba([text])[0]  # (n_classes,)
    return Prediction.of([str(c) for c in lstm.neural.classes_], pred_probs)


def render_lstm_metric(lstm: LoadedModel, prediction: Prediction, container=st) -> None:
    container.metric(
        f"LSTM ({md_escape(lstm.path.name)})", md_escape(prediction.label),
        f"{prediction.confidence:.0%} sure", delta_color="off",
    )  # fmt: skip


def render_lstm_prediction(lstm: LoadedModel | None, text: str) -> None:
    """Classify: the chosen LSTM's desk and confidence, beside the other models' (nothing
    without an LSTM)."""
    if lstm is None:
        return
    try:
        prediction = run_short(
            lambda cancel: lstm_prediction(lstm, text),
            title="Classify one complaint with the LSTM", kind="classify-one",
        )  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    render_lstm_metric(lstm, prediction, st.columns(3)[2])
    st.caption(LSTM_NOTE)


def lstm_scores(lstm: LoadedModel, text: str, expl: Explanation) -> LstmWordScores:
    """The LSTM's gradient × input for the explained desk, on the explanation's words; on the
    short lane, kept in the explanation cache."""
    from core.analysis.lstm_explain import METHOD, explain_lstm_classifier

    words = tuple(w.text for w in expl.words)
    return run_short_cached(
        EXPLANATIONS, (lstm.key, text, expl.target, METHOD),
        lambda cancel: explain_lstm_classifier(
            lstm.neural, text, target=expl.target, words=words
        ),
        title="Explain one complaint with the LSTM", kind="explain", spinner="Asking the LSTM…",
    )  # fmt: skip


def render_lstm_beside(active: LoadedModel, text: str, expl: Explanation) -> WordRow | None:
    """Explain: the "LSTM beside" selector, the chosen LSTM's desk, and its row for the word
    grid (None without an LSTM, or when it cannot explain the desk)."""
    from core.charts.word_strip import WordRow

    lstm = choose_lstm("explain", active)
    if lstm is None:
        return None
    try:
        scores = lstm_scores(lstm, text, expl)
    except UserError as exc:  # e.g. the LSTM knows other desks than the explained one
        st.info(f"The LSTM cannot be shown beside: {md_escape(exc)}")
        return None
    render_lstm_metric(lstm, scores.prediction)
    st.caption(
        f"{LSTM_NOTE} Its row in the grid: gradient × input of the same desk's centred logit on "
        "its word embeddings (one backward pass, a first-order reading)."
    )
    return WordRow(LSTM_ROW, scores.words, scores.scores, scores.seen, scores.label)


# --------------------------------------------------------------------------- an active LSTM


def is_lstm_model(model: LoadedModel) -> bool:
    """Whether the active model is an LSTM (no attention heads to show), by its card: asking
    loads no torch model."""
    return model.neural_name == "LSTM"


def render_lstm_explanation(expl: Explanation, blend: Blend) -> None:
    """Explain, for an active LSTM: both models' answers, the word grid (the LSTM's gradient ×
    input above the bag of words), the report, and why there is no attention to show."""
    from core.analysis.lstm_explain import METHOD
    from core.charts.explain_html import escaped_explanation_document, escaped_highlight_html
    from core.charts.word_strip import word_strip_chart

    decided, left, right = st.columns(3)
    decided.metric("Decision", md_escape(blend.decide(expl.neural, expl.bow).label))
    left.metric("LSTM", md_escape(expl.neural.label))
    right.metric("Bag of words", md_escape(expl.bow.label))
    st.dataframe(_probabilities(expl), hide_index=True)
    st.subheader("Word by word")
    # Raw HTML only for the word-aligned highlight; every string in it is html.escape'd.
    st.html(escaped_highlight_html(expl, top_name=LSTM_ROW))
    render_chart_images(
        lambda: word_strip_chart(expl, top_name=LSTM_ROW), stem="word-strip",
        key="explain.figure.strip", label="Word strip",
    )  # fmt: skip
    st.caption(
        f"LSTM: gradient × input of the desk's centred logit on the word embeddings (one "
        f"backward pass; its sum is {expl.tokens.scores.sum():+.3f} of the logit gap "
        f"{expl.logit_gap:+.3f} from the [PAD] baseline). Bag of words: each word's share of the "
        "bag of words' centred logit. Each row is scaled to its own largest value."
    )
    document = escaped_explanation_document(expl, top_name=LSTM_ROW, method=METHOD)
    st.download_button(
        "Download the explanation (HTML)", document, file_name="explanation.html",
        mime="text/html", key="explain.lstm_download",
    )  # fmt: skip
    st.info(
        "This model is an LSTM: it has no attention heads to show. It reads the words one after "
        "the other, so its hidden state carries word order through n sequential steps."
    )


def _probabilities(expl: Explanation) -> pd.DataFrame:
    desks = list(expl.neural.probabilities)
    frame = pd.DataFrame({
        "desk": desks,
        "LSTM": [expl.neural.probabilities[d] for d in desks],
        "bag of words": [expl.bow.probabilities[d] for d in desks],
    })  # fmt: skip
    return frame


# --------------------------------------------------------------------------- Attention lab


@dataclass(frozen=True)
class OrderModelsRun:
    """The order models' comparison on the queue, and the data set it was started on."""

    job: Job[OrderModels | None]
    fingerprint: str
    dataset_name: str


def start_order_models() -> OrderModelsRun:
    """Queue core.lab.order_models.compare_order_models on the active data set (reviewers
    and admins; the demo data when none is loaded)."""
    from core.lab import order_models

    active = get_active_dataset() or use_demo_dataset()
    config = order_models.OrderModelsConfig()
    queue = get_job_queue()
    job = queue.start(
        order_models.compare_order_models, active.dataset, config,
        requester=job_requester(), title=f"Order models on {len(active.dataset):,} rows",
        kind="lab", permission=Permission.RUN_JOBS, lane=queue.heavy_lane(config.device),
    )  # fmt: skip
    return OrderModelsRun(job, active.dataset.fingerprint, active.name)


def describe_order_models(job: Job) -> JobProgress | None:
    """Models done of the comparison, which one is training (or the timing), time left."""
    return describe_job(job, _order_models_text)


def _order_models_text(snapshot, eta: str) -> str:
    latest = snapshot.latest
    now = f" · {latest.detail}" if latest is not None and isinstance(latest.detail, str) else ""
    return f"Training and timing the models: {counted(latest)}{now}{eta}"


def _kept_results() -> dict:
    return st.session_state.setdefault(READERS_RESULTS, {})


def render_order_models_run(run: OrderModelsRun) -> None:
    """Progress while it runs; its error, or its result kept per data set once it ends."""
    snapshot = run.job.snapshot()
    if snapshot.status.active:
        render_job_progress(
            run.job, describe=describe_order_models, key="attention.readers_cancel", every=1.0
        )
    elif snapshot.status is JobStatus.FAILED:
        st.error(md_escape(snapshot.error))
    elif snapshot.result is not None:
        _kept_results()[run.fingerprint] = snapshot.result
    elif snapshot.status is JobStatus.CANCELLED or not snapshot.result_dropped:
        # cancelled by the queue, or it returned None (it stopped when asked); a result dropped
        # by the queue long after the end was kept above on an earlier rerun
        st.info("The comparison was cancelled.")


def render_order_models(models: OrderModels) -> None:
    """The score table and the time-per-complaint chart, with what they show."""
    from core.charts.order_models import order_model_scores_table, time_per_complaint_chart

    st.caption(
        f"{models.split} · {models.test_rows:,} held-out rows, "
        f"{models.twin_groups_held_out:,} twin groups held out whole."
    )
    percent = st.column_config.NumberColumn(format="%.3f")
    st.dataframe(
        order_model_scores_table(models), hide_index=True,
        column_config={"accuracy": percent, "twin accuracy": percent,
                       "train seconds": st.column_config.NumberColumn(format="%.1f")},
    )  # fmt: skip
    st.caption(
        "Twin accuracy: held-out pairs with exactly the same bag of words and different desks. "
        "The bag of words and the transformer without positions cannot tell a pair apart; the "
        "LSTM and the transformer with positions can, because both see word order."
    )
    show_chart(
        time_per_complaint_chart(models.timing.table), stem="time_per_complaint",
        key="attention.readers_chart", width="stretch",
    )  # fmt: skip
    st.caption(
        "The LSTM reads word order, but one word after the other: n sequential steps, so its "
        "time grows with the complaint however many cores there are. Attention compares every "
        "pair of words at once (n² work, done in parallel in one step)."
    )


def render_trained_order_models() -> None:
    """Attention lab: train the bag of words, the tiny transformer with and without positions
    and the LSTM on one split, and show how each reads held-out twins and how fast."""
    st.markdown("#### LSTM beside attention, trained")
    st.markdown(
        "Before transformers, LSTMs already read word order. Here four models are trained on "
        "the same split of the data set (whole twin groups held out): the bag of words, the tiny "
        "transformer with and without positional encoding, and a small bidirectional LSTM with "
        "the same tokenizer and embedding size. Then each is timed as complaints get longer."
    )
    active = get_active_dataset()
    name = active.name if active is not None else DEMO_NAME
    run: OrderModelsRun | None = st.session_state.get(READERS_RUN)
    if allowed(current_actor(), Permission.RUN_JOBS, "Training the models"):
        busy = run is not None and run.job.snapshot().status.active
        if st.button(f"Train and compare on {name}", key="attention.readers_start", disabled=busy):
            try:
                run = start_order_models()
            except UserError as exc:  # a full queue, a refused role
                st.error(md_escape(exc))
            else:
                st.session_state[READERS_RUN] = run
                active = get_active_dataset()
    if run is not None:
        render_order_models_run(run)
    result = _kept_results().get(active.dataset.fingerprint) if active is not None else None
    if result is not None:
        render_order_models(result)
