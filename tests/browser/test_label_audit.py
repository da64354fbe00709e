"""The label audit journey in a real browser: audit the demo data, relabel one row, the export
contains the change, and the decision is still there after the app restarts.

It runs on the session's server and restarts it (later tests get the new process); no other
browser test records review decisions in the session's store."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

ISSUE = re.compile(r"row (\d+): (.+) → (.+)")
WAIT_MS = 120_000  # expect() waits 5 s by default; a 3000-row audit on a busy 2-core box takes more


def open_audit_page(browser, url: str) -> Page:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.goto(url + "/label_audit")
    expect(page.get_by_role("heading", name="Label audit")).to_be_visible(timeout=WAIT_MS)
    page.get_by_role("button", name="Use the demo data").click()
    return page


def relabel_first_issue(page: Page) -> tuple[int, str, str]:
    """Run the audit, sign in, relabel the most suspicious row; returns (row, given, new)."""
    page.get_by_role("button", name="Run the audit").click()
    expect(page.get_by_text("Suspected issues (bow, 5 folds")).to_be_visible(timeout=WAIT_MS)
    page.get_by_label("Your name, saved with each decision").fill("Asha Rao")
    page.get_by_role("button", name="Start reviewing").click()
    expect(page.get_by_text("Reviewing as Asha Rao")).to_be_visible(timeout=WAIT_MS)
    chosen = page.get_by_role("combobox", name="Issue to review").input_value()
    match = ISSUE.fullmatch(chosen)
    assert match, chosen
    row, given, suggested = int(match[1]), match[2], match[3]
    expect(page.get_by_role("link", name=f"Explain row {row}")).to_be_visible()
    page.get_by_text("Relabel to …").click()
    page.get_by_label("Note (optional)").fill('=HYPERLINK("http://x") reads like a KYC form')
    page.get_by_role("button", name="Save decision").click()
    expect(
        page.get_by_text(f"Saved decision #1: row {row}, relabel to {suggested}.")
    ).to_be_visible(timeout=WAIT_MS)
    return row, given, suggested


def download_csv(page: Page) -> pd.DataFrame:
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the corrected data set (CSV)").click()
    content = Path(download.value.path()).read_bytes().decode("utf-8-sig")
    return pd.read_csv(io.StringIO(content), dtype=str, keep_default_na=False)


def test_audit_relabel_export_and_restart(browser, app_server):
    app_server.start_successor()  # the process after the restart boots while the audit runs
    page = open_audit_page(browser, app_server.url)
    row, given, suggested = relabel_first_issue(page)
    expect(page.get_by_test_id("stMetric").filter(has_text="Decided")).to_contain_text(
        "1", timeout=WAIT_MS
    )
    corrected = download_csv(page)
    page.context.close()
    changed = corrected[corrected["review"] != ""]
    assert changed[["row", "label", "original_label", "review"]].values.tolist() == [
        [str(row), suggested, given, f"relabelled from {given}"]
    ]
    assert len(corrected) == 3000

    app_server.restart()  # killed as in a crash; a new process on the same store
    page = open_audit_page(browser, app_server.url)
    expect(page.get_by_text(f"1 decisions on this data set; the latest: row {row}")).to_be_visible(
        timeout=WAIT_MS
    )
    expect(page.get_by_text(f"relabel to {suggested}, by Asha Rao")).to_be_visible(timeout=WAIT_MS)
    again = download_csv(page)  # the export is built from the store, not the session
    page.context.close()
    assert again.equals(corrected)
