"""The intake API end to end through TestClient: tokens and scopes, readiness, routing answers
that equal `classify`'s, idempotency, caps, validation messages, the rate limit, verdicts and
resolutions read back, the promotion switch, metrics, bugs as references, and batches stored
whole or not at all.

One module-scoped models folder holds two tiny models (A: the session's `tiny-test`, B: the
distinct tiny model, another card digest); every test opens its own store in tmp_path."""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient

from core.access import LOCAL_USER, OPERATOR
from core.board.tat import load_tat
from core.intake import api as api_module
from core.intake import inbox as inbox_module
from core.intake.api import create_app
from core.intake.schemas import ApiSettings
from core.intake.tokens import create_token, revoke_token
from core.models.classify import classification_columns
from core.models.registry import load_model
from core.review.live import promote_model
from core.review.store import Store

MODEL_A, MODEL_B = "model-a", "model-b"
TEXTS = [
    "my upi payment failed and money debited twice",
    "card stolen and a fraud charge on my account",
    "loan emi interest rate is very bad",
    "kyc aadhaar update pending since week",
]
ROUTING_FIELDS = ("desk", "confidence", "needs_review", "review_reason")


# ------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def models_root(
    tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, distinct_tiny_model_dir: Path
) -> Path:
    root = tmp_path_factory.mktemp("intake-models")
    shutil.copytree(tiny_model_dir, root / MODEL_A)
    shutil.copytree(distinct_tiny_model_dir, root / MODEL_B)
    return root


@pytest.fixture(scope="module")
def expected(models_root: Path) -> Callable[[str, list[str]], list[dict]]:
    """What `classification_columns` gives for `texts` with saved model `name` (one dict each)."""
    loaded: dict[str, Any] = {}

    def columns(name: str, texts: list[str]) -> list[dict]:
        if name not in loaded:
            loaded[name] = load_model(models_root / name)
        frame = classification_columns(loaded[name], texts)
        assert frame is not None
        return frame.to_dict("records")

    return columns


@dataclass
class Api:
    client: TestClient
    store: Store  # the test's own connection to the API's store
    secrets: dict[str, str]
    models_root: Path

    def auth(self, token: str = "web", **headers: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secrets[token]}", **headers}

    def post(self, complaints: list[dict], token: str = "web", headers: dict | None = None) -> Any:
        return self.client.post(
            "/v1/complaints",
            json={"complaints": complaints},
            headers={**self.auth(token), **(headers or {})},
        )

    def count(self, table: str = "inbox") -> int:
        return int(self.store.query(f"SELECT count(*) FROM {table}")[0][0])

    def trail(self, action: str | None = None) -> list[tuple[str, str]]:
        rows = self.store.query("SELECT action, actor FROM trail ORDER BY id")
        return [(a, b) for a, b in rows if action is None or a == action]

    def promote(self, name: str) -> None:
        promote_model(self.store, self.models_root, name, reason="test", actor=OPERATOR)


@pytest.fixture
def make_api(tmp_path: Path, models_root: Path) -> Iterator[Callable[..., Api]]:
    """Open the API on a store of its own: tokens web (submit, read), reader (read, source web),
    other (submit, read, source other) and gone (revoked); `live` promoted first (None: none)."""
    stack = ExitStack()
    made = 0

    def make(live: str | None = MODEL_A, **settings: Any) -> Api:
        nonlocal made
        made += 1
        db = tmp_path / f"store-{made}" / "lens.db"
        db.parent.mkdir()
        store = stack.enter_context(Store.open(db))
        secrets = {
            "web": create_token(store, "web", ["submit", "read"], actor=OPERATOR).secret,
            "reader": create_token(store, "reader", ["read"], actor=OPERATOR, source="web").secret,
            "other": create_token(store, "other", ["submit", "read"], actor=OPERATOR).secret,
            "gone": create_token(store, "gone", ["submit", "read"], actor=OPERATOR).secret,
        }
        revoke_token(store, "gone", actor=OPERATOR)
        api = Api(None, store, secrets, models_root)  # type: ignore[arg-type]
        if live is not None:
            api.promote(live)
        app = create_app(ApiSettings(db_path=db, models_root=models_root, **settings))
        api.client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
        return api

    yield make
    stack.close()


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()


