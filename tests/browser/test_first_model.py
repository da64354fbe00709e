"""A first visit in a real browser: no data, no model; one click on Classify builds a quick model
on the demo data in the background, with progress, and the page classifies with it."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_quick_model_is_one_click_away_on_a_page_that_needs_one(page, app_url: str):
    page.goto(f"{app_url}/classify")
    main = page.get_by_test_id("stMainBlockContainer")
    expect(main.get_by_text("No model is active")).to_be_visible()
    page.get_by_role("button", name="Build a quick model").click()
    # Embedding the demo complaints with the server's quick backbone (GRIEVANCE_LENS_QUICK_BACKBONE:
    # a small random BERT in the tests, seconds; MiniLM by default): progress, then the page.
    expect(main.get_by_text("Building model quick-")).to_be_visible()
    expect(page.get_by_role("textbox", name="Complaint")).to_be_visible(timeout=240_000)
    expect(main.get_by_text("This is a quick model")).to_be_visible()
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Model: quick-")
    page.get_by_role("textbox", name="Complaint").fill(
        "My UPI payment failed but the money was debited from my account"
    )
    page.get_by_role("button", name="Classify", exact=True).click()
    neural = page.get_by_test_id("stMetric").filter(has_text="Transformer")
    expect(neural).to_contain_text("UPI Dispute")
