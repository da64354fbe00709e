"""The main journey in a real browser: demo data → train a few steps → classify a complaint."""

import pytest
from playwright.sync_api import expect

from tests.browser.steps import choose_option

pytestmark = pytest.mark.browser


def test_demo_train_then_classify(page, app_url: str):
    page.goto(f"{app_url}/train")
    page.get_by_role("button", name="Use the demo data").click()
    main = page.get_by_test_id("stMainBlockContainer")
    expect(main.get_by_text("Data set: Built-in demo data")).to_be_visible()
    # Elements of the previous run stay on screen, marked stale, until a rerun ends.
    live = page.locator('[data-testid="stElementContainer"][data-stale="false"]')
    # Quick comes first for a data set without a model (unless another test saved one); the
    # full recipe's rerun enables the settings and offers the tiny backbone.
    page.get_by_test_id("stRadioGroup").get_by_text("Full fine-tuning").click()
    expect(live.get_by_role("spinbutton", name="Epochs")).to_be_enabled()
    # The run ends with the duration estimate (seconds of timed steps): a list opened before
    # it ends is closed by the rerun's end.
    expect(live.get_by_text("Estimated duration")).to_be_visible(timeout=120_000)
    backbone = live.get_by_test_id("stSelectbox").filter(has_text="Backbone")
    choose_option(page, backbone, "Tiny transformer (from scratch, seconds)")
    # Wait for the rerun that puts the tiny backbone's learning rate in the form.
    expect(live.get_by_role("spinbutton", name="Learning rate")).to_have_value("2e-3")
    steps = live.get_by_label("Stop after steps (0 = no limit)")
    steps.fill("5")
    steps.press("Tab")  # number inputs commit on blur
    name = live.get_by_role("textbox", name="Save as")
    name.fill("browser-tiny")
    name.press("Tab")
    page.get_by_role("button", name="Start training").click()
    expect(page.get_by_text("Trained in")).to_be_visible(timeout=120_000)
    expect(page.get_by_text("made your active model")).to_be_visible()
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Model: browser-tiny")

    page.get_by_test_id("stSidebarNav").get_by_text("Jobs").click()
    finished = page.get_by_test_id("stDataFrame").last
    expect(finished).to_be_visible()
    expect(page.get_by_text("Finished")).to_be_visible()

    page.get_by_test_id("stSidebarNav").get_by_text("Classify").click()
    complaint = "My UPI payment failed but the money was debited"
    page.get_by_role("textbox", name="Complaint").fill(complaint)
    page.get_by_role("button", name="Classify", exact=True).click()
    neural = page.get_by_test_id("stMetric").filter(has_text="Transformer")
    expect(neural).to_contain_text("sure")
    expect(page.get_by_test_id("stMetric").filter(has_text="Bag of words")).to_contain_text(
        "UPI Dispute"
    )
