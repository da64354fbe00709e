"""The inbox: complaints the bank's systems post to the intake API, each stored once with the
live model's routing answer, in the review store beside the trail (one truth for the API and the
app's pages).

A batch is stored in one write transaction with its triage items (the complaints that go to
people) and one trail event naming the token, so a crash leaves all of it or none of it, and an
answer goes out only after its commit (SQLite WAL, fsync on commit). A complaint is unique by
(source, the caller's id): a retry gets the stored answer with `duplicate: true`, whatever
happened to the first attempt, and the same for a whole batch under an `Idempotency-Key`.

A reviewer's verdict on an inbox complaint is a triage verdict (its item has batch "inbox" and
row = the complaint's id), so it is a correction for retraining like every verdict; the API's
updates feed reads verdicts and resolutions from the trail, whose ids are its cursor.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core.board.tat import TatTable
from core.errors import UserError
from core.intake.tokens import ApiToken
from core.review.chain import insert_chained
from core.review.store import Store, append_event, utc_now

__all__ = [
    "INBOX_BATCH", "Answer", "ComplaintRecord", "IdempotencyConflict", "Routing", "StoredBatch",
    "Submission", "Update", "body_digest", "complaint_record", "inbox_counts", "open_complaints",
    "replayed_batch", "resolve_complaint", "stored_answers", "store_batch", "updates_after",
]  # fmt: skip

INBOX_BATCH = "inbox"  # the triage batch of inbox complaints (row = the complaint's id)
ACCEPTED, RESOLVED, VERDICT = "intake.accepted", "intake.resolved", "triage.decided"
MAX_UPDATES = 1000  # updates per page of the feed


@dataclass(frozen=True)
class Submission:
    """One complaint as the caller sent it (checked by the API's schema)."""

    id: str  # the caller's own identifier
    text: str
    channel: str = ""
    customer_ref: str = ""
    received_at: datetime | None = None  # tz-aware; None: when the API received it


@dataclass(frozen=True)
class Routing:
    """The model's decision for one complaint (the contract columns of `classify`)."""

    desk: str
    confidence: float
    needs_review: bool
    review_reason: str
    unknown_desk_score: float | None
    decided_by: str
    probabilities: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """What the API answers for one stored complaint."""

    id: str
    complaint_id: int
    desk: str
    confidence: float
    needs_review: bool
    review_reason: str
    unknown_desk_score: float | None
    model: str
    due_by: str
    duplicate: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class IdempotencyConflict(UserError):
    """An Idempotency-Key was used before for a different batch."""


@dataclass(frozen=True)
class StoredBatch:
    """The answers of a batch, in the order sent, and how many were new."""

    answers: list[Answer]
    stored: int


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def replayed_batch(
    store: Store, token: ApiToken, key: str | None, body_sha256: str
) -> list[dict] | None:
    """The stored answer of the batch sent under `key` before (each result marked duplicate),
    or None when the key is new (or none was sent); IdempotencyConflict when the key was used
    for another body."""
    if key is None:
        return None
    return _replayed(_key_row(store.query, token.source, key), key, body_sha256)


def stored_answers(store: Store, token: ApiToken, ids: Sequence[str]) -> dict[str, Answer]:
    """The stored answers of the complaints of `ids` already in the inbox, by id (duplicates)."""
    found: dict[str, Answer] = {}
    for start in range(0, len(ids), 500):  # SQLite's bound on parameters
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for row in store.query(
            f"SELECT {_ANSWER_COLUMNS} FROM inbox WHERE source = ? AND external_id IN ({marks})",
            (token.source, *chunk),
        ):
            found[row[0]] = _answer(row, duplicate=True)
    return found


def _key_row(
    query: Callable[[str, Sequence[Any]], list[tuple]], source: str, key: str
) -> tuple | None:
    """The (body digest, answer) kept for `key` of `source`, through `query` (the store's, or a
    transaction's connection)."""
    rows = query(
        "SELECT body_sha256, answer FROM inbox_requests WHERE source = ? AND key = ?",
        (source, key),
    )
    return rows[0] if rows else None


def _replayed(row: tuple | None, key: str, body_sha256: str) -> list[dict] | None:
    if row is None:
        return None
    if row[0] != body_sha256:
        raise IdempotencyConflict(
            f"Idempotency-Key {key[:80]!r} was used for a different batch; send a new key for a "
            "new batch, or the same body to get the stored answer"
        )
    return [{**item, "duplicate": True} for item in json.loads(row[1])]


def store_batch(
    store: Store,
    token: ApiToken,
    items: Sequence[tuple[Submission, Routing]],
    *,
    model: tuple[str, str],
    tat: TatTable,
    key: str | None = None,
    body_sha256: str = "",
    others: Sequence[dict] = (),
    order: Sequence[str] = (),
    route_ms: float | None = None,
) -> list[dict] | StoredBatch:
    """Store the routed `items` of one batch (model = (name, card digest)) with their triage
    items and one trail event, in one transaction; complaints stored meanwhile by another
    request are answered from the store, marked duplicate. With `key`, the whole answer (in the
    caller's `order`, with the `others`: the refused items and those answered before routing) is
    kept for a retry of the same batch, which
    then gets it back (a list) instead of a new record. `route_ms`, how long the model took to
    route the batch, goes into the trail event for the monitor (core.intake.monitor)."""
    now = utc_now()
    with store.transaction() as conn:
        if key is not None:  # the same key may have been answered since replayed_batch read

            def query(sql: str, params: Sequence[Any]) -> list[tuple]:
                return conn.execute(sql, params).fetchall()

            replay = _replayed(_key_row(query, token.source, key), key, body_sha256)
            if replay is not None:
                return replay
        answers, new_ids = [], []
        for submission, routing in items:
            stored = _stored_answer(conn, token.source, submission.id)
            if stored is None:
                stored = _insert(conn, token, submission, routing, model, tat, now)
                new_ids.append(stored.complaint_id)
            answers.append(stored)
        if new_ids:
            details = {"complaints": new_ids, "model": model[0], "source": token.source}
            if route_ms is not None:  # the routing latency, kept where every process reads it
                details["route_ms"] = round(float(route_ms), 3)
            append_event(conn, ACCEPTED, new_ids[0], token.actor, details, now)
        if key is not None:
            _remember(conn, token, key, body_sha256, answers, others, order, now)
    return StoredBatch(answers, len(new_ids))


def _remember(
    conn: sqlite3.Connection,
    token: ApiToken,
    key: str,
    body_sha256: str,
    answers: list[Answer],
    others: Sequence[dict],
    order: Sequence[str],
    now: str,
) -> None:
    by_id = {r["id"]: r for r in others} | {a.id: a.to_json() for a in answers}
    answer = json.dumps([by_id[i] for i in order], allow_nan=False)
    values = {
        "source": token.source, "key": key, "body_sha256": body_sha256, "answer": answer,
        "created_at": now,
    }  # fmt: skip
    insert_chained(conn, "inbox_requests", values)


_ANSWER_COLUMNS = (
    "external_id, id, desk, confidence, needs_review, review_reason, unknown_desk_score, model,"
    " due_by"
)


def _answer(row: tuple, *, duplicate: bool) -> Answer:
    return Answer(
        id=row[0], complaint_id=int(row[1]), desk=row[2], confidence=float(row[3]),
        needs_review=bool(row[4]), review_reason=row[5], unknown_desk_score=row[6],
        model=row[7], due_by=row[8], duplicate=duplicate,
    )  # fmt: skip


def _stored_answer(conn: sqlite3.Connection, source: str, external_id: str) -> Answer | None:
    row = conn.execute(
        f"SELECT {_ANSWER_COLUMNS} FROM inbox WHERE source = ? AND external_id = ?",
        (source, external_id),
    ).fetchone()
    return None if row is None else _answer(row, duplicate=True)


def _insert(
    conn: sqlite3.Connection,
    token: ApiToken,
    submission: Submission,
    routing: Routing,
    model: tuple[str, str],
    tat: TatTable,
    now: str,
) -> Answer:
    received = submission.received_at or datetime.fromisoformat(now)
    due = due_by(received, routing.desk, tat)
    score = routing.unknown_desk_score
    score = None if score is None or not math.isfinite(score) else round(float(score), 6)
    confidence = round(float(routing.confidence), 6)
    values = {
        "source": token.source, "external_id": submission.id, "text": submission.text,
        "channel": submission.channel, "customer_ref": submission.customer_ref,
        "received_at": inbox_time(received), "desk": routing.desk, "confidence": confidence,
        "needs_review": int(routing.needs_review), "review_reason": routing.review_reason,
        "unknown_desk_score": score, "decided_by": routing.decided_by,
        "probabilities": _probabilities_json(routing.probabilities), "model": model[0],
        "model_digest": model[1], "due_by": due, "token": token.name, "created_at": now,
    }  # fmt: skip
    complaint_id = insert_chained(conn, "inbox", values)
    if routing.needs_review:
        item = {
            "batch": INBOX_BATCH, "row": complaint_id, "text": submission.text,
            "predicted_label": routing.desk, "confidence": confidence,
            "probabilities": values["probabilities"], "created_at": now,
            "decided_by": routing.decided_by,
        }  # fmt: skip
        insert_chained(conn, "triage_items", item)
    return Answer(
        submission.id, complaint_id, routing.desk, confidence, routing.needs_review,
        routing.review_reason, score, model[0], due,
    )  # fmt: skip


def due_by(received: datetime, desk: str, tat: TatTable) -> str:
    """When `desk`'s turnaround time runs out for a complaint received at `received` (UTC)."""
    return inbox_time(received + timedelta(hours=tat.hours_for(desk)))


def inbox_time(moment: datetime) -> str:
    """`moment` as the inbox stores times (received_at, due_by): UTC to the second, "...Z",
    so that they compare as text."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _probabilities_json(probabilities: dict[str, float]) -> str:
    rounded = {str(k): round(float(v), 6) for k, v in probabilities.items()}
    return json.dumps(rounded, ensure_ascii=False, sort_keys=True, allow_nan=False)


# ------------------------------------------------------------------------ reading back

# A complaint with its current state: the routing, the reviewer's verdict (if any) and the
# resolution (if any).
_RECORD_COLUMNS = (
    "c.id, c.external_id, c.source, c.channel, c.received_at, c.due_by, c.desk, c.confidence,"
    " c.needs_review, c.review_reason, c.unknown_desk_score, c.model, c.created_at, c.token,"
    " d.final_label, d.status, d.created_at, r.created_at, r.resolved_by, c.text, c.customer_ref,"
    " i.id"
)
_RECORD_JOIN = (
    "inbox AS c LEFT JOIN triage_items AS i ON i.batch = 'inbox' AND i.row = c.id"
    " LEFT JOIN triage_decisions AS d ON d.item_id = i.id"
    " LEFT JOIN inbox_resolutions AS r ON r.complaint_id = c.id"
)


@dataclass(frozen=True)
class ComplaintRecord:
    """One inbox complaint as it stands: routed, reviewed, resolved."""

    complaint_id: int
    id: str  # the caller's id
    source: str
    channel: str
    received_at: str
    due_by: str  # by the current desk's turnaround time
    routed_desk: str
    confidence: float
    needs_review: bool
    review_reason: str
    unknown_desk_score: float | None
    model: str
    created_at: str
    token: str
    reviewed_desk: str | None
    verdict: str | None  # "confirmed" / "corrected"
    reviewed_at: str | None
    resolved_at: str | None
    resolved_by: str | None
    text: str
    customer_ref: str
    triage_item: int | None

    @property
    def desk(self) -> str:
        """The desk it is at now: the reviewer's, else the model's."""
        return self.reviewed_desk or self.routed_desk

    @property
    def state(self) -> str:
        return "resolved" if self.resolved_at else "open"

    def to_json(self) -> dict[str, Any]:
        """The API's record: no complaint text (the caller has it; the API never echoes it)."""
        history = [{"at": self.created_at, "event": "routed", "desk": self.routed_desk,
                    "model": self.model, "needs_review": self.needs_review}]  # fmt: skip
        if self.reviewed_at:
            history.append({"at": self.reviewed_at, "event": self.verdict,
                            "desk": self.reviewed_desk})  # fmt: skip
        if self.resolved_at:
            history.append({"at": self.resolved_at, "event": "resolved"})
        return {
            "complaint_id": self.complaint_id, "id": self.id, "channel": self.channel,
            "received_at": self.received_at, "due_by": self.due_by, "state": self.state,
            "desk": self.desk, "routed_desk": self.routed_desk, "reviewed_desk": self.reviewed_desk,
            "confidence": self.confidence, "needs_review": self.needs_review,
            "review_reason": self.review_reason, "unknown_desk_score": self.unknown_desk_score,
            "model": self.model, "resolved_at": self.resolved_at, "history": history,
        }  # fmt: skip


def _record(row: tuple, tat: TatTable | None) -> ComplaintRecord:
    record = ComplaintRecord(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], float(row[7]), bool(row[8]),
        row[9], row[10], row[11], row[12], row[13], row[14], row[15], row[16], row[17], row[18],
        row[19], row[20], row[21],
    )  # fmt: skip
    if tat is not None and record.reviewed_desk and record.reviewed_desk != record.routed_desk:
        received = datetime.fromisoformat(record.received_at.replace("Z", "+00:00"))
        record = _with(record, due_by=due_by(received, record.reviewed_desk, tat))
    return record


