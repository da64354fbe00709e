"""Steps several browser journeys share."""

from __future__ import annotations

from playwright.sync_api import expect

# A cold server imports torch and transformers on the first run, on a shared, busy machine.
FIRST_LOAD_MS = 180_000


def use_saved_model(page, name: str) -> None:
    """Make `name` the active model through the Train page's picker (same browser session)."""
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav).to_be_visible(timeout=FIRST_LOAD_MS)
    nav.get_by_role("link", name="Train", exact=True).click()
    picker = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Model", exact=True))
    choose_option(page, picker, name)
    page.get_by_role("button", name="Use this model").click()
    expect(page.get_by_test_id("stSidebar")).to_contain_text(f"Model: {name}")


def choose_option(page, selectbox, option: str) -> None:
    """Pick `option` (its exact text) in a Streamlit selectbox. The list is opened mid-window:
    one opened at the window's bottom edge closes as the page scrolls to show it."""
    selectbox.evaluate("element => element.scrollIntoView({block: 'center'})")
    selectbox.click()
    page.get_by_role("option", name=option, exact=True).click()
