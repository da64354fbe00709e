"""The review store: review decisions, an append-only audit trail, the triage queue, run history.

One embedded SQLite file (WAL mode, schema versioned with PRAGMA user_version). Every write is one
`BEGIN IMMEDIATE ... COMMIT` transaction that also appends a trail event, so a decision confirmed
on screen survives a crash or restart and concurrent sessions never lose each other's writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # only annotations: the store itself needs nothing beyond the stdlib
    import pandas as pd

    from core.data.dataset import Dataset

from core.checks import check_non_empty_str
from core.paths import data_dir

DB_NAME = "lens.db"
DECISIONS = ("keep", "relabel", "escalate")
TRIAGE_STATUSES = ("open", "confirmed", "corrected")
# Seconds a writer waits for another connection's write lock before giving up. Writes are tiny
# (one row and one trail event), so even many sessions clear the lock within milliseconds.
BUSY_TIMEOUT_S = 30.0

Decision = Literal["keep", "relabel", "escalate"]
TriageStatus = Literal["open", "confirmed", "corrected"]

# Each entry moves the schema from version i to i + 1; never edit a shipped entry, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        row INTEGER NOT NULL CHECK (row >= 1),
        text TEXT NOT NULL,
        given_label TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('keep', 'relabel', 'escalate')),
        new_label TEXT,
        reviewer TEXT NOT NULL CHECK (length(trim(reviewer)) > 0),
        note TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        CHECK ((decision = 'relabel') = (new_label IS NOT NULL))
    );
    CREATE INDEX decisions_by_row ON decisions (fingerprint, row, id);

    CREATE TABLE trail (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        action TEXT NOT NULL,
        entity_id INTEGER,
        actor TEXT,
        details TEXT NOT NULL
    );
    CREATE TRIGGER trail_no_update BEFORE UPDATE ON trail
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: rows cannot be updated'); END;
    CREATE TRIGGER trail_no_delete BEFORE DELETE ON trail
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: rows cannot be deleted'); END;

    CREATE TABLE triage (
        id INTEGER PRIMARY KEY,
        batch TEXT NOT NULL,
        row INTEGER,
        text TEXT NOT NULL,
        predicted_label TEXT NOT NULL,
        confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
        probabilities TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'open'
            CHECK (status IN ('open', 'confirmed', 'corrected')),
        reviewer TEXT,
        final_label TEXT,
        created_at TEXT NOT NULL,
        decided_at TEXT,
        CHECK ((status = 'open') = (final_label IS NULL))
    );
    CREATE INDEX triage_by_status ON triage (status, batch, id);

    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        parameters TEXT NOT NULL,
        metrics TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX runs_by_kind ON runs (kind, id);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class ReviewDecision:
    """A reviewer's verdict on one row of a data set (identified by its fingerprint).

    `new_label` is required for "relabel" and must be None otherwise. `id` and `created_at` are
    filled in by the store.
    """

    fingerprint: str
    row: int  # 1-based spreadsheet row, as in Dataset.rows
    text: str
    given_label: str
    decision: Decision
    reviewer: str
    new_label: str | None = None
    note: str = ""
    id: int | None = None
    created_at: str | None = None

    def __post_init__(self) -> None:
        check_non_empty_str("fingerprint", self.fingerprint)
        if isinstance(self.row, bool) or not isinstance(self.row, int) or self.row < 1:
            raise ValueError(f"row must be a 1-based spreadsheet row number, got {self.row!r}")
        if not isinstance(self.text, str):
            raise ValueError(f"text must be a string, got {type(self.text).__name__}")
        check_non_empty_str("given_label", self.given_label)
        if self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {self.decision!r}")
        check_non_empty_str("reviewer", self.reviewer)
        self._check_new_label()
        if not isinstance(self.note, str):
            raise ValueError(f"note must be a string, got {type(self.note).__name__}")

    def _check_new_label(self) -> None:
        if self.decision == "relabel":
            if not isinstance(self.new_label, str) or not self.new_label.strip():
                raise ValueError("a relabel decision needs new_label: the label to change to")
        elif self.new_label is not None:
            raise ValueError(f"new_label must be None for a {self.decision!r} decision")


@dataclass(frozen=True)
class TriageItem:
    """A prediction the model was unsure about, waiting for (or given) a reviewer's verdict."""

    batch: str  # the data set fingerprint or classify batch id the prediction came from
    text: str
    predicted_label: str
    confidence: float
    probabilities: dict[str, float] = field(default_factory=dict)
    row: int | None = None  # 1-based spreadsheet row in the classified file, when known
    status: TriageStatus = "open"
    reviewer: str | None = None
    final_label: str | None = None
    id: int | None = None
    created_at: str | None = None
    decided_at: str | None = None

    def __post_init__(self) -> None:
        check_non_empty_str("batch", self.batch)
        if not isinstance(self.text, str):
            raise ValueError(f"text must be a string, got {type(self.text).__name__}")
        check_non_empty_str("predicted_label", self.predicted_label)
        ok = isinstance(self.confidence, int | float) and not isinstance(self.confidence, bool)
        if not ok or not math.isfinite(self.confidence) or not 0 <= self.confidence <= 1:
            raise ValueError(f"confidence must be a number in [0, 1], got {self.confidence!r}")
        if self.status not in TRIAGE_STATUSES:
            raise ValueError(f"status must be one of {TRIAGE_STATUSES}, got {self.status!r}")
        _check_probabilities(self.probabilities)


