"""The intake's commands: `token create|list|revoke` as the operator, `serve`'s refusals before it
binds anything, and `replay` (posting a file's complaints at a rate, a retry being a duplicate)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from core.access import OPERATOR
from core.errors import UserError
from core.intake.api import create_app
from core.intake.replay import ReplayConfig, replay, replay_texts
from core.intake.schemas import ApiSettings
from core.intake.tokens import authenticate, create_token
from core.review.live import promote_model
from core.review.store import Store, default_db_path
from tests.helpers import TINY_TEXTS, run_cli


def test_token_create_list_and_revoke_as_the_operator():
    made = run_cli("token", "create", "bank-web", "--scopes", "submit,read", "--json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert (created["name"], created["scopes"], created["source"]) == (
        "bank-web", ["submit", "read"], "bank-web",
    )  # fmt: skip
    with Store.open(default_db_path()) as store:
        assert authenticate(store, created["token"]).name == "bank-web"
    listed = json.loads(run_cli("token", "list", "--json").stdout)["tokens"]
    assert [t["name"] for t in listed] == ["bank-web"] and "token" not in listed[0]
    assert run_cli("token", "revoke", "bank-web").returncode == 0
    listed = json.loads(run_cli("token", "list", "--json").stdout)["tokens"]
    assert listed[0]["revoked_by"] == "operator"
    again = run_cli("token", "create", "bank-web", "--scopes", "read")
    assert again.returncode == 2 and "exists already" in again.stderr


def test_token_create_prints_only_the_secret_on_stdout():
    made = run_cli("token", "create", "branch", "--scopes", "submit", "--source", "branches")
    assert made.returncode == 0
    assert made.stdout.startswith("glk_") and len(made.stdout.strip().splitlines()) == 1
    assert "shown this once" in made.stderr and "source branches" in made.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "would listen on 0.0.0.0"),
        (["--workers", "0"], "--workers must be 1 to 64"),
        (["--port", "70000"], "--port must be 1 to 65535"),
    ],
)
def test_serve_refuses_before_it_binds(args: list[str], message: str, monkeypatch):
    monkeypatch.delenv("GRIEVANCE_LENS_ALLOW_UNAUTHENTICATED_PUBLIC", raising=False)
    run = run_cli("serve", *args)
    assert run.returncode == 2
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_replay_needs_a_token(monkeypatch):
    monkeypatch.delenv("GRIEVANCE_LENS_TOKEN", raising=False)
    run = run_cli("replay", "--limit", "1")
    assert run.returncode == 2 and "give an API token" in run.stderr


@pytest.fixture
def api(tiny_model_dir: Path, tmp_path: Path):
    models = tmp_path / "models"
    shutil.copytree(tiny_model_dir, models / "tiny-a")
    db = tmp_path / "lens.db"
    with Store.open(db) as store:
        secret = create_token(store, "replayer", ["submit", "read"], actor=OPERATOR).secret
        promote_model(store, models, "tiny-a", reason="replay", actor=OPERATOR)
    app = create_app(ApiSettings(db_path=db, models_root=models))
    with TestClient(app) as client:
        yield client, secret, db


def test_replay_posts_each_complaint_once_and_a_second_replay_is_all_duplicates(api):
    client, secret, db = api
    slept: list[float] = []
    config = ReplayConfig(token=secret, rate=1000.0, prefix="demo")
    first = replay(TINY_TEXTS, config, client=client, sleep=slept.append)
    assert (first.posted, first.duplicates, first.refused) == (len(TINY_TEXTS), 0, 0)
    assert sum(first.desks.values()) == len(TINY_TEXTS)
    with TestClient(client.app) as again:
        second = replay(TINY_TEXTS, config, client=again, sleep=slept.append)
    assert second.duplicates == len(TINY_TEXTS)
    with Store.open(db) as store:
        ids = [r[0] for r in store.query("SELECT external_id FROM inbox ORDER BY id")]
    assert ids == [f"demo-{row}" for row in range(2, len(TINY_TEXTS) + 2)]  # spreadsheet rows


def test_replay_paces_itself_at_the_rate(api):
    client, secret, _ = api
    slept: list[float] = []
    replay(TINY_TEXTS[:4], ReplayConfig(token=secret, rate=2.0), client=client,
           sleep=slept.append)  # fmt: skip
    # Four complaints at two a second are due 0.5, 1.0, 1.5 and 2.0 s after the start; the fake
    # sleep lets no time pass, so each wait is the whole way to its due time.
    assert slept == pytest.approx([0.5, 1.0, 1.5, 2.0], abs=0.3)


def test_replay_with_a_wrong_token_says_what_the_api_answered(api):
    client, _, _ = api
    with pytest.raises(UserError, match="answered 401"):
        replay(TINY_TEXTS[:1], ReplayConfig(token="glk_" + "x" * 40), client=client)


def test_replay_reads_a_file_with_the_apps_intake(tmp_path: Path):
    path = tmp_path / "complaints.csv"
    path.write_text('complaint,desk\n"upi failed, money debited",UPI Dispute\ncard stolen,x\n')
    assert replay_texts(path) == ["upi failed, money debited", "card stolen"]
    assert len(replay_texts(None)) > 100  # the demo data
