"""A real `streamlit run` on a free loopback port (tests/browser/server.py), driven by Debian's
chromium via Playwright."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.server import AppServer

CHROMIUM = Path("/usr/bin/chromium")
# Chromium must not reach for Google's services: this machine has no network beyond loopback.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


@pytest.fixture(scope="session")
def app_server(browser_server: AppServer) -> AppServer:
    """The app, started with the session (tests/conftest.py, browser_server); a test may restart
    it, so ask `app_url` (or this object's `url`) for its address each time."""
    return browser_server


@pytest.fixture(scope="session")
def saved_tiny_model(app_server: AppServer) -> Path:
    """The session's tiny transformer, saved as `tiny-test` among the server's models; pick it
    on the Train page ("Use this model")."""
    return app_server.models_dir / "tiny-test"


@pytest.fixture()
def app_url(app_server: AppServer) -> str:
    """The base URL of the session's server, as it is now."""
    return app_server.url


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (see .ci/run)")
        pytest.skip("Debian's chromium is not installed: apt-get install chromium")
    from playwright.sync_api import expect, sync_playwright

    # Pages train and validate for real on a 2-core machine: give assertions time to turn true.
    expect.set_options(timeout=30_000)

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keep each phase's report on the test, so `page` can tell that its test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture()
def page(browser, app_url: str, request: pytest.FixtureRequest):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        show_failed_page(page, request.node.name)
    context.close()


@pytest.fixture()
def signed_in(browser, request: pytest.FixtureRequest):
    """`signed_in(url, email)`: `steps.sign_in` in a fresh context; the pages still open when
    the test fails are shown in its output, and every context is closed after it."""
    from tests.browser.steps import sign_in

    pages = []

    def open_signed_in(url: str, email: str):
        page = sign_in(browser, url, email)
        pages.append(page)
        return page

    yield open_signed_in
    report = getattr(request.node, "report_call", None)
    for page in pages:
        if page.is_closed():
            continue
        if report is not None and report.failed:
            show_failed_page(page, request.node.name)
        page.context.close()


def show_failed_page(page, test_name: str) -> None:
    """What the browser showed when its test failed: the page's text in the test's output (CI
    keeps only that) and a full screenshot under $BROWSER_FAILURES, when set."""
    print(f"--- page at failure: {page.url}")
    print(page.locator("body").inner_text(timeout=5_000)[:6_000])
    folder = os.environ.get("BROWSER_FAILURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{test_name}.png"), full_page=True)
