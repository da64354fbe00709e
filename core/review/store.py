"""The review store: one embedded SQLite file of review decisions, an audit trail, the triage queue
and run history, every table append-only by trigger and hash-chained (core.review.chain). Every
write is one `BEGIN IMMEDIATE ... COMMIT` transaction by an actor whose role core checks, and it
appends a trail event naming that actor, so a decision confirmed on screen survives a crash or
restart, concurrent sessions never lose each other's writes, and no event is anonymous.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from core.access import Actor, Permission
from core.checks import check_non_empty_str
from core.errors import UserError
from core.paths import data_dir
from core.review.chain import ChainReport, insert_chained, verify_chains
from core.review.limits import TRIAGE_PER_HOUR_ENV, TriageLimits
from core.review.records import (
    OTHER_REVIEWER,
    TRIAGE_STATUSES,
    ReviewDecision,
    RunRecord,
    TrailEvent,
    TriageItem,
)
from core.review.schema import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    StoreError,
    configure_connection,
    migrate_schema,
    verify_schema,
)

__all__ = [
    "DB_NAME", "PUBLIC_ACTIONS", "BrokenChainError", "Store", "StoreBusyError", "StoreError",
    "append_event", "default_db_path", "utc_now",
]  # fmt: skip

DB_NAME = "lens.db"
# Trail events that record the team's shared state; anyone may read them (Store.events).
PUBLIC_ACTIONS = frozenset(
    {
        "dataset.saved",
        "dataset.retired",
        "model.promoted",
        "retrain.queued",
        "comparison.run",
        "model.saved",
        "model.renamed",
        "model.deleted",
    }
)
# Who a decision's reviewer is shown as to someone who may not see other people's records.


class BrokenChainError(StoreError):
    """The store's hash chain is broken: a row was changed outside Grievance Lens. `report` says
    where (the first broken link) and holds every table's chain head."""

    def __init__(self, path: Path, report: ChainReport) -> None:
        assert report.broken is not None
        super().__init__(
            f"{path} failed its tamper check: the hash chain breaks at "
            f"{report.broken.describe()} (changed outside Grievance Lens); restore a backup, and "
            "see `python -m core verify-store`"
        )
        self.report = report


class StoreBusyError(StoreError):
    """Another process held the store's lock for longer than the busy timeout. The file is fine:
    the same action can be tried again (nothing was written). Not an unreadable store, whose
    advice (move the file aside) would lose the trail."""

    def __init__(self, path: Path, exc: sqlite3.Error) -> None:
        super().__init__(
            f"the review store {path} is busy: another process holds it ({exc}); try again in a "
            "moment"
        )


