"""The review store's SQLite schema: the migrations (versioned with PRAGMA user_version; every table
append-only by trigger), the connection settings (WAL, busy timeout, fsync on commit) and bringing
a file up to date."""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from core.errors import UserError
from core.review.chain import chain_existing_rows

# Seconds a writer waits for another connection's write lock before giving up. Writes are tiny
# (one row and one trail event), so even many sessions clear the lock within milliseconds.
BUSY_TIMEOUT_S = 30.0

# One step of a migration: SQL statements, or a function run on the connection (data, not schema).
MigrationStep = str | Callable[[sqlite3.Connection], None]

# The chained tables: what their rows are called in a refusal, and the keys a new row must not
# take (a triage item gets one verdict). Migration 4 builds its BEFORE INSERT triggers from this.
_INSERT_GUARDED = (
    ("decisions", "review decisions are", "id = NEW.id"),
    ("trail", "the audit trail is", "id = NEW.id"),
    ("triage_items", "triage items are", "id = NEW.id"),
    ("triage_decisions", "triage verdicts are", "id = NEW.id OR item_id = NEW.item_id"),
    ("runs", "run history is", "id = NEW.id"),
)


# The intake's chained tables (migration 6): the API's tokens and their revocations, the inbox of
# complaints, the batches answered under an Idempotency-Key and the resolutions.
_INTAKE_GUARDED = (
    ("api_tokens", "API tokens are", "id = NEW.id"),
    ("api_token_revocations", "token revocations are", "id = NEW.id OR token_id = NEW.token_id"),
    ("inbox", "inbox complaints are", "id = NEW.id"),
    ("inbox_requests", "answered batches are", "id = NEW.id"),
    ("inbox_resolutions", "resolutions are", "id = NEW.id OR complaint_id = NEW.complaint_id"),
)


def _append_only(guarded: tuple[tuple[str, str, str], ...]) -> str:
    """BEFORE UPDATE and BEFORE DELETE triggers that refuse every change to each table."""
    return "".join(
        f"""
        CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
        BEGIN SELECT RAISE(ABORT, '{rows} append-only: rows cannot be updated'); END;
        CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
        BEGIN SELECT RAISE(ABORT, '{rows} append-only: rows cannot be deleted'); END;"""
        for table, rows, _ in guarded
    )


def _insert_guards(
    tables: tuple[str, ...] | None = None,
    guarded: tuple[tuple[str, str, str], ...] = _INSERT_GUARDED,
) -> str:
    """Two BEFORE INSERT triggers per chained table of `guarded` (all of them, or those named in
    `tables`): no row whose key is taken (INSERT OR REPLACE would delete the old row without
    firing its DELETE trigger) and no row without its hash (core.review.chain)."""
    return "".join(
        f"""
        CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table}
        WHEN EXISTS (SELECT 1 FROM {table} WHERE {taken})
        BEGIN SELECT RAISE(ABORT, '{rows} append-only: rows cannot be replaced'); END;
        CREATE TRIGGER {table}_hashed BEFORE INSERT ON {table}
        WHEN NEW.hash IS NULL OR length(NEW.hash) != 64
        BEGIN SELECT RAISE(ABORT, '{rows} hash-chained: a row needs its hash'); END;"""
        for table, rows, taken in guarded
        if tables is None or table in tables
    )


