"""The word strip: each model's score per word of one explanation, one row per model (`WordRow`
adds a model beside the two of an Explanation), its colours, and the strip drawn as an Altair
chart for images (core.charts.explain_html draws the same strip as HTML for the page)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import pandas as pd

from core.analysis.explain import Explanation

POSITIVE = (33, 102, 172)  # blue: the word pushes towards the target desk
NEGATIVE = (178, 24, 43)  # red: the word pushes away from it
DIVERGING = "redblue"  # the same two poles for Altair's colour scales
# The strip as a chart (for PNG and SVG; the page itself draws the HTML strip).
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


def row_scale(scores: Sequence[float]) -> float:
    """A row's largest |score|: each row of the strip is shaded relative to it."""
    return float(max((abs(s) for s in scores), default=0.0))


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
        (top_name, expl.neural_scores, expl.neural_seen),
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
        scale = row_scale(scores)
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
    """The word-attribution strip as a chart (the HTML strip of
    core.charts.explain_html.escaped_highlight_html, drawn for an image): each word in text
    order, wrapped into lines, with one coloured cell per model (blue towards the explained
    desk, red away from it, each row scaled to its own largest |score|); words cut off by
    truncation are grey on white."""
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
