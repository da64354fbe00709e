"""`python -m core monitor [--since T] [--json]` in-process: the documented JSON of the live
model's drift and health on a store with complaints of the live model and of another, the text
report, the warnings, and one-line errors for a bad --since and a missing store."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.access import OPERATOR
from core.board.tat import load_tat
from core.intake.inbox import Routing, Submission, store_batch
from core.intake.tokens import create_token
from core.models.card import card_digest
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import promote_model
from core.review.store import DB_NAME, Store
from tests.helpers import run_cli
from tests.test_cli import assert_one_line_error

LIVE = "live-tiny"
# A Monday at noon, two weeks back: the window below starts on it whatever day the test runs.
START = (datetime.now(UTC) - timedelta(days=14)).replace(hour=12, minute=0, second=0,
                                                         microsecond=0)  # fmt: skip
START -= timedelta(days=START.weekday())


@pytest.fixture
def folders(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    shutil.copytree(tiny_model_dir, tmp_path / "models" / LIVE)
    return tmp_path


def fill(folders: Path, *, live_desk: str, n: int) -> None:
    """`n` complaints on START's day routed by the live model to `live_desk` (0.62 sure, a
    fifth fitting no desk), and two older ones by another model, after promoting the model."""
    with Store.open(folders / "data" / DB_NAME) as store:
        promote_model(store, folders / "models", LIVE, reason="test", actor=OPERATOR)
        token = create_token(store, "web", ["submit"], actor=OPERATOR).token
        digest = card_digest(folders / "models" / LIVE)
        items = []
        for i in range(n):
            reason = "unknown desk" if i % 5 == 0 else ""
            routing = Routing(live_desk, 0.62, bool(reason), reason, 0.9, "transformer", {})
            channel = "app" if i % 2 else "web"
            items.append((Submission(f"c{i}", "text", channel, "", START), routing))
        store_batch(store, token, items, model=(LIVE, digest), tat=load_tat(), route_ms=40.0)
        earlier = Routing("Other", 0.9, False, "", 0.1, "transformer", {})
        received = START - timedelta(days=3)
        old = [(Submission(f"o{i}", "text", "", "", received), earlier) for i in range(2)]
        store_batch(store, token, old, model=("earlier", "x"), tat=load_tat(), route_ms=8.0)


def monitor_json(*args: str) -> dict:
    result = run_cli("monitor", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_json_document_holds_days_shares_weeks_latency_and_warnings(folders: Path):
    fill(folders, live_desk="Card Fraud", n=250)
    document = monitor_json("--since", (START - timedelta(days=7)).date().isoformat())
    assert set(document) >= {"since", "as_of", "baseline", "rule", "complaints", "review_share",
                             "unknown_share", "days", "confidence", "weeks", "current_week",
                             "latency", "warnings"}  # fmt: skip
    assert document["complaints"] == 252
    assert document["unknown_share"] == pytest.approx(50 / 252)
    day = document["days"][-1]
    assert day["day"] == START.date().isoformat() and day["complaints"] == 250
    assert day["by_channel"] == {"app": 125, "web": 125} and day["by_desk"] == {"Card Fraud": 250}
    assert document["days"][0]["by_channel"] == {"(none)": 2}
    baseline = document["baseline"]
    assert baseline["model"] == LIVE and baseline["validation_rows"] == 8
    assert document["rule"]["psi_threshold"] == 0.2 and "PSI" in document["rule"]["rule"]
    (week,) = document["weeks"]  # the earlier model's complaints are not the live model's
    assert week["complaints"] == 250 and week["desk_psi"] > 0
    # the tiny model validated on 8 rows: too few to judge a week against, so no warning
    assert week["judged"] is False and document["warnings"] == []
    assert sum(document["confidence"]["live"]) == 250
    assert len(document["confidence"]["edges"]) == len(document["confidence"]["live"]) + 1
    latency = document["latency"]
    assert latency["batches"] == 2 and latency["per_complaint_ms"] == pytest.approx(
        48 / 252, abs=1e-3
    )


def test_a_later_since_leaves_older_complaints_out(folders: Path):
    fill(folders, live_desk="Card Fraud", n=10)
    document = monitor_json("--since", START.date().isoformat())  # naive: UTC midnight
    assert document["complaints"] == 10
    assert document["since"] == f"{START.date().isoformat()}T00:00:00+00:00"


def test_the_text_report_names_the_model_and_each_week(folders: Path):
    fill(folders, live_desk="KYC Update", n=20)
    result = run_cli("monitor", "--since", (START - timedelta(days=7)).date().isoformat())
    assert result.returncode == 0, result.stderr
    assert f"Monitor of the live model {LIVE}" in result.stdout
    assert "22 complaints" in result.stdout and "too few" in result.stdout
    assert "p50 " in result.stdout and "No warnings." in result.stdout


def test_a_bad_since_and_a_missing_store_are_one_line(folders: Path):
    assert_one_line_error(run_cli("monitor", "--since", "last tuesday"), "--since", "not a date")
    assert_one_line_error(run_cli("monitor", "--since", "1200-01-01"), "--since", "1900")
    assert_one_line_error(run_cli("monitor"), "no review store", "python -m core serve")
    assert not (folders / "data" / DB_NAME).exists()  # asking creates no store
