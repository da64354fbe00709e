"""Altair charts for the attention lab: labelled matrix heatmaps, the positional-encoding
matrix, and the cost of self-attention against a recurrent layer (counted and measured).

Builders return charts; pages display them.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.errors import UserError


def _long_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """Wide matrix (rows × columns) → tidy rows of (row, column, value), labels as strings."""
    tidy = frame.copy()
    tidy.index = [str(i) for i in tidy.index]
    tidy.columns = [str(c) for c in tidy.columns]
    tidy = tidy.rename_axis(index="row", columns="column").stack().rename("value").reset_index()
    return tidy


def matrix_heatmap(
    frame: pd.DataFrame, *, title: str = "", value_format: str = ".3f", scheme: str = "blues"
) -> alt.LayerChart:
    """Heatmap of a labelled matrix with every value written in its cell.

    frame: a wide DataFrame (e.g. a step table of core.lab.self_attention); rows and columns keep
    their order. Text turns white on the darker half of the colour range.
    """
    if frame.empty:
        raise UserError("the matrix is empty; nothing to draw")
    tidy = _long_matrix(frame)
    midpoint = float(tidy["value"].min() + tidy["value"].max()) / 2
    base = alt.Chart(tidy, title=title).encode(
        x=alt.X(
            "column:N",
            sort=list(tidy["column"].unique()),
            title=None,
            axis=alt.Axis(orient="top", labelAngle=0),
        ),
        y=alt.Y("row:N", sort=list(tidy["row"].unique()), title=None),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("value:Q", scale=alt.Scale(scheme=scheme), legend=None),
        tooltip=["row:N", "column:N", alt.Tooltip("value:Q", format=value_format)],
    )
    labels = base.mark_text(fontSize=14).encode(
        text=alt.Text("value:Q", format=value_format),
        color=alt.condition(alt.datum.value > midpoint, alt.value("white"), alt.value("black")),
    )
    return alt.layer(cells, labels).properties(width=alt.Step(70), height=alt.Step(36))


def positional_encoding_heatmap(pe: np.ndarray, *, title: str = "Positional encoding") -> alt.Chart:
    """Heatmap of a (positions, d_model) positional-encoding matrix, values in [-1, 1]."""
    pe = np.asarray(pe, dtype=float)
    if pe.ndim != 2 or 0 in pe.shape:
        raise UserError(f"expected a non-empty (positions, d_model) matrix; got shape {pe.shape}")
    positions, dims = np.meshgrid(np.arange(pe.shape[0]), np.arange(pe.shape[1]), indexing="ij")
    tidy = pd.DataFrame(
        {"position": positions.ravel(), "dimension": dims.ravel(), "value": pe.ravel()}
    )
    return (
        alt.Chart(tidy, title=title)
        .mark_rect()
        .encode(
            x=alt.X("dimension:O", title="dimension i"),
            y=alt.Y("position:O", title="position"),
            color=alt.Color("value:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1])),
            tooltip=["position:O", "dimension:O", alt.Tooltip("value:Q", format=".4f")],
        )
    )


def _log_lines(frame: pd.DataFrame, y: str, y_title: str, title: str) -> alt.Chart:
    return (
        alt.Chart(frame, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X("n:Q", title="sequence length n", scale=alt.Scale(type="log")),
            y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(type="log")),
            color=alt.Color("layer:N", title="layer"),
            tooltip=["layer:N", "n:Q", alt.Tooltip(f"{y}:Q", format=".3g")],
        )
    )


def _check_columns(frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing or frame.empty:
        raise UserError(f"expected a non-empty table with columns {columns}; missing {missing}")


def cost_chart(frame: pd.DataFrame, *, title: str = "Operations per layer") -> alt.Chart:
    """Operation counts against n on log-log axes; `frame` is core.lab.self_attention.cost_table."""
    _check_columns(frame, ("n", "layer", "ops"))
    return _log_lines(frame, "ops", "operations", title)


def timing_chart(
    frame: pd.DataFrame, *, title: str = "Measured time per forward pass"
) -> alt.Chart:
    """Seconds against n on log-log axes.

    `frame` is core.lab.self_attention.time_attention_vs_lstm.
    """
    _check_columns(frame, ("n", "layer", "seconds"))
    return _log_lines(frame, "seconds", "seconds", title)


def weight_change_chart(
    changes: pd.DataFrame, *, title: str = "Every weight before and after"
) -> alt.LayerChart:
    """Dumbbell chart of attention weights before and after a change, one row per (query, key).

    changes: core.lab.self_attention.weight_changes (columns query, key, before, after, change);
    pairs with a new token have no "before" point.
    """
    _check_columns(changes, ("query", "key", "before", "after", "change"))
    frame = changes.assign(pair=changes["query"].astype(str) + " → " + changes["key"].astype(str))
    order = frame["pair"].tolist()
    y = alt.Y("pair:N", sort=order, title="query → key")
    tooltip = [
        "pair:N",
        alt.Tooltip("before:Q", format=".4f"),
        alt.Tooltip("after:Q", format=".4f"),
        alt.Tooltip("change:Q", format="+.4f"),
    ]
    rules = (
        alt.Chart(frame.dropna(subset=["before"]))
        .mark_rule(color="gray")
        .encode(y=y, x=alt.X("before:Q", title="attention weight"), x2="after:Q")
    )
    points = (
        alt.Chart(frame.melt(id_vars=["pair"], value_vars=["before", "after"], var_name="when"))
        .transform_filter("isValid(datum.value)")
        .mark_point(filled=True, size=70)
        .encode(
            y=y,
            x=alt.X("value:Q", title="attention weight"),
            color=alt.Color("when:N", sort=["before", "after"], title=None),
        )
    )
    points = points.encode(tooltip=["pair:N", "when:N", alt.Tooltip("value:Q", format=".4f")])
    return alt.layer(rules.encode(tooltip=tooltip), points).properties(title=title)
