"""Pictures of explanations: Altair charts of attention and word scores, and the word-level
side-by-side highlight as escaped HTML (a fragment for the page, a document to download).

Builders return charts or strings; pages display them. Every string that comes from a complaint
or a label passes through `html.escape` before it becomes markup.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class WordRow:
    """One more model's scores for the word grid, aligned to an explanation's words: the
    LSTM's gradient × input beside the transformer and the bag of words."""

    name: str  # the row's label, e.g. "LSTM (gradient x input)"
    words: tuple[str, ...]  # must equal the explanation's words
    scores: tuple[float, ...]  # one per word
    seen: tuple[bool, ...] | None = None  # False: cut off by the model's length limit
    label: str | None = None  # that model's own desk for the complaint, for the report

    def check(self, expl: Explanation) -> None:
        """ValueError unless the row belongs to the words of `expl`."""
        if list(self.words) != [w.text for w in expl.words] or len(self.scores) != len(self.words):
            raise ValueError(f"the row {self.name!r} is not aligned with the explanation's words")

    def is_seen(self, index: int) -> bool:
        return True if self.seen is None else self.seen[index]


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


def _word_block(
    expl: Explanation,
    index: int,
    scales: tuple[float, ...],
    extra: WordRow | None = None,
    top_name: str = "transformer",
) -> str:
    word = expl.words[index].text
    t_score, b_score = expl.transformer_scores[index], expl.bow_scores[index]
    seen = expl.transformer_seen[index]
    t_tip = f"{word} · {top_name} {t_score:+.4f}" if seen else f"{word} · cut off by truncation"
    b_tip = f"{word} · bag of words {b_score:+.4f}"
    cells = _cell(word, t_score, scales[0], t_tip, seen=seen)
    cells += _cell(word, b_score, scales[1], b_tip)
    if extra is not None:
        e_score, e_seen = extra.scores[index], extra.is_seen(index)
        e_tip = f"{word} · {extra.name} {e_score:+.4f}" if e_seen else f"{word} · cut off"
        cells += _cell(word, e_score, scales[2], e_tip, seen=e_seen)
    return f'<span style="display:inline-flex;flex-direction:column;gap:2px;">{cells}</span>'


def _legend(names: Sequence[str]) -> str:
    """The rows' names, left of the words; each escaped."""
    cells = "".join(
        f'<span style="padding:1px 4px;display:block;">{html.escape(name)}</span>' for name in names
    )
    column = "display:inline-flex;flex-direction:column;gap:2px;color:#555;"
    return f'<span style="{column}">{cells}</span>'


def escaped_highlight_html(
    expl: Explanation, *, extra: WordRow | None = None, top_name: str = "Transformer"
) -> str:
    """The side-by-side highlight: for each word, the transformer's attribution above and the
    bag-of-words contribution below (and `extra`'s scores under them, e.g. the LSTM beside),
    blue towards the target desk and red away from it, values on hover. Each row is scaled to
    its own largest |score|. `top_name` labels the first row (an active LSTM model's scores sit
    there). Every word and label is escaped."""
    scales = (_scale(expl.transformer_scores), _scale(expl.bow_scores))
    names = [top_name, "Bag of words"]
    if extra is not None:
        extra.check(expl)
        scales += (_scale(extra.scores),)
        names.append(extra.name)
    legend = _legend(names)
    tip_name = top_name.lower() if top_name == "Transformer" else top_name
    blocks = "".join(_word_block(expl, i, scales, extra, tip_name) for i in range(len(expl.words)))
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


def _word_rows(expl: Explanation, extra: WordRow | None = None) -> str:
    more = [""] * len(expl.words) if extra is None else [f"<td>{s:+.4f}</td>" for s in extra.scores]
    return "".join(
        f"<tr><td>{i + 1}</td><td>{html.escape(w.text)}</td><td>{t:+.4f}</td><td>{b:+.4f}</td>"
        f"{e}</tr>"
        for i, (w, t, b, e) in enumerate(
            zip(expl.words, expl.transformer_scores, expl.bow_scores, more, strict=True)
        )
    )


def _extra_label(extra: WordRow | None) -> str:
    if extra is None or extra.label is None:
        return ""
    return f" ·\n{html.escape(extra.name)}: <b>{html.escape(extra.label)}</b>"


def _method_note(expl: Explanation, method: str | None) -> str:
    """What the first row's scores are, with their gap and delta (escaped `method`)."""
    relative = "n/a" if expl.relative_delta is None else f"{expl.relative_delta:.1%}"
    how = (
        f"Integrated Gradients with {expl.tokens.n_steps} steps"
        if method is None
        else html.escape(method)
    )
    return (
        f"{how}: logit gap {expl.logit_gap:+.4f}, convergence delta {expl.delta:+.4f} "
        f"({relative} of the gap)."
    )


