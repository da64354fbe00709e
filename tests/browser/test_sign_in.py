"""Sign-in and roles in a real browser: a server of its own with [auth] in its secrets signs people
in through a mock OpenID provider on loopback (oidc-provider-mock, the authorization-code flow
Streamlit's own end-to-end tests use) and gives them the role the roles file lists.

The provider's authorize page asks for a subject; whatever is typed becomes the user, with the
same text as its e-mail claim. One app server and one provider serve the whole module.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from core.access import OPERATOR, Actor, Role
from core.models.classifier import Prediction
from core.review.live import live_model, promote_model, promotion_report
from core.review.store import DB_NAME, Store
from core.review.triage import enqueue_uncertain
from core.roles import ROLES_ENV
from tests.browser.server import AppServer
from tests.browser.steps import (
    choose_option,
    mock_provider,
    open_page,
    open_retraining,
    save_demo_data,
    sign_in,
    write_auth_secrets,
)
from ui.safe import WORD_JOINER

pytestmark = pytest.mark.browser

ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example"]
viewer = ["*@bank.example"]
"""
LOOP_ACTIONS = {
    "model.promoted", "dataset.saved", "decision.recorded", "triage.decided", "retrain.queued",
    "comparison.run",
}  # fmt: skip
WAIT_MS = 90_000  # a page that loads torch for the first time takes a while on 2 busy cores


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """The mock OpenID provider on a free loopback port; yields its base URL."""
    emails = (
        "stranger@elsewhere.example",
        "Vera@Bank.example",
        "asha@bank.example",
        "lead@bank.example",
    )
    with mock_provider(emails) as url:
        yield url


@pytest.fixture(scope="module")
def auth_server(provider: str, tmp_path_factory, tiny_model_dir: Path) -> Iterator[AppServer]:
    """The app with sign-in on: its own secrets and roles files, the session's tiny model, and
    one open triage item."""
    folder = tmp_path_factory.mktemp("lens-auth")
    secrets = write_auth_secrets(folder, provider)
    roles = folder / "roles.toml"
    roles.write_text(ROLES)
    models = folder / "models"
    shutil.copytree(tiny_model_dir, models / "tiny-test")
    data = folder / "data"
    data.mkdir()
    with Store.open(data / DB_NAME) as store:
        item = Prediction("UPI Dispute", {"UPI Dispute": 0.42, "Other": 0.58}, True)
        enqueue_uncertain(
            store, ["UPI paisa gaya"], [item], threshold=0.5, batch="march.csv", actor=OPERATOR
        )
    server = AppServer(
        data, models_dir=models, warm_up=True, secrets_file=secrets, env={ROLES_ENV: str(roles)}
    )
    yield server
    server.stop(kill=True)


def shown(text: str) -> str:
    """`text` as md_escape shows it: a word joiner after "@" keeps it from becoming a link."""
    return text.replace("@", "@" + WORD_JOINER)


def expect_signed_in(page: Page, actor: Actor) -> None:
    sidebar = page.get_by_test_id("stSidebar")
    expect(
        sidebar.get_by_text(f"Signed in as {shown(actor.user)} ({actor.role.label})")
    ).to_be_visible(timeout=WAIT_MS)
    expect(sidebar.get_by_role("button", name="Sign out")).to_be_visible()


def test_a_visitor_sees_only_the_sign_in_page_and_a_stranger_is_refused(browser, auth_server):
    url = auth_server.url
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/train")  # a deep link shows the sign-in page too
    expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_test_id("stSidebar")).to_have_count(0)
    expect(page.get_by_role("heading", name="Train", exact=True)).to_have_count(0)
    expect(page.get_by_text("Saved models")).to_have_count(0)
    context.close()

    page = sign_in(browser, url, "stranger@elsewhere.example")
    expect(page.get_by_text("is not on the list of people who may use")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_test_id("stSidebar")).to_have_count(0)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="End session").click()  # the provider's sign-out page
    expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=WAIT_MS)
    page.context.close()