def _check_probabilities(probabilities: object) -> None:
    if not isinstance(probabilities, Mapping):
        raise ValueError("probabilities must be a dict {label: probability}")
    for label, p in probabilities.items():
        bad = not isinstance(p, int | float) or isinstance(p, bool) or not math.isfinite(p)
        if not isinstance(label, str) or bad:
            raise ValueError(f"probabilities must map str to a finite number, got {label!r}: {p!r}")


@dataclass(frozen=True)
class RunRecord:
    """One train / audit / classify run: what it was asked to do and what it measured."""

    kind: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    id: int | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class TrailEvent:
    """One entry of the append-only audit trail."""

    id: int
    created_at: str
    action: str  # e.g. "decision.recorded", "triage.decided"
    entity_id: int | None
    actor: str | None
    details: dict[str, Any]


def default_db_path() -> Path:
    """`$GRIEVANCE_LENS_DATA_DIR/lens.db` when that variable is set, else `<repo>/data/lens.db`."""
    return data_dir() / DB_NAME


class Store:
    """SQLite-backed review store; open with `Store.open(path)` and use as a context manager.

    One Store may be shared between threads (calls are serialised by a lock); separate Stores,
    threads or processes on the same file are kept consistent by SQLite's locking.
    """

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._conn = connection
        self._lock = threading.RLock()
        self.path = path

    @classmethod
    def open(cls, path: str | Path | None = None) -> Store:
        """Open (creating the file, its folders and the schema if needed) the store at `path`.

        `path` defaults to `default_db_path()`.
        """
        path = Path(path) if path is not None else default_db_path()
        if path.is_dir():
            raise ValueError(f"{path} is a folder; give the path of a database file inside it")
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            _configure(conn)
            _migrate(conn, path)
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the file (PRAGMA user_version)."""
        return int(self._query("PRAGMA user_version")[0][0])

    def integrity_check(self) -> str:
        """SQLite's PRAGMA integrity_check verdict: "ok" when the file is sound."""
        return "; ".join(str(r[0]) for r in self._query("PRAGMA integrity_check"))

    def record_decision(self, decision: ReviewDecision) -> int:
        """Store `decision` (one committed transaction with its trail event) and return its id."""
        if not isinstance(decision, ReviewDecision):
            raise ValueError(f"expected a ReviewDecision, got {type(decision).__name__}")
        now = _utc_now()
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO decisions (fingerprint, row, text, given_label, decision, new_label,"
                " reviewer, note, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    decision.fingerprint,
                    decision.row,
                    decision.text,
                    decision.given_label,
                    decision.decision,
                    decision.new_label,
                    decision.reviewer,
                    decision.note,
                    now,
                ),
            )
            decision_id = int(cursor.lastrowid)
            details = _jsonable(decision, id=decision_id, created_at=now)
            _append_event(conn, "decision.recorded", decision_id, decision.reviewer, details, now)
        return decision_id

    def decisions(self, fingerprint: str) -> list[ReviewDecision]:
        """Every decision recorded for the data set `fingerprint`, oldest first (the history)."""
        check_non_empty_str("fingerprint", fingerprint)
        rows = self._query(
            "SELECT fingerprint, row, text, given_label, decision, reviewer, new_label, note, id,"
            " created_at FROM decisions WHERE fingerprint = ? ORDER BY id",
            (fingerprint,),
        )
        return [ReviewDecision(*r) for r in rows]

    def latest_decisions(self, fingerprint: str) -> dict[int, ReviewDecision]:
        """The current decision per row of data set `fingerprint`: the latest one wins."""
        return {d.row: d for d in self.decisions(fingerprint)}

    def trail(self, *, limit: int = 100) -> list[TrailEvent]:
        """The latest `limit` audit trail events, newest first."""
        _check_limit(limit)
        rows = self._query(
            "SELECT id, created_at, action, entity_id, actor, details FROM trail"
            " ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [TrailEvent(*r[:5], details=json.loads(r[5])) for r in rows]

    def enqueue_triage(
        self, items: Sequence[TriageItem], *, skip_queued: bool = False
    ) -> list[int]:
        """Add open triage items (all in one transaction) and return their ids, in order.

        With `skip_queued`, an item whose (batch, row, text) is already in the queue (open or
        decided) is skipped and has no id in the result: classifying the same file twice
        queues its rows once.
        """
        items = list(items)
        bad = next((i for i in items if not isinstance(i, TriageItem)), None)
        if bad is not None:
            raise ValueError(f"expected TriageItem objects, got {type(bad).__name__}")
        if any(i.status != "open" or i.final_label is not None for i in items):
            raise ValueError("enqueue only open items (status 'open', no final_label)")
        now = _utc_now()
        with self._transaction() as conn:
            if skip_queued:
                items = [item for item in items if not _already_queued(conn, item)]
            return [_insert_triage(conn, item, now) for item in items]

    def triage_items(
        self, *, batch: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[TriageItem]:
        """Triage items, optionally of one `batch` and/or `status`, oldest first."""
        if status is not None and status not in TRIAGE_STATUSES:
            raise ValueError(f"status must be one of {TRIAGE_STATUSES} or None, got {status!r}")
        _check_limit(limit)
        rows = self._query(
            "SELECT batch, text, predicted_label, confidence, probabilities, row, status,"
            " reviewer, final_label, id, created_at, decided_at FROM triage"
            " WHERE (?1 IS NULL OR batch = ?1) AND (?2 IS NULL OR status = ?2)"
            " ORDER BY id LIMIT ?3",
            (batch, status, limit),
        )
        return [_triage_from_row(r) for r in rows]

    def open_triage(self, *, batch: str | None = None, limit: int = 1000) -> list[TriageItem]:
        """The triage items still waiting for a reviewer, oldest first."""
        return self.triage_items(batch=batch, status="open", limit=limit)

    def decide_triage(self, item_id: int, *, final_label: str, reviewer: str) -> TriageItem:
        """Confirm (final label = predicted) or correct an open triage item; return it updated.

        Raises ValueError when the item does not exist or was already decided (by anyone).
        """
        check_non_empty_str("final_label", final_label)
        check_non_empty_str("reviewer", reviewer)
        now = _utc_now()
        with self._transaction() as conn:
            predicted = _open_triage_label(conn, item_id)
            status = "confirmed" if final_label == predicted else "corrected"
            conn.execute(
                "UPDATE triage SET status = ?, final_label = ?, reviewer = ?, decided_at = ?"
                " WHERE id = ?",
                (status, final_label, reviewer, now, item_id),
            )
            details = {"status": status, "predicted_label": predicted, "final_label": final_label}
            _append_event(conn, "triage.decided", item_id, reviewer, details, now)
            row = conn.execute(_TRIAGE_BY_ID, (item_id,)).fetchone()
        return _triage_from_row(row)

    def record_run(
        self, kind: str, *, parameters: Mapping[str, Any], metrics: Mapping[str, Any]
    ) -> int:
        """Store one run ("train", "audit", "classify", ...) with its parameters and metrics."""
        check_non_empty_str("kind", kind)
        params_json, metrics_json = _to_json(parameters, "parameters"), _to_json(metrics, "metrics")
        now = _utc_now()
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (kind, parameters, metrics, created_at) VALUES (?, ?, ?, ?)",
                (kind, params_json, metrics_json, now),
            )
            run_id = int(cursor.lastrowid)
            _append_event(conn, "run.recorded", run_id, None, {"kind": kind}, now)
        return run_id

    def runs(self, *, kind: str | None = None, limit: int = 100) -> list[RunRecord]:
        """The latest `limit` runs, optionally of one `kind`, newest first."""
        _check_limit(limit)
        rows = self._query(
            "SELECT kind, parameters, metrics, id, created_at FROM runs"
            " WHERE (?1 IS NULL OR kind = ?1) ORDER BY id DESC LIMIT ?2",
            (kind, limit),
        )
        return [RunRecord(r[0], json.loads(r[1]), json.loads(r[2]), r[3], r[4]) for r in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so a
        # transaction never fails half-way with SQLITE_BUSY on its first write.
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()


_TRIAGE_BY_ID = (
    "SELECT batch, text, predicted_label, confidence, probabilities, row, status, reviewer,"
    " final_label, id, created_at, decided_at FROM triage WHERE id = ?"
)


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise ValueError(f"could not switch the database to WAL mode (got {mode!r})")
    # FULL: WAL commits are fsynced, so a confirmed decision survives a power cut, not only a
    # crash of the app (NORMAL may lose the last commits on power loss). Writes are rare.
    conn.execute("PRAGMA synchronous = FULL")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the schema to SCHEMA_VERSION inside one write transaction (safe with racing opens)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"{path} has schema version {version}, newer than this code's {SCHEMA_VERSION};"
                " upgrade Grievance Lens or use another database path"
            )
        for index in range(version, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[index]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {index + 1}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers contain inner semicolons)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending.strip()
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement in a migration: {pending.strip()[:60]!r}")


def _append_event(
    conn: sqlite3.Connection,
    action: str,
    entity_id: int | None,
    actor: str | None,
    details: Mapping[str, Any],
    now: str,
) -> None:
    conn.execute(
        "INSERT INTO trail (created_at, action, entity_id, actor, details) VALUES (?, ?, ?, ?, ?)",
        (now, action, entity_id, actor, json.dumps(details, ensure_ascii=False, sort_keys=True)),
    )


def _jsonable(record: object, **extra: Any) -> dict[str, Any]:
    return {**asdict(record), **extra}


def _to_json(value: Mapping[str, Any], name: str) -> str:
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict, got {type(value).__name__}")
    try:
        return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be JSON-serialisable with finite numbers ({err})") from err


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")


def _insert_triage(conn: sqlite3.Connection, item: TriageItem, now: str) -> int:
    cursor = conn.execute(
        "INSERT INTO triage (batch, row, text, predicted_label, confidence, probabilities,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            item.batch,
            item.row,
            item.text,
            item.predicted_label,
            float(item.confidence),
            _to_json(item.probabilities, "probabilities"),
            now,
        ),
    )
    item_id = int(cursor.lastrowid)
    details = {"batch": item.batch, "predicted_label": item.predicted_label, "row": item.row}
    _append_event(conn, "triage.enqueued", item_id, None, details, now)
    return item_id


