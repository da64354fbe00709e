"""The inbox as the app's pages show it: the complaints the live model sent to people, waiting
for a verdict on the Triage queue page (oldest due first, with their channel and clock), and the
open complaints as a table the routing board draws (core.board.board.build_board).

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
from core.review.records import TriageItem
from core.review.store import Store

__all__ = [
    "BOARD_COLUMNS", "InboxTriageItem", "inbox_board_table", "inbox_triage",
    "inbox_triage_count", "open_complaint_count",
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
