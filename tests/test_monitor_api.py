"""The monitor through the intake API: each batch's routing time lands in its trail event and in
/metrics; /metrics carries today's complaints by channel and desk, the week's drift with its
threshold and warnings; `/v1/ready` stays ready and says why when the week drifts from the
serving model's validation rows or the unknown-desk share doubles."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from core.access import OPERATOR
from core.board.tat import load_tat
from core.intake import api as api_module
from core.intake.api import create_app
from core.intake.inbox import Routing, Submission, store_batch
from core.intake.schemas import ApiSettings
from core.intake.tokens import ApiToken, create_token
from core.models.card import card_digest
from core.models.profile import CONFIDENCE_EDGES
from core.review.live import promote_model
from core.review.store import Store

DRIFTED = "drifted"


@dataclass
class Api:
    client: TestClient
    store: Store
    token: ApiToken
    secret: str


def drifted_copy(tiny_model_dir: Path, root: Path) -> Path:
    """The tiny model whose card says its 400 validation rows all went to KYC Update with a
    confidence of 0.99 or more, and 1% fitted no desk (the card pins the other files only)."""
    folder = root / DRIFTED
    shutil.copytree(tiny_model_dir, folder)
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    confidence = [0] * (len(CONFIDENCE_EDGES) - 1)
    confidence[-1] = 400
    card["validation_profile"] = {
        "rows": 400, "confidence_edges": list(CONFIDENCE_EDGES), "confidence_counts": confidence,
        "desk_counts": {label: 400 if label == "KYC Update" else 0 for label in card["labels"]},
        "unknown_desk_share": 0.01, "review_share": 0.02,
    }  # fmt: skip
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return folder


@pytest.fixture
def api(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    """The API serving the drifted copy, every report read afresh (no reuse window)."""
    monkeypatch.setattr(api_module, "MONITOR_TTL_S", 0.0)
    root = tmp_path / "models"
    root.mkdir()
    drifted_copy(tiny_model_dir, root)
    with Store.open(tmp_path / "lens.db") as store:
        made = create_token(store, "web", ["submit", "read"], actor=OPERATOR)
        promote_model(store, root, DRIFTED, reason="test", actor=OPERATOR)
        app = create_app(ApiSettings(db_path=tmp_path / "lens.db", models_root=root))
        with TestClient(app) as client:
            yield Api(client, store, made.token, made.secret)


def metric_lines(api: Api) -> list[str]:
    response = api.client.get("/metrics", headers={"Authorization": f"Bearer {api.secret}"})
    assert response.status_code == 200
    return [line for line in response.text.splitlines() if line.startswith("grievance_lens_mon")]


def test_a_batch_records_its_routing_time_and_metrics_show_today_and_the_latency(api: Api):
    body = {"complaints": [{"id": f"c{i}", "text": "my upi payment failed", "channel": "web"}
                           for i in range(3)]}  # fmt: skip
    response = api.client.post("/v1/complaints", json=body,
                               headers={"Authorization": f"Bearer {api.secret}"})  # fmt: skip
    assert response.status_code == 200
    desk = response.json()["results"][0]["desk"]
    (details,) = api.store.query("SELECT details FROM trail WHERE action = 'intake.accepted'")[0]
    route_ms = json.loads(details)["route_ms"]
    assert route_ms > 0
    lines = metric_lines(api)
    assert "grievance_lens_monitor_baseline 1.0" in lines
    assert 'grievance_lens_monitor_complaints_today_by_channel{channel="web"} 3.0' in lines
    today_desks = [x for x in lines if x.startswith("grievance_lens_monitor_complaints_today_by_d")]
    assert sum(float(x.rsplit(" ", 1)[1]) for x in today_desks) == 3.0 and desk in today_desks[0]
    p50 = next(x for x in lines if 'routing_seconds{quantile="0.5"}' in x)
    assert float(p50.rsplit(" ", 1)[1]) == pytest.approx(route_ms / 1000, rel=1e-3)
    assert 'grievance_lens_monitor_warning{kind="desk_mix"} 0.0' in lines  # 3: too few to judge
    assert "grievance_lens_monitor_week_complaints 3.0" in lines
    assert api.client.get("/v1/ready").json()["warnings"] == []


def store_week(api: Api, *, n: int, unknown: int) -> None:
    """`n` complaints received now, routed by the drifted model to Card Fraud at 0.6, of which
    `unknown` fitted no desk."""
    digest = card_digest(Path(api.client.app.state.api.settings.models_root) / DRIFTED)
    now = datetime.now(UTC)
    items = []
    for i in range(n):
        reason = "unknown desk" if i < unknown else ""
        routing = Routing("Card Fraud", 0.6, bool(reason), reason, 0.99, "transformer", {})
        items.append((Submission(f"s{i}", "card charge", "branch", "", now), routing))
    store_batch(api.store, api.token, items, model=(DRIFTED, digest), tat=load_tat())


def test_ready_stays_ready_and_warns_when_the_week_drifts(api: Api):
    store_week(api, n=250, unknown=25)  # 10% fit no desk against 1%
    ready = api.client.get("/v1/ready")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    warnings = ready.json()["warnings"]
    assert len(warnings) == 3
    assert any("desk mix has drifted" in w for w in warnings)
    assert any("confidence has drifted" in w for w in warnings)
    assert any("fit no desk (25 of 250)" in w for w in warnings)
    lines = metric_lines(api)
    for kind in ("desk_mix", "confidence", "unknown_desk"):
        assert f'grievance_lens_monitor_warning{{kind="{kind}"}} 1.0' in lines
    assert "grievance_lens_monitor_drift_threshold 0.2" in lines
    psi = next(x for x in lines if 'drift_psi{figure="desk_mix"}' in x)
    assert float(psi.rsplit(" ", 1)[1]) > 0.2
    assert 'grievance_lens_monitor_share{rows="validation",share="unknown_desk"} 0.01' in lines
    assert 'grievance_lens_monitor_share{rows="week",share="unknown_desk"} 0.1' in lines


def test_a_week_like_the_validation_rows_does_not_warn(api: Api):
    digest = card_digest(Path(api.client.app.state.api.settings.models_root) / DRIFTED)
    now = datetime.now(UTC)
    routing = Routing("KYC Update", 0.995, False, "", 0.1, "transformer", {})
    items = [(Submission(f"k{i}", "kyc update", "web", "", now), routing) for i in range(250)]
    store_batch(api.store, api.token, items, model=(DRIFTED, digest), tat=load_tat())
    assert api.client.get("/v1/ready").json()["warnings"] == []
    assert 'grievance_lens_monitor_warning{kind="desk_mix"} 0.0' in metric_lines(api)
