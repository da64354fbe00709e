"""Charts as PNG and SVG for decks (core.charts.export): real files drawn by vl-convert, the row
and byte caps refusing in one line, complaint text escaped in the SVG, no URL fetched; the
word strip and the one-picture explanation; and the "PNG and SVG" control (ui.figures)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

import ui.figures
from core.analysis.explain import AttentionMaps
from core.charts import export
from core.charts.attention_maps import attention_grid_chart
from core.charts.explain import explanation_chart
from core.charts.export import chart_png, chart_spec, chart_svg
from core.charts.word_strip import word_strip_chart
from core.errors import UserError

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = ["<script>alert(1)</script>", "a & b", '"quoted" <b>bold</b>']


def bars(labels: list[str], values: list[float] | None = None) -> alt.Chart:
    frame = pd.DataFrame({"word": labels, "score": values or list(range(1, len(labels) + 1))})
    return alt.Chart(frame, title="Scores").mark_bar().encode(x="word:N", y="score:Q")


def svg_texts(svg: bytes) -> list[str]:
    """Every line of text drawn in `svg` (a text element, or each line of a multi-line one)."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [node.text for tag in ("text", "tspan") for node in root.iter(SVG + tag) if node.text]


def test_png_opens_and_scale_sets_its_pixels():
    chart = bars(["upi", "card", "loan"]).properties(width=120, height=80)
    one, two = (Image.open(io.BytesIO(chart_png(chart, scale=s))) for s in (1.0, 2.0))
    one.load()
    assert one.format == two.format == "PNG"
    assert two.size == (2 * one.size[0], 2 * one.size[1])
    Image.open(io.BytesIO(chart_png(chart))).verify()  # the default (scale 2) is a valid PNG too


def test_svg_parses_and_carries_the_labels():
    texts = svg_texts(chart_svg(bars(["upi", "card", "loan"])))
    assert {"upi", "card", "loan", "Scores"} <= set(texts)


def test_complaint_text_is_escaped_text_in_the_svg():
    svg = chart_svg(bars(HOSTILE))
    texts = svg_texts(svg)  # well-formed XML, whatever the labels hold
    assert set(HOSTILE) <= set(texts)  # drawn as text, read back literally
    root = ET.fromstring(svg)
    assert not [e for e in root.iter() if e.tag in (f"{SVG}script", f"{SVG}b", "script", "b")]
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in svg and b"a &amp; b" in svg