def _already_queued(conn: sqlite3.Connection, item: TriageItem) -> bool:
    found = conn.execute(
        "SELECT 1 FROM triage WHERE batch = ? AND row IS ? AND text = ? LIMIT 1",
        (item.batch, item.row, item.text),
    )
    return found.fetchone() is not None


def _open_triage_label(conn: sqlite3.Connection, item_id: object) -> str:
    """The predicted label of open triage item `item_id`; ValueError if missing or decided."""
    if isinstance(item_id, bool) or not isinstance(item_id, int):
        raise ValueError(f"item_id must be an integer triage id, got {item_id!r}")
    row = conn.execute("SELECT predicted_label, status FROM triage WHERE id = ?", (item_id,))
    found = row.fetchone()
    if found is None:
        raise ValueError(f"no triage item with id {item_id}; reload the queue")
    if found[1] != "open":
        raise ValueError(f"triage item {item_id} was already {found[1]}; reload the queue")
    return str(found[0])


def _triage_from_row(r: tuple) -> TriageItem:
    return TriageItem(
        batch=r[0],
        text=r[1],
        predicted_label=r[2],
        confidence=r[3],
        probabilities=json.loads(r[4]),
        row=r[5],
        status=r[6],
        reviewer=r[7],
        final_label=r[8],
        id=r[9],
        created_at=r[10],
        decided_at=r[11],
    )


