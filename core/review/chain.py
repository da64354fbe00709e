"""The review store's hash chains: every row of every table carries the SHA-256 of its content
and of the row before it, so a row edited, removed or reordered outside Grievance Lens (even by
someone who dropped and re-created the triggers) breaks the chain at that row."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# What each table's hash covers, in this order (the id first: a row moved to another id breaks
# the chain). Never reorder a shipped entry: every stored hash depends on it.
CHAINED_COLUMNS: dict[str, tuple[str, ...]] = {
    "decisions": (
        "id", "fingerprint", "row", "text", "given_label", "decision", "new_label", "reviewer",
        "note", "created_at",
    ),
    "trail": ("id", "created_at", "action", "entity_id", "actor", "details"),
    "triage_items": (
        "id", "batch", "row", "text", "predicted_label", "confidence", "probabilities",
        "created_at", "decided_by",
    ),
    "triage_decisions": ("id", "item_id", "status", "final_label", "reviewer", "created_at"),
    "runs": ("id", "kind", "parameters", "metrics", "created_at"),
    "api_tokens": ("id", "name", "source", "scopes", "secret_sha256", "created_by", "created_at"),
    "api_token_revocations": ("id", "token_id", "revoked_by", "created_at"),
    "inbox": (
        "id", "source", "external_id", "text", "channel", "customer_ref", "received_at", "desk",
        "confidence", "needs_review", "review_reason", "unknown_desk_score", "decided_by",
        "probabilities", "model", "model_digest", "due_by", "token", "created_at",
    ),
    "inbox_requests": ("id", "source", "key", "body_sha256", "answer", "created_at"),
    "inbox_resolutions": ("id", "complaint_id", "resolved_by", "created_at"),
}  # fmt: skip
# The tables chained by migration 4 (the later ones were chained from their first row).
CHAINED_AT_V4 = ("decisions", "trail", "triage_items", "triage_decisions", "runs")
GENESIS = "0" * 64  # the "previous hash" of each table's first row


@dataclass(frozen=True)
class ChainBreak:
    """The first row of `table` whose stored hash is not the hash of its content and the row
    before it: that row, or the one before it, was changed outside Grievance Lens."""

    table: str
    row_id: int

    def describe(self) -> str:
        return f"table {self.table}, row id {self.row_id}"


@dataclass(frozen=True)
class ChainHead:
    """One table's chain: its row count and the hash of its newest row (GENESIS when empty)."""

    table: str
    rows: int
    head: str


@dataclass(frozen=True)
class ChainReport:
    """Every table's chain, and the first broken link found (None: all intact)."""

    heads: tuple[ChainHead, ...]
    broken: ChainBreak | None

    @property
    def intact(self) -> bool:
        return self.broken is None

    def to_json(self) -> dict[str, Any]:
        broken = None if self.broken is None else {
            "table": self.broken.table, "row_id": self.broken.row_id
        }  # fmt: skip
        return {
            "intact": self.intact,
            "broken": broken,
            "tables": {h.table: {"rows": h.rows, "head": h.head} for h in self.heads},
        }


def row_hash(previous: str, table: str, values: tuple[Any, ...]) -> str:
    """SHA-256 (hex) of the previous row's hash and this row's values as canonical JSON."""
    content = json.dumps([table, *values], separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(f"{previous}\n{content}".encode("ascii")).hexdigest()


def insert_chained(conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
    """Insert one row of `table` (every chained column but the id) with the next id and its
    chained hash; return the id. Call inside the write transaction (the lock keeps ids and the
    chain in step)."""
    columns = CHAINED_COLUMNS[table]
    last = conn.execute(f"SELECT id, hash FROM {table} ORDER BY id DESC LIMIT 1").fetchone()
    row_id, previous = (1, GENESIS) if last is None else (int(last[0]) + 1, str(last[1]))
    row = (row_id, *(values[name] for name in columns[1:]))
    digest = row_hash(previous, table, row)
    marks = ", ".join("?" * (len(columns) + 1))
    sql = f"INSERT INTO {table} ({', '.join(columns)}, hash) VALUES ({marks})"
    conn.execute(sql, (*row, digest))
    if row_hash(previous, table, _stored(conn, table, row_id)) != digest:  # affinity changed it
        raise RuntimeError(f"a {table} row was stored with other values than were hashed")
    return row_id


def _stored(conn: sqlite3.Connection, table: str, row_id: int) -> tuple[Any, ...]:
    columns = ", ".join(CHAINED_COLUMNS[table])
    return tuple(conn.execute(f"SELECT {columns} FROM {table} WHERE id = ?", (row_id,)).fetchone())


def _rows(conn: sqlite3.Connection, table: str) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(chained values, stored hash) of every row of `table`, oldest id first."""
    columns = ", ".join(CHAINED_COLUMNS[table])
    for *values, stored in conn.execute(f"SELECT {columns}, hash FROM {table} ORDER BY id"):
        yield tuple(values), stored


def verify_table(conn: sqlite3.Connection, table: str) -> tuple[ChainHead, ChainBreak | None]:
    """Walk `table`'s chain: its head, and its first broken link (None when intact)."""
    previous, rows = GENESIS, 0
    for values, stored in _rows(conn, table):
        rows += 1
        if stored != row_hash(previous, table, values):
            return ChainHead(table, rows, str(stored)), ChainBreak(table, int(values[0]))
        previous = stored
    return ChainHead(table, rows, previous), None


def verify_chains(conn: sqlite3.Connection) -> ChainReport:
    """Every table's chain; the first break of the first broken table (in CHAINED_COLUMNS order)."""
    heads, broken = [], None
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in (t for t in CHAINED_COLUMNS if t in present):  # an old file lacks newer tables
        head, table_break = verify_table(conn, table)
        heads.append(head)
        broken = broken or table_break
    return ChainReport(tuple(heads), broken)


def chain_existing_rows(conn: sqlite3.Connection) -> None:
    """Migration step: give every row of a store from before the chains its hash, oldest first
    (the tables' no-update triggers are dropped around this step)."""
    for table in CHAINED_AT_V4:
        previous = GENESIS
        for values, _ in list(_rows(conn, table)):
            previous = row_hash(previous, table, values)
            conn.execute(f"UPDATE {table} SET hash = ? WHERE id = ?", (previous, values[0]))
