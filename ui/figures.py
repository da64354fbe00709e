"""Every chart on a page with its picture for a deck: `show_chart` draws the chart as
st.altair_chart did and, under it, "PNG and SVG", which draws both files on the server
(core.charts.export, on the job queue's short lane) and then offers them as downloads.

The files are drawn only after that click, once per chart content: the button's place is then
taken by the two downloads until the chart changes. Bytes are never deferred (see ui/downloads.py
for why). Files are kept in a process-wide cache bounded by bytes, keyed by the SHA-256 of the
chart's spec with its data, so the same chart is drawn once for every session.

Session state: "<key>.prepared" holds the digest of the chart whose files were asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import altair as alt
import streamlit as st

from core.charts.export import ChartImages, ChartSpec, chart_spec, spec_images
from core.charts.presenter import with_large_text
from core.data.export import safe_file_stem
from core.errors import UserError
from core.memo import MB, ByteBoundedCache
from ui.jobs import run_short_cached
from ui.safe import md_escape
from ui.state import is_presenting

# A PNG of the largest chart (the attention grid of MiniLM at scale 2) is about 2 MB and its SVG
# about 14 MB; 96 MB keeps a few of those and dozens of ordinary charts.
CHART_IMAGES = ByteBoundedCache(96 * MB, name="the chart image cache")
PNG_MIME, SVG_MIME = "image/png", "image/svg+xml"
ChartSource = alt.TopLevelMixin | Callable[[], alt.TopLevelMixin]  # a chart, or its builder


def show_chart(
    chart: alt.TopLevelMixin, *, stem: str, key: str, container: Any = st, **kwargs: Any
) -> None:
    """`container.altair_chart(chart, **kwargs)`, then the chart's PNG and SVG downloads.

    stem: the files' name without extension (made safe here); key: unique on the page, the
    prefix of the image controls' widget keys; container: `st` or any container (a column, a
    tab)."""
    if is_presenting():  # presenter mode: text readable from the back of the room, also in files
        chart = with_large_text(chart)
    container.altair_chart(chart, **kwargs)
    render_chart_images(chart, stem=stem, key=key, container=container)


def render_chart_images(
    chart: ChartSource, *, stem: str, key: str, container: Any = st, label: str = ""
) -> None:
    """The "PNG and SVG" button of `chart`, or its two downloads once asked for (see the module
    docstring). `label` names the picture on the button (e.g. "The whole explanation").

    `chart` may be a function that builds it: a picture that is not on the page (the whole
    explanation) is then built only after a click, not on every run of the page."""
    row = container.container(horizontal=True, gap="small")
    prepared = f"{key}.prepared"
    try:
        spec = _asked_for(chart, row, prepared, key=key, label=label)
        if spec is None:
            return
        images = _images(spec)
    except UserError as error:  # too large to export, or the queue is full or timed out
        st.session_state.pop(prepared, None)
        row.error(md_escape(error))
        return
    st.session_state[prepared] = spec.digest
    _render_downloads(row, images, stem=stem, key=key, label=label)


def _asked_for(
    chart: ChartSource, row: Any, prepared: str, *, key: str, label: str
) -> ChartSpec | None:
    """The chart's spec when its files were asked for (now, or earlier for this very chart);
    None after drawing the button that asks."""
    if prepared in st.session_state:
        spec = chart_spec(_built(chart))
        if st.session_state[prepared] == spec.digest:
            return spec
        del st.session_state[prepared]  # the chart changed: its old files are not offered
    text = f"{label} as PNG and SVG".strip() if label else "PNG and SVG"
    if not row.button(text, key=f"{key}.prepare", type="tertiary", icon=":material/image:"):
        return None
    return chart_spec(_built(chart))


def _built(chart: ChartSource) -> alt.TopLevelMixin:
    return chart() if callable(chart) else chart


def _images(spec: ChartSpec) -> ChartImages:
    return run_short_cached(
        CHART_IMAGES, ("chart images", spec.digest), lambda cancel: spec_images(spec),
        title="Draw a chart as PNG and SVG", kind="figure", spinner="Drawing the picture…",
    )  # fmt: skip


def _render_downloads(row: Any, images: ChartImages, *, stem: str, key: str, label: str) -> None:
    name = safe_file_stem(stem) or "chart"
    prefix = f"{label}: " if label else ""
    row.download_button(
        f"{prefix}Download PNG", images.png, f"{name}.png", PNG_MIME, key=f"{key}.png",
        type="tertiary", icon=":material/download:",
    )  # fmt: skip
    row.download_button(
        f"{prefix}Download SVG", images.svg, f"{name}.svg", SVG_MIME, key=f"{key}.svg",
        type="tertiary", icon=":material/download:",
    )  # fmt: skip
