"""The changes of the models folder the trail records (saved, renamed, deleted), and how one
that a killed process left half done is finished or undone (core.pending). Light: no torch,
so the app can finish them at start."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.models.card import model_folder
from core.pending import (
    DELETING,
    RENAMING,
    SAVING,
    Change,
    RecordedChange,
    finish_abandoned,
    move_into_name,
)

MODEL_SAVED, MODEL_RENAMED, MODEL_DELETED = "model.saved", "model.renamed", "model.deleted"
MODEL_ACTIONS = (MODEL_SAVED, MODEL_RENAMED, MODEL_DELETED)


@dataclass(frozen=True)
class ModelEvent:
    """What the trail records for one change of the models folder, before anyone can see the
    change: the action, the model's name after it (before it, for a delete), its card digest,
    and the change's id (core.pending), by which a change a killed process left is finished or
    undone."""

    action: str  # one of MODEL_ACTIONS
    name: str
    digest: str
    change: str
    renamed_from: str | None = None

    def details(self) -> dict[str, Any]:
        details = {"name": self.name, "digest": self.digest, "change": self.change}
        return details | ({"from": self.renamed_from} if self.renamed_from else {})


# Called with the change complete but hidden; if it raises, the change is undone. The team's
# saves, renames and deletes pass one that writes the trail event (core.review.model_changes).
ModelRecorder = Callable[[ModelEvent], None]


def finish_model_changes(root: str | Path, recorded: RecordedChange) -> list[str]:
    """Finish or undo the changes of the models folder `root` that processes killed midway
    left (hidden change folders no live process holds), by what the trail says: a recorded
    save or rename takes its name, a recorded delete is removed, an unrecorded change is
    undone (a save's folder removed, a model put back under its name). Returns one line per
    change, for the log."""
    root = Path(root)
    return finish_abandoned(root, recorded, lambda change, details: _finish(root, change, details))


def _finish(root: Path, change: Change, details: dict[str, Any] | None) -> str:
    if details is not None and change.kind == DELETING:
        shutil.rmtree(change.folder)
        return f"model {change.name!r}: finished its recorded delete"
    if details is not None and change.kind in (SAVING, RENAMING):
        name = str(details.get("name", ""))
        if _move(change, root, name):
            return f"model {name!r}: finished its recorded {_NOUNS[change.kind]}"
        return f"model {name!r}: its recorded change waits in {change.folder.name} (name taken)"
    if change.kind == SAVING:
        shutil.rmtree(change.folder)
        return f"model {change.name!r}: removed a save that was never recorded"
    if _move(change, root, change.name):
        return f"model {change.name!r}: put back (its {_NOUNS[change.kind]} was never recorded)"
    return f"model {change.name!r}: waits in {change.folder.name} (its name is taken)"


_NOUNS = {SAVING: "save", RENAMING: "rename", DELETING: "delete"}


def _move(change: Change, root: Path, name: str) -> bool:
    try:
        target = model_folder(root, name)
    except UserError:  # never trust a name enough to leave the models folder
        return False
    return move_into_name(change.folder, target)
