"""Pictures for a deck in a real browser: on the Explain page the attention grid's PNG and SVG
and the whole explanation as one PNG download and open; presenter mode (`?present=1`) hides the
sidebar."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.browser.steps import FIRST_LOAD_MS, use_saved_model

pytestmark = pytest.mark.browser
DRAW_MS = 120_000  # vl-convert draws on the job queue of a busy 2-core machine


def widget(page, key: str):
    """The element Streamlit gives the widget `key` (its class is st-key-<key>, "." → "-")."""
    return page.locator(f".st-key-{key.replace('.', '-')}")


def download(page, key: str) -> tuple[str, bytes]:
    """Click the download button `key`; the file's suggested name and its bytes."""
    with page.expect_download() as done:
        widget(page, key).get_by_role("button").click()
    return done.value.suggested_filename, Path(done.value.path()).read_bytes()


def check_png(content: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(content))
    image.verify()
    return image.size


def check_svg(content: bytes) -> None:
    root = ET.fromstring(content)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def prepare(page, key: str) -> None:
    widget(page, f"{key}.prepare").get_by_role("button").click()
    expect(widget(page, f"{key}.png")).to_be_visible(timeout=DRAW_MS)


def test_explain_pictures_download_and_presenter_hides_the_sidebar(page, saved_tiny_model, app_url):
    use_saved_model(page, saved_tiny_model.name)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Explain", exact=True).click()
    expect(page.get_by_text("Word by word")).to_be_visible(timeout=FIRST_LOAD_MS)

    prepare(page, "explain.figure.grid")
    name, png = download(page, "explain.figure.grid.png")
    # the layers shown (the last by default) are in the name, e.g. attention-grid-layers-2.png
    stem = name.removesuffix(".png")
    assert stem.startswith("attention-grid") and check_png(png)[0] > 100
    name, svg = download(page, "explain.figure.grid.svg")
    assert name == f"{stem}.svg"
    check_svg(svg)

    prepare(page, "explain.figure.all")
    name, whole = download(page, "explain.figure.all.png")
    assert name == "explanation.png"
    width, height = check_png(whole)
    assert height > width / 2  # the complaint, the strip and the grid, one above the other

    page.goto(f"{app_url}/explain?present=1")  # a bookmarked presenter view
    expect(page.get_by_role("heading", name="Explain")).to_be_visible(timeout=FIRST_LOAD_MS)
    expect(page.get_by_role("switch", name="Presenter mode")).to_be_checked()
    expect(page.get_by_test_id("stSidebar")).to_be_hidden()
    expect(page.get_by_test_id("stExpandSidebarButton")).to_be_hidden()
