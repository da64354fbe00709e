"""The team's live model: which saved model routes the team's complaints, promoted by an admin.

The record of it is the review store's trail (event "model.promoted": who, when, the model's
name and card digest, the reason and the comparison report it was based on), so it survives a
restart and is tamper-evident like every decision. Rolling back is promoting an earlier model.
A promotion reads the live model and records itself in one write transaction, so two admins
promoting at once are recorded one after the other. Reading the live model leaves the comparison
report (up to 8 MiB) in the store until it is asked for (`promotion_report`).
Torch-free (core.models.card, never the registry), so `--model live` resolves in milliseconds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.access import Actor, Permission
from core.errors import UserError
from core.models.card import (
    FILES_KEY,
    card_digest,
    check_loadable,
    file_digest,
    model_folder,
    read_card_and_digest,
)
from core.review.store import Store, append_event, utc_now

__all__ = [
    "MAX_REASON_CHARS",
    "MAX_REPORT_BYTES",
    "NO_LIVE_MODEL",
    "PROMOTED",
    "LiveModel",
    "checked_live_folder",
    "format_since",
    "live_model",
    "live_model_folder",
    "promote_model",
    "promotion_history",
    "promotion_report",
    "promotions_with_report",
]

PROMOTED = "model.promoted"  # the trail action (core.review.store.PUBLIC_ACTIONS)
# A reason is a sentence or a short paragraph for the team's record, not a document.
MAX_REASON_CHARS = 2_000
# The comparison report kept with a promotion (core.analysis.compare.Comparison.to_json: the
# scores and the changed complaints). 8 MiB holds about 15,000 changed complaints of 500
# characters; a bigger one is refused rather than cut: the record is the report the admin saw.
MAX_REPORT_BYTES = 8 * 1024 * 1024
NO_LIVE_MODEL = (
    "no model is live yet: promote one with `python -m core promote NAME --reason ...` or on "
    "the Train page"
)


@dataclass(frozen=True)
class LiveModel:
    """One promotion: the model that became live, when and by whom, and why.

    Its comparison report (up to MAX_REPORT_BYTES of JSON) is not part of it: most readers
    (every Classify click, every routed complaint) never show it. `promotion_report` reads it;
    `promotions_with_report` says which promotions have one."""

    name: str  # the saved model's folder name in the models folder
    digest: str  # its card digest at promotion (core.models.card.card_digest)
    since: str  # when it was promoted (UTC, ISO 8601: the trail event's created_at)
    promoted_by: str  # the admin's e-mail, or "operator" / "local"
    reason: str
    event_id: int  # the trail event that records this promotion
    previous: str | None  # the live model's name before this promotion (None: the first)


def promotion_report(store: Store, live: LiveModel) -> dict | None:
    """The comparison report `live` was promoted from, or None when it was promoted without."""
    rows = store.query(
        "SELECT json_extract(details, '$.report') FROM trail WHERE id = ? AND action = ?",
        (live.event_id, PROMOTED),
    )
    return json.loads(rows[0][0]) if rows and rows[0][0] is not None else None


def promotions_with_report(store: Store, promotions: Sequence[LiveModel]) -> set[int]:
    """The event ids of those of `promotions` kept with a comparison report (one SQLite JSON
    pass each; the reports themselves stay in the store)."""
    ids = [int(m.event_id) for m in promotions][:500]  # a page of history, within SQLite's bound
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    rows = store.query(
        f"SELECT id FROM trail WHERE id IN ({marks}) AND json_type(details, '$.report') = 'object'",
        ids,
    )
    return {int(r[0]) for r in rows}


def promote_model(
    store: Store,
    models_root: str | Path,
    name: str,
    *,
    reason: str,
    actor: Actor,
    report: Mapping[str, Any] | None = None,
) -> LiveModel:
    """Make saved model `name` of `models_root` the team's live model, recorded in the trail.

    `actor` needs MANAGE_MODELS (admin); `reason` must say something (at most MAX_REASON_CHARS);
    the model must be a saved model that passes the card checks (no pickle, no code, only files
    its card lists, each with the digest it was saved with). Promoting an earlier model is the
    rollback. The model that is live already, unchanged, is refused: nothing would change.
    """
    actor.require(Permission.MANAGE_MODELS)
    reason = _checked_reason(reason)
    details_report = _checked_report(report)
    digest = _checked_model(models_root, name)
    # The live model is read in the promotion's own write transaction, so a promotion made at
    # the same time by another admin is either wholly before this one (it is `previous`) or after.
    with store.transaction() as conn:
        current = live_model_in(conn)
        if current is not None and (current.name, current.digest) == (name, digest):
            raise UserError(
                f"{name} is already the live model (since {format_since(current.since)})"
            )
        previous = None if current is None else current.name
        details = {
            "name": name, "digest": digest, "reason": reason, "report": details_report,
            "previous": previous,
        }  # fmt: skip
        now = utc_now()
        event_id = append_event(conn, PROMOTED, None, actor.user, details, now)
    return LiveModel(
        name=name, digest=digest, since=now, promoted_by=actor.user, reason=reason,
        event_id=event_id, previous=previous,
    )  # fmt: skip


def live_model(store: Store) -> LiveModel | None:
    """The latest promotion (the live model), or None when no model was ever promoted."""
    history = promotion_history(store, limit=1)
    return history[0] if history else None


def live_model_in(conn: sqlite3.Connection) -> LiveModel | None:
    """The live model as a write transaction reads it (`Store.transaction`), so that what the
    transaction then writes cannot race a promotion (core.review.library refuses to rename or
    delete the live model this way)."""
    return next(iter(_promotions(_on(conn), limit=1)), None)


def promotion_history(store: Store, *, limit: int = 20) -> list[LiveModel]:
    """The latest `limit` promotions, newest first (the first is the live model), without their
    comparison reports (`promotion_report` reads one)."""
    return _promotions(store.query, limit=limit)


def live_model_folder(store: Store, models_root: str | Path) -> Path:
    """The folder of the live model in `models_root`; UserError saying what to do when no model
    was promoted, when its folder is gone, or when it was saved again since its promotion (its
    card digest changed: another model under the same name, which nobody promoted)."""
    live = live_model(store)
    if live is None:
        raise UserError(NO_LIVE_MODEL)
    return checked_live_folder(live, models_root)


def checked_live_folder(live: LiveModel, models_root: str | Path) -> Path:
    """`live`'s folder in `models_root` when it still holds the promoted version; UserError
    otherwise (see `live_model_folder`)."""
    folder = model_folder(models_root, live.name)
    found = card_digest(folder)
    if found is None:
        raise UserError(
            f"the live model {live.name} is no longer in the models folder (deleted or renamed); "
            "promote a saved model: `python -m core promote NAME --reason ...` or the Train page"
        )
    if found != live.digest:
        raise UserError(
            f"the live model {live.name} was saved again after its promotion on "
            f"{format_since(live.since)}, so nobody promoted this version; check it and promote it "
            f"again: `python -m core promote {live.name} --reason ...`"
        )
    return folder


def format_since(since: str) -> str:
    """A trail time (UTC, ISO 8601) as people read it: "2025-03-01 14:05 UTC"."""
    return f"{since[:10]} {since[11:16]} UTC"


def _checked_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise UserError("give a reason for the promotion: the team reads it in the trail")
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise UserError(
            f"the reason is {len(reason):,} characters; keep it to {MAX_REASON_CHARS:,}"
        )
    return reason


def _checked_report(report: Mapping[str, Any] | None) -> dict | None:
    """`report` as plain JSON (what the trail stores is what a reader gets back), bounded."""
    if report is None:
        return None
    try:
        text = json.dumps(dict(report), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise UserError(f"the comparison report is not plain JSON ({err}); run it again") from err
    if len(text.encode("utf-8")) > MAX_REPORT_BYTES:
        raise UserError(
            f"the comparison report is over {MAX_REPORT_BYTES >> 20} MiB; compare on fewer rows"
        )
    return json.loads(text)


def _checked_model(models_root: str | Path, name: str) -> str:
    """The card digest of saved model `name`, after the torch-free checks of a load: the card,
    no pickle, no code, only listed files, and each file as saved (so the digest pins a model
    that will load, not only a card)."""
    folder = model_folder(models_root, name)
    card, digest = read_card_and_digest(folder)
    check_loadable(folder)
    listed = card.get(FILES_KEY)
    if listed is not None and not isinstance(listed, dict):
        raise UserError(f"model {name}: its card's file list is damaged; save the model again")
    for file_name, expected in sorted((listed or {}).items()):
        path = model_folder(folder, file_name)  # a card names files of its own folder only
        if not path.is_file() or file_digest(path) != expected:
            raise UserError(
                f"model {name}: {file_name} differs from the file it was saved with; save the "
                "model again before promoting it"
            )
    return digest


_Query = Callable[[str, Sequence[Any]], list[tuple]]
# A promotion's fields without its comparison report: SQLite drops the report from the details
# (one pass of its JSON parser in C), so Python neither receives nor parses it. One JSON pass
# only: asking SQLite also whether a report is there (json_type) in the same query took the read
# of an 8 MB report from 3.5 ms to 16.8 (BENCHMARKS.md, "Live intake").
_PROMOTIONS = (
    "SELECT id, created_at, actor, json_remove(details, '$.report') FROM trail"
    " WHERE action = ? ORDER BY id DESC LIMIT ?"
)


def _on(conn: sqlite3.Connection) -> _Query:
    return lambda sql, params: conn.execute(sql, params).fetchall()


def _promotions(query: _Query, *, limit: int) -> list[LiveModel]:
    """The latest `limit` promotions through `query` (the store's, or a transaction's
    connection), without their reports."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UserError(f"limit must be an integer >= 1, got {limit!r}")  # as Store.events
    return [_promotion(*row) for row in query(_PROMOTIONS, (PROMOTED, limit))]


def _promotion(event_id: int, since: str, actor: str, text: str) -> LiveModel:
    """One promotion from a row of _PROMOTIONS."""
    details = json.loads(text)
    return LiveModel(
        name=str(details["name"]), digest=str(details["digest"]), since=since,
        promoted_by=str(actor), reason=str(details.get("reason", "")),
        event_id=int(event_id), previous=details.get("previous"),
    )  # fmt: skip
