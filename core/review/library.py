"""The team's library as shared changes: saved models (saved, renamed, deleted) and saved data
sets (saved, retired), each recorded in the trail under its actor before anyone can see it
(core.pending), so no change and its record can be separated by a crash. The live model is never
renamed or deleted. What a killed process left half done is finished or undone by what the
trail says (`finish_interrupted_changes`), at start and before the next change.

Light to import (no torch): the registry's functions are imported where they are called.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.access import Actor, Permission
from core.data.saved import DatasetSave, SavedDataset, retire_dataset, save_dataset
from core.errors import UserError
from core.models.changes import (
    MODEL_ACTIONS,
    MODEL_SAVED,
    ModelEvent,
    ModelRecorder,
    finish_model_changes,
)
from core.pending import RecordedChange
from core.review.live import LiveModel, live_model, live_model_in
from core.review.store import Store, StoreError, append_event, utc_now

SAVED_EVENT = "dataset.saved"
RETIRED_EVENT = "dataset.retired"
# Every trail action whose details carry a change id (core.pending).
CHANGE_ACTIONS = (*MODEL_ACTIONS, SAVED_EVENT, RETIRED_EVENT)

log = logging.getLogger(__name__)


def save_and_record(
    store: Store, root: str | Path, request: DatasetSave, *, actor: Actor
) -> SavedDataset:
    """`core.data.saved.save_dataset`, recorded as "dataset.saved" (name, fingerprint, rows,
    parent) under `actor`, who needs DECIDE, before the data set can be seen."""
    actor.require(Permission.DECIDE)
    record = _event_recorder(store, SAVED_EVENT, actor, Permission.DECIDE)
    finish_interrupted_changes(store, datasets_root=root)
    return save_dataset(root, request, actor=actor, record=record)


def retire_and_record(
    store: Store, root: str | Path, name: str, *, actor: Actor, reason: str
) -> SavedDataset:
    """`core.data.saved.retire_dataset`, recorded as "dataset.retired" (name, fingerprint,
    rows, parent, reason) under `actor`, who needs MANAGE_DATA, before it takes effect."""
    actor.require(Permission.MANAGE_DATA)
    record = _event_recorder(store, RETIRED_EVENT, actor, Permission.MANAGE_DATA)
    finish_interrupted_changes(store, datasets_root=root)
    return retire_dataset(root, name, actor=actor, reason=reason, record=record)


def _event_recorder(
    store: Store, action: str, actor: Actor, permission: Permission
) -> Callable[[dict[str, Any]], None]:
    require_writable(store)  # refused before any file is touched
    return lambda details: store.record_event(action, details, actor=actor, permission=permission)


def model_recorder(store: Store, *, actor: Actor) -> ModelRecorder:
    """The recorder `save_model`, `rename_model` and `delete_model` call with a change ready
    but hidden: it appends the trail event under `actor`, and refuses (so the change is
    undone) a rename or delete of the live model, read in the same write transaction so a
    promotion at the same moment is either before it (and refuses it) or after it."""
    require_writable(store)

    def record(event: ModelEvent) -> None:
        with store.transaction() as conn:
            if event.action != MODEL_SAVED:
                _refuse_live(live_model_in(conn), event.renamed_from or event.name)
            append_event(conn, event.action, None, actor.user, event.details(), utc_now())

    return record


def rename_recorded(
    store: Store, models_root: str | Path, name: str, new_name: str, *, actor: Actor
) -> Path:
    """Rename model `name` to `new_name`, recorded ("model.renamed"); never the live model."""
    from core.models.registry import rename_model

    actor.require(Permission.MANAGE_MODELS)
    _refuse_live(live_model(store), name)
    finish_interrupted_changes(store, models_root=models_root)
    record = model_recorder(store, actor=actor)
    return rename_model(models_root, name, new_name, actor=actor, record=record)


def delete_recorded(store: Store, models_root: str | Path, name: str, *, actor: Actor) -> None:
    """Delete model `name`, recorded ("model.deleted"); never the live model."""
    from core.models.registry import delete_model

    actor.require(Permission.MANAGE_MODELS)
    _refuse_live(live_model(store), name)
    finish_interrupted_changes(store, models_root=models_root)
    delete_model(models_root, name, actor=actor, record=model_recorder(store, actor=actor))


def finish_interrupted_changes(
    store: Store,
    *,
    models_root: str | Path | None = None,
    datasets_root: str | Path | None = None,
) -> list[str]:
    """Finish or undo the changes of the models folder and of the saved data sets that
    processes killed midway left, by what the trail recorded; logs and returns one line per
    change."""
    recorded = recorded_changes(store)
    lines = [] if models_root is None else finish_model_changes(models_root, recorded)
    if datasets_root is not None:
        from core.data.saved import finish_dataset_changes

        lines += finish_dataset_changes(datasets_root, recorded)
    for line in lines:
        log.warning("an interrupted change: %s", line)
    return lines


def recorded_changes(store: Store) -> RecordedChange:
    """`recorded(change_id)`: the details of the trail event that recorded that change, or
    None (core.models.changes.RecordedChange)."""
    marks = ", ".join("?" * len(CHANGE_ACTIONS))
    sql = (
        f"SELECT details FROM trail WHERE action IN ({marks})"
        " AND json_extract(details, '$.change') = ? ORDER BY id DESC LIMIT 1"
    )

    def recorded(change: str) -> dict[str, Any] | None:
        rows = store.query(sql, (*CHANGE_ACTIONS, change))
        return json.loads(rows[0][0]) if rows else None

    return recorded


def require_writable(store: Store) -> None:
    """Refuse before touching any file when the trail cannot be written."""
    if store.read_only:
        raise StoreError(
            f"the review store {store.path} is read-only, so the trail cannot record this; "
            "nothing was changed; ask the operator to make it writable"
        )


def _refuse_live(live: LiveModel | None, name: str) -> None:
    if live is not None and live.name == name:
        raise UserError(
            f"model {name!r} is the live model: promote another model before renaming or "
            "deleting it"
        )
