"""The intake API (FastAPI): the bank's systems post complaints, the live model routes each one
as it arrives, the inbox keeps it (core.intake.inbox), and the bank reads decisions back.

    POST /v1/complaints                   submit: a batch; the routing answer of each complaint
    GET  /v1/complaints/{complaint_id}    read:   one record (desk, verdict, state, due, history)
    POST /v1/complaints/{id}/resolve      submit: the bank resolved it; its clock stops
    GET  /v1/updates?after=CURSOR         read:   verdicts and resolutions since the cursor
    GET  /metrics                         read:   Prometheus text
    GET  /v1/health, /v1/ready, /docs     open:   process up; model and store ready; OpenAPI

Every data route needs a bearer token with its scope (core.intake.tokens); health, readiness and
the docs carry no data and are open, so a load balancer can probe them. Errors are JSON
`{"error": "..."}` a person can act on: 401, 403, 413, 422, 429, 503; a bug is a 500 with a
reference the server log repeats beside the traceback, never a traceback in the response. The
API keeps no state outside the store but a rate counter per token, so it runs as several
processes (`serve --workers N`) or replicas on one store.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.checks import MAX_COMPLAINT_CHARS
from core.errors import UserError
from core.intake.inbox import (
    ComplaintRecord,
    IdempotencyConflict,
    Submission,
    body_digest,
    complaint_record,
    inbox_counts,
    replayed_batch,
    resolve_complaint,
    store_batch,
    stored_answers,
    updates_after,
)
from core.intake.metrics import ApiMetrics
from core.intake.router import LiveRouter, NotReady, default_loader
from core.intake.schemas import ApiSettings, ComplaintBatch, ComplaintIn, received_error
from core.intake.tokens import READ, SUBMIT, ApiToken, authenticate
from core.review.store import StoreBusyError
from core.text import word_spans

if TYPE_CHECKING:
    from core.board.tat import TatTable
    from core.monitor.report import MonitorReport
    from core.review.store import Store

LOG = logging.getLogger(__name__)
API_VERSION = "1"
# How long the monitor's report is reused: the load balancer probes /v1/ready and Prometheus
# scrapes every few seconds, and a report reads the fortnight's complaints.
MONITOR_TTL_S = 30.0


class ApiError(Exception):
    """An answer with a status and one line for the caller."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


@dataclass
class ApiState:
    settings: ApiSettings
    store: Store
    router: LiveRouter
    tat: TatTable
    metrics: ApiMetrics
    limiter: RateLimiter
    monitor: Callable[[], MonitorReport]  # drift and health against the serving model


class RateLimiter:
    """A token bucket per token name: `per_minute` requests a minute, in bursts of as many."""

    def __init__(self, per_minute: int) -> None:
        self._rate = per_minute / 60.0
        self._capacity = float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, name: str) -> float:
        """0 when a request of `name` may go now, else the seconds until it may."""
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(name, (self._capacity, now))
            tokens = min(self._capacity, tokens + (now - at) * self._rate)
            if tokens < 1.0:
                self._buckets[name] = (tokens, now)
                return (1.0 - tokens) / self._rate
            self._buckets[name] = (tokens - 1.0, now)
            return 0.0


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """The API, its store and model opened by its lifespan (never at import)."""
    chosen = settings or ApiSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from core.board.tat import load_tat
        from core.review.store import Store

        store = Store.open(chosen.db_path)
        router = LiveRouter(store, chosen.models_root, model=chosen.model,
                            loader=default_loader(chosen.device, chosen.precision))  # fmt: skip
        monitor = _monitor(store, router)
        app.state.api = ApiState(
            chosen, store, router, load_tat(), ApiMetrics(lambda: inbox_counts(store), monitor),
            RateLimiter(chosen.rate_per_minute), monitor,
        )  # fmt: skip
        try:
            router.current()  # load the model now, not on the first complaint
        except NotReady as exc:
            LOG.warning("the API starts without a model: %s", exc)
        try:
            yield
        finally:
            router.close()
            store.close()

    # The docs page from files shipped with the package, not a CDN: a bank's network (and this
    # project's machines) reach no CDN, and a page that fetches scripts from one shows nothing.
    app = FastAPIOffline(
        redoc_url=None, static_url="/docs-static",
        title="Grievance Lens intake API", version=API_VERSION, lifespan=lifespan,
        description="Complaints in, routing decisions out. Bearer tokens: `python -m core token "
        "create NAME --scopes submit,read`.",
    )  # fmt: skip
    _install_errors(app)
    _install_timing(app, chosen.max_body_bytes)
    _install_routes(app)
    app.add_middleware(BodyCap, cap=chosen.max_body_bytes)
    return app


