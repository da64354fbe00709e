"""Changes to the team's shared folders (saved models, saved data sets) that the trail must
record: each is prepared under a hidden name, recorded, and only then made visible, so a change
and its trail event are one outcome even when the process is killed in between.

A change lives in a hidden folder `.<name>.<kind>-<id>` beside the visible ones (the listings
skip hidden names). The process making it holds an exclusive `flock` on that folder for the
whole change; the trail event carries the change's id (`<kind>-<id>`). A hidden change folder
whose lock is free was left by a process that died, and is finished at the next start (or
before the next change) by what the trail says: recorded, it is completed; not recorded, it is
undone. Nothing here knows the trail: the caller passes `recorded`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAVING = "saving"  # a new folder, complete, waiting for its event
RENAMING = "renaming"  # an existing folder, taken out of its name, on its way to another
DELETING = "deleting"  # an existing folder, taken out of its name, to be removed
RETIRING = "retiring"  # a data set's retirement marker, waiting for its event
KINDS = (SAVING, RENAMING, DELETING, RETIRING)
MAKING = "making"  # a change folder being created and locked (`created_held`): microseconds
STALE_MAKING_S = 60.0  # one older than this was left by a process killed in those microseconds
# The trail's answer for a change id: the details of the event that recorded it, or None.
RecordedChange = Callable[[str], dict[str, Any] | None]
_HIDDEN = re.compile(r"^\.(?P<name>.+)\.(?P<kind>" + "|".join(KINDS) + r")-(?P<id>[0-9a-f]{8,32})$")


@dataclass(frozen=True)
class Change:
    """One pending change: its hidden folder, the visible name it belongs to, and its id."""

    folder: Path
    name: str
    kind: str
    id: str  # "<kind>-<hex>": what the trail event records as "change"


def new_change(parent: Path, name: str, kind: str) -> Change:
    """A fresh change of `name` in `parent` (nothing is created yet)."""
    token = f"{kind}-{uuid.uuid4().hex[:16]}"
    return Change(parent / f".{name}.{token}", name, kind, token)


def pending_changes(root: Path) -> list[Change]:
    """The hidden change folders of `root`, held or not, oldest name first."""
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(root.iterdir()):
        match = _HIDDEN.fullmatch(entry.name)
        if match and entry.is_dir() and not entry.is_symlink():
            kind, token = match["kind"], f"{match['kind']}-{match['id']}"
            found.append(Change(entry, match["name"], kind, token))
    return found


def finish_abandoned(
    root: Path,
    recorded: RecordedChange,
    finish: Callable[[Change, dict[str, Any] | None], str],
) -> list[str]:
    """`finish(change, details)` for each change of `root` that no live process holds (its
    process was killed), `details` being what the trail recorded of it (None: nothing); first
    the folders a kill left half made are swept. Returns `finish`'s lines, for the log."""
    sweep_stale_making(root)
    lines = []
    for change in pending_changes(root):
        with if_abandoned(change.folder) as abandoned:
            if abandoned:
                lines.append(finish(change, recorded(change.id)))
    return lines


def sweep_stale_making(root: Path, *, now: float | None = None) -> int:
    """Remove the folders `created_held` left when its process was killed between creating and
    renaming one (empty, older than STALE_MAKING_S); returns how many."""
    if not root.is_dir():
        return 0
    now = time.time() if now is None else now
    removed = 0
    for entry in root.glob(f".*.{MAKING}-*"):
        with suppress(OSError):  # gone meanwhile, or not empty: not a leftover of ours
            if (
                entry.is_dir()
                and not entry.is_symlink()
                and now - entry.stat().st_mtime > STALE_MAKING_S
            ):
                entry.rmdir()
                removed += 1
    return removed


@contextmanager
def holding(folder: Path) -> Iterator[None]:
    """Hold `folder` (an existing folder) exclusively while a change is made to it; raises
    BlockingIOError at once if another change holds it. The lock follows the folder through
    renames (it is on the folder itself) and dies with the process."""
    fd = _hold(folder)
    if fd is None:
        raise BlockingIOError(errno.EWOULDBLOCK, f"{folder.name} is being changed")
    try:
        yield
    finally:
        os.close(fd)


@contextmanager
def created_held(change: Change) -> Iterator[None]:
    """Create `change.folder` and hold it, as `holding` does. It is made under a name no sweep
    looks at, locked, and only then renamed to the change's name, so a sweep of another
    process never finds it unheld between its creation and its lock."""
    making = change.folder.with_name(f".{change.name}.{MAKING}-{change.id}")
    making.mkdir()
    with holding(making):  # nothing else knows this name: the lock cannot be refused
        try:
            os.rename(making, change.folder)
        except BaseException:
            making.rmdir()
            raise
        yield


@contextmanager
def if_abandoned(folder: Path) -> Iterator[bool]:
    """Yields True, holding `folder`, when no live process holds it (its change was
    abandoned), else False."""
    fd = _hold(folder)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


def _hold(folder: Path) -> int | None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def move_into_name(folder: Path, target: Path) -> bool:
    """Rename `folder` to `target` when that name is free (absent, or an empty folder nobody
    holds: the claim of a save that was killed); False, touching nothing, when it is not."""
    if not os.path.lexists(target):
        return _rename(folder, target)
    with if_abandoned(target) as abandoned:  # a live save's claim is held: never take it
        return abandoned and _rename(folder, target)


def _rename(folder: Path, target: Path) -> bool:
    """POSIX renames a folder onto an empty one and refuses one with files in it."""
    try:
        os.rename(folder, target)
    except OSError as err:
        if err.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            return False
        raise
    return True
