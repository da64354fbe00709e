"""The Routing board in a real browser on the demo data, no upload and no model: its per-desk
numbers (read from the page's own CSV of the table and its headline metrics) equal build_board's
on the demo file generated here with the app's DemoConfig at the same as_of, and the board
chart's PNG and SVG download and open."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import pytest
from PIL import Image
from playwright.sync_api import Page, expect

from core.board.board import BoardConfig, build_board, dataset_table
from core.board.tat import load_tat
from core.data.demo import DemoConfig, generate_demo_data
from core.data.validation import validate
from tests.browser.steps import FIRST_LOAD_MS

pytestmark = pytest.mark.browser


def expected_board(as_of: datetime):
    """The board of the demo data as the app boards it (ui.datasets: DemoConfig(), validated
    with text and desk), built here in the test process."""
    dataset, report = validate(generate_demo_data(DemoConfig()), text_col="text", label_col="desk")
    table, rows = dataset_table(dataset, text_col=report.text_col, label_col=report.label_col)
    config = BoardConfig(as_of=as_of, desk_col=report.label_col)
    return build_board(table, load_tat(), config, rows=rows)


def download(page: Page, button: str) -> bytes:
    with page.expect_download() as done:
        page.get_by_role("button", name=button, exact=True).first.click()
    return Path(done.value.path()).read_bytes()


def metric(page: Page, label: str):
    return page.get_by_test_id("stMetric").filter(has_text=label)


def test_board_on_the_demo_data_and_its_pictures(browser, app_url: str):
    # Ages measured at a fixed minute, given in the address, so the test can count the same.
    as_of = datetime.now(UTC).replace(second=0, microsecond=0)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(f"{app_url}/board?as_of={quote(as_of.isoformat())}")
    expect(page.get_by_role("heading", name="Routing board")).to_be_visible(timeout=FIRST_LOAD_MS)
    page.get_by_role("button", name="Use the demo data").click()
    expect(page.get_by_role("heading", name="Desks")).to_be_visible()

    board = expected_board(as_of)
    csv = download(page, "Download the desks (CSV)")
    desks = pd.read_csv(io.BytesIO(csv), encoding="utf-8-sig").set_index("desk")
    shown = desks[["open", "breached", "due in 24 h", "no time"]]
    wanted = {d.desk: [d.open, d.breached, d.due_24h, d.no_time] for d in board.desks}
    assert {desk: row.tolist() for desk, row in shown.iterrows()} == wanted
    breached, due = (sum(d.breached for d in board.desks), sum(d.due_24h for d in board.desks))
    assert breached > 0  # the demo queue has breaches to show
    expect(metric(page, "Breached")).to_contain_text(f"{breached:,}")
    expect(metric(page, "Due within 24 h")).to_contain_text(f"{due:,}")

    page.get_by_role("button", name="PNG and SVG").first.click()
    png = download(page, "Download PNG")
    Image.open(io.BytesIO(png)).verify()
    svg = download(page, "Download SVG")
    assert ET.fromstring(svg).tag.endswith("svg")
    assert b"Routing board as of" in svg
    context.close()
