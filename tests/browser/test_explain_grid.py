"""The Explain page's every-head attention grid in a real browser: for a model shaped like MiniLM
(6 layers × 12 heads) it fits the main column at 1,400 and 1,000 px, every head drawn inside."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from core.charts.attention_maps import GRID_WIDTH
from tests.browser.steps import FIRST_LOAD_MS, use_saved_model
from tests.conftest import make_dataset, save_random_bert, separable_rows

pytestmark = pytest.mark.browser

LAYERS, HEADS = 6, 12  # all-MiniLM-L6-v2's attention
# Longer than the grid's 24 tokens, so every head is drawn at its widest.
COMPLAINT = (
    "upi payment failed but money debited twice and the merchant refund is still pending since "
    "yesterday, no reply from customer care, very bad service, kindly help sir, please help"
)
SHOTS = ("explain-grid-1400.png", "explain-grid-1000.png")


@pytest.fixture(scope="module")
def saved_wide_model(app_server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random BERT with MiniLM's 6 × 12 heads (hidden 48) trained one step, saved among the
    server's models as `wide-bert`."""
    from core.access import OPERATOR
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    backbone = save_random_bert(
        tmp_path_factory.mktemp("wide-bert"), layers=LAYERS, heads=HEADS, hidden=48
    )
    data = make_dataset(*separable_rows(2))
    config = TrainConfig(
        backbone=str(backbone), lr=1e-2, batch_size=6, max_length=48, max_steps=1, device="cpu"
    )
    return save_model(
        train_models(data, data, config), app_server.models_dir, "wide-bert", actor=OPERATOR
    )


def head_columns(png: bytes) -> list[tuple[int, int]]:
    """The runs of pixel columns (start, end) that hold cells of the grid: each run is one head,
    all its layers. The cells are drawn in the "blues" scheme (its lightest is #cfe1f2); text is
    grey, at most slightly bluish (#808495), and a column of cells is taller than a line of it."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    blue = (pixels[..., 2] - pixels[..., 0]) > 30  # (height, width)
    cells = (blue.sum(axis=0) >= 20).astype(int)
    edges = np.flatnonzero(np.diff(np.r_[0, cells, 0]))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


# The main column's content box and the grid's drawing (canvas or SVG) in the visible tab,
# scrolled into view for the screenshot, all measured at once (Streamlit may redraw it).
BOXES = """() => {
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    const tab = [...document.querySelectorAll('[role="tabpanel"]')]
        .find(panel => panel.offsetParent !== null);
    const chart = tab && tab.querySelector("canvas, svg.marks");
    if (!chart) return null;
    chart.scrollIntoView({block: "center"});
    const box = main.getBoundingClientRect(), style = getComputedStyle(main);
    const drawn = chart.getBoundingClientRect();
    return {
        left: box.left + parseFloat(style.paddingLeft),
        right: Math.min(box.right - parseFloat(style.paddingRight), window.innerWidth),
        chart: {x: drawn.x, y: drawn.y, width: drawn.width, height: drawn.height},
    };
}"""
# The drawing has settled at its natural width (GRID_WIDTH for 12 heads) or the column's.
SETTLED = f"""(natural) => {{
    const b = ({BOXES})();
    return b !== null && Math.abs(b.chart.width - Math.min(natural, b.right - b.left)) <= 1;
}}"""


def check_grid_fits(page, shot: Path) -> None:
    """The grid's drawing lies within the main column and the viewport, with all 12 heads."""
    expect(page.locator('[data-testid="stElementContainer"][data-stale="true"]')).to_have_count(0)
    with contextlib.suppress(PlaywrightTimeoutError):  # the assertion below says what is wrong
        page.wait_for_function(SETTLED, arg=GRID_WIDTH, timeout=20_000)
    boxes = page.evaluate(BOXES)
    chart = boxes["chart"]
    assert boxes["left"] <= chart["x"] and chart["x"] + chart["width"] <= boxes["right"], boxes
    clip = {"x": boxes["left"], "y": chart["y"], "width": boxes["right"] - boxes["left"]}
    page.screenshot(path=shot, clip=clip | {"height": chart["height"]})
    heads = head_columns(shot.read_bytes())
    assert len(heads) == HEADS, heads  # head 12 too, inside the column
    widths = [end - start for start, end in heads]
    assert min(widths) >= 24, widths  # a pixel or more per token of the 24 drawn


def test_every_head_fits_the_page(page, saved_wide_model, tmp_path):
    use_saved_model(page, saved_wide_model.name)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Explain", exact=True).click()
    expect(page.get_by_text("Word by word")).to_be_visible(timeout=FIRST_LOAD_MS)
    page.get_by_role("textbox", name="Complaint").fill(COMPLAINT)
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.get_by_test_id("stText").filter(has_text="merchant refund")).to_be_visible(
        timeout=FIRST_LOAD_MS
    )
    expect(page.get_by_text(f"{LAYERS} layers × {HEADS} heads")).to_be_visible()

    check_grid_fits(page, tmp_path / SHOTS[0])
    page.set_viewport_size({"width": 1000, "height": 1000})
    check_grid_fits(page, tmp_path / SHOTS[1])