def _with(record: ComplaintRecord, **changes: Any) -> ComplaintRecord:
    return ComplaintRecord(**{**record.__dict__, **changes})


def complaint_record(
    store: Store, complaint_id: int, *, source: str | None, tat: TatTable | None = None
) -> ComplaintRecord | None:
    """Complaint `complaint_id` (None when missing, or of another source than `source`)."""
    rows = store.query(
        f"SELECT {_RECORD_COLUMNS} FROM {_RECORD_JOIN} WHERE c.id = ?"
        " AND (?2 IS NULL OR c.source = ?2)",
        (complaint_id, source),
    )
    return _record(rows[0], tat) if rows else None


def open_complaints(
    store: Store, *, tat: TatTable | None = None, limit: int = 200_000
) -> list[ComplaintRecord]:
    """Every open (unresolved) complaint, oldest received first, at most `limit`."""
    rows = store.query(
        f"SELECT {_RECORD_COLUMNS} FROM {_RECORD_JOIN} WHERE r.id IS NULL"
        " ORDER BY c.received_at, c.id LIMIT ?",
        (limit,),
    )
    return [_record(r, tat) for r in rows]


def resolve_complaint(
    store: Store, complaint_id: int, *, token: ApiToken
) -> tuple[ComplaintRecord, bool] | None:
    """Mark complaint `complaint_id` of the token's source resolved (its clock stops), in one
    transaction with its trail event. Returns (the record, whether it was resolved already: a
    retry is answered, not refused), or None when there is no such complaint for this token."""
    now = utc_now()
    with store.transaction() as conn:
        found = conn.execute(
            "SELECT c.id, r.id FROM inbox AS c LEFT JOIN inbox_resolutions AS r"
            " ON r.complaint_id = c.id WHERE c.id = ? AND c.source = ?",
            (complaint_id, token.source),
        ).fetchone()
        if found is None:
            return None
        already = found[1] is not None
        if not already:
            values = {"complaint_id": complaint_id, "resolved_by": token.name, "created_at": now}
            insert_chained(conn, "inbox_resolutions", values)
            details = {"source": token.source}
            append_event(conn, RESOLVED, complaint_id, token.actor, details, now)
    record = complaint_record(store, complaint_id, source=token.source)
    assert record is not None
    return record, already


