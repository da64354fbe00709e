"""Pictures of explanations: Altair charts of attention and word scores, and the word-level
side-by-side highlight as escaped HTML (a fragment for the page, a document to download).

Builders return charts or strings; pages display them. Every string that comes from a complaint
or a label passes through `html.escape` before it becomes markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.analysis.explain import AttentionMaps, Explanation
from core.errors import UserError

POSITIVE = (33, 102, 172)  # blue: the word pushes towards the target desk
NEGATIVE = (178, 24, 43)  # red: the word pushes away from it
DIVERGING = "redblue"  # the same two poles for Altair's colour scales
GRID_TOKENS = 24  # tokens per axis in the layer × head grid; the zoom shows them all
GRID_GAP = 0.25  # space between two heads (or layers) of the grid, as a share of one head's side
GRID_HEAD_PX = 72  # side of one head in the grid when there is room (few heads)
# The main column beside the sidebar in a 1,400-px window (wide layout, Streamlit's default
# padding): MiniLM's 12 heads are sized so that its cells are square there.
GRID_WIDTH = 940
GRID_MARGIN_PX = 40  # the layer axis's title and labels, left of the cells
GRID_TOOLTIP = ["layer:O", "head:O", "query:O", "key:O", alt.Tooltip("weight:Q", format=".3f")]


def _colour(score: float, scale: float) -> str:
    """Background for a score: blue for positive, red for negative, opacity ∝ |score| / scale."""
    rgb = POSITIVE if score >= 0 else NEGATIVE
    alpha = min(abs(score) / scale, 1.0) if scale > 0 else 0.0
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha:.2f})"


def _scale(scores: Sequence[float]) -> float:
    return float(max((abs(s) for s in scores), default=0.0))


def _cell(word: str, score: float, scale: float, tip: str, *, seen: bool = True) -> str:
    """One coloured word; `word` and `tip` are escaped here."""
    style = "padding:1px 4px;border-radius:3px;display:block;white-space:pre;"
    if seen:
        style += f"background:{_colour(score, scale)};"
    else:
        style += "color:#888;border:1px dashed #bbb;"
    return (
        f'<span style="{style}" title="{html.escape(tip, quote=True)}">{html.escape(word)}</span>'
    )


def _word_block(expl: Explanation, index: int, scales: tuple[float, float]) -> str:
    word = expl.words[index].text
    t_score, b_score = expl.transformer_scores[index], expl.bow_scores[index]
    seen = expl.transformer_seen[index]
    t_tip = f"{word} · transformer {t_score:+.4f}" if seen else f"{word} · cut off by truncation"
    b_tip = f"{word} · bag of words {b_score:+.4f}"
    cells = _cell(word, t_score, scales[0], t_tip, seen=seen)
    cells += _cell(word, b_score, scales[1], b_tip)
    return f'<span style="display:inline-flex;flex-direction:column;gap:2px;">{cells}</span>'


def escaped_highlight_html(expl: Explanation) -> str:
    """The side-by-side highlight: for each word, the transformer's attribution above and the
    bag-of-words contribution below, blue towards the target desk and red away from it, values
    on hover. Each row is scaled to its own largest |score|. Every word and label is escaped."""
    scales = (_scale(expl.transformer_scores), _scale(expl.bow_scores))
    legend = (
        '<span style="display:inline-flex;flex-direction:column;gap:2px;color:#555;">'
        '<span style="padding:1px 4px;display:block;">Transformer</span>'
        '<span style="padding:1px 4px;display:block;">Bag of words</span></span>'
    )
    blocks = "".join(_word_block(expl, i, scales) for i in range(len(expl.words)))
    target = html.escape(expl.target)
    return (
        '<div style="font-family:sans-serif;line-height:1.4;">'
        f'<div style="margin-bottom:6px;color:#555;">Scores for the desk <b>{target}</b> '
        "(blue: towards it, red: away from it; hover for values)</div>"
        f'<div style="display:flex;flex-wrap:wrap;gap:6px 4px;">{legend}{blocks}</div></div>'
    )


def _probability_rows(expl: Explanation) -> str:
    rows = []
    for desk in expl.transformer.probabilities:
        rows.append(
            f"<tr><td>{html.escape(desk)}</td>"
            f"<td>{expl.transformer.probabilities[desk]:.3f}</td>"
            f"<td>{expl.bow.probabilities[desk]:.3f}</td></tr>"
        )
    return "".join(rows)


def _word_rows(expl: Explanation) -> str:
    return "".join(
        f"<tr><td>{i + 1}</td><td>{html.escape(w.text)}</td><td>{t:+.4f}</td><td>{b:+.4f}</td></tr>"
        for i, (w, t, b) in enumerate(
            zip(expl.words, expl.transformer_scores, expl.bow_scores, strict=True)
        )
    )


def escaped_explanation_document(expl: Explanation) -> str:
    """A self-contained HTML page of the explanation to download: no scripts, no external
    resources (a Content-Security-Policy forbids them), every user-derived string escaped."""
    relative = "n/a" if expl.relative_delta is None else f"{expl.relative_delta:.1%}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Grievance Lens explanation</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:8px}}</style></head><body>
<h1>Why the models routed this complaint</h1>
<pre>{html.escape(expl.text)}</pre>
<p>Transformer: <b>{html.escape(expl.transformer.label)}</b> ·
Bag of words: <b>{html.escape(expl.bow.label)}</b> ·
Explained desk: <b>{html.escape(expl.target)}</b></p>
<table><tr><th>desk</th><th>transformer</th><th>bag of words</th></tr>
{_probability_rows(expl)}</table>
<h2>Word by word</h2>
{escaped_highlight_html(expl)}
<p>Integrated Gradients with {expl.tokens.n_steps} steps: logit gap {expl.logit_gap:+.4f},
convergence delta {expl.delta:+.4f} ({relative} of the gap). Punctuation and symbols outside
words carry {expl.unassigned:+.4f}.</p>
<table><tr><th>#</th><th>word</th><th>transformer</th><th>bag of words</th></tr>
{_word_rows(expl)}</table>
</body></html>
"""


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
        .mark_rect()
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


