"""Altair charts of order probes and the data set scan: probability shifts per perturbation, flip
rates per perturbation kind, and where a bag-of-words model is capped. Builders return charts."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from core.analysis.probe_compare import ProbeResult
from core.analysis.probe_scan import KindStats


def probe_shift_chart(result: ProbeResult) -> alt.Chart:
    """Per perturbation, how much each model's probability for its original desk moved."""
    records = []
    for i, o in enumerate(result.outcomes):
        name = f"{i + 1:02d} {o.perturbation.kind}"
        records.append({"perturbation": name, "model": "transformer", "shift": o.neural_shift})
        records.append({"perturbation": name, "model": "bag of words", "shift": o.bow_shift})
    frame = pd.DataFrame(records, columns=["perturbation", "model", "shift"])
    title = "Change in the probability of the original desk"
    return _bars_per_model(
        frame, "perturbation", "shift", "probability shift", (-1, 1), "+.3f", title
    )


def capped_chart(frame: pd.DataFrame) -> alt.Chart:
    """Twin-group rows per desk: those a bag of words can at best get right and those it cannot
    (`frame` from core.charts.probe_tables.capped_frame)."""
    return (
        alt.Chart(frame, title="Where a bag-of-words model is capped")
        .mark_bar()
        .encode(
            y=alt.Y("desk:N", title=None),
            x=alt.X("rows:Q", title="rows in same-bag groups with several desks"),
            color=alt.Color(
                "status:N",
                title=None,
                legend=alt.Legend(orient="bottom", direction="vertical"),
                scale=alt.Scale(
                    domain=["reachable at best", "out of reach for a bag of words"],
                    range=["#9ecae1", "#de2d26"],
                ),
            ),
            tooltip=["desk:N", "status:N", "rows:Q"],
        )
    )


def flip_rate_chart(stats: Sequence[KindStats]) -> alt.Chart:
    """Flip rate per perturbation kind for both models."""
    records = [
        {"kind": s.kind, "model": model, "flip rate": rate}
        for s in stats
        for model, rate in (
            ("transformer", s.neural_flip_rate),
            ("bag of words", s.bow_flip_rate),
        )
    ]
    frame = pd.DataFrame(records, columns=["kind", "model", "flip rate"])
    title = "How often a perturbation changes the desk"
    return _bars_per_model(frame, "kind", "flip rate", "flip rate", (0, 1), ".0%", title)


def _bars_per_model(
    frame: pd.DataFrame,
    y: str,
    x: str,
    x_title: str,
    domain: tuple[float, float],
    value_format: str,
    title: str,
) -> alt.Chart:
    """Horizontal bars of `x` for each `y`, the two models' bars side by side (column "model")."""
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            y=alt.Y(f"{y}:N", title=None),
            x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(domain=list(domain))),
            yOffset="model:N",
            color=alt.Color("model:N", title="model", legend=alt.Legend(orient="bottom")),
            tooltip=[f"{y}:N", "model:N", alt.Tooltip(f"{x}:Q", format=value_format)],
        )
    )