def test_a_viewer_reads_but_cannot_decide_train_or_manage_models(browser, auth_server):
    url = auth_server.url
    page = sign_in(browser, url, "Vera@Bank.example")
    expect_signed_in(page, Actor("vera@bank.example", Role.VIEWER, signed_in=True))

    open_page(page, url, "triage", "Triage queue")
    expect(
        page.get_by_text("Confirming or correcting predictions needs the reviewer role")
    ).to_be_visible()
    expect(page.get_by_role("button", name="Confirm UPI Dispute")).to_have_count(0)
    expect(page.get_by_label("Your name, saved with each verdict")).to_have_count(0)

    open_page(page, url, "train", "Train")
    expect(
        page.get_by_text("Training a model needs the admin role; you are a viewer.")
    ).to_be_visible()
    expect(page.get_by_text("Renaming and deleting models needs the admin role")).to_be_visible()
    expect(page.get_by_role("button", name="Use this model")).to_be_visible()  # reading is fine
    expect(page.get_by_role("button", name="Rename", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Delete", exact=True)).to_have_count(0)
    page.context.close()


def test_a_reviewer_decides_under_their_email_and_only_an_admin_trains(browser, auth_server):
    url = auth_server.url
    reviewer = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
    page = sign_in(browser, url, reviewer.user)
    expect_signed_in(page, reviewer)
    open_page(page, url, "triage", "Triage queue")
    expect(page.get_by_text(f"Reviewing as {shown(reviewer.user)} (signed in).")).to_be_visible()
    expect(page.get_by_label("Your name, saved with each verdict")).to_have_count(0)
    page.get_by_role("button", name="Confirm UPI Dispute").click()
    expect(page.get_by_text("Saved: item #1 confirmed as UPI Dispute.")).to_be_visible()
    with Store.open(auth_server.data_dir / DB_NAME, read_only=True) as store:
        (item,) = store.triage_items()
        assert (item.status, item.reviewer) == ("confirmed", reviewer.user)
        assert [(e.action, e.actor) for e in store.trail(actor=reviewer)] == [
            ("triage.decided", reviewer.user)
        ]

    open_page(page, url, "train", "Train")
    expect(
        page.get_by_text("Training a model needs the admin role; you are a reviewer.")
    ).to_be_visible()
    expect(page.get_by_role("button", name="Delete", exact=True)).to_have_count(0)
    open_page(page, url, "label_audit", "Label audit")
    page.get_by_role("button", name="Use the demo data").click()
    expect(page.get_by_role("button", name="Run the audit")).to_be_visible()
    page.get_by_role("tab", name="Audit trail").click()
    expect(page.get_by_text("The latest 200 of your own events")).to_be_visible()
    page.context.close()

    admin = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
    page = sign_in(browser, url, admin.user)
    expect_signed_in(page, admin)
    open_page(page, url, "train", "Train")
    expect(page.get_by_role("button", name="Rename", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Delete", exact=True)).to_be_visible()
    page.get_by_role("button", name="Use the demo data").click()
    expect(page.get_by_role("button", name="Start training")).to_be_visible()
    open_page(page, url, "label_audit", "Label audit")
    page.get_by_role("button", name="Use the demo data").click()
    page.get_by_role("tab", name="Audit trail").click()
    expect(page.get_by_text("The latest 200 of everyone's events")).to_be_visible()
    page.context.close()


def test_the_closed_loop_with_three_people(browser, auth_server):
    """A reviewer saves a data set, relabels a row and corrects a triage verdict; an admin
    retrains from those corrections, compares the challenger with the live model and promotes
    it; a viewer who signs in afterwards routes with it; the trail names each step's author."""
    url, models = auth_server.url, auth_server.models_dir
    reviewer, admin = "asha@bank.example", "lead@bank.example"
    with Store.open(auth_server.data_dir / DB_NAME) as store:
        promote_model(store, models, "tiny-test", reason="the model in use", actor=OPERATOR)
        unsure = Prediction("UPI Dispute", {"UPI Dispute": 0.45, "Card Fraud": 0.4}, True)
        enqueue_uncertain(
            store, ["hotel booking charged on my card, never stayed there"], [unsure],
            threshold=0.5, batch="april.csv", actor=OPERATOR,
        )  # fmt: skip

    page = sign_in(browser, url, reviewer)
    save_demo_data(page, url, "complaints")
    open_page(page, url, "label_audit", "Label audit")  # a new page load: a new session
    page.get_by_role("button", name="Use the demo data").click()  # the data set just saved
    expect(page.get_by_text("No decisions yet for this data set.")).to_be_visible()
    page.get_by_role("button", name="Run the audit").click()
    expect(page.get_by_text("Suspected issues (bow, 5 folds")).to_be_visible(timeout=WAIT_MS)
    match = re.fullmatch(
        r"row (\d+): (.+) → (.+)",
        page.get_by_role("combobox", name="Issue to review").input_value(),
    )
    assert match, "the first issue should read 'row N: given → suggested'"
    page.get_by_text("Relabel to …").click()
    page.get_by_role("button", name="Save decision").click()
    expect(page.get_by_text(f"row {match[1]}, relabel to {match[3]}.")).to_be_visible()
    open_page(page, url, "triage", "Triage queue")
    choose_option(page, page.get_by_test_id("stSelectbox").filter(has_text="Batch"), "april.csv")
    expect(page.get_by_text("Item #2: april.csv")).to_be_visible()
    choose_option(
        page, page.get_by_test_id("stSelectbox").filter(has_text="Correct desk"), "Card Fraud"
    )
    page.get_by_role("button", name="Correct to the chosen desk").click()
    expect(page.get_by_text("corrected as Card Fraud.")).to_be_visible()
    page.context.close()

    page = sign_in(browser, url, admin)
    open_retraining(page, url, "complaints")
    relabelled = page.get_by_test_id("stMetric").filter(has_text="Relabelled")
    expect(relabelled).to_contain_text("1")
    with Store.open(auth_server.data_dir / DB_NAME, read_only=True) as store:
        counts = store.triage_counts()  # earlier tests of this module may have decided item #1
    added = page.get_by_test_id("stMetric").filter(has_text="Added from triage")
    expect(added).to_contain_text(str(counts["confirmed"] + counts["corrected"]))
    page.get_by_role("button", name="Build the version and train the challenger").click()
    expect(page.get_by_text("Challenger complaints-v2-challenger is saved.")).to_be_visible(
        timeout=WAIT_MS
    )
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page.get_by_role("button", name="Download the report (JSON)")).to_be_visible(
        timeout=WAIT_MS
    )
    page.get_by_label("Why promote B?").fill("corrections from the April review")
    page.get_by_role("button", name="Promote complaints-v2-challenger to live").click()
    expect(
        page.get_by_text("complaints-v2-challenger is now the team's live model.")
    ).to_be_visible()
    page.context.close()

    page = sign_in(browser, url, "Vera@Bank.example")
    open_page(page, url, "classify", "Classify")
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar).to_contain_text("Live model: complaints-v2-challenger")
    expect(sidebar).to_contain_text("by lead@")
    expect(page.get_by_text("not the live model")).to_have_count(0)
    page.context.close()

    with Store.open(auth_server.data_dir / DB_NAME, read_only=True) as store:
        steps = [(e.action, e.actor) for e in reversed(store.trail(actor=OPERATOR, limit=50))]
        live = live_model(store)
        report = promotion_report(store, live)
    loop = [step for step in steps if step[0] in LOOP_ACTIONS]
    assert loop[-8:] == [  # earlier tests of this module may have decided item #1
        ("model.promoted", "operator"),
        ("dataset.saved", reviewer),
        ("decision.recorded", reviewer),
        ("triage.decided", reviewer),
        ("dataset.saved", admin),
        ("retrain.queued", admin),
        ("comparison.run", admin),
        ("model.promoted", admin),
    ]
    assert live.name == "complaints-v2-challenger" and live.previous == "tiny-test"
    assert report is not None and report["b"]["name"] == live.name