@dataclass(frozen=True)
class Update:
    """One change the bank's system pulls back: a verdict or a resolution."""

    cursor: int  # the trail event's id
    kind: str  # "verdict" or "resolved"
    complaint_id: int
    id: str  # the caller's id
    at: str
    desk: str | None  # the desk after a verdict
    status: str | None  # "confirmed" / "corrected"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def updates_after(
    store: Store, *, source: str, after: int, limit: int = MAX_UPDATES
) -> tuple[list[Update], int]:
    """The verdicts and resolutions of `source`'s complaints after trail event `after`, oldest
    first (at most `limit`), and the cursor to ask from next: past the last update, or past
    every event seen when the page is not full (so a quiet source never rescans the trail)."""
    # The trail's head first, then the rows up to it: an event committed in between has a
    # higher id than the head, so the next page finds it (ids grow in commit order).
    head = int(store.query("SELECT coalesce(max(id), 0) FROM trail")[0][0])
    rows = store.query(
        "SELECT t.id, t.action, t.created_at, t.details, c.id, c.external_id FROM trail AS t"
        " LEFT JOIN triage_items AS i ON t.action = 'triage.decided' AND i.id = t.entity_id"
        " JOIN inbox AS c ON c.id = CASE WHEN t.action = 'intake.resolved' THEN t.entity_id"
        "   WHEN i.batch = 'inbox' THEN i.row END"
        " WHERE t.id > ? AND t.id <= ? AND t.action IN ('triage.decided', 'intake.resolved')"
        " AND c.source = ? ORDER BY t.id LIMIT ?",
        (after, head, source, limit),
    )
    updates = [_update(r) for r in rows]
    cursor = updates[-1].cursor if len(updates) == limit else max(int(head), after)
    return updates, cursor


