"""Charts for a projector: the same chart with its text larger (presenter mode)."""

from __future__ import annotations

import altair as alt

# Vega-Lite's default sizes (px): axis and legend labels 10, their titles 11, chart titles 13.
LABEL_PX, AXIS_TITLE_PX, TITLE_PX = 10, 11, 13
PRESENTER_SCALE = 1.5  # read from the back of a meeting room, still fits the page's charts


def with_large_text(chart: alt.TopLevelMixin, *, scale: float = PRESENTER_SCALE):
    """`chart` with axis, legend, facet-header and title text `scale` times Vega-Lite's default
    size. Sizes a chart sets itself stay; the data and encodings are untouched."""
    label, title = LABEL_PX * scale, AXIS_TITLE_PX * scale
    return (
        chart.configure_axis(labelFontSize=label, titleFontSize=title)
        .configure_legend(labelFontSize=label, titleFontSize=title)
        .configure_header(labelFontSize=label, titleFontSize=title)
        .configure_title(fontSize=TITLE_PX * scale)
    )
