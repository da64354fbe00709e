"""AppTest for the Monitor page: with no model live and an empty inbox it says so and stops;
with the live model's week drifted it shows the three warnings core.monitor gives, the headline
figures against the validation rows and the weeks table; an old card is "no baseline", counts
only; a viewer reads it. Complaints are stored with hand-made routings: no model runs."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.board.tat import load_tat
from core.intake.inbox import Routing, Submission, store_batch
from core.intake.tokens import create_token
from core.models.card import card_digest
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import promote_model
from core.review.store import Store, default_db_path
from core.roles import ROLES_ENV
from tests.helpers import AUTH, ROOT
from tests.test_monitor_api import DRIFTED, drifted_copy

PAGE = str(ROOT / "pages" / "monitor.py")


@pytest.fixture
def folders(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    drifted_copy(tiny_model_dir, tmp_path / "models")
    return tmp_path


def fill(folders: Path, name: str = DRIFTED, *, n: int = 250) -> None:
    """Promote `name`; store `n` complaints received now, routed by it to Card Fraud at 0.6, a
    tenth fitting no desk, with a routing time of 25 ms."""
    with Store.open(default_db_path()) as store:
        promote_model(store, folders / "models", name, reason="test", actor=OPERATOR)
        token = create_token(store, "web", ["submit"], actor=OPERATOR).token
        now = datetime.now(UTC)
        items = []
        for i in range(n):
            reason = "unknown desk" if i % 10 == 0 else ""
            routing = Routing("Card Fraud", 0.6, bool(reason), reason, 0.99, "transformer", {})
            items.append((Submission(f"c{i}", "card charge", "branch", "", now), routing))
        digest = card_digest(folders / "models" / name)
        store_batch(store, token, items, model=(name, digest), tat=load_tat(), route_ms=25.0)


def monitor_page(at: AppTest | None = None) -> AppTest:
    at = (at or AppTest.from_file(PAGE, default_timeout=60)).run()
    assert not at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_no_live_model_and_no_complaint_are_said_plainly(folders: Path):
    at = monitor_page()
    assert any("no model is live yet" in i.value for i in at.info)
    assert any("No complaint from the intake API" in i.value for i in at.info)
    assert not at.warning and not at.metric


def test_a_drifted_week_shows_its_warnings_figures_and_weeks(folders: Path):
    fill(folders)
    at = monitor_page()
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 3
    assert any("desk mix has drifted" in w for w in warnings)
    assert any("confidence has drifted" in w for w in warnings)
    assert any("fit no desk \\(25 of 250\\)" in w for w in warnings)  # escaped: one line
    assert metric(at, "Complaints") == "250"
    assert metric(at, "Fit no desk") == "10.0%"
    assert any("400 validation rows" in c.value for c in at.caption)
    weeks = next(d.value for d in at.dataframe if "desk mix PSI" in d.value.columns)
    assert weeks["complaints"].tolist() == [250] and weeks["judged"].tolist() == ["yes"]
    assert weeks["desk mix PSI"].iloc[0] > 0.2
    assert metric(at, "Routing p95 (a batch)") == "25 ms"
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    assert titles == [
        "Complaints per day by channel (UTC)", "Complaints per day by desk (UTC)",
        "Sent to people and fitting no desk, per day", "Confidence against the validation rows",
        "Drift per week (population stability index)",
    ]  # fmt: skip


def test_an_old_card_shows_counts_without_a_baseline(folders: Path):
    old = folders / "models" / "old"
    shutil.copytree(folders / "models" / DRIFTED, old)
    card = json.loads((old / "card.json").read_text(encoding="utf-8"))
    del card["validation_profile"]
    (old / "card.json").write_text(json.dumps(card), encoding="utf-8")
    fill(folders, "old", n=30)
    at = monitor_page()
    assert any("saved before validation profiles" in i.value for i in at.info)
    assert metric(at, "Complaints") == "30" and not at.warning
    assert any("Not measured" in m.value for m in at.markdown)


def test_a_later_start_date_leaves_the_complaints_out(folders: Path):
    fill(folders, n=20)
    at = monitor_page()
    assert metric(at, "Complaints") == "20"
    tomorrow = datetime.now(UTC).date().toordinal() + 1
    at.date_input(key="monitor.since").set_value(datetime.fromordinal(tomorrow).date())
    at = monitor_page(at)
    assert any("No complaint from the intake API" in i.value for i in at.info)


def test_a_viewer_reads_the_monitor(folders: Path, monkeypatch: pytest.MonkeyPatch):
    roles = folders / "roles.toml"
    roles.write_text('viewer = ["*@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    fill(folders, n=20)
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "vera@bank.example", "email_verified": True}
    at = monitor_page(at)
    assert metric(at, "Complaints") == "20"
