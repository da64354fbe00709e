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
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Mapping
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


def load_table_contained(
    data: bytes,
    *,
    filename: str,
    limits: IntakeLimits,
    containment: Containment = DEFAULT_CONTAINMENT,
) -> pd.DataFrame:
    """`load_table(data, filename=..., limits=...)` run in a child process within `containment`.

    Returns the same table (values, dtypes and attrs); raises `DataError` with `load_table`'s
    own message, or one saying the file needed more memory or time than one upload may use.
    """
    command = [
        sys.executable, "-m", "core.data.contained", filename,
        json.dumps(asdict(limits)), json.dumps(asdict(containment)),
    ]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    # pyarrow's default allocator (mimalloc) reserves large address ranges up front, which an
    # address-space cap refuses; the system allocator asks for what it uses.
    env = {**os.environ, "PYTHONPATH": path, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    try:
        done = subprocess.run(
            command, input=bytes(data), capture_output=True, timeout=containment.seconds,
            env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        _log_stderr(filename, exc.stderr, failed=True)
        raise DataError(
            f"'{filename}' took longer than {containment.seconds:g} s to read; save it as CSV "
            "UTF-8 or split it"
        ) from None
    _log_stderr(filename, done.stderr, failed=not _answered(done))
    return _table_of(done, filename, containment, len(data))


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
