"""Tables and charts of a challenger-against-live comparison (core.analysis.compare): the two
models' figures side by side and their recall per desk."""

from __future__ import annotations

import altair as alt
import pandas as pd

from core.analysis.compare import CONFIDENCE, Comparison, ModelScores


def scores_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per model (A, then B): accuracy and macro-F1 with their intervals, calibration
    error, review load and the twin slice."""
    level = f"{CONFIDENCE:.0%} CI"
    return pd.DataFrame([_scores_row(tag, s, level) for tag, s in _models(comparison)])


def _scores_row(tag: str, scores: ModelScores, level: str) -> dict:
    return {
        "model": f"{tag}: {scores.name}",
        "accuracy": scores.accuracy,
        f"accuracy {level}": _interval(scores.accuracy_ci),
        "macro-F1": scores.macro_f1,
        f"macro-F1 {level}": _interval(scores.macro_f1_ci),
        "calibration error (ECE)": scores.ece,
        "review load": scores.flagged,
        "twin accuracy": scores.twin_accuracy,
    }


def _interval(interval: tuple[float, float]) -> str:
    return f"{interval[0]:.3f} – {interval[1]:.3f}"


def _models(comparison: Comparison) -> list[tuple[str, ModelScores]]:
    return [("A", comparison.a), ("B", comparison.b)]


def per_desk_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per desk: its rows (support) and each model's recall, precision and F1."""
    desks = list(comparison.a.per_class)
    table = {"desk": desks, "rows": [int(comparison.a.per_class[d]["support"]) for d in desks]}
    for tag, scores in _models(comparison):
        for figure in ("recall", "precision", "f1"):
            table[f"{tag} {figure}"] = [scores.per_class[d][figure] for d in desks]
    return pd.DataFrame(table)


def per_desk_recall_chart(comparison: Comparison) -> alt.Chart:
    """Grouped bars: each desk's recall under model A and model B."""
    frame = pd.DataFrame(
        [
            {"desk": desk, "model": f"{tag}: {scores.name}", "recall": figures["recall"]}
            for tag, scores in _models(comparison)
            for desk, figures in scores.per_class.items()
            if figures["support"] > 0
        ]
    )
    return (
        alt.Chart(frame, title="Recall per desk")
        .mark_bar()
        .encode(
            x=alt.X("recall:Q", scale=alt.Scale(domain=[0, 1]), title="recall"),
            y=alt.Y("desk:N", title=None),
            yOffset="model:N",
            color=alt.Color("model:N", title=None),
            tooltip=["desk:N", "model:N", alt.Tooltip("recall:Q", format=".3f")],
        )
    )