def _grid_frame(maps: AttentionMaps, n: int) -> pd.DataFrame:
    """Tidy rows (layer, head, query, key, weight) of every head's first `n` tokens, 1-based
    layers and heads."""
    layers, heads, q, k = np.meshgrid(
        np.arange(maps.n_layers), np.arange(maps.n_heads), np.arange(n), np.arange(n),
        indexing="ij",
    )  # fmt: skip
    return pd.DataFrame(
        {
            "layer": layers.ravel() + 1,
            "head": heads.ravel() + 1,
            "query": q.ravel(),
            "key": k.ravel(),
            "weight": maps.weights[:, :, :n, :n].ravel(),
        }
    )


def _grid_extent(count: int, n: int) -> float:
    """Tokens that `count` blocks of `n` tokens and the gaps between them span."""
    return count * n + (count - 1) * n * GRID_GAP


def _grid_position(channel: str, field: str, count: int, n: int) -> dict:
    """The encoding of one axis of the grid: block i (head or layer, 1-based `field`) covers
    tokens [(i - 1) * step, (i - 1) * step + n), blocks a gap apart, labelled 1..count."""
    step = n * (1 + GRID_GAP)
    axis = alt.Axis(
        title=field, orient="top" if channel == "x" else "left",
        values=[i * step + n / 2 for i in range(count)],
        labelExpr=f"round((datum.value - {n / 2}) / {step}) + 1",
        grid=False, ticks=False, domain=False, labelFlush=False, labelAngle=0,
    )  # fmt: skip
    reverse = channel == "y"  # layer 1 on top
    scale = alt.Scale(domain=[0, _grid_extent(count, n)], nice=False, reverse=reverse)
    encode = alt.X if channel == "x" else alt.Y
    return {channel: encode(f"{channel}:Q", scale=scale, axis=axis), f"{channel}2": f"{channel}2:Q"}


def _grid_head_px(n_heads: int) -> float:
    """Side of one head's square in pixels: GRID_HEAD_PX, or less where the heads, their gaps
    and the layer axis would not fit GRID_WIDTH."""
    room = GRID_WIDTH - GRID_MARGIN_PX
    return min(GRID_HEAD_PX, room / _grid_extent(n_heads, 1))


def attention_grid_chart(maps: AttentionMaps, *, max_tokens: int = GRID_TOKENS) -> alt.Chart:
    """Small multiples: one heatmap per layer (rows) and head (columns), first `max_tokens`.

    One view, not a facet, so that its width can follow the page's column: each head is a block
    of (n, n) cells placed by its layer and head, a quarter of a block apart. `chart.width` is
    its natural width in pixels (GRID_HEAD_PX per head, GRID_WIDTH at most); show it at that
    width or its column's, whichever is smaller: `st.altair_chart(chart, width=chart.width)`.
    The height is fixed (the cells' squares at the natural width); fit-x narrows the cells only.
    """
    n = min(max_tokens, len(maps.tokens))
    step = n * (1 + GRID_GAP)  # tokens from one head (or layer) to the next
    per_token = _grid_head_px(maps.n_heads) / n  # pixels
    x = _grid_position("x", "head", maps.n_heads, n)
    y = _grid_position("y", "layer", maps.n_layers, n)
    blues = alt.Scale(scheme="blues")
    chart = (
        alt.Chart(_grid_frame(maps, n))
        .transform_calculate(x=f"(datum.head - 1) * {step} + datum.key", x2="datum.x + 1")
        .transform_calculate(y=f"(datum.layer - 1) * {step} + datum.query", y2="datum.y + 1")
        .mark_rect(strokeWidth=0.5)  # outlined in its own colour: no seams between cells
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
        height=round(_grid_extent(maps.n_layers, n) * per_token),
        autosize=alt.AutoSizeParams(type="fit-x", contains="padding"),  # width is the whole chart
        # Short lines: Streamlit cuts a title at the chart's width, and a tiny model's is narrow.
        title=alt.Title(
            f"Every head (first {n} tokens)", subtitle="rows: token, columns: attended token"
        ),
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
        .mark_rect()
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


def word_scores_chart(expl: Explanation) -> alt.Chart:
    """Both models' scores per word as bars, words in text order (position-prefixed)."""
    width = len(str(len(expl.words)))
    labels = [f"{i + 1:0{width}d} {w.text}" for i, w in enumerate(expl.words)]
    frame = pd.DataFrame(
        {
            "word": labels * 2,
            "model": ["transformer"] * len(labels) + ["bag of words"] * len(labels),
            "score": list(expl.transformer_scores) + list(expl.bow_scores),
        }
    )
    return (
        alt.Chart(frame, title=f"Word scores for {expl.target}")
        .mark_bar()
        .encode(
            x=alt.X("word:N", sort=labels, title=None, axis=alt.Axis(labelAngle=-60)),
            y=alt.Y("score:Q", title="score"),
            color=alt.Color("score:Q", scale=alt.Scale(scheme=DIVERGING, domainMid=0), legend=None),
            row=alt.Row("model:N", title=None),
            tooltip=["word:N", "model:N", alt.Tooltip("score:Q", format="+.4f")],
        )
        .properties(height=120)
    )
