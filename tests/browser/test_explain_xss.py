"""Explain and Order probes in a real browser: a hostile complaint stays plain text, loads
nothing and opens no dialog."""

import pytest
from playwright.sync_api import expect

from tests.browser.steps import FIRST_LOAD_MS, use_saved_model

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/x.png) paid by card, not by UPI"
TRAP = "127.0.0.1:9"


def _submit(page, button: str) -> None:
    box = page.get_by_role("textbox", name="Complaint")
    box.fill(HOSTILE)
    page.get_by_role("button", name=button, exact=True).click()
    expect(page.get_by_test_id("stText").filter(has_text="onerror=alert(1)")).to_have_text(
        HOSTILE, timeout=FIRST_LOAD_MS
    )


def test_hostile_complaint_is_plain_text_on_both_pages(page, saved_tiny_model):
    requests: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    use_saved_model(page, saved_tiny_model.name)

    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Explain", exact=True).click()
    expect(page.get_by_text("Word by word")).to_be_visible(timeout=FIRST_LOAD_MS)  # page idle
    _submit(page, "Explain")
    expect(page.get_by_text("Word by word")).to_be_visible(timeout=FIRST_LOAD_MS)
    expect(page.get_by_test_id("stMetric").filter(has_text="Transformer")).to_be_visible()
    expect(page.locator("img[src='x'], img[src*='127.0.0.1']")).to_have_count(0)

    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Order probes").click()
    expect(page.get_by_text("Positional ablation")).to_be_visible(timeout=FIRST_LOAD_MS)
    _submit(page, "Probe")
    expect(page.get_by_text("Positional ablation")).to_be_visible(timeout=FIRST_LOAD_MS)
    expect(page.locator("img[src='x'], img[src*='127.0.0.1']")).to_have_count(0)
    expect(page.get_by_test_id("stException")).to_have_count(0)

    assert [url for url in requests if TRAP in url] == []
    assert dialogs == []