def escaped_explanation_document(
    expl: Explanation,
    *,
    extra: WordRow | None = None,
    top_name: str = "Transformer",
    method: str | None = None,
) -> str:
    """A self-contained HTML page of the explanation to download: no scripts, no external
    resources (a Content-Security-Policy forbids them), every user-derived string escaped.
    `extra` and `top_name` as in `escaped_highlight_html`; `method` names how the first row's
    scores were computed (None: Integrated Gradients)."""
    top = html.escape(top_name)
    extra_th = "" if extra is None else f"<th>{html.escape(extra.name)}</th>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Grievance Lens explanation</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:8px}}</style></head><body>
<h1>Why the models routed this complaint</h1>
<pre>{html.escape(expl.text)}</pre>
<p>{top}: <b>{html.escape(expl.transformer.label)}</b> ·
Bag of words: <b>{html.escape(expl.bow.label)}</b>{_extra_label(extra)} ·
Explained desk: <b>{html.escape(expl.target)}</b></p>
<table><tr><th>desk</th><th>{top.lower()}</th><th>bag of words</th></tr>
{_probability_rows(expl)}</table>
<h2>Word by word</h2>
{escaped_highlight_html(expl, extra=extra, top_name=top_name)}
<p>{_method_note(expl, method)} Punctuation and symbols outside
words carry {expl.unassigned:+.4f}.</p>
<table><tr><th>#</th><th>word</th><th>{top.lower()}</th><th>bag of words</th>{extra_th}</tr>
{_word_rows(expl, extra)}</table>
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


# --------------------------------------------------------------------------- images for decks
# The word strip as a chart (for PNG and SVG; the page itself draws the HTML strip above).
# Words are laid out in Python, left to right and wrapped, in pixels (scale=None encodings).
STRIP_WIDTH = 900  # pixels of one line of words, the row names included
STRIP_FONT = 12
STRIP_CHAR_PX = 7.2  # a generous average width of one character at STRIP_FONT (DejaVu Sans)
STRIP_PAD_PX = 8  # inside a word's cell, both sides together
STRIP_GAP_PX = 4  # between two words
STRIP_ROW_PX = 18  # one model's row of cells
STRIP_LINE_GAP_PX = 10  # between two lines of words
STRIP_LEGEND_PX = 120  # the row names, left of every line
STRIP_MAX_CHARS = 28  # a longer word (a UPI reference) is shortened with "…"
STORY_TEXT_CHARS = 400  # of the complaint in the one-image explanation
STORY_LINE_CHARS = 110


def _shown_word(word: str) -> str:
    return word if len(word) <= STRIP_MAX_CHARS else word[: STRIP_MAX_CHARS - 1] + "…"


def _strip_lines(words: Sequence[str]) -> list[tuple[int, float, float]]:
    """(line, x, x2) in pixels of each word's cell, wrapped at STRIP_WIDTH."""
    placed, line, x = [], 0, float(STRIP_LEGEND_PX)
    for word in words:
        width = len(word) * STRIP_CHAR_PX + STRIP_PAD_PX
        if x > STRIP_LEGEND_PX and x + width > STRIP_WIDTH:
            line, x = line + 1, float(STRIP_LEGEND_PX)
        placed.append((line, x, x + width))
        x += width + STRIP_GAP_PX
    return placed


def _strip_rows(expl: Explanation, extra: WordRow | None, top_name: str) -> list[tuple]:
    """(name, scores, seen) of each row of the strip, top to bottom."""
    everywhere = (True,) * len(expl.words)
    rows = [
        (top_name, expl.transformer_scores, expl.transformer_seen),
        ("Bag of words", expl.bow_scores, everywhere),
    ]
    if extra is not None:
        extra.check(expl)
        seen = everywhere if extra.seen is None else extra.seen
        rows.append((extra.name, extra.scores, seen))
    return rows


def _strip_frame(expl: Explanation, rows: list[tuple]) -> tuple[pd.DataFrame, int]:
    """One record per (word, row): cell corners in pixels, the score and its shade in [-1, 1]
    (the score over its row's largest |score|); and the number of lines."""
    shown = [_shown_word(w.text) for w in expl.words]
    placed = _strip_lines(shown)
    line_px = len(rows) * STRIP_ROW_PX + STRIP_LINE_GAP_PX
    records = []
    for r, (name, scores, seen) in enumerate(rows):
        scale = _scale(scores)
        for i, (line, x, x2) in enumerate(placed):
            y = line * line_px + r * STRIP_ROW_PX
            shade = scores[i] / scale if scale > 0 and seen[i] else 0.0
            records.append((shown[i], name, x, x2, y, y + STRIP_ROW_PX - 2, scores[i], shade,
                            bool(seen[i])))  # fmt: skip
    columns = ["word", "model", "x", "x2", "y", "y2", "score", "shade", "seen"]
    lines = placed[-1][0] + 1 if placed else 1
    return pd.DataFrame.from_records(records, columns=columns), lines