def _busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` is SQLite's SQLITE_BUSY ("database is locked"): another connection holds
    the lock. Errors raised without a code (not from SQLite itself) go by their message."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "database is locked" in str(exc)
    return code & 0xFF == sqlite3.SQLITE_BUSY


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def default_db_path() -> Path:
    """`$GRIEVANCE_LENS_DATA_DIR/lens.db` when that variable is set, else `<repo>/data/lens.db`."""
    return data_dir() / DB_NAME


class Store:
    """SQLite-backed review store; open with `Store.open(path)` and use as a context manager.

    One Store may be shared between threads (calls are serialised by a lock); separate Stores,
    threads or processes on the same file are kept consistent by SQLite's locking.
    """

    def __init__(
        self, connection: sqlite3.Connection, path: Path, *, read_only: bool = False
    ) -> None:
        self._conn = connection
        self._lock = threading.RLock()
        self.path = path
        self.read_only = read_only  # opened with mode=ro: reads work, every write is refused

    @classmethod
    def open(cls, path: str | Path | None = None, *, read_only: bool | None = None) -> Store:
        """Open (creating the file, its folders and the schema if needed) the store at `path`.

        `path` defaults to `default_db_path()`. The schema and its append-only triggers are
        verified first: a tampered, corrupt or unreadable file raises StoreError (one line), and a
        file another process holds for longer than the busy timeout raises StoreBusyError.
        `read_only` defaults to whether the file or its folder is not writable; a read-only store
        is opened with SQLite's mode=ro (no WAL switch, no migration) and refuses writes.
        """
        path = Path(path) if path is not None else default_db_path()
        if path.is_dir():
            raise UserError(f"{path} is a folder; give the path of a database file inside it")
        if read_only is None:
            read_only = path.exists() and not (_writable(path) and _writable(path.parent))
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = _connect(path, read_only=read_only)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the review store {path} ({exc})") from exc
        try:
            _prepare(conn, path, read_only=read_only)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _busy(exc):
                raise StoreBusyError(path, exc) from exc
            raise StoreError(
                f"{path} is not a readable review store ({exc}); move it aside to start a new "
                "one, or restore a backup"
            ) from exc
        except BaseException:
            conn.close()
            raise
        store = cls(conn, path, read_only=read_only)
        report = store.verify_chains()
        if not report.intact:
            store.close()
            raise BrokenChainError(path, report)
        return store

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

    def verify_chains(self) -> ChainReport:
        """Recompute every table's hash chain (one read transaction, so a consistent snapshot)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                return verify_chains(self._conn)
            finally:
                self._conn.execute("COMMIT")

    def record_decision(self, decision: ReviewDecision, *, actor: Actor) -> int:
        """Store `decision` (one committed transaction with its trail event) and return its id.

        `actor` needs DECIDE (reviewer). A signed-in actor decides under their own e-mail:
        `decision.reviewer` must be it (the trail event names it too).
        """
        actor.require(Permission.DECIDE)
        if not isinstance(decision, ReviewDecision):
            raise TypeError(f"expected a ReviewDecision, got {type(decision).__name__}")
        _check_reviewer(actor, decision.reviewer)
        now = utc_now()
        with self._transaction() as conn:
            decision_id = insert_chained(conn, "decisions", _decision_values(decision, now))
            details = _jsonable(decision, id=decision_id, created_at=now)
            append_event(conn, "decision.recorded", decision_id, decision.reviewer, details, now)
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

    def decision_history(self, fingerprint: str, *, actor: Actor) -> list[ReviewDecision]:
        """`decisions(fingerprint)` as `actor` may see them, by the trail's rule: with
        SEE_ALL_TRAIL (admin) all of them in full, else other reviewers' decisions without their
        name and note (the verdicts themselves stay: they are what the data set becomes)."""
        actor.require(Permission.READ)
        mine = _own_records_only(actor)
        hidden = {"reviewer": OTHER_REVIEWER, "note": ""}
        return [
            d if mine is None or d.reviewer == mine else replace(d, **hidden)
            for d in self.decisions(fingerprint)
        ]

    def trail(self, *, actor: Actor, limit: int = 100) -> list[TrailEvent]:
        """The latest `limit` audit trail events `actor` may see, newest first: everyone's with
        SEE_ALL_TRAIL (admin), else only the events the actor's own name is on."""
        actor.require(Permission.READ)
        _check_limit(limit)
        mine = _own_records_only(actor)
        rows = self._query(
            "SELECT id, created_at, action, entity_id, actor, details FROM trail"
            " WHERE (?1 IS NULL OR actor = ?1) ORDER BY id DESC LIMIT ?2",
            (mine, limit),
        )
        return [TrailEvent(*r[:5], details=json.loads(r[5])) for r in rows]

    def record_event(
        self,
        action: str,
        details: Mapping[str, Any],
        *,
        actor: Actor,
        permission: Permission,
        entity_id: int | None = None,
    ) -> int:
        """Append one trail event for a shared change made outside the store's own tables (a
        data set saved or retired, a model promoted, a retraining queued) and return its id.
        `actor` needs `permission`; the event names `actor.user` and is chained like every row.
        `action` must be one of PUBLIC_ACTIONS (everyone may read those events back)."""
        actor.require(permission)
        if action not in PUBLIC_ACTIONS:
            raise ValueError(f"unknown public trail action {action!r}; add it to PUBLIC_ACTIONS")
        now = utc_now()
        with self._transaction() as conn:
            return append_event(conn, action, entity_id, actor.user, dict(details), now)

    def events(self, action: str, *, limit: int = 100) -> list[TrailEvent]:
        """The latest `limit` trail events of one PUBLIC_ACTIONS `action`, newest first, for
        anyone: these record the team's shared state (which model is live, which data sets are
        retired), so every role may read them in full."""
        if action not in PUBLIC_ACTIONS:
            raise ValueError(f"{action!r} is not a public trail action")
        _check_limit(limit)
        rows = self._query(
            "SELECT id, created_at, action, entity_id, actor, details FROM trail"
            " WHERE action = ? ORDER BY id DESC LIMIT ?",
            (action, limit),
        )
        return [TrailEvent(*r[:5], details=json.loads(r[5])) for r in rows]

    def enqueue_triage(
        self,
        items: Sequence[TriageItem],
        *,
        actor: Actor,
        skip_queued: bool = False,
        limits: TriageLimits | None = None,
    ) -> list[int]:
        """Add open triage items (all in one transaction) and return their ids, in order.

        `actor` needs RUN_JOBS (reviewer: queuing is part of classifying a file) and is named on
        each item's trail event. One actor queues at most `limits.max_items_per_hour` items in
        any hour (default: `TriageLimits.from_env()`); past it nothing is queued (UserError).
        With `skip_queued`, an item whose (batch, row, text) is already in the queue (open or
        decided) is skipped and has no id in the result: classifying the same file twice
        queues its rows once.
        """
        actor.require(Permission.RUN_JOBS)
        limits = TriageLimits.from_env() if limits is None else limits
        items = list(items)
        bad = next((i for i in items if not isinstance(i, TriageItem)), None)
        if bad is not None:
            raise TypeError(f"expected TriageItem objects, got {type(bad).__name__}")
        if any(i.status != "open" or i.final_label is not None for i in items):
            raise UserError("enqueue only open items (status 'open', no final_label)")
        now = utc_now()
        with self._transaction() as conn:
            if skip_queued:
                items = [item for item in items if not _already_queued(conn, item)]
            _check_hourly_cap(conn, actor.user, len(items), limits.max_items_per_hour, now)
            return [_insert_triage(conn, item, actor.user, now) for item in items]

    def triage_items(
        self,
        *,
        batch: str | None = None,
        status: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[TriageItem]:
        """Triage items, optionally of one `batch` and/or `status`, oldest first: `limit` of
        them after skipping `offset` (page through a queue of any length)."""
        if status is not None and status not in TRIAGE_STATUSES:
            raise UserError(f"status must be one of {TRIAGE_STATUSES} or None, got {status!r}")
        _check_limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise UserError(f"offset must be an integer >= 0, got {offset!r}")
        rows = self._query(
            f"SELECT {_TRIAGE_COLUMNS} FROM {_TRIAGE_JOIN}"
            " WHERE (?1 IS NULL OR i.batch = ?1)"
            " AND (?2 IS NULL OR coalesce(d.status, 'open') = ?2)"
            " ORDER BY i.id LIMIT ?3 OFFSET ?4",
            (batch, status, limit, offset),
        )
        return [_triage_from_row(r) for r in rows]

    def open_triage(
        self, *, batch: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[TriageItem]:
        """The triage items still waiting for a reviewer, oldest first (a page of them)."""
        return self.triage_items(batch=batch, status="open", limit=limit, offset=offset)

    def triage_counts(self, *, batch: str | None = None) -> dict[str, int]:
        """How many triage items (of one `batch`, or all) are open, confirmed and corrected."""
        rows = self._query(
            f"SELECT coalesce(d.status, 'open'), count(*) FROM {_TRIAGE_JOIN}"
            " WHERE (?1 IS NULL OR i.batch = ?1) GROUP BY 1",
            (batch,),
        )
        return {status: 0 for status in TRIAGE_STATUSES} | {s: int(n) for s, n in rows}

    def triage_batches(self) -> list[str]:
        """Every batch that has queued items, sorted."""
        return [r[0] for r in self._query("SELECT DISTINCT batch FROM triage_items ORDER BY 1")]

    def decide_triage(
        self, item_id: int, *, final_label: str, reviewer: str, actor: Actor
    ) -> TriageItem:
        """Confirm (final label = predicted) or correct an open triage item; return it decided.

        `actor` needs DECIDE (reviewer); signed in, `reviewer` must be the actor's e-mail. The
        verdict is appended to triage_decisions (items are never updated). Raises UserError
        when the item does not exist or was already decided (by anyone).
        """
        _check_verdict(actor, final_label, reviewer)
        now = utc_now()
        with self._transaction() as conn:
            _decide(conn, item_id, final_label, reviewer, now)
            row = conn.execute(_TRIAGE_BY_ID, (item_id,)).fetchone()
        return _triage_from_row(row)

    def decide_group(
        self,
        item_ids: Sequence[int],
        new_items: Sequence[TriageItem],
        *,
        final_label: str,
        reviewer: str,
        actor: Actor,
        action: str,
        details: Mapping[str, Any],
    ) -> list[int]:
        """One verdict, `final_label`, on the open triage items `item_ids` and on `new_items`
        (queued first), and the trail event `action` (with `details` and every item id), in one
        transaction: a decision on a group of complaints (a candidate desk) is recorded whole or
        not at all. `actor` needs DECIDE; an item decided meanwhile refuses the whole group
        (UserError), as `decide_triage` does. Returns the items' ids, given ones first."""
        _check_verdict(actor, final_label, reviewer)
        now = utc_now()
        with self._transaction() as conn:
            queued = [_insert_triage(conn, item, actor.user, now) for item in new_items]
            ids = [*item_ids, *queued]
            for item_id in ids:
                _decide(conn, item_id, final_label, reviewer, now)
            append_event(conn, action, None, reviewer, {**details, "items": ids}, now)
        return ids

    def record_run(
        self, kind: str, *, parameters: Mapping[str, Any], metrics: Mapping[str, Any], actor: Actor
    ) -> int:
        """Store one run ("train", "audit", "classify", ...) with its parameters and metrics.

        `actor` needs RUN_JOBS (reviewer: the runs are long work on the shared CPUs) and is named
        on the run's trail event."""
        actor.require(Permission.RUN_JOBS)
        check_non_empty_str("kind", kind)
        params_json, metrics_json = _to_json(parameters, "parameters"), _to_json(metrics, "metrics")
        now = utc_now()
        run = {"kind": kind, "parameters": params_json, "metrics": metrics_json, "created_at": now}
        with self._transaction() as conn:
            run_id = insert_chained(conn, "runs", run)
            append_event(conn, "run.recorded", run_id, actor.user, {"kind": kind}, now)
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

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT, rolled back on any error) for the
        modules that own the store's other tables (core.intake.inbox, core.intake.tokens)."""
        return self._transaction()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Rows of one read, serialised with this Store's other calls."""
        return self._query(sql, params)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so a
        # transaction never fails half-way with SQLITE_BUSY on its first write; when the wait
        # runs out, nothing has been written and the caller hears StoreBusyError.
        if self.read_only:
            raise StoreError(
                f"the review store {self.path} is read-only (the file or its folder is not "
                "writable): nothing was saved; ask the operator to make it writable"
            )
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    raise StoreBusyError(self.path, exc) from exc
                raise
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()


def _own_records_only(actor: Actor) -> str | None:
    """Whose names and notes `actor` sees, the one rule for the trail and decision history:
    None (everyone's) with SEE_ALL_TRAIL, else only the actor's own."""
    return None if actor.can(Permission.SEE_ALL_TRAIL) else actor.user


def _check_verdict(actor: Actor, final_label: str, reviewer: str) -> None:
    """Who may give a verdict (DECIDE; signed in, under their own name) and that it names one."""
    actor.require(Permission.DECIDE)
    check_non_empty_str("final_label", final_label)
    check_non_empty_str("reviewer", reviewer)
    _check_reviewer(actor, reviewer)


def _check_reviewer(actor: Actor, reviewer: str) -> None:
    """Signed in, the reviewer (and so the trail's actor) is the actor's e-mail: no typed name
    stands in for it. Without sign-in the one local user is admin and types their name."""
    if actor.signed_in and reviewer != actor.user:
        raise UserError(
            f"you are signed in as {actor.user}, so decisions are saved under that address, "
            f"not {reviewer!r}"
        )


def _writable(path: Path) -> bool:
    """Writable by this process and meant to be: some write bit set (root ignores the bits)."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    target = f"{path.resolve().as_uri()}?{_read_only_query(path)}" if read_only else path
    return sqlite3.connect(
        target, uri=read_only, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )


def _read_only_query(path: Path) -> str:
    """mode=ro, and immutable when SQLite could not create the -shm file it needs for WAL.

    Every WAL connection keeps a -shm file, so without one no writer is active: the file is read
    as it is (a writer that starts later is not seen until the store is opened again).
    """
    shm = path.with_name(path.name + "-shm")
    return "mode=ro&immutable=1" if not shm.exists() and not _writable(path.parent) else "mode=ro"


def _prepare(conn: sqlite3.Connection, path: Path, *, read_only: bool) -> None:
    """Writable: WAL, then verify and migrate. Read-only: verify only; it must be up to date."""
    if not read_only:
        configure_connection(conn)
        migrate_schema(conn, path)
        return
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("BEGIN")
    try:
        version = verify_schema(conn, path)
    finally:
        conn.execute("COMMIT")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version} and is read-only, so it cannot be upgraded to "
            f"version {SCHEMA_VERSION}; make it writable once, or use another database path"
        )


# The columns of a triage item and its verdict (if any) in the order of `_triage_from_row`: an
# item's current state is its row in triage_items plus its row in triage_decisions.
_TRIAGE_COLUMNS = (
    "i.batch, i.text, i.predicted_label, i.confidence, i.probabilities, i.row,"
    " coalesce(d.status, 'open'), d.reviewer, d.final_label, i.id, i.created_at, d.created_at,"
    " i.decided_by"
)
_TRIAGE_JOIN = "triage_items AS i LEFT JOIN triage_decisions AS d ON d.item_id = i.id"
_TRIAGE_BY_ID = f"SELECT {_TRIAGE_COLUMNS} FROM {_TRIAGE_JOIN} WHERE i.id = ?"


def append_event(
    conn: sqlite3.Connection,
    action: str,
    entity_id: int | None,
    actor: str,
    details: Mapping[str, Any],
    now: str,
) -> int:
    """Append one trail event and return its id; every event names who caused it (never None
    or blank)."""
    check_non_empty_str("actor", actor)
    event = {
        "created_at": now, "action": action, "entity_id": entity_id, "actor": actor,
        "details": json.dumps(details, ensure_ascii=False, sort_keys=True),
    }  # fmt: skip
    return insert_chained(conn, "trail", event)


def _decision_values(decision: ReviewDecision, now: str) -> dict[str, Any]:
    return {
        "fingerprint": decision.fingerprint, "row": decision.row, "text": decision.text,
        "given_label": decision.given_label, "decision": decision.decision,
        "new_label": decision.new_label, "reviewer": decision.reviewer, "note": decision.note,
        "created_at": now,
    }  # fmt: skip


def _check_hourly_cap(conn: sqlite3.Connection, user: str, adding: int, cap: int, now: str) -> None:
    """Refuse (UserError) when `user`'s items queued in the hour before `now`, plus `adding`,
    exceed `cap`: one user cannot flood the queue everyone reviews."""
    if adding == 0:
        return
    since = (datetime.fromisoformat(now) - timedelta(hours=1)).isoformat(timespec="microseconds")
    (queued,) = conn.execute(
        "SELECT count(*) FROM trail WHERE action = 'triage.enqueued' AND actor = ?"
        " AND created_at > ?",
        (user, since),
    ).fetchone()
    if queued + adding > cap:
        raise UserError(
            f"{user} may queue {cap:,} items for review per hour ({TRIAGE_PER_HOUR_ENV}) and "
            f"queued {queued:,} in the last hour, so these {adding:,} were not queued: lower the "
            "review threshold or send a smaller file, or try again later"
        )


def _jsonable(record: object, **extra: Any) -> dict[str, Any]:
    return {**asdict(record), **extra}


def _to_json(value: Mapping[str, Any], name: str) -> str:
    if not isinstance(value, Mapping):
        raise UserError(f"{name} must be a dict, got {type(value).__name__}")
    try:
        return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise UserError(f"{name} must be JSON-serialisable with finite numbers ({err})") from err


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UserError(f"limit must be an integer >= 1, got {limit!r}")


def _insert_triage(conn: sqlite3.Connection, item: TriageItem, actor: str, now: str) -> int:
    values = {
        "batch": item.batch, "row": item.row, "text": item.text,
        "predicted_label": item.predicted_label, "confidence": float(item.confidence),
        "probabilities": _to_json(item.probabilities, "probabilities"), "created_at": now,
        "decided_by": item.decided_by,
    }  # fmt: skip
    item_id = insert_chained(conn, "triage_items", values)
    details = {"batch": item.batch, "predicted_label": item.predicted_label, "row": item.row}
    append_event(conn, "triage.enqueued", item_id, actor, details, now)
    return item_id


def _decide(
    conn: sqlite3.Connection, item_id: int, final_label: str, reviewer: str, now: str
) -> None:
    """Append the verdict on open item `item_id` and its "triage.decided" event (what the
    intake's updates feed reads)."""
    predicted = _open_triage_label(conn, item_id)
    status = "confirmed" if final_label == predicted else "corrected"
    verdict = {
        "item_id": item_id, "status": status, "final_label": final_label,
        "reviewer": reviewer, "created_at": now,
    }  # fmt: skip
    insert_chained(conn, "triage_decisions", verdict)
    details = {"status": status, "predicted_label": predicted, "final_label": final_label}
    append_event(conn, "triage.decided", item_id, reviewer, details, now)


def _already_queued(conn: sqlite3.Connection, item: TriageItem) -> bool:
    found = conn.execute(
        "SELECT 1 FROM triage_items WHERE batch = ? AND row IS ? AND text = ? LIMIT 1",
        (item.batch, item.row, item.text),
    )
    return found.fetchone() is not None


def _open_triage_label(conn: sqlite3.Connection, item_id: object) -> str:
    """The predicted label of open triage item `item_id`; UserError if missing or decided."""
    if isinstance(item_id, bool) or not isinstance(item_id, int):
        raise UserError(f"item_id must be an integer triage id, got {item_id!r}")
    found = conn.execute(_TRIAGE_BY_ID, (item_id,)).fetchone()
    if found is None:
        raise UserError(f"no triage item with id {item_id}; reload the queue")
    item = _triage_from_row(found)
    if item.status != "open":
        raise UserError(f"triage item {item_id} was already {item.status}; reload the queue")
    return item.predicted_label


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
        decided_by=r[12],
    )
