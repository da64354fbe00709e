"""Altair chart builders for data sets and metrics: typed results in, `alt.Chart` out."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.data import Dataset, ValidationReport
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