def test_too_many_rows_are_refused_in_one_line():
    def half(column: str) -> alt.Chart:
        frame = pd.DataFrame({column: np.arange(export.MAX_ROWS // 2 + 1)})
        return alt.Chart(frame).mark_point().encode(x=f"{column}:Q")

    chart_spec(half("x"))  # half the cap is fine
    with pytest.raises(UserError, match=r"^this chart has 100,002 data points") as caught:
        chart_spec(alt.vconcat(half("x"), half("y")))  # rows of every sub-chart count
    assert "\n" not in str(caught.value)


def test_too_many_bytes_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(export, "MAX_SPEC_BYTES", 2048)
    chart = bars([f"word number {i}" for i in range(60)])
    with pytest.raises(UserError, match=r"MB, more than the 0 MB an image export takes") as caught:
        chart_png(chart)
    assert "\n" not in str(caught.value)


def test_no_url_is_fetched():
    chart = alt.Chart(alt.UrlData(url="http://127.0.0.1:9/data.json")).mark_point()
    with pytest.raises(ValueError, match="not allowed"):
        chart_svg(chart.encode(x="a:Q"))


def test_the_largest_attention_grid_fits_the_caps():
    """12 layers x 12 heads at 24 tokens (BERT-base sized): 82,944 cells, all inline."""
    weights = np.full((12, 12, 30, 30), 1 / 30, dtype=np.float32)
    maps = AttentionMaps(tuple(f"t{i}" for i in range(30)), weights, has_cls=True)
    spec = chart_spec(attention_grid_chart(maps))
    assert spec.rows == 12 * 12 * 24 * 24
    assert len(spec.json) < export.MAX_SPEC_BYTES
    assert spec.digest == chart_spec(attention_grid_chart(maps)).digest  # content-keyed


@pytest.fixture(scope="module")
def tiny_explanation(tiny_model_dir):
    from core.analysis.explain import explain_text
    from core.analysis.probe_compare import DEMO_TEXT
    from core.models.registry import load_model

    model = load_model(str(tiny_model_dir))
    return explain_text(model.neural, model.bow, DEMO_TEXT)


def test_word_strip_chart_has_every_word_on_both_rows(tiny_explanation):
    expl = tiny_explanation
    chart = word_strip_chart(expl)
    frame = chart.layer[0].data
    assert len(frame) == 2 * len(expl.words)
    neural = frame[frame["model"] == "Transformer"]
    assert neural["word"].tolist() == [w.text for w in expl.words]
    largest = int(np.argmax(np.abs(expl.neural_scores)))
    assert neural["shade"].iloc[largest] == pytest.approx(
        np.sign(expl.neural_scores[largest])
    )  # each row is scaled to its own largest |score|
    assert (neural["x"].iloc[1:].to_numpy() > neural["x"].iloc[:-1].to_numpy()).all()
    texts = svg_texts(chart_svg(chart))
    assert {w.text for w in expl.words} <= set(texts)


def test_explanation_chart_is_one_picture(tiny_explanation):
    expl = tiny_explanation
    chart = explanation_chart(expl)
    image = Image.open(io.BytesIO(chart_png(chart)))
    image.verify()
    texts = svg_texts(chart_svg(chart))
    assert "Why the models routed this complaint" in texts
    assert any(expl.neural.label in t and expl.bow.label in t for t in texts)
    assert "Every head (first 15 tokens)" in texts


# --------------------------------------------------------------------------- ui.figures


def figure_page() -> None:
    import streamlit as st

    from ui.figures import show_chart

    show_chart(st.session_state["chart"], stem="my chart/../x", key="test.figure", width="stretch")


@pytest.fixture
def drawn(monkeypatch) -> list[bytes]:
    """The PNG and SVG of every chart drawn; the image cache starts empty."""
    monkeypatch.setattr(ui.figures, "CHART_IMAGES", ui.figures.ByteBoundedCache(2**20))
    files: list[bytes] = []

    def recording(spec):
        images = export.spec_images(spec)
        files.extend((images.png, images.svg))
        return images

    monkeypatch.setattr(ui.figures, "spec_images", recording)
    return files


def labels(at: AppTest) -> list[str]:
    return [button.proto.label for button in at.get("download_button")]


def test_images_are_drawn_only_when_asked_and_once(drawn):
    at = AppTest.from_function(figure_page, default_timeout=60)
    at.session_state["chart"] = bars(["upi", "card"])
    at.run()
    assert not at.exception and labels(at) == [] and drawn == []
    at.button(key="test.figure.prepare").click().run()
    assert not at.exception
    assert labels(at) == ["Download PNG", "Download SVG"]
    urls = [button.proto.url for button in at.get("download_button")]
    assert urls[0].endswith(".png") and urls[1].endswith(".svg")  # served with their types
    assert drawn[0].startswith(export.PNG_MAGIC) and svg_texts(drawn[1])
    at.run()  # a rerun keeps the downloads and draws nothing again
    assert labels(at) == ["Download PNG", "Download SVG"] and len(drawn) == 2
    at.session_state["chart"] = bars(["upi", "loan"])  # the chart changed: ask again
    at.run()
    assert labels(at) == [] and at.button(key="test.figure.prepare")


def test_a_chart_too_large_says_so(drawn, monkeypatch):
    monkeypatch.setattr(export, "MAX_ROWS", 1)
    at = AppTest.from_function(figure_page, default_timeout=60)
    at.session_state["chart"] = bars(["upi", "card"])
    at.run()
    at.button(key="test.figure.prepare").click().run()
    assert not at.exception and labels(at) == [] and drawn == []
    assert at.error[0].value.startswith(r"this chart has 2 data points\, more than the 1 ")


def test_every_page_draws_its_charts_through_show_chart():
    """So that every chart has its PNG and SVG: only ui.figures calls st.altair_chart."""
    root = Path(__file__).resolve().parent.parent
    callers = [
        path.relative_to(root).as_posix()
        for folder in ("pages", "ui")
        for path in sorted((root / folder).glob("*.py"))
        if "altair_chart(" in path.read_text(encoding="utf-8")
    ]
    assert callers == ["ui/figures.py"]
