"""Altair charts of one text's AttentionMaps (core.analysis.explain): one head's heatmap, every
head as a grid of small multiples, where [CLS] looks, and the rollout across layers.
Builders return charts; pages display them."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.analysis.explain import AttentionMaps
from core.errors import UserError

GRID_TOKENS = 24  # tokens per axis in the layer × head grid; the zoom shows them all
GRID_GAP = 0.25  # space between two heads (or layers) of the grid, as a share of one head's side
GRID_HEAD_PX = 72  # side of one head in the grid when there is room (few heads)
# The main column beside the sidebar in a 1,400-px window (wide layout, Streamlit's default
# padding): MiniLM's 12 heads are sized so that its cells are square there.
GRID_WIDTH = 940
GRID_MARGIN_PX = 40  # the layer axis's title and labels, left of the cells
GRID_TOOLTIP = ["layer:O", "head:O", "query:O", "key:O", alt.Tooltip("weight:Q", format=".3f")]


def _matrix_frame(matrix: np.ndarray, labels: Sequence[str]) -> pd.DataFrame:
    """(seq, seq) matrix → tidy rows (query, key, weight) with position-prefixed labels."""
    q, k = np.meshgrid(np.arange(len(labels)), np.arange(len(labels)), indexing="ij")
    return pd.DataFrame(
        {
            "query": [labels[i] for i in q.ravel()],
            "key": [labels[j] for j in k.ravel()],
            "weight": matrix.ravel(),
        }
    )


def _heatmap(frame: pd.DataFrame, labels: Sequence[str], title: str) -> alt.Chart:
    return (
        alt.Chart(frame, title=title)
        .mark_rect(aria=False)  # a described string per cell is the browser's slowest part
        .encode(
            x=alt.X("key:N", sort=list(labels), title="attends to", axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("query:N", sort=list(labels), title="token"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues"), title="weight"),
            tooltip=["query:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=alt.Step(14), height=alt.Step(14))
    )


def _check_head(maps: AttentionMaps, layer: int, head: int) -> None:
    if not (0 <= layer < maps.n_layers and 0 <= head < maps.n_heads):
        raise UserError(
            f"layer {layer} / head {head} out of range: the model has {maps.n_layers} layers "
            f"and {maps.n_heads} heads (0-based)"
        )


def attention_head_chart(maps: AttentionMaps, layer: int, head: int) -> alt.Chart:
    """One head's (seq, seq) attention with position-prefixed token labels; layer, head 0-based."""
    _check_head(maps, layer, head)
    labels = maps.labels()
    frame = _matrix_frame(maps.weights[layer, head], labels)
    return _heatmap(frame, labels, f"Layer {layer + 1}, head {head + 1}")


def _grid_frame(maps: AttentionMaps, n: int, layers: Sequence[int]) -> pd.DataFrame:
    """One record per cell drawn: its corners (x, x2, y, y2 in tokens from the grid's corner)
    and what its tooltip says (layer and head 1-based, query, key, weight) of every head's
    first `n` tokens in `layers` (0-based). The corners are computed here, not by the chart:
    a browser's Vega evaluates a chart's formulas cell by cell in its (slow) interpreter."""
    rows, heads, q, k = np.meshgrid(
        np.arange(len(layers)), np.arange(maps.n_heads), np.arange(n), np.arange(n),
        indexing="ij",
    )  # fmt: skip
    step = n * (1 + GRID_GAP)  # tokens from one head (or layer) to the next
    x, y = heads.ravel() * step + k.ravel(), rows.ravel() * step + q.ravel()
    chosen = np.asarray(layers, dtype=int)
    return pd.DataFrame(
        {
            "x": x, "x2": x + 1, "y": y, "y2": y + 1,
            "layer": chosen[rows.ravel()] + 1, "head": heads.ravel() + 1,
            "query": q.ravel(), "key": k.ravel(),
            "weight": maps.weights[chosen][:, :, :n, :n].ravel(),
        }
    )  # fmt: skip


def _grid_extent(count: int, n: int) -> float:
    """Tokens that `count` blocks of `n` tokens and the gaps between them span."""
    return count * n + (count - 1) * n * GRID_GAP


def _grid_position(channel: str, field: str, labels: Sequence[int], n: int) -> dict:
    """The encoding of one axis of the grid: block i (0-based) covers tokens
    [i * step, i * step + n), blocks a gap apart, labelled `labels[i]` (1-based numbers)."""
    count, step = len(labels), n * (1 + GRID_GAP)
    axis = alt.Axis(
        title=field, orient="top" if channel == "x" else "left",
        values=[i * step + n / 2 for i in range(count)],
        labelExpr=f"{[int(x) for x in labels]}[round((datum.value - {n / 2}) / {step})]",
        grid=False, ticks=False, domain=False, labelFlush=False, labelAngle=0,
    )  # fmt: skip
    reverse = channel == "y"  # the first layer on top
    scale = alt.Scale(domain=[0, _grid_extent(count, n)], nice=False, reverse=reverse)
    encode = alt.X if channel == "x" else alt.Y
    return {channel: encode(f"{channel}:Q", scale=scale, axis=axis), f"{channel}2": f"{channel}2:Q"}