def apply_decisions(
    dataset: Dataset, decisions: Mapping[int, ReviewDecision] | Iterable[ReviewDecision]
) -> pd.DataFrame:
    """The corrected data set: `dataset.to_frame()` with relabels applied, ready for export.

    `decisions` are those of this data set (its fingerprint); when a row has several, the last
    one given wins (pass `Store.latest_decisions(...)` or `Store.decisions(...)`). Adds
    `original_label` (the label before review) and `review` ("relabelled from X", "kept",
    "escalated", or "" for rows nobody reviewed) after the `label` column. Export the frame with
    core.export, which neutralises formula-looking cells.
    """
    latest = _latest_by_row(dataset, decisions)
    frame = dataset.to_frame()
    clash = {c: f"{c}_original" for c in ("original_label", "review") if c in frame.columns}
    frame = frame.rename(columns=clash)
    original = frame["label"].tolist()
    pairs = list(zip(dataset.rows, original, strict=True))
    new_labels = [_new_label(latest.get(r), old) for r, old in pairs]
    reviews = [_review_note(latest.get(r), old) for r, old in pairs]
    position = frame.columns.get_loc("label")
    frame["label"] = new_labels
    frame.insert(position + 1, "original_label", original)
    frame.insert(position + 2, "review", reviews)
    return frame


