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
    page.get_by_test_id("stSelectbox").filter(has_text="Model").click()
    page.get_by_role("option", name=name, exact=True).click()
    page.get_by_role("button", name="Use this model").click()
    expect(page.get_by_test_id("stSidebar")).to_contain_text(f"Model: {name}")
