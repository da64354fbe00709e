"""New desks and drift end to end (issue 37), in a real browser with sign-in on: a complaint file
holds a kind of complaint the live model has never seen (bank lockers); a reviewer finds the
candidate desks on the New desks page and names the lockers' one "Locker Rent"; an admin builds
the next version of the saved demo data with those complaints, trains the challenger and
compares it with the live model, whose report scores the new desk; then the bank's system
replays a stream that shifts the mix into the intake API and the Monitor page warns.

The live model is the session's tiny transformer under another name, with the review policy it
was trained with (it flags every locker complaint as fitting no desk: checked before the
browser starts). Its card's validation profile is the tiny model's own, counted 50 times: the
monitor judges a week only against at least 200 validation rows, and the tiny model was
validated on 8. The stream is replayed with `core.intake.replay` through the intake API's app
in the test process (FastAPI's TestClient), not a `serve` process.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import Page, expect

from core.access import OPERATOR
from core.review.store import DB_NAME, Store
from tests.browser.server import AppServer
from tests.browser.steps import (
    mock_provider,
    open_page,
    open_retraining,
    save_demo_data,
    sign_in,
    start_signed_in_server,
)
from tests.helpers import TINY_TEXTS

pytestmark = pytest.mark.browser

ADMIN, REVIEWER, VIEWER = "lead@bank.example", "asha@bank.example", "vera@bank.example"
ROLES = f'admin = ["{ADMIN}"]\nreviewer = ["{REVIEWER}"]\nviewer = ["*@bank.example"]\n'
LIVE = "tiny-live"
NEW_DESK = "Locker Rent"
CARDS = (LIVE, "complaints-v2-challenger")  # the live model and the challenger the admin trains
PROFILE_SCALE = 50  # the tiny model's 8 validation rows counted as 400 (the rule needs 200)
WAIT_MS = 90_000  # a page that loads torch for the first time takes a while on 2 busy cores
JOURNEY_ACTIONS = {
    "model.promoted", "dataset.saved", "discovery.named", "retrain.queued", "comparison.run",
}  # fmt: skip


def locker_complaints(n: int, *, seed: int = 7) -> list[str]:
    """`n` distinct complaints about bank lockers, a kind none of the tiny model's desks holds:
    phrases drawn at random, with their own amounts and locker numbers."""
    rng = random.Random(seed)
    openers = [
        "my bank locker", "the safe deposit locker", "locker no. {b}", "our family locker {b}",
        "the locker at the {c} branch",
    ]  # fmt: skip
    issues = [
        "rent of rs {a} was charged twice", "key is lost and the branch wants rs {a}",
        "access was denied although rent rs {a} is paid", "annual rent {a} deducted again",
        "renewal fee rs {a} taken without consent",
    ]  # fmt: skip
    ends = ["", " kindly look into it", " since {d} days", " and nobody answers", " please help"]
    branches = ["andheri", "powai", "karol bagh", "t nagar"]
    return [
        (rng.choice(openers) + " " + rng.choice(issues) + rng.choice(ends)).format(
            a=1000 + 37 * i, b=100 + i, c=rng.choice(branches), d=2 + i % 9
        )
        for i in range(n)
    ]


ORDINARY = [
    "upi payment of rs {a} failed but money debited, ref {b}",
    "my credit card was used for a purchase of rs {a} i never made, card ending {b}",
    "emi of rs {a} charged twice on my home loan account {b}",
    "please update my kyc address, request number {b}",
]
LOCKERS = locker_complaints(30)
# The file a reviewer uploads: the new kind, then ordinary complaints of the four known desks.
FILE_TEXTS = LOCKERS + [ORDINARY[i % 4].format(a=200 + 13 * i, b=5000 + i) for i in range(20)]
# The replayed stream: the validation rows' kind of complaint, then the lockers take over.
STREAM = TINY_TEXTS * 10 + locker_complaints(190, seed=8)[30:]


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with mock_provider((ADMIN, REVIEWER, VIEWER)) as url:
        yield url


def live_copy(tiny_model_dir: Path, folder: Path) -> Path:
    """The tiny model at `folder`, its validation profile counted PROFILE_SCALE times (the card
    pins the other files, not itself: the copy still loads)."""
    shutil.copytree(tiny_model_dir, folder)
    card_path = folder / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    profile = card["validation_profile"]
    profile["rows"] *= PROFILE_SCALE
    profile["confidence_counts"] = [n * PROFILE_SCALE for n in profile["confidence_counts"]]
    profile["desk_counts"] = {d: n * PROFILE_SCALE for d, n in profile["desk_counts"].items()}
    card_path.write_text(json.dumps(card, indent=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def desks_server(provider: str, tmp_path_factory, tiny_model_dir: Path) -> Iterator[AppServer]:
    """The app with sign-in on, its own roles, and LIVE promoted by the operator."""
    server = start_signed_in_server(
        tmp_path_factory.mktemp("lens-new-desks"), provider, ROLES, live=LIVE,
        place=lambda folder: live_copy(tiny_model_dir, folder),
    )  # fmt: skip
    yield server
    server.stop(kill=True)


def check_preconditions(models: Path) -> None:
    """What the journey relies on, said plainly if it ever stops holding: the live model flags
    every locker complaint as fitting no desk, and some of them fall on the validation side of
    the challenger's inherited split (so the comparison has rows of the new desk)."""
    from core.data.dataset import Dataset, split_inheriting
    from core.models.classify import classification_columns
    from core.models.registry import load_model

    loaded = load_model(models / LIVE)
    reasons = classification_columns(loaded, LOCKERS)["review_reason"]
    assert (reasons == "unknown desk").all(), reasons.value_counts().to_dict()
    fraction = loaded.card["train_config"]["val_fraction"]
    lockers = Dataset(LOCKERS, [NEW_DESK] * len(LOCKERS))
    _, held_out = split_inheriting(
        lockers, train_keys=(), validation_keys=(), val_fraction=fraction
    )
    assert len(held_out) >= 5, f"only {len(held_out)} locker complaints are held out"