def _strip_legend(rows: list[tuple], lines: int) -> alt.Chart:
    line_px = len(rows) * STRIP_ROW_PX + STRIP_LINE_GAP_PX
    frame = pd.DataFrame(
        [(name, line * line_px + r * STRIP_ROW_PX + STRIP_ROW_PX / 2 - 1)
         for line in range(lines) for r, (name, _, _) in enumerate(rows)],
        columns=["model", "y"],
    )  # fmt: skip
    return (
        alt.Chart(frame)
        .mark_text(align="left", baseline="middle", fontSize=STRIP_FONT, color="#555")
        .encode(x=alt.value(0), y=alt.Y("y:Q", scale=None, axis=None), text="model:N")
    )


def word_strip_chart(
    expl: Explanation, *, extra: WordRow | None = None, top_name: str = "Transformer"
) -> alt.LayerChart:
    """The word-attribution strip as a chart (the HTML strip of `escaped_highlight_html`, drawn
    for an image): each word in text order, wrapped into lines, with one coloured cell per model
    (blue towards the explained desk, red away from it, each row scaled to its own largest
    |score|); words cut off by truncation are grey on white."""
    rows = _strip_rows(expl, extra, top_name)
    frame, lines = _strip_frame(expl, rows)
    x, y = alt.X("x:Q", scale=None, axis=None), alt.Y("y:Q", scale=None, axis=None)
    base = alt.Chart(frame).encode(x=x, y=y)
    cells = base.mark_rect(cornerRadius=3).encode(
        x2="x2:Q", y2="y2:Q",
        color=alt.Color("shade:Q", scale=alt.Scale(scheme=DIVERGING, domain=[-1, 1]), legend=None),
        tooltip=["word:N", "model:N", alt.Tooltip("score:Q", format="+.4f")],
    )  # fmt: skip
    light = "datum.shade > 0.55 || datum.shade < -0.55"
    words = base.mark_text(align="left", baseline="middle", fontSize=STRIP_FONT, dx=4, dy=8).encode(
        text="word:N",
        color=alt.condition(light, alt.value("white"), alt.value("black")),
        opacity=alt.condition("datum.seen", alt.value(1.0), alt.value(0.45)),
    )
    height = lines * (len(rows) * STRIP_ROW_PX + STRIP_LINE_GAP_PX)
    title = alt.Title(
        f"Scores for the desk {expl.target}",
        subtitle="blue: towards it, red: away from it",
        anchor="start",
    )
    return alt.layer(cells, words, _strip_legend(rows, lines)).properties(
        width=STRIP_WIDTH, height=height, title=title, view=alt.ViewBackground(stroke=None)
    )


def _complaint_lines(text: str) -> list[str]:
    """The complaint, shortened to STORY_TEXT_CHARS characters and wrapped for a title."""
    short = text if len(text) <= STORY_TEXT_CHARS else text[: STORY_TEXT_CHARS - 1] + "…"
    return textwrap.wrap(" ".join(short.split()), STORY_LINE_CHARS) or [""]


def _probabilities_chart(expl: Explanation, top_name: str) -> alt.Chart:
    """Both models' probability of every desk, side by side, titled with the complaint."""
    desks = list(expl.transformer.probabilities)
    frame = pd.DataFrame(
        {
            "desk": desks * 2,
            "model": [top_name] * len(desks) + ["Bag of words"] * len(desks),
            "probability": list(expl.transformer.probabilities.values())
            + [expl.bow.probabilities[d] for d in desks],
        }
    )
    answers = (
        f"{top_name}: {expl.transformer.label} ({expl.transformer.confidence:.0%}) · "
        f"Bag of words: {expl.bow.label} ({expl.bow.confidence:.0%})"
    )
    title = alt.Title(
        "Why the models routed this complaint",
        subtitle=[*_complaint_lines(expl.text), "", answers],
        anchor="start", fontSize=16, subtitleFontSize=12,
    )  # fmt: skip
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            y=alt.Y("desk:N", sort=desks, title=None),
            yOffset=alt.YOffset("model:N", sort=[top_name, "Bag of words"]),
            x=alt.X("probability:Q", scale=alt.Scale(domain=[0, 1]), title="probability"),
            color=alt.Color("model:N", sort=[top_name, "Bag of words"], title=None),
            tooltip=["desk:N", "model:N", alt.Tooltip("probability:Q", format=".3f")],
        )
        .properties(width=STRIP_WIDTH - STRIP_LEGEND_PX, height=alt.Step(12))
    )


def explanation_chart(
    expl: Explanation,
    *,
    extra: WordRow | None = None,
    top_name: str = "Transformer",
    max_tokens: int = GRID_TOKENS,
) -> alt.VConcatChart:
    """The Explain page as one picture (for a PNG): the complaint (shortened) and both models'
    answers over their probabilities, the word strip, and every head's attention (first
    `max_tokens` tokens), one above the other."""
    grid = attention_grid_chart(expl.attention, max_tokens=max_tokens)
    grid.autosize = alt.Undefined  # only a whole (top-level) chart may size itself
    parts = [
        _probabilities_chart(expl, top_name),
        word_strip_chart(expl, extra=extra, top_name=top_name),
        grid,
    ]
    return alt.vconcat(*parts, spacing=28).resolve_scale(color="independent")