def _update(row: tuple) -> Update:
    details = json.loads(row[3])
    if row[1] == RESOLVED:
        return Update(row[0], "resolved", row[4], row[5], row[2], None, None)
    return Update(
        row[0], "verdict", row[4], row[5], row[2], details.get("final_label"), details.get("status")
    )


def inbox_counts(store: Store) -> dict[str, Any]:
    """What the metrics report from the store (the same for every API process): complaints by
    routed desk, open complaints, the share sent to people, and verdicts still waiting."""
    by_desk = dict(store.query("SELECT desk, count(*) FROM inbox GROUP BY desk ORDER BY desk"))
    total = sum(by_desk.values())
    (flagged,) = store.query("SELECT count(*) FROM inbox WHERE needs_review = 1")[0]
    (resolved,) = store.query("SELECT count(*) FROM inbox_resolutions")[0]
    (waiting,) = store.query(
        "SELECT count(*) FROM triage_items AS i LEFT JOIN triage_decisions AS d"
        " ON d.item_id = i.id WHERE i.batch = 'inbox' AND d.id IS NULL"
    )[0]
    return {
        "by_desk": {str(k): int(v) for k, v in by_desk.items()},
        "complaints": total,
        "open": total - int(resolved),
        "review_share": (int(flagged) / total) if total else 0.0,
        "waiting_review": int(waiting),
    }
