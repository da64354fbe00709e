"""The Attention lab in a real browser: the worked example's numbers can be read off the page."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TEXTBOOK_NUMBERS = ["0.599", "1.401", "0.802", "0.752", "1.503", "0.1978", "0.4011"]
# A cold server imports torch and transformers on the first run: allow it its time.
FIRST_LOAD_MS = 120_000


def _visible_in_a_table(page, number: str, **kwargs) -> None:
    """`number` is text in a visible st.table (real DOM text, not a canvas)."""
    expect(page.get_by_test_id("stTable").filter(has_text=number).first).to_be_visible(**kwargs)


def test_worked_example_numbers_are_readable(page, app_url: str):
    # Go through app.py's navigation: until st.navigation has run once on a fresh server,
    # Streamlit would serve /attention_lab as a legacy pages/ script, outside the frame.
    link = page.get_by_test_id("stSidebar").get_by_role("link", name="Attention lab")
    expect(link).to_be_visible(timeout=FIRST_LOAD_MS)  # the title st.navigation gives it
    link.click()
    expect(page).to_have_url(f"{app_url}/attention_lab")
    output = page.get_by_test_id("stTable").filter(has_text="z1").first
    expect(output).to_contain_text("0.599", timeout=FIRST_LOAD_MS)
    expect(page.get_by_role("heading", name="Attention lab")).to_be_visible()
    for number in TEXTBOOK_NUMBERS:
        _visible_in_a_table(page, number)

    page.get_by_text("Append “again”").click()
    expect(output).to_contain_text("again", timeout=30_000)
    expect(output).to_contain_text("0.141")
    for number in ("0.1412", "0.2863"):
        _visible_in_a_table(page, number)
    expect(page.get_by_test_id("stException")).to_have_count(0)