def name_the_locker_desk(page: Page, url: str, upload: Path) -> int:
    """On New desks: find the candidates in `upload`, name the lockers' one NEW_DESK; returns
    how many complaints it holds."""
    open_page(page, url, "new_desks", "New desks")
    page.get_by_test_id("stRadio").get_by_text("A complaint file", exact=True).click()
    smallest = page.get_by_role("spinbutton", name="Smallest group")
    smallest.fill("5")
    smallest.press("Tab")  # number inputs commit on blur
    page.locator("input[type=file]").set_input_files(str(upload))
    page.get_by_role("button", name=f"Find candidate desks in {len(FILE_TEXTS)} complaints").click()
    expect(
        page.get_by_text(f"of {len(FILE_TEXTS)} complaints in {upload.name} fit no desk")
    ).to_be_visible(timeout=WAIT_MS)
    candidate = page.get_by_test_id("stExpander").filter(
        has=page.locator("summary", has_text=re.compile(r"·.*\blocker\b"))
    )
    expect(candidate).to_have_count(1)
    title = candidate.locator("summary").inner_text()
    size = re.search(r"C\d+ · (\d+) complaints", title)
    assert size, f"a candidate's title reads 'C1 · N complaints · words', not {title!r}"
    candidate.get_by_text("Name it as a new desk", exact=True).click()
    candidate.get_by_role("textbox", name="New desk's name").fill(NEW_DESK)
    candidate.get_by_role("button", name="Record the decision").click()
    decided = candidate.get_by_text(f"{size[1]} complaints now have the desk {NEW_DESK}.")
    expect(candidate.locator("summary")).to_contain_text("decided")
    candidate.locator("summary").click()  # a decided candidate is shown collapsed
    expect(decided).to_be_visible()
    return int(size[1])


