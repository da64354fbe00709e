"""Altair chart builders for data sets and metrics: typed results in, `alt.Chart` out."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.data.dataset import Dataset
from core.data.validation import ValidationReport
from core.metrics import EvalReport
from core.text import words


def label_counts_chart(report: ValidationReport) -> alt.Chart:
    """Horizontal bars: rows kept per label, largest first."""
    frame = pd.DataFrame({"label": list(report.labels), "rows": list(report.labels.values())})
    return (
        alt.Chart(frame, title="Rows per label")
        .mark_bar()
        .encode(
            x=alt.X("rows:Q", title="rows"),
            y=alt.Y("label:N", sort="-x", title=None),
            tooltip=["label:N", "rows:Q"],
        )
    )


def text_length_chart(dataset: Dataset) -> alt.Chart:
    """Histogram of complaint lengths in words."""
    frame = pd.DataFrame({"words": [len(words(t)) for t in dataset.texts]})
    return (
        alt.Chart(frame, title="Complaint length (words)")
        .mark_bar()
        .encode(
            x=alt.X("words:Q", bin=alt.Bin(maxbins=40), title="words"),
            y=alt.Y("count():Q", title="complaints"),
            tooltip=[alt.Tooltip("count():Q", title="complaints")],
        )
    )


def confusion_chart(report: EvalReport, *, title: str = "Confusion matrix") -> alt.LayerChart:
    """Heatmap of true (rows) against predicted (columns) labels with counts written in."""
    cells = [
        {"true": true, "predicted": pred, "count": report.confusion[i][j]}
        for i, true in enumerate(report.labels)
        for j, pred in enumerate(report.labels)
    ]
    base = alt.Chart(pd.DataFrame(cells), title=title).encode(
        x=alt.X("predicted:N", sort=list(report.labels), title="predicted"),
        y=alt.Y("true:N", sort=list(report.labels), title="true"),
    )
    heat = base.mark_rect().encode(
        color=alt.Color("count:Q", scale=alt.Scale(scheme="blues"), legend=None),
        tooltip=["true:N", "predicted:N", "count:Q"],
    )
    text = base.mark_text().encode(
        text="count:Q",
        color=alt.condition(alt.datum.count > 0, alt.value("black"), alt.value("#bbbbbb")),
    )
    return heat + text


def per_class_frame(report: EvalReport) -> pd.DataFrame:
    """Per-class precision, recall, F1 and support as a table, one row per label."""
    return pd.DataFrame(
        [
            {
                "label": label,
                "precision": m.precision,
                "recall": m.recall,
                "f1": m.f1,
                "support": m.support,
            }
            for label, m in report.per_class.items()
        ]
    )


def training_curve_chart(steps: list[int], losses: list[float]) -> alt.Chart:
    """Training loss (running mean over the epoch) against optimiser step."""
    frame = pd.DataFrame({"step": steps, "loss": losses})
    return (
        alt.Chart(frame, title="Training loss")
        .mark_line()
        .encode(x=alt.X("step:Q", title="step"), y=alt.Y("loss:Q", title="loss"))
    )


def validation_curve_chart(epochs: list[int], accuracy: list[float], macro_f1: list[float]):
    """Validation accuracy and macro-F1 after each epoch."""
    frame = pd.DataFrame({"epoch": epochs, "accuracy": accuracy, "macro F1": macro_f1}).melt(
        "epoch", var_name="metric", value_name="value"
    )
    return (
        alt.Chart(frame, title="Validation after each epoch")
        .mark_line(point=True)
        .encode(
            x=alt.X("epoch:O", title="epoch"),
            y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title=None),
            color=alt.Color("metric:N", title=None),
            tooltip=["epoch:O", "metric:N", alt.Tooltip("value:Q", format=".3f")],
        )
    )


def f1_comparison_chart(reports: dict[str, EvalReport]) -> alt.Chart:
    """Grouped bars of per-class F1, one colour per model."""
    frame = pd.DataFrame(
        [
            {"model": model, "label": label, "f1": m.f1}
            for model, report in reports.items()
            for label, m in report.per_class.items()
        ]
    )
    return (
        alt.Chart(frame, title="F1 per desk")
        .mark_bar()
        .encode(
            x=alt.X("f1:Q", scale=alt.Scale(domain=[0, 1]), title="F1"),
            y=alt.Y("model:N", title=None),
            row=alt.Row("label:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            color=alt.Color("model:N", title=None),
            tooltip=["label:N", "model:N", alt.Tooltip("f1:Q", format=".3f")],
        )
    )


def probability_chart(probabilities: dict[str, dict[str, float]]) -> alt.Chart:
    """Bars of class probabilities for each model: {model: {label: p}}."""
    frame = pd.DataFrame(
        [
            {"model": model, "label": label, "probability": p}
            for model, probs in probabilities.items()
            for label, p in probs.items()
        ]
    )
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("probability:Q", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("label:N", title=None),
            color=alt.Color("model:N", title=None),
            yOffset="model:N",
            tooltip=["model:N", "label:N", alt.Tooltip("probability:Q", format=".3f")],
        )
    )
