"""Steps several browser journeys share."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

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


@contextlib.contextmanager
def mock_provider(emails: Iterable[str]) -> Iterator[str]:
    """The mock OpenID provider on a free loopback port, vouching for each of `emails`
    (`email_verified`: the app trusts no other); yields its base URL."""
    import oidc_provider_mock
    import werkzeug.serving

    users = [
        oidc_provider_mock.User(sub=e, claims={"email": e, "email_verified": True}) for e in emails
    ]
    app = oidc_provider_mock.app(user_claims=users)
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def write_auth_secrets(folder: Path, provider: str) -> Path:
    """A secrets.toml in `folder` whose [auth] signs in with the mock `provider`."""
    secrets = folder / "secrets.toml"
    secrets.write_text(
        "[auth]\n"
        'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'  # Streamlit fills in {port}
        'cookie_secret = "a-test-cookie-secret-of-some-length"\n'
        'client_id = "grievance-lens"\n'
        'client_secret = "any: the mock accepts every client"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n'
    )
    return secrets


SIGN_IN_WAIT_MS = 90_000  # signing in and a first page that loads torch, on 2 busy cores


def sign_in(browser: Browser, url: str, email: str) -> Page:
    """A fresh browser context (no cookies, downloads allowed) signed in as `email` through the
    mock provider's form (`mock_provider`), waiting for the app's Sign out button."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(SIGN_IN_WAIT_MS)
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(email)  # the provider's authorize form
    page.get_by_role("button", name="Authorize", exact=True).click()
    page.wait_for_url(f"{url}/**")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible(timeout=SIGN_IN_WAIT_MS)
    return page


def open_page(page: Page, url: str, path: str, heading: str) -> None:
    """Go to the page at `path` and wait for its `heading`."""
    page.goto(f"{url}/{path}")
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(
        timeout=SIGN_IN_WAIT_MS
    )


def save_demo_data(page: Page, url: str, name: str) -> None:
    """From the Data page (the default page), save the demo data on the server as `name`."""
    open_page(page, url, "", "Data")
    page.get_by_role("button", name="Use the demo data").click()
    page.get_by_role("textbox", name="Save this data set on the server as").fill(name)
    page.get_by_role("button", name="Save on the server").click()
    expect(page.get_by_text(f"Saved 3,000 rows on the server as {name}.")).to_be_visible()


def open_retraining(page: Page, url: str, data_set: str) -> None:
    """The Train page with `data_set` chosen as the one to correct (an admin's retraining)."""
    open_page(page, url, "train", "Train")
    choose_option(
        page, page.get_by_test_id("stSelectbox").filter(has_text="Data set to correct"), data_set
    )


def start_signed_in_server(
    folder: Path, provider: str, roles: str, *, live: str, place: Callable[[Path], object]
):
    """An app server on `folder` with sign-in on (the mock `provider`), the roles file text
    `roles`, and the model `place(models_folder / live)` puts there promoted live by the
    operator, warmed up; stop it with `server.stop(kill=True)`."""
    from core.access import OPERATOR
    from core.review.live import promote_model
    from core.review.store import DB_NAME, Store
    from core.roles import ROLES_ENV
    from tests.browser.server import AppServer

    secrets = write_auth_secrets(folder, provider)
    roles_file = folder / "roles.toml"
    roles_file.write_text(roles)
    models, data = folder / "models", folder / "data"
    place(models / live)
    data.mkdir()
    with Store.open(data / DB_NAME) as store:
        promote_model(store, models, live, reason="the model in use", actor=OPERATOR)
    return AppServer(
        data, models_dir=models, warm_up=True, secrets_file=secrets,
        env={ROLES_ENV: str(roles_file)},
    )  # fmt: skip
