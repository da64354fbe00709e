"""Scratch folders of browser sessions: where a session's large job outputs (a classified table
of complaints) live, under the system's temporary folder, from the session's first need until the
session ends, the job queue shuts down or the process exits, whichever comes first."""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from core.errors import UserError

log = logging.getLogger(__name__)

PREFIX = "grievance-lens-jobs-"
# A root is named PREFIX + "<owning process id>-<random>": a later process can tell that its
# owner died (killed before it could clean up) and delete it. Older names carry no id: kept.
_OWNED_ROOT = re.compile(re.escape(PREFIX) + r"(\d+)-\w+")


class SessionScratch:
    """The scratch folders of one job queue: one per browser session, in a root of this process.

    Nothing is written until a session first asks for a folder. Folders are numbered from a
    counter that never goes down, so a new session never gets the name of a live one however
    many have ended; session ids (sent by browsers) never become names. Creating one first
    deletes the roots of dead processes (`remove_stale`)."""

    def __init__(self, parent: Path | None = None) -> None:
        self._parent = Path(parent or tempfile.gettempdir())
        self._lock = threading.Lock()
        self._root: Path | None = None  # made on first need
        self._folders: dict[str | None, Path] = {}
        self._numbers = itertools.count(1)
        self._removed = False
        remove_stale(self._parent)

    def folder(self, session_id: str | None) -> Path:
        """`session_id`'s folder, made on first use (None: work asked for by no browser)."""
        with self._lock:
            if self._removed:
                raise UserError("the job queue is shut down; restart the server")
            folder = self._folders.get(session_id)
            if folder is None:
                folder = self._own_root() / f"session-{next(self._numbers)}"
                folder.mkdir()
                self._folders[session_id] = folder
            return folder

    def sweep(self, ended: Callable[[str], bool]) -> None:
        """Delete the folders of the browser sessions for which `ended(session_id)` is true."""
        with self._lock:
            gone = [s for s in self._folders if s is not None and ended(s)]
            folders = [self._folders.pop(s) for s in gone]
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)

    def remove(self) -> None:
        """Delete every folder, for good (the queue's shutdown, or the interpreter's exit)."""
        with self._lock:
            root, self._root, self._removed = self._root, None, True
            self._folders.clear()
        atexit.unregister(self.remove)  # the exit hook no longer keeps this object alive
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def _own_root(self) -> Path:
        """This process's root, made on first need (call with the lock held)."""
        if self._root is None:
            prefix = f"{PREFIX}{os.getpid()}-"
            self._root = Path(tempfile.mkdtemp(prefix=prefix, dir=self._parent))
            # A server is stopped without anyone calling shutdown: complaint tables must not
            # outlive the process either.
            atexit.register(self.remove)
        return self._root


def remove_stale(parent: Path) -> list[Path]:
    """Delete the scratch roots in `parent` whose owning process has died; never a live
    process's, another user's, or a link. Returns what was deleted."""
    if os.name != "posix":
        return []  # no signal-0 probe of a process elsewhere: delete nothing
    removed = []
    for path in parent.glob(f"{PREFIX}*"):
        owner = _OWNED_ROOT.fullmatch(path.name)
        if owner is None or not _own_folder(path) or _process_alive(int(owner[1])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        log.info("deleted %d scratch folders of ended processes", len(removed))
    return removed


def _own_folder(path: Path) -> bool:
    """A real folder (not a link someone planted) owned by this process's user."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def _process_alive(pid: int) -> bool:
    """Whether process `pid` may still run: true unless the system says there is none."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or no pid at all: not ours to judge
    return True