def _latest_by_row(
    dataset: Dataset, decisions: Mapping[int, ReviewDecision] | Iterable[ReviewDecision]
) -> dict[int, ReviewDecision]:
    """Row -> last decision, after checking each belongs to `dataset` and matches its label."""
    items = decisions.values() if isinstance(decisions, Mapping) else decisions
    label_of = dict(zip(dataset.rows, dataset.labels, strict=True))
    latest: dict[int, ReviewDecision] = {}
    for decision in items:
        if not isinstance(decision, ReviewDecision):
            raise ValueError(f"expected ReviewDecision objects, got {type(decision).__name__}")
        _check_belongs(decision, dataset.fingerprint, label_of)
        latest[decision.row] = decision
    return latest


def _check_belongs(decision: ReviewDecision, fingerprint: str, label_of: dict[int, str]) -> None:
    if decision.fingerprint != fingerprint:
        raise ValueError(
            f"decision {decision.id} is for data set {decision.fingerprint[:12]}…, not this one "
            f"({fingerprint[:12]}…); load the decisions of this data set's fingerprint"
        )
    if decision.row not in label_of:
        raise ValueError(f"decision {decision.id} is for row {decision.row}, not in this data set")
    if label_of[decision.row] != decision.given_label:
        raise ValueError(
            f"row {decision.row} is labelled {label_of[decision.row]!r} but decision "
            f"{decision.id} was made on label {decision.given_label!r}; review the row again"
        )


def _new_label(decision: ReviewDecision | None, old: str) -> str:
    return decision.new_label if decision is not None and decision.decision == "relabel" else old


def _review_note(decision: ReviewDecision | None, old: str) -> str:
    if decision is None:
        return ""
    if decision.decision == "relabel":
        return f"relabelled from {old}" if decision.new_label != old else "kept"
    return {"keep": "kept", "escalate": "escalated"}[decision.decision]


# ---------------------------------------------------------------------------------- triage queue


class RoutedPrediction(Protocol):
    """What the triage queue needs of a prediction (core.models.classifier.Prediction fits)."""

    label: str
    confidence: float
    probabilities: Mapping[str, float]


