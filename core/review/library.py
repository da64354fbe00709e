"""The team's library of saved data sets as a shared change: each save and retirement
(core.data.saved) together with its trail event, so the trail says who saved or retired what.

The file operation comes first and the event second; when the event cannot be written (a
read-only store, a full disk) the file operation is undone, so no data set appears or
disappears without the trail knowing.
"""

from __future__ import annotations

from pathlib import Path

from core.access import Actor, Permission
from core.data.saved import (
    DatasetSave,
    SavedDataset,
    discard_dataset,
    retire_dataset,
    save_dataset,
    undo_retirement,
)
from core.review.store import Store, StoreError

SAVED_EVENT = "dataset.saved"
RETIRED_EVENT = "dataset.retired"


def save_and_record(
    store: Store, root: str | Path, request: DatasetSave, *, actor: Actor
) -> SavedDataset:
    """`core.data.saved.save_dataset` and the trail event "dataset.saved" (name, fingerprint,
    rows, parent) under `actor`, who needs DECIDE."""
    actor.require(Permission.DECIDE)
    _require_writable(store)
    saved = save_dataset(root, request, actor=actor)
    try:
        store.record_event(SAVED_EVENT, _details(saved), actor=actor, permission=Permission.DECIDE)
    except BaseException:
        discard_dataset(saved)
        raise
    return saved


def retire_and_record(
    store: Store, root: str | Path, name: str, *, actor: Actor, reason: str
) -> SavedDataset:
    """`core.data.saved.retire_dataset` and the trail event "dataset.retired" (name,
    fingerprint, rows, parent, reason) under `actor`, who needs MANAGE_DATA."""
    actor.require(Permission.MANAGE_DATA)
    _require_writable(store)
    saved = retire_dataset(root, name, actor=actor, reason=reason)
    details = {**_details(saved), "reason": saved.retired_reason}
    try:
        store.record_event(RETIRED_EVENT, details, actor=actor, permission=Permission.MANAGE_DATA)
    except BaseException:
        undo_retirement(saved)
        raise
    return saved


def _require_writable(store: Store) -> None:
    """Refuse before touching any file when the trail cannot be written."""
    if store.read_only:
        raise StoreError(
            f"the review store {store.path} is read-only, so the trail cannot record this; "
            "nothing was changed; ask the operator to make it writable"
        )


def _details(saved: SavedDataset) -> dict:
    return {
        "name": saved.name,
        "fingerprint": saved.fingerprint,
        "rows": saved.rows,
        "parent": saved.parent,
    }
