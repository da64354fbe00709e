"""The job queue's scratch folders (core.scratch_folders): nothing written before a session needs
a folder, everything deleted at shutdown, at the interpreter's exit, and at the next start when
the owning process was killed, but never a live process's folder."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import pytest

from core.errors import UserError
from core.jobs import JobQueue, QueueConfig
from core.scratch_folders import PREFIX, SessionScratch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system temporary folder of the test's own (what tempfile.gettempdir() returns)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_queue_writes_no_scratch_until_a_session_needs_a_folder(temp_dir):
    """Regression: every queue made a scratch folder when it was built, and a server never
    shut down, so the temporary folder filled with them."""
    queue = JobQueue(QueueConfig(), cpus=2)
    try:
        assert list(temp_dir.iterdir()) == []
        folder = queue.session_folder("tab-1")
        assert folder.is_dir() and folder.parent.parent == temp_dir
        assert folder.parent.name.startswith(f"{PREFIX}{os.getpid()}-")  # its owner, recorded
    finally:
        queue.shutdown()
    assert list(temp_dir.iterdir()) == []


def test_scratch_is_deleted_when_the_process_exits_without_a_shutdown(tmp_path):
    """Regression: a server stopped without calling shutdown left its classified complaints."""
    code = (
        "from core.jobs import JobQueue\n"
        "folder = JobQueue(cpus=2).session_folder('tab-1')\n"
        "(folder / 'classified.parquet').write_bytes(b'complaints')\n"
        "print(folder)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    folder = Path(done.stdout.strip())
    assert folder.parent.parent == tmp_path and not folder.exists()
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


@pytest.mark.skipif(os.name != "posix", reason="probes processes with signal 0")
def test_a_dead_process_scratch_is_swept_at_start_never_a_live_one(temp_dir):
    """Regression: scratch of a killed server stayed forever; a new queue deletes it, and only
    folders whose recorded owner has ended."""
    dead = _dead_pid()
    stale = temp_dir / f"{PREFIX}{dead}-abc123"
    (stale / "session-1").mkdir(parents=True)
    (stale / "session-1" / "classified.parquet").write_bytes(b"complaints")
    live = temp_dir / f"{PREFIX}{os.getppid()}-def456"  # the process that started this one
    own = temp_dir / f"{PREFIX}{os.getpid()}-ghi789"
    unowned = temp_dir / f"{PREFIX}k2j4h5g6"  # an older name: no owner recorded, kept
    for folder in (live, own, unowned):
        folder.mkdir()
    target = temp_dir / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("not scratch")
    planted = temp_dir / f"{PREFIX}{dead}-link"
    planted.symlink_to(target, target_is_directory=True)
    JobQueue(QueueConfig(), cpus=2).shutdown()
    assert not stale.exists()
    assert live.is_dir() and own.is_dir() and unowned.is_dir()
    assert planted.is_symlink() and (target / "keep.txt").read_text() == "not scratch"


def test_removed_scratch_is_let_go_by_the_exit_hook(temp_dir):
    """The exit hook holds the scratch only while it has folders to delete: a queue shut down
    is not kept alive until the interpreter exits."""
    scratch = SessionScratch()
    scratch.folder("tab-1")
    scratch.remove()
    assert list(temp_dir.iterdir()) == []
    gone = weakref.ref(scratch)
    del scratch
    gc.collect()
    assert gone() is None


def test_a_removed_scratch_refuses_new_folders(temp_dir):
    scratch = SessionScratch()
    scratch.remove()
    with pytest.raises(UserError, match="shut down"):
        scratch.folder("tab-1")
    assert list(temp_dir.iterdir()) == []
