"""The inbox as the app's pages show it: the complaints the live model sent to people, waiting
for a verdict on the Triage queue page (oldest due first, with their channel and clock), the
open complaints as a table the routing board draws (core.board.board.build_board), and the
complaints flagged as fitting no desk that discovery groups (core.tasks.discovery).

Reads only: a verdict on an inbox complaint is an ordinary triage verdict
(`Store.decide_triage`; its item has batch INBOX_BATCH and row = the complaint's id).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from core.checks import check_int
from core.intake.inbox import INBOX_BATCH, ComplaintRecord
from core.models.flagging import UNKNOWN as UNKNOWN_DESK
from core.review.records import TriageItem
from core.review.store import Store

__all__ = [
    "BOARD_COLUMNS", "FlaggedComplaint", "InboxTriageItem", "flagged_complaints",
    "inbox_board_table", "inbox_triage", "inbox_triage_count", "open_complaint_count",
    "routed_texts",
]  # fmt: skip

# The columns of `inbox_board_table`, in order.
BOARD_COLUMNS = (
    "text", "predicted_label", "confidence", "needs_review", "received_at", "channel",
    "complaint_id",
)  # fmt: skip

# Open = no verdict yet; the complaint joined by the item's row (the complaint's id).
_WAITING = (
    "triage_items AS i JOIN inbox AS c ON c.id = i.row"
    " LEFT JOIN triage_decisions AS d ON d.item_id = i.id"
    " WHERE i.batch = ? AND d.id IS NULL"
)
_COLUMNS = (
    "i.id, i.text, i.predicted_label, i.confidence, i.probabilities, i.row, i.created_at,"
    " i.decided_by, c.id, c.external_id, c.source, c.channel, c.received_at, c.due_by"
)


@dataclass(frozen=True)
class InboxTriageItem:
    """An inbox complaint waiting for a verdict: its triage item and where it came from."""

    item: TriageItem
    complaint_id: int
    caller_id: str  # the id the bank's system gave it
    source: str  # the bank's system (the token's source)
    channel: str
    received_at: str  # ISO 8601, UTC ("...Z")
    due_by: str  # when the routed desk's turnaround time runs out (ISO 8601, UTC)


def inbox_triage(store: Store, *, limit: int = 200, offset: int = 0) -> list[InboxTriageItem]:
    """The open triage items of the inbox with their complaints, the oldest due first (then by
    item id): `limit` of them after skipping `offset`."""
    check_int("limit", limit, minimum=1)
    check_int("offset", offset, minimum=0)
    rows = store.query(
        f"SELECT {_COLUMNS} FROM {_WAITING} ORDER BY c.due_by, i.id LIMIT ? OFFSET ?",
        (INBOX_BATCH, limit, offset),
    )
    return [_waiting(row) for row in rows]


def inbox_triage_count(store: Store) -> int:
    """How many inbox complaints wait for a verdict (every one, not a page)."""
    return int(store.query(f"SELECT count(*) FROM {_WAITING}", (INBOX_BATCH,))[0][0])


def open_complaint_count(store: Store) -> int:
    """How many inbox complaints are open (not resolved by the bank's system)."""
    (count,) = store.query(
        "SELECT count(*) FROM inbox AS c LEFT JOIN inbox_resolutions AS r"
        " ON r.complaint_id = c.id WHERE r.id IS NULL"
    )[0]
    return int(count)


def _waiting(row: tuple) -> InboxTriageItem:
    item = TriageItem(
        batch=INBOX_BATCH, text=row[1], predicted_label=row[2], confidence=float(row[3]),
        probabilities=json.loads(row[4]), row=row[5], id=row[0], created_at=row[6],
        decided_by=row[7],
    )  # fmt: skip
    return InboxTriageItem(item, int(row[8]), row[9], row[10], row[11], row[12], row[13])


def inbox_board_table(records: Sequence[ComplaintRecord]) -> pd.DataFrame:
    """Open inbox complaints as the table `build_board` reads: the desk each is at now (the
    reviewer's, else the model's) as `predicted_label`, and `needs_review` true only while a
    flagged complaint still waits for its verdict."""
    return pd.DataFrame(
        {
            "text": [r.text for r in records],
            "predicted_label": [r.desk for r in records],
            "confidence": pd.array([r.confidence for r in records], dtype="float64"),
            "needs_review": pd.array(
                [r.needs_review and r.verdict is None for r in records], dtype="bool"
            ),
            "received_at": [r.received_at for r in records],
            "channel": [r.channel for r in records],
            "complaint_id": pd.array([r.complaint_id for r in records], dtype="int64"),
        },
        columns=list(BOARD_COLUMNS),
    )


@dataclass(frozen=True)
class FlaggedComplaint:
    """An inbox complaint the live model flagged as fitting no desk when it arrived, with the
    open triage item that waits for its verdict (None once a reviewer decided it)."""

    complaint_id: int
    text: str
    desk: str  # the desk it was routed to
    confidence: float
    probabilities: dict[str, float]
    received_at: str
    open_item: int | None


def flagged_complaints(store: Store, *, since: str, limit: int) -> list[FlaggedComplaint]:
    """The inbox complaints received at or after `since` (ISO 8601, UTC) that were flagged as
    fitting no desk ("unknown desk"), newest first, at most `limit`."""
    check_int("limit", limit, minimum=1)
    rows = store.query(
        "SELECT c.id, c.text, c.desk, c.confidence, c.probabilities, c.received_at,"
        " (SELECT i.id FROM triage_items AS i LEFT JOIN triage_decisions AS d"
        "  ON d.item_id = i.id WHERE i.batch = ? AND i.row = c.id AND d.id IS NULL LIMIT 1)"
        " FROM inbox AS c WHERE c.review_reason = ? AND c.received_at >= ?"
        " ORDER BY c.received_at DESC, c.id DESC LIMIT ?",
        (INBOX_BATCH, UNKNOWN_DESK, since, limit),
    )
    return [
        FlaggedComplaint(int(r[0]), r[1], r[2], float(r[3]), json.loads(r[4]), r[5], r[6])
        for r in rows
    ]


def routed_texts(store: Store, *, since: str, per_desk: int) -> dict[str, list[str]]:
    """The texts of the inbox complaints received at or after `since` that were routed without
    a person, newest first, at most `per_desk` per desk: what the known desks sound like."""
    check_int("per_desk", per_desk, minimum=1)
    rows = store.query(
        "SELECT desk, text FROM (SELECT desk, text, row_number() OVER"
        " (PARTITION BY desk ORDER BY received_at DESC, id DESC) AS n FROM inbox"
        " WHERE review_reason = '' AND received_at >= ?) WHERE n <= ? ORDER BY desk, n",
        (since, per_desk),
    )
    texts: dict[str, list[str]] = {}
    for desk, text in rows:
        texts.setdefault(desk, []).append(text)
    return texts