# Each entry moves the schema from version i to i + 1: one SQL script, or steps run in order.
# Never edit a shipped entry, append a new one.
MIGRATIONS: tuple[MigrationStep | tuple[MigrationStep, ...], ...] = (
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
    # 2: every table append-only by trigger. A triage verdict is no longer an UPDATE of its item
    # but a row of triage_decisions (one per item: decided once); existing verdicts move there.
    """
    CREATE TABLE triage_items (
        id INTEGER PRIMARY KEY,
        batch TEXT NOT NULL,
        row INTEGER,
        text TEXT NOT NULL,
        predicted_label TEXT NOT NULL,
        confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
        probabilities TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    INSERT INTO triage_items
        (id, batch, row, text, predicted_label, confidence, probabilities, created_at)
        SELECT id, batch, row, text, predicted_label, confidence, probabilities, created_at
        FROM triage ORDER BY id;
    CREATE INDEX triage_items_by_batch ON triage_items (batch, id);

    CREATE TABLE triage_decisions (
        id INTEGER PRIMARY KEY,
        item_id INTEGER NOT NULL UNIQUE REFERENCES triage_items (id),
        status TEXT NOT NULL CHECK (status IN ('confirmed', 'corrected')),
        final_label TEXT NOT NULL,
        reviewer TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    INSERT INTO triage_decisions (item_id, status, final_label, reviewer, created_at)
        SELECT id, status, final_label, coalesce(reviewer, ''), coalesce(decided_at, created_at)
        FROM triage WHERE status != 'open' ORDER BY coalesce(decided_at, created_at), id;
    DROP TABLE triage;

    CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
    BEGIN SELECT RAISE(ABORT, 'review decisions are append-only: record a new decision'); END;
    CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
    BEGIN SELECT RAISE(ABORT, 'review decisions are append-only: rows cannot be deleted'); END;
    CREATE TRIGGER triage_items_no_update BEFORE UPDATE ON triage_items
    BEGIN SELECT RAISE(ABORT, 'triage items are append-only: rows cannot be updated'); END;
    CREATE TRIGGER triage_items_no_delete BEFORE DELETE ON triage_items
    BEGIN SELECT RAISE(ABORT, 'triage items are append-only: rows cannot be deleted'); END;
    CREATE TRIGGER triage_decisions_no_update BEFORE UPDATE ON triage_decisions
    BEGIN SELECT RAISE(ABORT, 'triage verdicts are append-only: rows cannot be updated'); END;
    CREATE TRIGGER triage_decisions_no_delete BEFORE DELETE ON triage_decisions
    BEGIN SELECT RAISE(ABORT, 'triage verdicts are append-only: rows cannot be deleted'); END;
    CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
    BEGIN SELECT RAISE(ABORT, 'run history is append-only: rows cannot be updated'); END;
    CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
    BEGIN SELECT RAISE(ABORT, 'run history is append-only: rows cannot be deleted'); END;
    """,
    # 3: which model made each queued call (core.models.blend: "transformer", "bag of words" or
    # "blend"); items queued before models blended were decided by the transformer.
    """
    ALTER TABLE triage_items ADD COLUMN decided_by TEXT NOT NULL DEFAULT 'transformer';
    """,
    # 4: tamper evidence. Every row carries the SHA-256 of its content chained to the row before
    # (core.review.chain); existing rows are chained once, with the no-update triggers dropped
    # around that step and re-created with the same text. INSERT OR REPLACE deletes the row it
    # replaces without firing DELETE triggers (recursive_triggers is off), so a BEFORE INSERT
    # trigger refuses any insert whose key is taken; another refuses a row without a hash. The
    # trail index serves the per-user cap on triage items queued per hour.
    (
        """
        DROP TRIGGER decisions_no_update;
        DROP TRIGGER trail_no_update;
        DROP TRIGGER triage_items_no_update;
        DROP TRIGGER triage_decisions_no_update;
        DROP TRIGGER runs_no_update;
        ALTER TABLE decisions ADD COLUMN hash TEXT;
        ALTER TABLE trail ADD COLUMN hash TEXT;
        ALTER TABLE triage_items ADD COLUMN hash TEXT;
        ALTER TABLE triage_decisions ADD COLUMN hash TEXT;
        ALTER TABLE runs ADD COLUMN hash TEXT;
        """,
        chain_existing_rows,
        """
        CREATE TRIGGER trail_no_update BEFORE UPDATE ON trail
        BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: rows cannot be updated'); END;
        CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
        BEGIN SELECT RAISE(ABORT, 'review decisions are append-only: record a new decision'); END;
        CREATE TRIGGER triage_items_no_update BEFORE UPDATE ON triage_items
        BEGIN SELECT RAISE(ABORT, 'triage items are append-only: rows cannot be updated'); END;
        CREATE TRIGGER triage_decisions_no_update BEFORE UPDATE ON triage_decisions
        BEGIN SELECT RAISE(ABORT, 'triage verdicts are append-only: rows cannot be updated'); END;
        CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
        BEGIN SELECT RAISE(ABORT, 'run history is append-only: rows cannot be updated'); END;
        CREATE INDEX trail_by_actor ON trail (action, actor, created_at);
        """,
        _insert_guards(),
    ),
    # 5: a reviewer may exclude a row from the next version of a data set ("exclude", no new
    # label; core.review.corrections). SQLite cannot alter a CHECK constraint, so the table is
    # rebuilt with the same columns and its rows copied in id order with their hashes: the chain
    # covers column values, not the table, so it verifies as before. Dropping the old table drops
    # its index and triggers; they are created again on the new one, as migrations 2 and 4 made
    # them. No trigger fires on the copy (INSERT ... SELECT into a table that has none yet) or on
    # the drop (the implicit DELETE of DROP TABLE fires no trigger).
    (
        """
        CREATE TABLE decisions_v5 (
            id INTEGER PRIMARY KEY,
            fingerprint TEXT NOT NULL,
            row INTEGER NOT NULL CHECK (row >= 1),
            text TEXT NOT NULL,
            given_label TEXT NOT NULL,
            decision TEXT NOT NULL
                CHECK (decision IN ('keep', 'relabel', 'escalate', 'exclude')),
            new_label TEXT,
            reviewer TEXT NOT NULL CHECK (length(trim(reviewer)) > 0),
            note TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            hash TEXT,
            CHECK ((decision = 'relabel') = (new_label IS NOT NULL))
        );
        INSERT INTO decisions_v5
            (id, fingerprint, row, text, given_label, decision, new_label, reviewer, note,
             created_at, hash)
            SELECT id, fingerprint, row, text, given_label, decision, new_label, reviewer, note,
                   created_at, hash
            FROM decisions ORDER BY id;
        DROP TABLE decisions;
        ALTER TABLE decisions_v5 RENAME TO decisions;
        CREATE INDEX decisions_by_row ON decisions (fingerprint, row, id);
        CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
        BEGIN SELECT RAISE(ABORT, 'review decisions are append-only: record a new decision'); END;
        CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
        BEGIN SELECT RAISE(ABORT, 'review decisions are append-only: rows cannot be deleted'); END;
        """,
        _insert_guards(("decisions",)),
    ),
    # 6: the intake API (core.intake). Tokens are stored as SHA-256 digests of their secrets and
    # revoked by a row of their own; every complaint is stored once per (source, caller's id)
    # with the live model's routing answer; a batch sent with an Idempotency-Key is remembered
    # with its complaints; a resolution stops a complaint's clock. Reviewers' verdicts on inbox
    # complaints are triage verdicts (triage_items.batch = 'inbox', row = the complaint's id).
    (
        """
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL,
            scopes TEXT NOT NULL,
            secret_sha256 TEXT NOT NULL UNIQUE,
            created_by TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hash TEXT
        );
        CREATE TABLE api_token_revocations (
            id INTEGER PRIMARY KEY,
            token_id INTEGER NOT NULL UNIQUE REFERENCES api_tokens (id),
            revoked_by TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hash TEXT
        );
        CREATE TABLE inbox (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            external_id TEXT NOT NULL,
            text TEXT NOT NULL,
            channel TEXT NOT NULL,
            customer_ref TEXT NOT NULL,
            received_at TEXT NOT NULL,
            desk TEXT NOT NULL,
            confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            needs_review INTEGER NOT NULL CHECK (needs_review IN (0, 1)),
            review_reason TEXT NOT NULL,
            unknown_desk_score REAL,
            decided_by TEXT NOT NULL,
            probabilities TEXT NOT NULL,
            model TEXT NOT NULL,
            model_digest TEXT NOT NULL,
            due_by TEXT NOT NULL,
            token TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hash TEXT,
            UNIQUE (source, external_id)
        );
        CREATE INDEX inbox_by_received ON inbox (received_at, id);
        CREATE TABLE inbox_requests (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,
            key TEXT NOT NULL,
            body_sha256 TEXT NOT NULL,
            answer TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hash TEXT,
            UNIQUE (source, key)
        );
        CREATE TABLE inbox_resolutions (
            id INTEGER PRIMARY KEY,
            complaint_id INTEGER NOT NULL UNIQUE REFERENCES inbox (id),
            resolved_by TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hash TEXT
        );
        CREATE INDEX triage_items_by_row ON triage_items (batch, row);
        """,
        _append_only(_INTAKE_GUARDED),
        _insert_guards(guarded=_INTAKE_GUARDED),
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# One (type, name, sql) per table, index and trigger of a store; SQLite's own objects are left out.
SchemaObjects = frozenset[tuple[str, str, str | None]]


class StoreError(UserError):
    """The review store cannot be used as asked: an unreadable or tampered file, or a write to a
    store opened read-only. The message is one line saying what to do."""


def configure_connection(conn: sqlite3.Connection) -> None:
    """Busy timeout, foreign keys, WAL journal and fsync on every commit for a new connection."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    mode = switch_to_wal(conn)
    if str(mode).lower() != "wal":
        raise StoreError(f"could not switch the database to WAL mode (got {mode!r})")
    # FULL: WAL commits are fsynced, so a confirmed decision survives a power cut, not only a
    # crash of the app (NORMAL may lose the last commits on power loss). Writes are rare.
    conn.execute("PRAGMA synchronous = FULL")


def switch_to_wal(conn: sqlite3.Connection, *, timeout_s: float = BUSY_TIMEOUT_S) -> str:
    """`PRAGMA journal_mode = WAL`, retried while another connection holds a conflicting lock.

    SQLite answers this pragma with "database is locked" at once, without waiting out the busy
    timeout, when it could deadlock (two processes creating one database); returns the new mode.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def migrate_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Verify the file's schema, then bring it to SCHEMA_VERSION, in one write transaction (safe
    with racing opens); a tampered file is refused before anything is written."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = verify_schema(conn, path)
        for index in range(version, SCHEMA_VERSION):
            _run_migration(conn, MIGRATIONS[index])
            conn.execute(f"PRAGMA user_version = {index + 1}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _run_migration(
    conn: sqlite3.Connection, migration: MigrationStep | tuple[MigrationStep, ...]
) -> None:
    """Run one migration's steps in order on `conn` (inside the caller's transaction)."""
    for step in migration if isinstance(migration, tuple) else (migration,):
        if callable(step):
            step(conn)
            continue
        for statement in _statements(step):
            conn.execute(statement)


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
        raise RuntimeError(f"incomplete SQL statement in a migration: {pending.strip()[:60]!r}")


class TamperedSchemaError(StoreError):
    """The file's tables, indexes or triggers are not those the migrations create: a trigger
    dropped or altered, a table changed outside Grievance Lens."""


def verify_schema(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version, after checking that its tables, indexes and triggers are exactly
    those the migrations create (a dropped or altered trigger is refused); raises StoreError."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this code's {SCHEMA_VERSION};"
            " upgrade Grievance Lens or use another database path"
        )
    problems = schema_differences(schema_of(conn), expected_schema(version))
    if problems:
        raise TamperedSchemaError(
            f"{path} is not an intact review store (schema version {version}: "
            f"{'; '.join(problems[:3])}); restore a backup or use another database path"
        )
    return version


def schema_of(conn: sqlite3.Connection) -> SchemaObjects:
    """Every table, index and trigger of the database on `conn` as (type, name, sql)."""
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    )
    return frozenset((str(t), str(n), s) for t, n, s in rows)


@functools.cache
def expected_schema(version: int) -> SchemaObjects:
    """The objects the first `version` migrations create, built in a database in memory."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for migration in MIGRATIONS[:version]:
            _run_migration(conn, migration)
        return schema_of(conn)
    finally:
        conn.close()


def schema_differences(found: SchemaObjects, expected: SchemaObjects) -> list[str]:
    """What differs, one phrase each ("trigger x is missing"), sorted by name."""
    found_by_name = {name: (kind, sql) for kind, name, sql in found}
    expected_by_name = {name: (kind, sql) for kind, name, sql in expected}
    problems = []
    for name in sorted(found_by_name.keys() | expected_by_name.keys()):
        have, want = found_by_name.get(name), expected_by_name.get(name)
        if have is None:
            problems.append(f"{want[0]} {name} is missing")
        elif want is None:
            problems.append(f"unexpected {have[0]} {name}")
        elif have != want:
            problems.append(f"{want[0]} {name} was altered")
    return problems