def _monitor(store: Store, router: LiveRouter) -> Callable[[], MonitorReport]:
    """The monitor's report of this ISO week and the last against the model serving now (or no
    baseline while none serves), reused for MONITOR_TTL_S seconds."""
    from core.intake.monitor import read_monitor
    from core.monitor.report import Baseline, MonitorCache, card_baseline

    cache = MonitorCache(MONITOR_TTL_S)

    def report() -> MonitorReport:
        try:
            serving = router.current()
            baseline = card_baseline(serving.name, serving.digest, serving.loaded.card)
        except NotReady as exc:
            baseline = Baseline(None, "", None, str(exc))
        now = datetime.now(UTC)
        monday = now.date() - timedelta(days=now.weekday() + 7)  # last week's
        since = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
        build = partial(read_monitor, store, baseline, since=since, now=now)
        return cache.get((baseline.digest, since), build)

    return report


def _state(request: Request) -> ApiState:
    return request.app.state.api


def _caller(scope: str) -> Callable[[Request], ApiToken]:
    def check(request: Request) -> ApiToken:
        state = _state(request)
        header = request.headers.get("authorization", "")
        kind, _, secret = header.partition(" ")
        token = authenticate(state.store, secret.strip()) if kind.lower() == "bearer" else None
        if token is None:
            raise ApiError(
                401, "send a valid API token: `Authorization: Bearer glk_...` (an admin creates "
                "one with `python -m core token create`)", {"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
        if scope not in token.scopes:
            raise ApiError(403, f"token {token.name} lacks the {scope!r} scope; ask an admin")
        wait = state.limiter.take(token.name)
        if wait > 0:
            raise ApiError(
                429, f"token {token.name} is over its rate limit; retry in {wait:.1f} s",
                {"Retry-After": str(max(1, round(wait)))},
            )  # fmt: skip
        return token

    return check


COMPLAINT_ID = Path(ge=1, le=2**62, description="the `complaint_id` the API answered with")


def _install_routes(app: FastAPI) -> None:
    submit, read = Depends(_caller(SUBMIT)), Depends(_caller(READ))

    @app.post("/v1/complaints")
    def post_complaints(
        request: Request, batch: ComplaintBatch, token: ApiToken = submit
    ) -> dict[str, Any]:
        """Route and store a batch; idempotent on (source, id) and on `Idempotency-Key`."""
        return _post(_state(request), batch, token, request.headers.get("idempotency-key"))

    @app.get("/v1/complaints/{complaint_id}")
    def get_complaint(
        request: Request, complaint_id: int = COMPLAINT_ID, token: ApiToken = read
    ) -> dict:
        state = _state(request)
        record = complaint_record(state.store, complaint_id, source=token.source, tat=state.tat)
        return _found(record, complaint_id).to_json()

    @app.post("/v1/complaints/{complaint_id}/resolve")
    def resolve(
        request: Request, complaint_id: int = COMPLAINT_ID, token: ApiToken = submit
    ) -> dict:
        outcome = resolve_complaint(_state(request).store, complaint_id, token=token)
        if outcome is None:
            _found(None, complaint_id)
        record, already = outcome
        return {**record.to_json(), "duplicate": already}

    @app.get("/v1/updates")
    def get_updates(
        request: Request,
        after: int = Query(0, ge=0, le=2**62, description="the `next` cursor of the last page"),
        limit: int = Query(500, ge=1, le=1000),
        token: ApiToken = read,
    ) -> dict:
        rows, cursor = updates_after(_state(request).store, source=token.source, after=after,
                                     limit=limit)  # fmt: skip
        return {"updates": [u.to_json() for u in rows], "next": cursor}

    @app.get("/v1/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/ready")
    def ready(request: Request) -> JSONResponse:
        state = _state(request)
        try:
            serving = state.router.current()
        except NotReady as exc:
            return JSONResponse({"ready": False, "error": str(exc)}, status_code=503)
        if state.store.read_only:
            message = "the review store is read-only; the operator makes it writable"
            return JSONResponse({"ready": False, "error": message}, status_code=503)
        # What routes (core.models.serving): an operator sees the runtime and precision here
        body = {"ready": True, "model": serving.name, "routing": serving.loaded.routing,
                "warnings": []}  # fmt: skip
        if state.router.problem:
            body["warnings"].append(state.router.problem)
        # Drift and a surge of complaints that fit no desk warn; the API still routes.
        body["warnings"] += [w.message for w in state.monitor().warnings]
        return JSONResponse(body)

    @app.get("/metrics", response_class=Response)
    def metrics(request: Request, token: ApiToken = read) -> Response:
        text = _state(request).metrics.text()
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


def _found(record: ComplaintRecord | None, complaint_id: int) -> ComplaintRecord:
    if record is None:
        raise ApiError(404, f"no complaint {complaint_id} for this token's source")
    return record


def _post(state: ApiState, batch: ComplaintBatch, token: ApiToken, key: str | None) -> dict:
    settings = state.settings
    items = batch.complaints
    if len(items) > settings.max_batch:
        raise ApiError(413, f"a batch holds at most {settings.max_batch} complaints; got "
                       f"{len(items)}: send it in smaller batches")  # fmt: skip
    _check_key(key)
    _check_unique_ids(items)
    zone = ZoneInfo(state.tat.timezone)
    now = datetime.now(UTC)
    submissions, refused = [], []
    for index, item in enumerate(items):
        problem = _text_problem(item.text)
        if problem:
            refused.append({"id": item.id, "error": problem})
        else:
            submissions.append(_submission(index, item, zone, now))
    digest = body_digest(json.dumps(batch.model_dump(mode="json"), sort_keys=True).encode())
    order = [item.id for item in items]
    try:
        replay = replayed_batch(state.store, token, key, digest)
        if replay is not None:
            return _batch_json(replay)
        known = stored_answers(state.store, token, [s.id for s in submissions])
        fresh = [s for s in submissions if s.id not in known]
        routed: list = []
        model = ("", "")
        route_ms = None
        if fresh:
            started = time.perf_counter()
            serving, routings = state.router.route([s.text for s in fresh])
            route_ms = (time.perf_counter() - started) * 1000
            model = (serving.name, serving.digest)
            routed = list(zip(fresh, routings, strict=True))
        earlier = refused + [a.to_json() for a in known.values()]
        stored = store_batch(
            state.store, token, routed, model=model, tat=state.tat, key=key, body_sha256=digest,
            others=earlier, order=order, route_ms=route_ms,
        ) if routed or key else None  # fmt: skip
    except IdempotencyConflict as exc:
        raise ApiError(422, str(exc)) from exc
    except NotReady as exc:
        raise ApiError(503, str(exc), {"Retry-After": "5"}) from exc
    if isinstance(stored, list):
        return _batch_json(stored)
    answers = {a.id: a.to_json() for a in (stored.answers if stored else [])}
    answers |= {i: a.to_json() for i, a in known.items()} | {r["id"]: r for r in refused}
    for answer in answers.values():
        if "desk" in answer and not answer.get("duplicate"):
            state.metrics.routed.labels(answer["desk"]).inc()
    return _batch_json([answers[i] for i in order])


def _batch_json(results: list[dict]) -> dict:
    refused = sum(1 for r in results if "error" in r)
    return {"results": results, "accepted": len(results) - refused, "refused": refused}


def _check_key(key: str | None) -> None:
    if key is not None and not (1 <= len(key) <= 200 and key.isprintable() and key.isascii()):
        raise ApiError(422, "Idempotency-Key: 1 to 200 printable ASCII characters")


def _check_unique_ids(items: list[ComplaintIn]) -> None:
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.id in first:
            raise ApiError(
                422, f"complaints[{index}].id repeats complaints[{first[item.id]}].id "
                f"({item.id[:60]!r}); every complaint of a batch needs its own id",
            )  # fmt: skip
        first[item.id] = index


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_COMPLAINT_CHARS:
        return (f"text is {len(text):,} characters; a complaint may have at most "
                f"{MAX_COMPLAINT_CHARS:,} (nothing was stored for it)")  # fmt: skip
    if not word_spans(text):
        return "text has no words; send the complaint's text (nothing was stored for it)"
    return None


def _submission(index: int, item: ComplaintIn, zone: ZoneInfo, now: datetime) -> Submission:
    received = item.received_at
    if received is not None:
        received = received if received.tzinfo else received.replace(tzinfo=zone)
        problem = received_error(received, now)
        if problem:
            raise ApiError(422, f"complaints[{index}].received_at {problem}")
    return Submission(item.id, item.text, item.channel or "", item.customer_ref or "", received)


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": exc.message}, exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_message(exc)}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)

    @app.exception_handler(UserError)
    async def user_error(request: Request, exc: UserError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, 422)

    @app.exception_handler(StoreBusyError)
    async def store_busy(request: Request, exc: StoreBusyError) -> JSONResponse:
        # Nothing of the request was stored (its transaction never began): a retry is safe.
        return JSONResponse({"error": str(exc)}, 503, headers={"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        reference = secrets.token_hex(4)
        LOG.error("intake API bug, reference %s", reference, exc_info=exc)
        message = f"internal error (reference {reference}); the server log has the details"
        return JSONResponse({"error": message}, 500)


def _validation_message(exc: RequestValidationError) -> str:
    """The first problem as `where: why` ("complaints[2].text: Field required"), and a count."""
    errors = exc.errors()
    if not errors:
        return "the request is malformed"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'malformed')})"
    where = _location(first.get("loc", ()))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def _location(loc: tuple) -> str:
    parts = [p for p in loc if p not in ("body", "query", "path", "header")]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text[:200] or "body"


def _install_timing(app: FastAPI, cap: int) -> None:
    """Latency per route into the metrics, and the body cap for a stated Content-Length (refused
    before the body is read; a chunked body is capped by BodyCap)."""

    @app.middleware("http")
    async def timed(request: Request, call_next: Callable) -> Response:
        start = time.perf_counter()
        state: ApiState | None = getattr(request.app.state, "api", None)
        length = request.headers.get("content-length", "")
        status = 500  # unless an answer comes back: a bug's 500 is counted too
        try:
            if length.isdigit() and int(length) > cap:
                response: Response = _too_big(cap)
            else:
                response = await call_next(request)
            status = response.status_code
            return response
        finally:
            if state is not None:
                name = getattr(request.scope.get("route"), "path", "unmatched")
                state.metrics.observe(name, status, time.perf_counter() - start)


class BodyCap:
    """ASGI: a request body without a Content-Length (chunked) is read here, up to `cap` bytes,
    before the app sees it; past the cap the answer is 413 and the app never runs. (Raising
    from inside the app's own body reading would surface as FastAPI's 400.)"""

    def __init__(self, app: Any, cap: int) -> None:
        self.app, self.cap = app, cap

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = dict(scope.get("headers") or ()) if scope["type"] == "http" else {}
        if scope["type"] != "http" or b"content-length" in headers:
            await self.app(scope, receive, send)  # a stated length is checked by the middleware
            return
        messages, seen = [], 0
        while True:
            message = await receive()
            messages.append(message)
            seen += len(message.get("body", b""))
            if seen > self.cap:
                await _too_big(self.cap)(scope, receive, send)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _too_big(cap: int) -> JSONResponse:
    size = f"{cap >> 20} MiB" if cap >= 1 << 20 else f"{cap:,} bytes"
    return JSONResponse({"error": f"the body is over {size}; send smaller batches"}, 413)
