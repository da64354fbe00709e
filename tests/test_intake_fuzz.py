"""The intake API fuzzed from its own OpenAPI schema (schemathesis): whatever a caller sends,
with a valid token, the answer is never a 500 and never a traceback (ARCHITECTURE.md, "Errors").
The same run at a larger scale is bench/bench_intake.py's fuzz phase."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from core.access import OPERATOR
from core.intake.api import create_app
from core.intake.schemas import ApiSettings
from core.intake.tokens import create_token
from core.review.live import promote_model
from core.review.store import Store

EXAMPLES = 25  # per operation: about 150 requests, a few seconds


@pytest.fixture(scope="module")
def fuzzed_api(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("fuzz")
    models = folder / "models"
    shutil.copytree(tiny_model_dir, models / "tiny-a")
    db = folder / "lens.db"
    with Store.open(db) as store:
        secret = create_token(store, "fuzz", ["submit", "read"], actor=OPERATOR).secret
        promote_model(store, models, "tiny-a", reason="fuzz", actor=OPERATOR)
    app = create_app(ApiSettings(db_path=db, models_root=models, rate_per_minute=1_000_000))
    with TestClient(app):  # runs the lifespan: the store and the model stay open for every case
        yield app, secret


def test_no_request_is_a_server_error(fuzzed_api):
    app, secret = fuzzed_api
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/complaints", "/v1/updates", "/metrics"}
    seen: list[int] = []

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def no_server_error(case):
            response = case.call(headers={"Authorization": f"Bearer {secret}"})
            seen.append(response.status_code)
            case.validate_response(response, checks=(not_a_server_error,))
            assert "Traceback" not in response.text

        no_server_error()
    assert len(seen) >= EXAMPLES * 2 and 200 in seen and 422 in seen  # it reached the routes


@pytest.mark.parametrize("field", ["id", "text", "channel", "customer_ref"])
def test_an_unpaired_surrogate_is_a_422_naming_the_field(fuzzed_api, field: str):
    """Found by the fuzz run: JSON may escape half a surrogate pair, which is not text and
    cannot be stored (it was a 500)."""
    app, secret = fuzzed_api
    item = {"id": "s1", "text": "upi payment failed", field: "bad \\ud899 here"}
    fields = ", ".join(f'"{k}": "{v}"' for k, v in item.items())
    body = '{"complaints": [{' + fields + "}]}"  # by hand: json.dumps would escape the backslash
    with TestClient(app) as client:  # its own lifespan: schemathesis's calls ran the app's too
        response = client.post(
            "/v1/complaints", content=body.encode("ascii"),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        )  # fmt: skip
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(f"complaints[0].{field}: ")
