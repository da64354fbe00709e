"""Charts as files people paste into a deck: PNG and SVG drawn on the server by vl-convert (the
Vega-Lite engine compiled into a Python extension; no browser), bounded in rows and bytes.

Complaint words reach charts as data; vl-convert draws them as SVG text nodes, escaping `<` and
`&`, so an SVG never carries markup from a complaint. It may not fetch anything: charts carry
their data inline, and every URL is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import vl_convert
from altair.utils.data import to_values

from core.errors import UserError

# The largest chart the app draws: the attention grid of a 12-layer, 12-head model at 24 tokens
# (82,944 cells); one head's map fits up to 316 tokens. Past that a picture is unreadable anyway.
MAX_ROWS = 100_000
# The spec as JSON: about 100 bytes a row for the largest charts, with room for labels.
MAX_SPEC_BYTES = 16 * 1024 * 1024
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEFAULT_SCALE = 2.0  # pixels per chart unit: sharp on a projector and in a slide
MAX_SCALE = 4.0
# Sub-charts of compound charts, where data may sit besides the top level.
_CHILDREN = ("layer", "vconcat", "hconcat", "concat")
_NO_URLS: list[str] = []  # vl-convert's allow-list of base URLs for data: none


@dataclass(frozen=True)
class ChartSpec:
    """A chart's Vega-Lite spec with all data inline, checked against the caps.

    json: the spec as JSON text; digest: its SHA-256 (hex), the content key of caches;
    rows: data rows it carries, all datasets together."""

    json: str
    digest: str
    rows: int


@dataclass(frozen=True)
class ChartImages:
    """One chart as a PNG (bytes) and an SVG document (UTF-8 bytes)."""

    png: bytes
    svg: bytes


def _rows_of(data: Any) -> int:
    if isinstance(data, pd.DataFrame):
        return len(data)
    values = getattr(data, "values", None) if not isinstance(data, dict) else data.get("values")
    return len(values) if isinstance(values, list) else 0


def _count_rows(chart: Any) -> int:
    """Data rows of `chart` and of every sub-chart (layers, concatenations, a facet's spec)."""
    total = _rows_of(getattr(chart, "data", None))
    for name in _CHILDREN:
        total += sum(_count_rows(child) for child in _children(chart, name))
    spec = getattr(chart, "spec", alt.Undefined)
    return total + (_count_rows(spec) if hasattr(spec, "to_dict") else 0)


def _children(chart: Any, name: str) -> list:
    children = getattr(chart, name, alt.Undefined)
    return list(children) if isinstance(children, list) else []


def _named(chart: Any, datasets: dict[str, list]) -> Any:
    """A shallow copy of `chart` whose DataFrames are replaced by named datasets, their rows
    put in `datasets`. Altair's own data transformer stops at 5,000 rows, and changing it is
    process-wide (Streamlit sets it under its own lock while it draws); inline values would be
    validated row by row (seconds for the attention grid). So the rows go in here, per chart."""
    chart = chart.copy(deep=False)
    if isinstance(getattr(chart, "data", None), pd.DataFrame):
        name = f"lens-data-{len(datasets)}"
        datasets[name] = to_values(chart.data)["values"]
        chart.data = {"name": name}
    for name in _CHILDREN:
        if children := _children(chart, name):
            setattr(chart, name, [_named(child, datasets) for child in children])
    spec = getattr(chart, "spec", alt.Undefined)
    if hasattr(spec, "to_dict") and hasattr(spec, "copy"):
        chart.spec = _named(spec, datasets)
    return chart


def _spec_dict(chart: Any) -> dict:
    datasets: dict[str, list] = {}
    spec = _named(chart, datasets).to_dict(validate=False)
    spec["datasets"] = {**spec.get("datasets", {}), **datasets}
    return spec


def chart_spec(chart: alt.TopLevelMixin) -> ChartSpec:
    """`chart` as a self-contained Vega-Lite spec; UserError (one line) when it carries more
    than MAX_ROWS data rows or its JSON exceeds MAX_SPEC_BYTES. The rows are counted before any
    are copied."""
    rows = _count_rows(chart)
    if rows > MAX_ROWS:
        raise UserError(
            f"this chart has {rows:,} data points, more than the {MAX_ROWS:,} an image export "
            "takes; show fewer tokens or a shorter complaint, then export again"
        )
    text = json.dumps(_spec_dict(chart), separators=(",", ":"), allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > MAX_SPEC_BYTES:
        raise UserError(
            f"this chart's data take {size / 2**20:.1f} MB, more than the "
            f"{MAX_SPEC_BYTES // 2**20} MB an image export takes; show less, then export again"
        )
    return ChartSpec(text, hashlib.sha256(text.encode("utf-8")).hexdigest(), rows)


def spec_png(spec: ChartSpec, *, scale: float = DEFAULT_SCALE) -> bytes:
    """The chart drawn as a PNG at `scale` pixels per unit (1 to MAX_SCALE)."""
    if not 1.0 <= scale <= MAX_SCALE:
        raise UserError(f"scale must be between 1 and {MAX_SCALE:g}, got {scale!r}")
    png = vl_convert.vegalite_to_png(spec.json, scale=scale, allowed_base_urls=_NO_URLS)
    if not png.startswith(PNG_MAGIC):  # vl-convert promises a PNG; anything else is a bug
        raise RuntimeError("vl-convert returned something other than a PNG")
    return png


def spec_svg(spec: ChartSpec) -> bytes:
    """The chart drawn as an SVG document (UTF-8), text as escaped text nodes."""
    svg = vl_convert.vegalite_to_svg(spec.json, allowed_base_urls=_NO_URLS)
    if not svg.lstrip().startswith("<svg"):
        raise RuntimeError("vl-convert returned something other than an SVG document")
    return svg.encode("utf-8")


def spec_images(spec: ChartSpec, *, scale: float = DEFAULT_SCALE) -> ChartImages:
    """Both files of one chart spec."""
    return ChartImages(png=spec_png(spec, scale=scale), svg=spec_svg(spec))


def chart_png(chart: alt.TopLevelMixin, *, scale: float = DEFAULT_SCALE) -> bytes:
    """`chart` as PNG bytes, drawn on the server (bounded: see chart_spec)."""
    return spec_png(chart_spec(chart), scale=scale)


def chart_svg(chart: alt.TopLevelMixin) -> bytes:
    """`chart` as an SVG document (UTF-8 bytes), drawn on the server (bounded: see chart_spec)."""
    return spec_svg(chart_spec(chart))