def _items(*texts: str, prefix: str = "c") -> list[dict]:
    return [{"id": f"{prefix}{i}", "text": t} for i, t in enumerate(texts)]


def _error(response: Any, status: int) -> str:
    """The one-line error of a JSON error answer with `status` (never a traceback)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body["error"]


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------- 1. 401 and 403


def test_missing_wrong_and_revoked_tokens_get_401_with_a_bearer_challenge(api: Api):
    wrong = "glk_" + "A" * 43
    for headers in (
        {},
        {"Authorization": f"Bearer {wrong}"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Basic {api.secrets['web']}"},  # the right secret, the wrong scheme
        api.auth("gone"),  # revoked
    ):
        for method, path in (
            ("POST", "/v1/complaints"),
            ("GET", "/v1/updates"),
            ("GET", "/v1/complaints/1"),
            ("POST", "/v1/complaints/1/resolve"),
            ("GET", "/metrics"),
        ):
            body = (
                {"complaints": _items("upi payment failed")} if path == "/v1/complaints" else None
            )
            response = api.client.request(method, path, json=body, headers=headers)
            assert "valid API token" in _error(response, 401)
            assert response.headers["www-authenticate"] == "Bearer"
    assert api.count() == 0


def test_a_read_only_token_cannot_post_or_resolve(api: Api):
    response = api.post(_items("upi payment failed"), token="reader")
    message = _error(response, 403)
    assert "reader" in message and "'submit'" in message
    assert api.count() == 0
    stored = api.post(_items("upi payment failed")).json()["results"][0]
    cid = stored["complaint_id"]
    resolve = api.client.post(f"/v1/complaints/{cid}/resolve", headers=api.auth("reader"))
    assert "'submit'" in _error(resolve, 403)
    # the same token reads what its source sent
    assert api.client.get(f"/v1/complaints/{cid}", headers=api.auth("reader")).status_code == 200


# --------------------------------------------------------------------------- 2. no live model


def test_without_a_live_model_posts_and_readiness_are_503_until_one_is_promoted(make_api):
    api = make_api(live=None)
    assert api.client.get("/v1/health").json() == {"status": "ok"}
    ready = api.client.get("/v1/ready")
    assert ready.status_code == 503
    assert ready.json()["ready"] is False and "no model is live" in ready.json()["error"]
    response = api.post(_items("upi payment failed"))
    assert "no model is live" in _error(response, 503)
    assert response.headers["retry-after"] == "5"
    assert api.count() == 0 and not api.trail("intake.accepted")

    api.promote(MODEL_A)  # no restart
    ready = api.client.get("/v1/ready").json()
    assert {k: ready[k] for k in ("ready", "model", "warnings")} == {
        "ready": True, "model": MODEL_A, "warnings": [],
    }  # fmt: skip
    assert ready["routing"]["runtime"] == "torch"  # the tiny transformer has no serving graph
    assert ready["routing"]["device"] == "cpu" and ready["routing"]["precision"] in ("fp32", "bf16")
    assert api.post(_items("upi payment failed")).status_code == 200
    assert api.client.get("/v1/health").status_code == 200


# ------------------------------------------------------------------------ 3. routing answers


def test_each_answer_is_classify_s_decision_with_the_model_and_the_desk_s_due_time(
    api: Api, expected
):
    response = api.post(_items(*TEXTS))
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["refused"]) == (len(TEXTS), 0)
    want = expected(MODEL_A, TEXTS)
    tat = load_tat()
    ids = []
    for i, (got, row) in enumerate(zip(body["results"], want, strict=True)):
        assert got["id"] == f"c{i}" and got["duplicate"] is False and got["model"] == MODEL_A
        assert got["desk"] == row["predicted_label"]
        assert got["confidence"] == pytest.approx(row["confidence"], abs=1e-5)
        assert got["needs_review"] is bool(row["needs_review"])
        assert got["review_reason"] == row["review_reason"]
        record = api.client.get(f"/v1/complaints/{got['complaint_id']}", headers=api.auth())
        record = record.json()
        assert record["routed_desk"] == record["desk"] == got["desk"]
        assert record["model"] == MODEL_A and record["state"] == "open"
        due = _utc(record["received_at"]) + timedelta(hours=tat.hours_for(got["desk"]))
        assert got["due_by"] == record["due_by"] == _iso(due)
        ids.append(got["complaint_id"])
    assert len(set(ids)) == len(TEXTS)
    assert api.count() == len(TEXTS)


def test_due_by_counts_from_the_given_received_time_naive_ones_in_the_tat_zone(api: Api):
    tat = load_tat()
    complaints = [
        {"id": "aware", "text": TEXTS[0], "received_at": "2024-03-01T10:00:00+05:30"},
        {"id": "naive", "text": TEXTS[0], "received_at": "2024-03-01T10:00:00"},
        {"id": "utc", "text": TEXTS[1], "received_at": "2024-03-01T04:30:00Z"},
    ]
    results = api.post(complaints).json()["results"]
    naive = datetime(2024, 3, 1, 10, tzinfo=ZoneInfo(tat.timezone))
    starts = [
        datetime(2024, 3, 1, 4, 30, tzinfo=UTC),
        naive,
        datetime(2024, 3, 1, 4, 30, tzinfo=UTC),
    ]
    for got, start in zip(results, starts, strict=True):
        assert got["due_by"] == _iso(start + timedelta(hours=tat.hours_for(got["desk"])))
        record = api.client.get(f"/v1/complaints/{got['complaint_id']}", headers=api.auth())
        assert record.json()["received_at"] == _iso(start)


# --------------------------------------------------------------------------- 4. idempotency


def test_ids_sent_again_are_answered_from_the_store_once_per_id(api: Api):
    first = api.post(_items(TEXTS[0], TEXTS[1])).json()["results"]
    again = api.post(_items(TEXTS[0], TEXTS[1])).json()
    assert again["accepted"] == 2
    for old, new in zip(first, again["results"], strict=True):
        assert new == {**old, "duplicate": True}
    # a batch of one stored id and one new id: the stored answer and a new record
    mixed = api.post([{"id": "c0", "text": TEXTS[0]}, {"id": "c9", "text": TEXTS[2]}]).json()
    assert mixed["results"][0] == {**first[0], "duplicate": True}
    assert mixed["results"][1]["duplicate"] is False
    assert mixed["results"][1]["complaint_id"] not in {r["complaint_id"] for r in first}
    assert api.count() == 3
    assert sorted(r[0] for r in api.store.query("SELECT external_id FROM inbox")) == [
        "c0", "c1", "c9"
    ]  # fmt: skip
    # one accepted event per batch that stored something
    assert len(api.trail("intake.accepted")) == 2
    # the same id from another source is another complaint
    theirs = api.post(_items(TEXTS[0]), token="other").json()["results"][0]
    assert theirs["duplicate"] is False and theirs["complaint_id"] != first[0]["complaint_id"]


def test_an_idempotency_key_replays_the_whole_stored_answer(api: Api):
    key = {"Idempotency-Key": "batch-0001"}
    batch = [
        {"id": "k0", "text": TEXTS[0]},
        {"id": "k1", "text": "upi " * 5001},  # refused: never stored
        {"id": "k2", "text": TEXTS[1]},
    ]
    first = api.post(batch, headers=key).json()
    assert (first["accepted"], first["refused"]) == (2, 1)
    replay = api.post(batch, headers=key).json()
    assert (replay["accepted"], replay["refused"]) == (2, 1)
    assert replay["results"] == [{**r, "duplicate": True} for r in first["results"]]
    assert api.count() == 2 and api.count("inbox_requests") == 1

    # a batch stored nothing (every item refused): the key still keeps and replays its answer,
    # though no id of it is in the inbox
    refused_only = [{"id": "r0", "text": "?!"}]
    key2 = {"Idempotency-Key": "batch-0002"}
    once = api.post(refused_only, headers=key2).json()
    assert once["refused"] == 1 and "error" in once["results"][0]
    twice = api.post(refused_only, headers=key2).json()
    assert twice["results"] == [{**once["results"][0], "duplicate": True}]
    assert api.count() == 2 and api.count("inbox_requests") == 2


def test_the_same_key_with_another_body_is_422_and_stores_nothing(api: Api):
    key = {"Idempotency-Key": "batch-0001"}
    assert api.post(_items(TEXTS[0]), headers=key).status_code == 200
    other = api.post(_items(TEXTS[1], prefix="new"), headers=key)
    assert "Idempotency-Key 'batch-0001' was used for a different batch" in _error(other, 422)
    assert api.count() == 1 and api.count("inbox_requests") == 1
    # the key is per source: another source may use it
    assert api.post(_items(TEXTS[1]), token="other", headers=key).status_code == 200


@pytest.mark.parametrize("key", ["", "x" * 201, "tab\there", "clé".encode()])
def test_a_malformed_idempotency_key_is_422(api: Api, key: str | bytes):
    response = api.post(_items(TEXTS[0]), headers={"Idempotency-Key": key})
    assert "Idempotency-Key" in _error(response, 422)
    assert api.count() == 0


def test_a_keyed_batch_may_hold_an_id_stored_earlier(api: Api):
    first = api.post(_items(TEXTS[0])).json()["results"][0]
    response = api.post(
        [{"id": "c0", "text": TEXTS[0]}, {"id": "c1", "text": TEXTS[1]}],
        headers={"Idempotency-Key": "retry-with-a-key"},
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert results[0] == {**first, "duplicate": True}
    assert results[1]["duplicate"] is False
    assert api.count() == 2


# ---------------------------------------------------------------------------------- 5. caps


def test_a_batch_over_max_batch_is_413(make_api):
    api = make_api(max_batch=3)
    response = api.post(_items("upi payment failed", "card stolen", "loan emi", "kyc update"))
    assert "at most 3 complaints; got 4" in _error(response, 413)
    assert api.count() == 0
    assert api.post(_items("upi payment failed", "card stolen", "loan emi")).status_code == 200


def test_a_body_over_the_cap_with_content_length_is_413(make_api):
    api = make_api(max_body_bytes=1 << 20)
    body = b'{"complaints": [{"id": "a", "text": "' + b"u" * (1 << 20) + b'"}]}'
    response = api.client.post(
        "/v1/complaints", content=body, headers=api.auth(**{"Content-Type": "application/json"})
    )
    assert "over 1 MiB" in _error(response, 413)
    assert api.count() == 0


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_chunked_body_under_the_cap_is_read(make_api):
    api = make_api(max_body_bytes=1 << 20)
    body = b'{"complaints": [{"id": "a", "text": "upi payment failed"}]' + b" " * 200_000 + b"}"
    response = api.client.post(
        "/v1/complaints",
        content=_chunks(body),
        headers=api.auth(**{"Content-Type": "application/json"}),
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.status_code == 200, response.text
    assert api.count() == 1


def test_a_chunked_body_over_the_cap_is_413(make_api):
    api = make_api(max_body_bytes=1 << 20)
    body = b'{"complaints": [{"id": "a", "text": "' + b"u" * (1 << 20) + b'"}]}'
    response = api.client.post(
        "/v1/complaints",
        content=_chunks(body),
        headers=api.auth(**{"Content-Type": "application/json"}),
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "over 1 MiB" in _error(response, 413)
    assert api.count() == 0


def test_an_overlong_or_wordless_text_is_refused_for_that_item_only(api: Api):
    at_cap = ("upi payment failed " * 1100)[:20_000]
    complaints = [
        {"id": "ok", "text": TEXTS[0]},
        {"id": "long", "text": "u" * 20_001},
        {"id": "cap", "text": at_cap},
        {"id": "blank", "text": "  ?! ... "},
        {"id": "empty", "text": ""},
    ]
    response = api.post(complaints)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["accepted"], body["refused"]) == (2, 3)
    by_id = {r["id"]: r for r in body["results"]}
    assert [r["id"] for r in body["results"]] == [c["id"] for c in complaints]
    assert by_id["long"] == {
        "id": "long",
        "error": "text is 20,001 characters; a complaint may have at most 20,000 (nothing was "
        "stored for it)",
    }
    assert set(by_id["blank"]) == {"id", "error"} and "no words" in by_id["blank"]["error"]
    assert "no words" in by_id["empty"]["error"]
    assert "complaint_id" in by_id["ok"] and "complaint_id" in by_id["cap"]
    stored = sorted(r[0] for r in api.store.query("SELECT external_id FROM inbox"))
    assert stored == ["cap", "ok"]


# ------------------------------------------------------------------------ 6. 422 messages

FUTURE = (datetime.now(UTC) + timedelta(days=2)).isoformat()


@pytest.mark.parametrize(
    ("body", "starts"),
    [
        ({"complaints": [{"id": "a"}]}, "complaints[0].text: Field required"),
        ({"complaints": [{"id": "a", "text": "upi", "colour": "red"}]}, "complaints[0].colour:"),
        ({"complaints": [{"id": "a", "text": "upi"}], "extra": 1}, "extra: Extra inputs"),
        ({"complaints": [{"id": "a", "text": "upi"}, {"id": "a", "text": "card"}]},
         "complaints[1].id repeats complaints[0].id ('a')"),
        ({"complaints": [{"id": "a", "text": "upi", "received_at": FUTURE}]},
         "complaints[0].received_at is in the future"),
        ({"complaints": [{"id": "a", "text": "upi", "received_at": "1999-12-31T23:00:00Z"}]},
         "complaints[0].received_at is before 2000-01-01"),
        ({"complaints": [{"id": "a", "text": "upi", "received_at": "yesterday"}]},
         "complaints[0].received_at:"),
        ({"complaints": [{"id": "a\nb", "text": "upi"}]}, "complaints[0].id:"),
        ({"complaints": []}, "complaints: List should have at least 1 item"),
        ({}, "complaints: Field required"),
        ([], "body:"),
    ],
)  # fmt: skip
def test_invalid_bodies_are_422_naming_the_field(api: Api, body: Any, starts: str):
    response = api.client.post("/v1/complaints", json=body, headers=api.auth())
    assert _error(response, 422).startswith(starts)
    assert api.count() == 0


def test_a_body_that_is_not_json_is_422(api: Api):
    response = api.client.post(
        "/v1/complaints", content=b"{bad", headers=api.auth(**{"Content-Type": "application/json"})
    )
    assert _error(response, 422).startswith("the body is not valid JSON")


def test_a_received_time_a_little_ahead_of_the_server_clock_is_accepted(api: Api):
    ahead = (datetime.now(UTC) + timedelta(minutes=2)).isoformat()
    response = api.post([{"id": "a", "text": TEXTS[0], "received_at": ahead}])
    assert response.status_code == 200, response.text


# ---------------------------------------------------------------------------- 7. rate limit


def test_the_third_request_a_minute_is_429_with_retry_after(make_api):
    api = make_api(rate_per_minute=2)
    assert api.client.get("/v1/updates", headers=api.auth()).status_code == 200
    assert api.post(_items(TEXTS[0])).status_code == 200
    response = api.post(_items(TEXTS[1], prefix="x"))
    assert "token web is over its rate limit" in _error(response, 429)
    assert 1 <= int(response.headers["retry-after"]) <= 30
    assert api.count() == 1
    # the limit is per token; health and readiness are not counted
    assert api.client.get("/v1/updates", headers=api.auth("other")).status_code == 200
    assert api.client.get("/v1/health").status_code == 200


# ------------------------------------------------------------ 8. triage, verdicts, updates


def test_flagged_complaints_go_to_triage_and_verdicts_come_back(api: Api, expected):
    results = api.post(_items(*TEXTS)).json()["results"]
    flagged = {r["complaint_id"] for r in results if r["needs_review"]}
    assert flagged, "the tiny model flags its complaints (unknown desk)"
    items = dict(api.store.query("SELECT row, id FROM triage_items WHERE batch = 'inbox'"))
    assert set(items) == flagged

    target = next(r for r in results if r["needs_review"])
    classes = [str(c) for c in load_model(api.models_root / MODEL_A).neural.classes_]
    other_desk = next(c for c in classes if c != target["desk"])
    api.store.decide_triage(
        items[target["complaint_id"]], final_label=other_desk, reviewer="local", actor=LOCAL_USER
    )

    page = api.client.get("/v1/updates", headers=api.auth("reader")).json()
    assert [
        (u["kind"], u["complaint_id"], u["id"], u["desk"], u["status"]) for u in page["updates"]
    ] == [("verdict", target["complaint_id"], target["id"], other_desk, "corrected")]
    assert page["next"] >= page["updates"][0]["cursor"]
    later = api.client.get(f"/v1/updates?after={page['next']}", headers=api.auth()).json()
    assert later == {"updates": [], "next": page["next"]}
    # another source sees none of it
    theirs = api.client.get("/v1/updates", headers=api.auth("other")).json()
    assert theirs["updates"] == []

    record = api.client.get(f"/v1/complaints/{target['complaint_id']}", headers=api.auth())
    record = record.json()
    assert record["reviewed_desk"] == record["desk"] == other_desk
    assert record["routed_desk"] == target["desk"]
    due = _utc(record["received_at"]) + timedelta(hours=load_tat().hours_for(other_desk))
    assert record["due_by"] == _iso(due)  # the new desk's clock
    assert [h["event"] for h in record["history"]] == ["routed", "corrected"]


# ------------------------------------------------------------------------------- 9. resolve


def test_resolving_stops_the_clock_once_and_only_for_the_source(api: Api):
    result = api.post(_items(TEXTS[0])).json()["results"][0]
    cid = result["complaint_id"]
    first = api.client.post(f"/v1/complaints/{cid}/resolve", headers=api.auth())
    assert first.status_code == 200, first.text
    first = first.json()
    assert first["state"] == "resolved" and first["duplicate"] is False and first["resolved_at"]
    again = api.client.post(f"/v1/complaints/{cid}/resolve", headers=api.auth()).json()
    assert again["duplicate"] is True and again["resolved_at"] == first["resolved_at"]

    updates = api.client.get("/v1/updates", headers=api.auth()).json()["updates"]
    assert [(u["kind"], u["complaint_id"], u["id"]) for u in updates] == [
        ("resolved", cid, result["id"])
    ]
    record = api.client.get(f"/v1/complaints/{cid}", headers=api.auth("reader")).json()
    assert record["state"] == "resolved"
    assert [h["event"] for h in record["history"]] == ["routed", "resolved"]

    for method, path in (
        ("GET", f"/v1/complaints/{cid}"),
        ("POST", f"/v1/complaints/{cid}/resolve"),
    ):
        response = api.client.request(method, path, headers=api.auth("other"))
        assert f"no complaint {cid}" in _error(response, 404)
    assert "no complaint 999" in _error(
        api.client.post("/v1/complaints/999/resolve", headers=api.auth()), 404
    )
    assert api.count("inbox_resolutions") == 1

    api.post(_items(TEXTS[1]), token="other")
    events = api.trail()
    assert events.count(("intake.accepted", "token:web")) == 1
    assert events.count(("intake.resolved", "token:web")) == 1
    assert events.count(("intake.accepted", "token:other")) == 1
    assert not [e for e in events if e[0].startswith("intake.") and not e[1].startswith("token:")]


# ------------------------------------------------------------------- 10. promotion switch


def test_a_promotion_switches_the_model_without_a_restart(api: Api, expected):
    before = api.post(_items(*TEXTS[:2], prefix="a")).json()["results"]
    assert {r["model"] for r in before} == {MODEL_A}
    api.promote(MODEL_B)
    after = api.post(_items(*TEXTS, prefix="b")).json()["results"]
    assert {r["model"] for r in after} == {MODEL_B}
    for got, row in zip(after, expected(MODEL_B, TEXTS), strict=True):
        assert got["desk"] == row["predicted_label"]
        assert got["confidence"] == pytest.approx(row["confidence"], abs=1e-5)
        assert got["needs_review"] is bool(row["needs_review"])
        assert got["review_reason"] == row["review_reason"]
    assert api.client.get("/v1/ready").json()["model"] == MODEL_B
    for old in before:
        record = api.client.get(f"/v1/complaints/{old['complaint_id']}", headers=api.auth())
        assert record.json()["model"] == MODEL_A
    digests = dict(api.store.query("SELECT model, model_digest FROM inbox GROUP BY model"))
    assert set(digests) == {MODEL_A, MODEL_B} and digests[MODEL_A] != digests[MODEL_B]


# -------------------------------------------------------------------------------- 11. metrics


def test_metrics_are_prometheus_text_for_a_read_token(api: Api):
    results = api.post(_items(*TEXTS)).json()["results"]
    assert "valid API token" in _error(api.client.get("/metrics"), 401)
    response = api.client.get("/metrics", headers=api.auth("reader"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    by_desk: dict[str, int] = {}
    for r in results:
        by_desk[r["desk"]] = by_desk.get(r["desk"], 0) + 1
    for desk, n in by_desk.items():
        assert f'grievance_lens_inbox_complaints_total{{desk="{desk}"}} {float(n)}' in text
    assert 'grievance_lens_api_request_seconds_count{route="/v1/complaints"} 1.0' in text
    assert 'grievance_lens_api_requests_total{route="/v1/complaints",status="200"} 1.0' in text
    assert f"grievance_lens_inbox_open {float(len(TEXTS))}" in text


# ------------------------------------------------------------------------------- 12. a bug


def test_a_bug_in_a_route_is_a_500_with_a_reference_and_no_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internals 7f3a")

    monkeypatch.setattr(api_module, "store_batch", broken)
    with caplog.at_level(logging.ERROR, logger="core.intake.api"):
        response = api.post(_items(TEXTS[0]))
    message = _error(response, 500)
    found = re.fullmatch(
        r"internal error \(reference ([0-9a-f]{8})\); the server log has the details", message
    )
    assert found, message
    assert "secret internals" not in response.text and "RuntimeError" not in response.text
    logged = [r for r in caplog.records if found.group(1) in r.getMessage()]
    assert logged and logged[0].exc_info and "secret internals" in str(logged[0].exc_info[1])
    assert api.count() == 0


# -------------------------------------------------------------------------- 13. all or none


def test_a_batch_that_fails_half_way_stores_nothing_and_a_retry_stores_it_once(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    real = inbox_module.insert_chained
    calls = 0

    def failing(conn: Any, table: str, values: Any) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("disk gone")
        return real(conn, table, values)

    trail_before = api.trail()
    monkeypatch.setattr(inbox_module, "insert_chained", failing)
    key = {"Idempotency-Key": "half-way"}
    assert api.post(_items(*TEXTS), headers=key).status_code == 500
    assert calls == 3
    assert api.count() == 0 and api.count("inbox_requests") == 0
    assert api.count("triage_items") == 0
    assert api.trail() == trail_before

    monkeypatch.setattr(inbox_module, "insert_chained", real)
    retry = api.post(_items(*TEXTS), headers=key).json()
    assert [r["duplicate"] for r in retry["results"]] == [False] * len(TEXTS)
    assert api.count() == len(TEXTS) and api.count("inbox_requests") == 1
    assert len(api.trail("intake.accepted")) == 1
    replay = api.post(_items(*TEXTS), headers=key).json()
    assert replay["results"] == [{**r, "duplicate": True} for r in retry["results"]]
    assert api.count() == len(TEXTS)


@pytest.mark.parametrize("path_id", ["abc", "0", "-1", "99999999999999999999"])
def test_a_malformed_complaint_id_in_the_path_is_422_naming_it(api: Api, path_id: str):
    for method, path in (
        ("GET", f"/v1/complaints/{path_id}"),
        ("POST", f"/v1/complaints/{path_id}/resolve"),
    ):
        response = api.client.request(method, path, headers=api.auth())
        assert _error(response, 422).startswith("complaint_id: ")


def test_the_docs_page_is_served_from_the_package_not_a_cdn(api: Api):
    page = api.client.get("/docs")
    assert page.status_code == 200
    assert "swagger-ui-bundle.js" in page.text and "//cdn" not in page.text
    script = api.client.get("/docs-static/swagger-ui-bundle.js")
    assert script.status_code == 200 and len(script.content) > 100_000
    assert api.client.get("/openapi.json").json()["info"]["title"] == "Grievance Lens intake API"


def test_a_busy_store_is_a_503_to_retry_not_a_422(api: Api, monkeypatch):
    import sqlite3

    from core.review.store import StoreBusyError

    def busy(*args, **kwargs):
        raise StoreBusyError(Path("lens.db"), sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr("core.intake.api.store_batch", busy)
    response = api.post(_items("upi payment failed"))
    assert "is busy" in _error(response, 503)
    assert response.headers["retry-after"] == "1"
