"""Hostile labels, texts, column and file names in a real browser: on the Data page (column
options, the label chart's tooltip, the sidebar) and the Triage queue (the Confirm button, the
desk options, the reviewer's name) they are shown literally, and load, link or run nothing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Page, expect

from core.access import OPERATOR
from core.models.classifier import Prediction
from core.review.store import DB_NAME, Store
from core.review.triage import enqueue_uncertain
from ui.safe import WORD_JOINER

pytestmark = pytest.mark.browser

LABEL = (
    "Confirm ![](https://attacker.example/b.png) [UPI Dispute](https://phish.example) "
    "<img src=x onerror=alert(1)> <script>alert(2)</script> www.phish.example :smile: $x^2$"
)
TEXT = "<script>alert(3)</script> ![t](https://attacker.example/t.png) refund pending"
COLUMN = "note ![](https://attacker.example/c.png)"
FILE_NAME = "www.phish.example.csv"  # bare "www." text is what remark-gfm links
REVIEWER = "Ravi ![](https://attacker.example/r.png)"
TRAPS = ("attacker.example", "phish.example")
LOADED = (
    "img[src*='attacker.example'], img[src='x'], a[href*='attacker.example'], "
    "a[href*='phish.example'], a[href^='mailto:'], .katex"
)
WAIT_MS = 120_000  # a cold server imports torch on the first run, on a shared, busy machine


def shown(locator) -> str:
    """The text a reader sees (md_escape's invisible word joiners removed)."""
    return locator.inner_text().replace(WORD_JOINER, "")


def write_upload(folder: Path) -> Path:
    labels = [LABEL] * 3 + ["Card Fraud"] * 2 + ["UPI Dispute"] * 2
    texts = [f"{TEXT} {i}" for i in range(3)] + [
        "card stolen unknown charge", "atm card skimmed", "upi payment failed", "upi refund",
    ]  # fmt: skip
    path = folder / FILE_NAME
    pd.DataFrame({"complaint": texts, "desk": labels, COLUMN: "x"}).to_csv(path, index=False)
    return path


def queue_hostile_item(data_dir: Path) -> int:
    """One unsure prediction with the hostile label, queued as Classify would."""
    probabilities = {LABEL: 0.4, "Card Fraud": 0.35, "UPI Dispute": 0.25}
    with Store.open(data_dir / DB_NAME) as store:
        [item] = enqueue_uncertain(
            store, [TEXT], [Prediction(LABEL, probabilities, True)],
            threshold=0.5, batch=FILE_NAME, rows=[2], actor=OPERATOR,
        )  # fmt: skip
    return item


def option_texts(page: Page, combobox: str) -> list[str]:
    box = page.get_by_role("combobox", name=combobox)
    box.click()
    if box.get_attribute("aria-expanded") != "true":
        box.press("ArrowDown")  # a click on a box that already has focus may leave it closed
    options = page.get_by_role("option")
    expect(options.first).to_be_visible()
    texts = options.all_inner_texts()
    page.keyboard.press("Escape")
    return texts


def hover_tooltips(page: Page) -> list[str]:
    """Hover every bar of the first Vega-Lite chart; the inner HTML of each tooltip shown."""
    tooltip = page.locator("#vg-tooltip-element.visible")
    seen = []
    bars = page.get_by_test_id("stVegaLiteChart").first.locator(".mark-rect path")
    expect(bars).to_have_count(3)  # one per desk, once the chart has drawn
    for bar in bars.all():
        bar.hover()
        expect(tooltip).to_be_visible()
        seen.append(tooltip.inner_html())
    return seen


def check_data_page(page: Page, upload: Path) -> None:
    page.locator("input[type=file]").set_input_files(str(upload))
    expect(page.get_by_text("Validation report: www")).to_be_visible(timeout=WAIT_MS)
    assert shown(page.get_by_role("heading", name="Validation report")) == (
        f"Validation report: {FILE_NAME}"
    )
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar).to_contain_text("Data set: www")
    assert f"Data set: {FILE_NAME}" in shown(sidebar)
    assert COLUMN in option_texts(page, "Text column")  # options are plain text, verbatim
    tooltips = hover_tooltips(page)
    assert any("attacker.example/b.png" in t for t in tooltips), tooltips
    for html in tooltips:  # vega-tooltip escapes values: markup stays text
        assert "<img" not in html and "<a " not in html and "<script" not in html, html
    expect(page.locator(LOADED)).to_have_count(0)


def check_triage_page(page: Page, item: int) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Triage queue").click()
    expect(page.get_by_role("heading", name="Triage queue")).to_be_visible(timeout=WAIT_MS)
    page.get_by_label("Your name, saved with each verdict").fill(REVIEWER)
    page.get_by_role("button", name="Start reviewing").click()
    reviewing = page.get_by_text("Reviewing as Ravi")
    expect(reviewing).to_be_visible()
    assert shown(reviewing).startswith(f"Reviewing as {REVIEWER} (")

    confirm = page.locator("button", has_text="Confirm Confirm")
    expect(confirm).to_be_visible()
    assert shown(confirm) == f"Confirm {LABEL}"
    expect(confirm.locator("img, a, script, .katex")).to_have_count(0)
    item_box = page.get_by_role("combobox", name="Item to review")
    assert item_box.input_value().startswith(f"#{item}: {LABEL} (40%) · <script>")
    assert LABEL in option_texts(page, "Correct desk (for a correction)")
    expect(page.locator(LOADED)).to_have_count(0)

    confirm.click()
    saved = page.get_by_text("Saved: item #")
    expect(saved).to_be_visible()
    assert shown(saved) == f"Saved: item #{item} confirmed as {LABEL}."
    combined = page.locator("button", has_text="+ 1 reviewed rows")
    assert shown(combined) == f"Download {FILE_NAME} + 1 reviewed rows (CSV)"
    expect(page.locator(LOADED)).to_have_count(0)


def test_hostile_labels_are_literal_in_labels_options_and_tooltips(page, app_server, tmp_path):
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    item = queue_hostile_item(app_server.data_dir)

    check_data_page(page, write_upload(tmp_path))
    check_triage_page(page, item)

    scripts = page.evaluate("() => [...document.scripts].filter(s => /alert/.test(s.text)).length")
    assert scripts == 0
    assert [url for url in requests if any(trap in url for trap in TRAPS)] == []
    assert dialogs == []
    expect(page.get_by_test_id("stException")).to_have_count(0)
