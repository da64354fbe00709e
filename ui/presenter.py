"""Presenter mode for a demo on a projector: a "Presenter mode" toggle on the Explain and
Attention lab pages (also on with `?present=1` in the address, so a presenter can bookmark it),
the one constant style sheet it applies (larger text, wider spacing, no sidebar), and the
Explain page's story of one complaint (core.analysis.story) in three steps.

The style sheet is a constant: nothing typed or uploaded ever reaches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.analysis.explain import Explanation
from core.analysis.perturbations import ProbeConfig
from core.analysis.probe_compare import ProbeResult, run_probes
from core.analysis.story import BlindSpot, Story, build_story
from core.charts.attention_maps import attention_head_chart
from core.charts.explain_html import escaped_highlight_html
from core.errors import UserError
from core.models.registry import LoadedModel
from ui.caches import PROBES
from ui.figures import show_chart
from ui.jobs import run_short_cached
from ui.safe import md_escape
from ui.state import set_presenting

PRESENT_PARAM = "present"  # `?present=1` turns presenter mode on when a page opens
# Streamlit sizes its text in rem, so a larger root font enlarges every text element; charts
# (drawn in a canvas) keep their size. The sidebar, its collapse and expand buttons and its
# page list are hidden: the toggle on the page turns presenter mode off again.
MINI_PX = 260  # side of each head's heatmap in the story's third step
PRESENTER_CSS = """<style>
html { font-size: 20px; }
[data-testid="stSidebar"],
[data-testid="stSidebarCollapsedControl"],
[data-testid="stSidebarCollapseButton"],
[data-testid="stExpandSidebarButton"] { display: none !important; }
[data-testid="stMainBlockContainer"] { max-width: 1500px; padding-top: 2.5rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 1.6rem; }
[data-testid="stMarkdownContainer"] p, [data-testid="stText"] { line-height: 1.6; }
</style>"""


def presenter_on(page_key: str) -> bool:
    """The page's "Presenter mode" toggle (key f"{page_key}.presenter"), first set from
    `?present=1`; while on, the style sheet is applied and `?present=1` kept in the address."""
    key = f"{page_key}.presenter"
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(PRESENT_PARAM) == "1"
    on = st.toggle(
        "Presenter mode", key=key,
        help="Larger text, no sidebar, and the page's story in order. Bookmark the page with "
        "?present=1 in its address to open it this way.",
    )  # fmt: skip
    _keep_in_address(on)
    set_presenting(on)  # charts drawn after this, in this run, get larger text
    if on:
        apply_presenter_style()
    return on


def _keep_in_address(on: bool) -> None:
    present = st.query_params.get(PRESENT_PARAM) == "1"
    if on and not present:
        st.query_params[PRESENT_PARAM] = "1"
    elif not on and PRESENT_PARAM in st.query_params:
        del st.query_params[PRESENT_PARAM]


def apply_presenter_style() -> None:
    """Inject PRESENTER_CSS (a constant) into the page."""
    st.html(PRESENTER_CSS)


def presenter_sections(titles: Sequence[str]) -> list[Any]:
    """One container per title, one below the other, each under a numbered header: a page's
    tabs told in order for an audience. `titles` are the page's constants, never user text."""
    sections = []
    for number, title in enumerate(titles, 1):
        section = st.container()
        section.header(f"{number} · {title}")
        sections.append(section)
    return sections


# --------------------------------------------------------------------------- the Explain story


def probed(model: LoadedModel, text: str) -> ProbeResult:
    """Both models on `text` and its order rewrites: on the short lane, in the probe cache under
    the Order probes page's key (the same complaint is probed once for both pages)."""
    config = ProbeConfig()
    return run_short_cached(
        PROBES, ("probe", model.key, text, config),
        lambda cancel: run_probes(model.neural, model.bow, text, config, cancel=cancel),
        title="Probe one complaint", kind="probe", spinner="Reordering the complaint…",
    )  # fmt: skip


def render_explain_story(model: LoadedModel, text: str, expl: Explanation) -> None:
    """The presenter's story of one complaint (core.analysis.story), in three steps."""
    st.header("The story of one complaint")
    try:
        probe = probed(model, text)
        story = build_story(expl, probe)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    render_blindness(story)
    render_answer(story, expl)
    render_heads(story, expl)
    st.divider()


def _answers(story: Story, spot: BlindSpot) -> pd.DataFrame:
    """Each model's desk on the original and on the reordering, and how far the probability
    of its original desk moved."""
    after = spot.outcome
    rows = [
        ("Bag of words", story.bow, after.bow),
        ("Transformer", story.neural, after.neural),
    ]
    return pd.DataFrame(
        {
            "model": [name for name, _, _ in rows],
            "original": [f"{a.label} ({a.confidence:.1%})" for _, a, _ in rows],
            "reordered": [f"{b.label} ({b.confidence:.1%})" for _, _, b in rows],
            "change of its first desk": [
                b.probabilities[a.label] - a.confidence for _, a, b in rows
            ],
        }
    )


def render_blindness(story: Story) -> None:
    st.subheader("1 · The bag of words cannot see word order")
    spot = story.blind_spot
    if spot is None:
        st.info(story.note)
        return
    st.caption("The complaint as the models read it:")
    st.text(story.text)  # untrusted: shown as is
    st.caption(f"The same words in another order ({md_escape(spot.outcome.perturbation.kind)}):")
    st.text(spot.text)
    st.dataframe(_answers(story, spot), hide_index=True, width="stretch")
    st.caption(
        "The bag of words counts the same words, so its answer cannot change; the transformer "
        "reads their order, and its answer moves."
    )


def render_answer(story: Story, expl: Explanation) -> None:
    st.subheader("2 · The transformer's answer")
    left, right = st.columns(2)
    left.metric("Transformer", md_escape(story.neural.label),
                f"{story.neural.confidence:.0%} sure", delta_color="off")  # fmt: skip
    right.metric("Bag of words", md_escape(story.bow.label), f"{story.bow.confidence:.0%} sure",
                 delta_color="off")  # fmt: skip
    # Every word and label in the strip is html.escape'd by its builder (core.charts.explain_html).
    st.html(escaped_highlight_html(expl))


def render_heads(story: Story, expl: Explanation) -> None:
    st.subheader("3 · The heads that looked at the order words")
    if not story.heads:
        st.info("No reordering moved the transformer, so no order words to follow.")
        return
    words = ", ".join(story.order_words)
    st.caption(
        f"Order words (the reordering moved them): {md_escape(words)}. The heads below give them "
        "the most attention, averaged over every token of the complaint."
    )
    columns = st.columns(len(story.heads))
    for rank, (column, focus) in enumerate(zip(columns, story.heads, strict=True), 1):
        chart = attention_head_chart(expl.attention, focus.layer, focus.head)
        name = f"layer-{focus.layer + 1}-head-{focus.head + 1}"
        show_chart(chart.properties(width=MINI_PX, height=MINI_PX), stem=name,
                   key=f"explain.story.head{rank}", container=column)  # fmt: skip
        column.caption(f"{focus.mass:.0%} of the attention goes to the order words")
