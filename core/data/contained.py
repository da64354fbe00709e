"""The second wall of intake: read an untrusted upload in a child process with a memory and a time
limit, so that a file no check foresaw (a Parquet page that lies about its size, a parser bug)
costs that child, never the server every other session runs in.

The first wall is `load_table` itself, which refuses what it will not keep before reading it;
this module runs the same `load_table` in a fresh interpreter (`python -m core.data.contained`,
about 0.9 s of imports, once per upload: the pages cache the table by the file's SHA-256). The
child caps its own address space once it holds the file, and sends back an Arrow IPC stream,
never a pickle: a child that a hostile file took over can only send a wrong table, not code.
A fresh interpreter rather than a fork: the server is multi-threaded (forking it can deadlock),
and multiprocessing's spawn and fork server re-run the server's main module in the child.
Each child may take a gigabyte or two, so a process-wide `ReaderSlots` bounds how many run at once;
a caller that finds no free slot within a short wait is told to try again.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from core.data.intake import load_table
from core.data.limits import MB, DataError, IntakeLimits
from core.errors import UserError

log = logging.getLogger(__name__)

_TABLE, _REFUSED, _NO_MEMORY = b"T", b"E", b"M"
_ATTRS_KEY = b"grievance_lens.attrs"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Characters of the child's stderr kept in the log, its last ones (where a traceback ends): a
# child that a hostile file took over must not fill the server's log.
MAX_STDERR_LOGGED = 20_000


CONTAIN_UPLOADS_ENV = "GRIEVANCE_LENS_CONTAIN_UPLOADS"


def contain_uploads(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the pages read uploads in a child process (the default, "1"), or, with
    GRIEVANCE_LENS_CONTAIN_UPLOADS=0, in the server's own process: only for a server whose every
    uploader is trusted (and the test suite, whose hundreds of tiny uploads would each wait for
    a child's imports). `environ` defaults to `os.environ`; unset or empty keeps the default."""
    env = os.environ if environ is None else environ
    raw = env.get(CONTAIN_UPLOADS_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise UserError(f"{CONTAIN_UPLOADS_ENV} must be 0 or 1, got {raw!r}; fix or unset it")
    return raw != "0"


@dataclass(frozen=True)
class Containment:
    """How much the child reading one file may use."""

    # Address space the child may add to what it holds once it has the file (the interpreter,
    # its libraries and the bytes): ten times the file, as the intake benchmark measured for
    # ordinary files, and never less than `min_extra_bytes` (pandas and pyarrow reserve arenas
    # up front, which count as address space before they hold anything).
    memory_per_file_byte: float = 10.0
    min_extra_bytes: int = 1024 * MB
    seconds: float = 60.0

    def extra_bytes(self, file_bytes: int) -> int:
        return max(self.min_extra_bytes, int(self.memory_per_file_byte * file_bytes))


DEFAULT_CONTAINMENT = Containment()


UPLOAD_READERS_ENV = "GRIEVANCE_LENS_UPLOAD_READERS"
# Memory one reader is counted for: what a child may take, the 1 GiB floor above plus ten times
# a file near the 200 MB limit (about 2.5 GiB), counted so that readers hold a third at most.
_MEMORY_PER_READER = 8 * 1024 * MB


def default_order_model_count(*, cpus: int | None = None, memory_bytes: int | None = None) -> int:
    """How many children may read uploads at once on this machine (`cpus` usable cores and
    `memory_bytes` of memory; both default to this machine's): half the cores, since a child
    parses on one and the job queue needs the rest, and one per 8 GiB of memory; at least one.
    A 4-core, 16 GiB server reads 2 uploads at once."""
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    memory_bytes = _machine_memory_bytes() if memory_bytes is None else memory_bytes
    return max(1, min(cpus // 2, memory_bytes // _MEMORY_PER_READER))


def _machine_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class ReaderSlots:
    """At most `count` children reading uploads at once: a burst of uploads must not start a
    gigabyte-hungry child each. A caller waits up to `wait_seconds` for a slot, then gets a
    one-line UserError telling it to come back, rather than piling up behind the others."""

    def __init__(self, count: int, *, wait_seconds: float = 10.0) -> None:
        # Ten seconds ride out a burst of ordinary files (about a second each) without leaving a
        # page hanging behind a queue of large ones (up to Containment.seconds each).
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UserError(f"the number of upload readers must be 1 or more, got {count!r}")
        self.count, self.wait_seconds = count, wait_seconds
        self._free = threading.BoundedSemaphore(count)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the duration of the block."""
        if not self._free.acquire(timeout=self.wait_seconds):
            raise UserError(
                f"the server is reading other uploads ({self.count} at a time); try again in a "
                "minute"
            )
        try:
            yield
        finally:
            self._free.release()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReaderSlots:
        """`default_order_model_count()` slots, or GRIEVANCE_LENS_UPLOAD_READERS of them.

        `environ` defaults to `os.environ`; an unset or empty variable keeps the default."""
        env = os.environ if environ is None else environ
        raw = env.get(UPLOAD_READERS_ENV, "").strip()
        if not raw:
            return cls(default_order_model_count())
        if not (raw.isascii() and raw.isdigit() and int(raw) >= 1):
            raise UserError(
                f"{UPLOAD_READERS_ENV} must be a positive whole number, got {raw!r}; fix or "
                "unset it"
            )
        return cls(int(raw))


_process_slots: list[ReaderSlots] = []  # the one ReaderSlots of this process, made when needed
_process_slots_lock = threading.Lock()


def process_reader_slots() -> ReaderSlots:
    """The slots every upload read of this process shares (`ReaderSlots.from_env()`, read once)."""
    with _process_slots_lock:
        if not _process_slots:
            _process_slots.append(ReaderSlots.from_env())
        return _process_slots[0]


def load_table_contained(
    data: bytes,
    *,
    filename: str,
    limits: IntakeLimits,
    containment: Containment = DEFAULT_CONTAINMENT,
    slots: ReaderSlots | None = None,
) -> pd.DataFrame:
    """`load_table(data, filename=..., limits=...)` run in a child process within `containment`,
    holding one of `slots` (default: the process's `process_reader_slots()`) while it runs.

    Returns the same table (values, dtypes and attrs); raises `DataError` with `load_table`'s
    own message, or one saying the file needed more memory or time than one upload may use, and
    a `UserError` when no slot came free in time.
    """
    command = [
        sys.executable, "-m", "core.data.contained", filename,
        json.dumps(asdict(limits)), json.dumps(asdict(containment)),
    ]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    # pyarrow's default allocator (mimalloc) reserves large address ranges up front, which an
    # address-space cap refuses; the system allocator asks for what it uses.
    env = {**os.environ, "PYTHONPATH": path, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    with (slots or process_reader_slots()).slot():
        done = _run_child(command, data, filename, env, containment)
    _log_stderr(filename, done.stderr, failed=not _answered(done))
    return _table_of(done, filename, containment, len(data))


def _run_child(
    command: list[str], data: bytes, filename: str, env: dict[str, str], c: Containment
) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            command, input=bytes(data), capture_output=True, timeout=c.seconds,
            env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        _log_stderr(filename, exc.stderr, failed=True)
        raise DataError(
            f"'{filename}' took longer than {c.seconds:g} s to read; save it as CSV UTF-8 or "
            "split it"
        ) from None


def _answered(done: subprocess.CompletedProcess) -> bool:
    """Whether the child ended normally with one of its three messages."""
    return done.returncode == 0 and done.stdout[:1] in (_TABLE, _REFUSED, _NO_MEMORY)


def _log_stderr(name: str, stderr: bytes | None, *, failed: bool) -> None:
    """Keep what the child wrote to stderr (a traceback, a library's warning) in the server's
    log: at warning level when the read failed, at debug level otherwise."""
    text = (stderr or b"").decode("utf-8", errors="replace").strip()
    if text:
        level = logging.WARNING if failed else logging.DEBUG
        log.log(level, "the reader of %r wrote to stderr:\n%s", name, text[-MAX_STDERR_LOGGED:])


def _table_of(
    done: subprocess.CompletedProcess, name: str, c: Containment, size: int
) -> pd.DataFrame:
    tag, body = done.stdout[:1], done.stdout[1:]
    if not _answered(done):
        # Killed for memory outside Python's reach, or crashed: the child said nothing usable.
        raise DataError(
            f"'{name}' could not be read: the reader stopped (exit code {done.returncode}); "
            "save the data as CSV UTF-8 and try again"
        )
    if tag == _REFUSED:
        raise DataError(body.decode("utf-8"))
    if tag == _NO_MEMORY:
        raise DataError(
            f"'{name}' needs more than the {c.extra_bytes(size) / MB:,.0f} MB one upload may "
            "use to read; split the file or save it as CSV"
        )
    with pa.ipc.open_stream(body) as stream:
        table = stream.read_all()
    frame = table.to_pandas()
    frame.attrs = json.loads(table.schema.metadata[_ATTRS_KEY])
    return frame


# -------------------------------------------------------------------------------------- child


def _main(argv: list[str]) -> int:
    """The child: read the file from stdin, cap the address space, read it, write one message."""
    filename, limits_json, containment_json = argv
    limits = IntakeLimits(**json.loads(limits_json))
    containment = Containment(**json.loads(containment_json))
    data = sys.stdin.buffer.read()
    _cap_address_space(containment.extra_bytes(len(data)))
    try:
        message = _TABLE + _ipc_bytes(load_table(data, filename=filename, limits=limits))
    except UserError as exc:  # a DataError, or another refusal in the user's words
        message = _REFUSED + str(exc).encode("utf-8")
    except MemoryError:  # pyarrow's ArrowMemoryError is one too
        message = _NO_MEMORY
    sys.stdout.buffer.write(message)
    sys.stdout.buffer.flush()
    return 0


def _cap_address_space(extra: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space_bytes() + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _address_space_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[0])
    return pages * resource.getpagesize()


def _ipc_bytes(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    attrs = json.dumps(frame.attrs, default=str).encode("utf-8")
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _ATTRS_KEY: attrs})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