def triage_batch_id(name: str, texts: Sequence[str]) -> str:
    """A batch id for a classified file: its name and a digest of its texts.

    The same file classified again gets the same id, so `enqueue_uncertain` queues it once.
    """
    check_non_empty_str("name", name)
    digest = hashlib.sha256()
    for text in texts:
        digest.update(json.dumps(text, ensure_ascii=False).encode("utf-8") + b"\n")
    return f"{name.strip()} · {digest.hexdigest()[:12]}"


def enqueue_uncertain(
    store: Store,
    texts: Sequence[str],
    predictions: Sequence[RoutedPrediction],
    *,
    threshold: float,
    batch: str,
    rows: Sequence[int] | None = None,
) -> list[int]:
    """Queue for review the predictions whose confidence is below `threshold`; return new ids.

    Parameters
    ----------
    store : the review store.
    texts : (n,) the classified texts, in the order of `predictions`.
    predictions : (n,) objects with `label`, `confidence` and `probabilities`
        (e.g. core.models.classifier.Prediction from `predict_labels`).
    threshold : review threshold in [0, 1]: confidence below it goes to the queue.
    batch : where the predictions came from, e.g. `triage_batch_id(file name, texts)`.
    rows : (n,) 1-based spreadsheet rows of the texts in their file, when known.

    Everything is written in one transaction; a (batch, row, text) already queued is skipped.
    """
    texts, predictions = list(texts), list(predictions)
    rows = [None] * len(texts) if rows is None else list(rows)
    if not len(texts) == len(predictions) == len(rows):
        raise ValueError(
            f"texts ({len(texts)}), predictions ({len(predictions)}) and rows ({len(rows)}) "
            "must be equally long: one prediction per classified text"
        )
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not ok or not math.isfinite(threshold) or not 0 <= threshold <= 1:
        raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
    items = [
        _triage_item(batch, text, prediction, row)
        for text, prediction, row in zip(texts, predictions, rows, strict=True)
        if prediction.confidence < threshold
    ]
    return store.enqueue_triage(items, skip_queued=True)


def _triage_item(
    batch: str, text: str, prediction: RoutedPrediction, row: int | None
) -> TriageItem:
    return TriageItem(
        batch=batch,
        text=text,
        predicted_label=str(prediction.label),
        confidence=float(prediction.confidence),
        probabilities={str(k): float(v) for k, v in prediction.probabilities.items()},
        row=None if row is None else int(row),
    )


def triage_training_rows(
    items: Iterable[TriageItem], *, include_confirmed: bool = True
) -> pd.DataFrame:
    """Reviewed triage items as labelled training rows, oldest first.

    Columns `text` and `label` (the reviewer's final label), so the file loads on the Data page
    as it is, then `source` (e.g. "triage #12, corrected from Other"), `batch` and `row`.
    Open items are left out; confirmed ones too when `include_confirmed` is False.
    """
    import pandas as pd  # only here: the store itself needs nothing beyond the stdlib

    wanted = ("confirmed", "corrected") if include_confirmed else ("corrected",)
    chosen = [item for item in items if item.status in wanted]
    return pd.DataFrame(
        {
            "text": [item.text for item in chosen],
            "label": [item.final_label for item in chosen],
            "source": [_triage_source(item) for item in chosen],
            "batch": [item.batch for item in chosen],
            "row": pd.array([item.row for item in chosen], dtype="Int64"),
        }
    )


def _triage_source(item: TriageItem) -> str:
    if item.status == "corrected":
        return f"triage #{item.id}, corrected from {item.predicted_label}"
    return f"triage #{item.id}, confirmed"


def with_training_rows(dataset: Dataset, extra_rows: pd.DataFrame) -> pd.DataFrame:
    """`dataset`'s text and label (and other columns) followed by `extra_rows` (text, label, ...).

    A `source` column says where each row came from ("data set row N" or the extra row's own
    source), so the combined file can be loaded on the Data page to retrain with both.
    """
    import pandas as pd

    if not {"text", "label"} <= set(extra_rows.columns):
        raise ValueError("extra_rows needs 'text' and 'label' columns (see triage_training_rows)")
    frame = dataset.to_frame()
    base = frame.drop(columns=["row"]).assign(source=[f"data set row {r}" for r in dataset.rows])
    added = extra_rows.drop(columns=["batch", "row"], errors="ignore")
    return pd.concat([base, added], ignore_index=True)