def _grid_head_px(n_heads: int) -> float:
    """Side of one head's square in pixels: GRID_HEAD_PX, or less where the heads, their gaps
    and the layer axis would not fit GRID_WIDTH."""
    room = GRID_WIDTH - GRID_MARGIN_PX
    return min(GRID_HEAD_PX, room / _grid_extent(n_heads, 1))


def _grid_layers(maps: AttentionMaps, layers: Sequence[int] | None) -> tuple[int, ...]:
    """The 0-based layers to draw, in order: all of them when None."""
    if layers is None:
        return tuple(range(maps.n_layers))
    chosen = tuple(sorted(set(int(x) for x in layers)))
    if not chosen or not all(0 <= x < maps.n_layers for x in chosen):
        raise UserError(
            f"choose one or more of the model's {maps.n_layers} layers to draw "
            f"(0-based: 0-{maps.n_layers - 1}); got {list(layers)}"
        )
    return chosen


def _grid_title(maps: AttentionMaps, layers: tuple[int, ...], n: int) -> alt.Title:
    if len(layers) == maps.n_layers:
        which = "Every head"
    else:
        names = ", ".join(str(x + 1) for x in layers)
        which = f"Every head of layer{'s' if len(layers) > 1 else ''} {names}"
    # Short lines: Streamlit cuts a title at the chart's width, and a tiny model's is narrow.
    return alt.Title(f"{which} (first {n} tokens)", subtitle="rows: token, columns: attended token")


def attention_grid_chart(
    maps: AttentionMaps, *, layers: Sequence[int] | None = None, max_tokens: int = GRID_TOKENS
) -> alt.Chart:
    """Small multiples: one heatmap per layer (rows) and head (columns), first `max_tokens`.

    layers: the 0-based layers to draw (None: all). Its data is what is drawn and no more: a
    page shows one layer at a time (MiniLM's six layers are 41,472 cells, seconds for a
    browser to draw), a picture for a deck all of them.

    One view, not a facet, so that its width can follow the page's column: each head is a block
    of (n, n) cells placed by its layer and head, a quarter of a block apart. `chart.width` is
    its natural width in pixels (GRID_HEAD_PX per head, GRID_WIDTH at most); show it at that
    width or its column's, whichever is smaller: `st.altair_chart(chart, width=chart.width)`.
    The height is fixed (the cells' squares at the natural width); fit-x narrows the cells only.
    """
    chosen = _grid_layers(maps, layers)
    n = min(max_tokens, len(maps.tokens))
    per_token = _grid_head_px(maps.n_heads) / n  # pixels
    x = _grid_position("x", "head", range(1, maps.n_heads + 1), n)
    y = _grid_position("y", "layer", [layer + 1 for layer in chosen], n)
    blues = alt.Scale(scheme="blues")
    chart = (
        alt.Chart(_grid_frame(maps, n, chosen))
        # Outlined in its own colour: no seams between cells. No screen-reader description of
        # each cell (aria): a browser's Vega would build 9 formatted strings per cell.
        .mark_rect(strokeWidth=0.5, aria=False)
        .encode(
            **x,
            **y,
            color=alt.Color("weight:Q", scale=blues, legend=None),
            stroke=alt.Stroke("weight:Q", scale=blues, legend=None),
            tooltip=GRID_TOOLTIP,
        )
    )
    return chart.properties(
        width=round(_grid_extent(maps.n_heads, n) * per_token) + GRID_MARGIN_PX,
        height=round(_grid_extent(len(chosen), n) * per_token),
        autosize=alt.AutoSizeParams(type="fit-x", contains="padding"),  # width is the whole chart
        title=_grid_title(maps, chosen, n),
    )


def cls_attention_chart(maps: AttentionMaps) -> alt.Chart:
    """Where [CLS] (position 0) looks, one row per layer and head, one column per token."""
    labels = maps.labels()
    rows = maps.cls_rows()  # (layers, heads, seq)
    layer, head, key = np.meshgrid(
        np.arange(maps.n_layers), np.arange(maps.n_heads), np.arange(len(labels)), indexing="ij"
    )
    frame = pd.DataFrame(
        {
            "head": [
                f"L{a + 1} H{b + 1}" for a, b in zip(layer.ravel(), head.ravel(), strict=True)
            ],
            "key": [labels[i] for i in key.ravel()],
            "weight": rows.ravel(),
        }
    )
    order = [f"L{a + 1} H{b + 1}" for a in range(maps.n_layers) for b in range(maps.n_heads)]
    return (
        alt.Chart(frame, title="[CLS] attention, every head")
        .mark_rect(aria=False)  # as in _heatmap
        .encode(
            x=alt.X("key:N", sort=labels, title="token", axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("head:N", sort=order, title="layer and head"),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="blues"), title="weight"),
            tooltip=["head:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=alt.Step(14), height=alt.Step(10))
    )


def rollout_chart(maps: AttentionMaps) -> alt.Chart:
    """Attention rollout across all layers as a (seq, seq) heatmap."""
    labels = maps.labels()
    return _heatmap(_matrix_frame(maps.rollout(), labels), labels, "Attention rollout")