def retrain_and_compare(page: Page, url: str, named: int) -> dict:
    """On Train: the next version of the saved demo data with the named complaints added, its
    challenger trained and compared with the live model; returns the report (JSON)."""
    open_retraining(page, url, "complaints")
    added = page.get_by_test_id("stMetric").filter(has_text="Added from triage")
    expect(added.get_by_test_id("stMetricValue")).to_have_text(f"{named:,}")
    page.get_by_role("button", name="Build the version and train the challenger").click()
    expect(page.get_by_text("Challenger complaints-v2-challenger is saved.")).to_be_visible(
        timeout=WAIT_MS
    )
    page.get_by_role("button", name="Compare", exact=True).click()
    download = page.get_by_role("button", name="Download the report (JSON)")
    expect(download).to_be_visible(timeout=WAIT_MS)
    with page.expect_download() as done:
        download.click()
    return json.loads(Path(done.value.path()).read_text(encoding="utf-8"))


def replay_shifted_stream(server: AppServer) -> dict:
    """The bank's system replays STREAM into the intake API (`core.intake.replay` against the
    API app in this process, on the server's folders), with a token the operator made."""
    from fastapi.testclient import TestClient

    from core.intake.api import create_app
    from core.intake.replay import ReplayConfig, replay
    from core.intake.schemas import ApiSettings
    from core.intake.tokens import create_token

    db = server.data_dir / DB_NAME
    with Store.open(db) as store:
        secret = create_token(store, "bank-web", ["submit"], actor=OPERATOR).secret
    app = create_app(ApiSettings(db_path=db, models_root=server.models_dir))
    config = ReplayConfig(token=secret, rate=1e9, prefix="shifted", channel="web")
    return replay(STREAM, config, client=TestClient(app), sleep=lambda _: None).to_json()


def test_a_new_desk_is_found_named_retrained_and_the_monitor_warns(browser, desks_server, tmp_path):
    """A reviewer names the candidate desk of a file's locker complaints; an admin retrains and
    the comparison scores the new desk; a replayed stream of lockers makes the monitor warn;
    the trail names each step's author."""
    url, models = desks_server.url, desks_server.models_dir
    check_preconditions(models)
    upload = tmp_path / "april-complaints.csv"
    pd.DataFrame({"complaint": FILE_TEXTS}).to_csv(upload, index=False)

    page = sign_in(browser, url, REVIEWER)
    save_demo_data(page, url, "complaints")
    named = name_the_locker_desk(page, url, upload)
    page.context.close()
    assert named >= 20, f"the lockers' candidate holds {named} of {len(LOCKERS)} complaints"

    page = sign_in(browser, url, ADMIN)
    report = retrain_and_compare(page, url, named)
    page.context.close()
    assert (report["a"]["name"], report["b"]["name"]) == CARDS
    labels = {m: json.loads((models / m / "card.json").read_text())["labels"] for m in CARDS}
    assert NEW_DESK in labels["complaints-v2-challenger"] and NEW_DESK not in labels[LIVE]
    for side in ("a", "b"):  # the live model never knew the desk: it counts as its error
        assert report[side]["per_class"][NEW_DESK]["support"] > 0, report[side]["per_class"]

    replayed = replay_shifted_stream(desks_server)
    assert (replayed["posted"], replayed["refused"]) == (len(STREAM), 0)
    page = sign_in(browser, url, VIEWER)
    open_page(page, url, "monitor", "Monitor")
    expect(
        page.get_by_text("the desk mix has drifted from the live model's validation rows")
    ).to_be_visible()
    unknown = len(STREAM) - len(TINY_TEXTS) * 10
    expect(page.get_by_text(f"fit no desk ({unknown} of {len(STREAM)})")).to_be_visible()
    page.context.close()

    with Store.open(desks_server.data_dir / DB_NAME, read_only=True) as store:
        steps = [(e.action, e.actor) for e in reversed(store.trail(actor=OPERATOR, limit=1000))]
        decided = [i for i in store.triage_items() if i.final_label == NEW_DESK]
    assert [step for step in steps if step[0] in JOURNEY_ACTIONS] == [
        ("model.promoted", "operator"),
        ("dataset.saved", REVIEWER),
        ("discovery.named", REVIEWER),
        ("dataset.saved", ADMIN),
        ("retrain.queued", ADMIN),
        ("comparison.run", ADMIN),
    ]
    assert steps.count(("intake.accepted", "token:bank-web")) == len(STREAM)
    assert len(decided) == named and {i.reviewer for i in decided} == {REVIEWER}
    assert {i.text for i in decided} <= set(LOCKERS)
