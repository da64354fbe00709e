"""The live intake end to end, in a real browser with sign-in on: an admin creates an API token
on "API tokens"; the bank's system (`python -m core replay`) posts demo complaints to a real
`python -m core serve` with it; a reviewer corrects an unsure arrival on the Triage queue; the
bank reads that verdict back through `/v1/updates`; the Routing board shows the live inbox against
its clocks; the admin promotes another model on the Train page and the API's next answer names it.

The app server and the API are two processes on the same data and models folders, as in
`make run`; the mock OpenID provider is the one tests/browser/test_sign_in.py uses.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pandas as pd
import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from core.intake.queue import inbox_triage, inbox_triage_count, open_complaint_count
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import live_model
from core.review.store import DB_NAME, Store
from core.roles import ROLES_ENV
from tests.browser.server import ROOT, AppServer, free_port
from tests.browser.steps import mock_provider, open_page, write_auth_secrets

pytestmark = pytest.mark.browser

ADMIN, REVIEWER = "lead@bank.example", "asha@bank.example"
ROLES = f'admin = ["{ADMIN}"]\nreviewer = ["{REVIEWER}"]\n'
FIRST_LIVE, NEXT_LIVE = "tiny-test", "live-tiny"  # the saved models: live first, promoted later
TOKEN_NAME = "bank-web"
REPLAYED = 12
WAIT_MS = 90_000  # a page that loads torch for the first time takes a while on 2 busy cores
API_READY_S = 120  # `serve` imports torch and loads the live model before /v1/ready says 200


@dataclass(frozen=True)
class Journey:
    app: AppServer
    api: str  # the intake API's base URL
    env: dict[str, str]  # the environment of the command-line runs (same folders)


def run_core(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`python -m core ARGS` as an operator runs it, on the journey's folders; must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, f"core {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """The mock OpenID provider on a free loopback port, vouching for both addresses."""
    with mock_provider((ADMIN, REVIEWER)) as url:
        yield url


def start_api(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, str]:
    """`python -m core serve` on a free port, once `/v1/ready` answers 200."""
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "core", "serve", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()  # the child keeps its own descriptor
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + API_READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/v1/ready", timeout=5).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)  # polling a server that is still starting, not pacing a test
    stop(process)
    raise RuntimeError(f"the intake API never became ready:\n{log_path.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def journey(
    provider: str, tmp_path_factory, tiny_model_dir: Path, distinct_tiny_model_dir: Path
) -> Iterator[Journey]:
    """The app (sign-in on) and the intake API on one data folder and one models folder holding
    two tiny saved models, the first promoted live beforehand with the command line."""
    folder = tmp_path_factory.mktemp("lens-intake")
    secrets = write_auth_secrets(folder, provider)
    roles = folder / "roles.toml"
    roles.write_text(ROLES)
    models, data = folder / "models", folder / "data"
    shutil.copytree(tiny_model_dir, models / FIRST_LIVE)
    shutil.copytree(distinct_tiny_model_dir, models / NEXT_LIVE)
    data.mkdir()
    Store.open(data / DB_NAME).close()  # created here, before two processes open it at once
    env = {
        **os.environ, DATA_DIR_ENV: str(data), MODELS_DIR_ENV: str(models),
        "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
    }  # fmt: skip
    # The app boots (and runs app.py once) in the background while the model is promoted and
    # the API starts.
    app = AppServer(
        data, models_dir=models, warm_up=True, secrets_file=secrets, env={ROLES_ENV: str(roles)}
    )
    api = None
    try:
        run_core(env, "promote", FIRST_LIVE, "--reason", "the first live model")
        api, url = start_api(env, folder / "api.log")
        yield Journey(app, url, env)
    finally:
        if api is not None:
            stop(api)
        app.stop(kill=True)


def create_token(page: Page, url: str) -> str:
    """Create a submit+read token on "API tokens"; its secret, read from the page."""
    open_page(page, url, "tokens", "API tokens")
    page.get_by_role("textbox", name="Name (1 to 64").fill(TOKEN_NAME)
    page.get_by_test_id("stMultiSelect").click()
    page.get_by_role("option", name="read: read complaints and their updates").click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_text(f"Created {TOKEN_NAME} for source {TOKEN_NAME}")).to_be_visible()
    expect(page.get_by_text("(submit, read)")).to_be_visible()
    secret = page.get_by_test_id("stCode").inner_text().strip()
    assert re.fullmatch(r"glk_\S+", secret), f"not a token secret: {secret!r}"
    return secret


def pick(page: Page, selectbox, option: str, *, tries: int = 6) -> None:
    """Pick `option` in a Streamlit selectbox (as steps.choose_option does), opening the list
    again while a self-redrawing fragment (the Triage queue's list, every 5 s) closes it first."""
    for attempt in range(tries):
        selectbox.evaluate("element => element.scrollIntoView({block: 'center'})")
        selectbox.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
    expect(selectbox.get_by_role("combobox")).to_have_value(option)


def desks_csv(page: Page) -> pd.DataFrame:
    with page.expect_download() as done:
        page.get_by_role("button", name="Download the desks (CSV)", exact=True).click()
    data = Path(done.value.path()).read_bytes()
    return pd.read_csv(io.BytesIO(data), encoding="utf-8-sig")


def test_intake_from_token_to_verdict_board_and_promotion(signed_in, journey: Journey):
    url, api, store_path = journey.app.url, journey.api, journey.app.data_dir / DB_NAME

    # 1. The admin creates a token with submit and read; its secret is shown once.
    admin = signed_in(url, ADMIN)
    secret = create_token(admin, url)
    bearer = {"Authorization": f"Bearer {secret}"}

    # 2. The bank's system posts demo complaints with it; the live tiny model is unsure of some.
    replayed = run_core(
        journey.env, "replay", "--url", api, "--token", secret, "--rate", "50",
        "--limit", str(REPLAYED), "--prefix", "journey", "--json",
    )  # fmt: skip
    report = json.loads(replayed.stdout)
    assert (report["posted"], report["refused"], report["duplicates"]) == (REPLAYED, 0, 0)
    routed = Counter(report["desks"])
    with Store.open(store_path, read_only=True) as store:
        flagged = inbox_triage_count(store)
        first = inbox_triage(store, limit=1)[0]  # the oldest due first: the one shown first
        assert open_complaint_count(store) == REPLAYED
    assert flagged >= 1, "the tiny model should be unsure of some demo complaints"
    ranked = sorted(first.item.probabilities, key=lambda d: -first.item.probabilities[d])
    chosen = next(desk for desk in ranked if desk != first.item.predicted_label)

    # 3. The reviewer sees the arrivals (channel, received, due) and corrects the first one.
    reviewer = signed_in(url, REVIEWER)
    open_page(reviewer, url, "triage", "Triage queue")
    expect(
        reviewer.get_by_text(f"Arriving from the intake API ({flagged:,} waiting)")
    ).to_be_visible()
    expect(
        reviewer.get_by_text(
            re.compile(
                rf"Item #{first.item.id}: complaint {first.complaint_id} from {TOKEN_NAME} "
                rf"\(its id {first.caller_id}\), channel replay, received "
                r"\d{4}-\d\d-\d\d \d\d:\d\d UTC, due by \d{4}-\d\d-\d\d \d\d:\d\d UTC"
            )
        )
    ).to_be_visible()
    pick(reviewer, reviewer.get_by_test_id("stSelectbox").filter(has_text="Correct desk"), chosen)
    reviewer.get_by_role("button", name="Correct to the chosen desk").click()
    expect(
        reviewer.get_by_text(f"Saved: item #{first.item.id} corrected as {chosen}.")
    ).to_be_visible()
    expect(
        reviewer.get_by_text(f"Arriving from the intake API ({flagged - 1:,} waiting)")
    ).to_be_visible()

    # 4. The bank reads the verdict back with its token.
    updates = httpx.get(f"{api}/v1/updates", params={"after": 0}, headers=bearer, timeout=30)
    assert updates.status_code == 200, updates.text
    verdicts = [u for u in updates.json()["updates"] if u["kind"] == "verdict"]
    assert [(u["id"], u["complaint_id"], u["desk"], u["status"]) for u in verdicts] == [
        (first.caller_id, first.complaint_id, chosen, "corrected")
    ]
    record = httpx.get(f"{api}/v1/complaints/{first.complaint_id}", headers=bearer, timeout=30)
    assert record.status_code == 200, record.text
    assert (record.json()["desk"], record.json()["model"]) == (chosen, FIRST_LIVE)

    # 5. The Routing board opens on the live inbox: every open complaint at its desk now (the
    # reviewer's desk for the corrected one), each desk against its turnaround time.
    open_page(reviewer, url, "board", "Routing board")
    expect(reviewer.get_by_role("radio", name=re.compile("^The live inbox"))).to_be_checked()
    expect(
        reviewer.get_by_text(f"The live inbox ({REPLAYED:,} open complaints from the intake API)")
    ).to_be_visible()
    opened = reviewer.get_by_test_id("stMetric").filter(
        has=reviewer.get_by_text("Open", exact=True)
    )
    expect(opened).to_contain_text(f"{REPLAYED:,}")
    expect(reviewer.get_by_role("heading", name="Desks")).to_be_visible()
    desks = desks_csv(reviewer)
    shown = desks[desks["open"] > 0].set_index("desk")
    routed[first.item.predicted_label] -= 1
    routed[chosen] += 1
    assert shown["open"].to_dict() == {desk: n for desk, n in routed.items() if n > 0}
    assert (shown["TAT (h)"] > 0).all() and (shown["breached"] == 0).all()
    reviewer.context.close()

    # 6. The admin promotes the other saved model on the Train page; the API's next answer
    # names it (the API switches at its next request, without a restart).
    open_page(admin, url, "train", "Train")
    admin.get_by_text("Saved models", exact=True).click()  # the expander (a model is in use)
    pick(
        admin, admin.get_by_test_id("stSelectbox").filter(has_text="Model to make live"), NEXT_LIVE
    )
    admin.get_by_role("textbox", name="Why (kept in the trail)").fill("the bank asked for it")
    admin.get_by_role("button", name="Promote to live").click()
    expect(admin.get_by_text(f"{NEXT_LIVE} is now the team's live model.")).to_be_visible()
    with Store.open(store_path, read_only=True) as store:
        live = live_model(store)
    assert (live.name, live.previous, live.promoted_by) == (NEXT_LIVE, FIRST_LIVE, ADMIN)
    admin.context.close()

    posted = httpx.post(
        f"{api}/v1/complaints",
        json={"complaints": [{"id": "after-promotion", "channel": "web",
                              "text": "UPI payment failed but the money was debited"}]},
        headers=bearer, timeout=120,
    )  # fmt: skip
    assert posted.status_code == 200, posted.text
    (answer,) = posted.json()["results"]
    assert answer["model"] == NEXT_LIVE


def test_the_api_docs_render_with_no_network(browser: Browser, journey: Journey):
    """The OpenAPI page's scripts come from the API itself: chromium here reaches no CDN."""
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{journey.api}/docs")
        expect(page.get_by_text("Grievance Lens intake API").first).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text("/v1/complaints").first).to_be_visible()
    finally:
        context.close()
