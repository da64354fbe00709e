"""The Explain page's charts that are neither attention (core.charts.attention_maps) nor the word
strip (core.charts.word_strip): both models' word scores as bars, and the whole page as one
picture for a PNG (the complaint, both answers, the word strip and every head's attention)."""

from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from core.analysis.explain import Explanation
from core.charts.attention_maps import GRID_TOKENS, attention_grid_chart
from core.charts.word_strip import (
    DIVERGING,
    STRIP_LEGEND_PX,
    STRIP_WIDTH,
    WordRow,
    word_strip_chart,
)

STORY_TEXT_CHARS = 400  # of the complaint in the one-image explanation
STORY_LINE_CHARS = 110


def word_scores_chart(expl: Explanation) -> alt.Chart:
    """Both models' scores per word as bars, words in text order (position-prefixed)."""
    width = len(str(len(expl.words)))
    labels = [f"{i + 1:0{width}d} {w.text}" for i, w in enumerate(expl.words)]
    frame = pd.DataFrame(
        {
            "word": labels * 2,
            "model": ["transformer"] * len(labels) + ["bag of words"] * len(labels),
            "score": list(expl.neural_scores) + list(expl.bow_scores),
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


def _complaint_lines(text: str) -> list[str]:
    """The complaint, shortened to STORY_TEXT_CHARS characters and wrapped for a title."""
    short = text if len(text) <= STORY_TEXT_CHARS else text[: STORY_TEXT_CHARS - 1] + "…"
    return textwrap.wrap(" ".join(short.split()), STORY_LINE_CHARS) or [""]


def _probabilities_chart(expl: Explanation, top_name: str) -> alt.Chart:
    """Both models' probability of every desk, side by side, titled with the complaint."""
    desks = list(expl.neural.probabilities)
    frame = pd.DataFrame(
        {
            "desk": desks * 2,
            "model": [top_name] * len(desks) + ["Bag of words"] * len(desks),
            "probability": list(expl.neural.probabilities.values())
            + [expl.bow.probabilities[d] for d in desks],
        }
    )
    answers = (
        f"{top_name}: {expl.neural.label} ({expl.neural.confidence:.0%}) · "
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
