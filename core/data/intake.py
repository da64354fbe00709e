"""Read a labelled complaint file into a table of strings: the source's name and format, its
bytes within the size limit (a path only if it is a regular file, checked before it is opened),
the format reader, and clean, checked column names.

Every failure is a `DataError` (a `UserError`) whose message is one line saying what is wrong
and what to do; the command line prints it after ``error:``.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from core.data.limits import DEFAULT_LIMITS, MAX_FILE_MB_ENV, MB, DataError, IntakeLimits
from core.data.readers import RawTable, read_csv, read_parquet, read_xlsx, too_many_rows_message

Source = str | os.PathLike | bytes | bytearray | memoryview | IO[bytes]
SUPPORTED_SUFFIXES = (".csv", ".tsv", ".xlsx", ".parquet")

_REFUSED_SUFFIXES = {
    ".xls": ".xls workbooks are not supported; save it as .xlsx or .csv",
    ".xlsm": ".xlsm workbooks (with macros) are not supported; save it as .xlsx or .csv",
    ".xlsb": ".xlsb (binary) workbooks are not supported; save it as .xlsx or .csv",
}


def load_table(
    source: Source, *, filename: str | None = None, limits: IntakeLimits = DEFAULT_LIMITS
) -> pd.DataFrame:
    """Read a .csv, .tsv, .xlsx or .parquet file into a table of strings.

    Parameters
    ----------
    source : path, bytes or binary file-like (e.g. Streamlit's UploadedFile)
    filename : name whose suffix gives the format; defaults to the path or ``source.name``.
    limits : size and row ceilings, checked before parsing where possible.

    Returns
    -------
    DataFrame (n_rows, n_columns)
        Every cell a string or NaN (empty cell); column names stripped; the header is not a row.
        ``attrs`` holds ``source``, ``format`` and, where they apply, ``encoding`` and
        ``delimiter`` (CSV/TSV) or ``sheet`` (XLSX: only the first sheet is read), and
        ``warnings`` (one-line notes, e.g. bytes that were not UTF-8) when there are any.
        XLSX formulas are never evaluated: a formula cell reads as the value Excel cached when
        it last saved the file, and as empty when there is none (e.g. files written by scripts).
    """
    name = _source_name(source, filename)
    suffix = _checked_suffix(name)
    data = _read_bytes(source, name, limits)
    if not data:
        raise DataError(f"'{name}' is empty (0 bytes); choose a file with a header row and data")
    readers = {".csv": read_csv, ".tsv": read_csv, ".xlsx": read_xlsx, ".parquet": read_parquet}
    raw = readers[suffix](data, name=name, suffix=suffix, limits=limits)
    return _finish_table(raw, name, limits)


def _source_name(source: Source, filename: str | None) -> str:
    if filename is not None:
        return Path(str(filename)).name
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:
        return Path(name).name
    raise DataError(
        "cannot tell the file type of unnamed data; pass filename= with a .csv, .tsv, .xlsx "
        "or .parquet name"
    )


def _checked_suffix(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix in _REFUSED_SUFFIXES:
        raise DataError(f"'{name}': {_REFUSED_SUFFIXES[suffix]}")
    if suffix not in SUPPORTED_SUFFIXES:
        shown = f"'{suffix}' files are" if suffix else "files without a suffix are"
        raise DataError(f"'{name}': {shown} not supported; use .csv, .tsv, .xlsx or .parquet")
    return suffix


def _read_bytes(source: Source, name: str, limits: IntakeLimits) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        data = _read_path(Path(source), limits)
    elif hasattr(source, "read"):
        data = _read_stream(source, name, limits)
    else:
        raise DataError(
            f"cannot read a {type(source).__name__}; pass a path, bytes or a binary file"
        )
    if len(data) > limits.max_file_bytes:
        raise DataError(_too_big_message(name, len(data), limits))
    return data


def _read_path(path: Path, limits: IntakeLimits) -> bytes:
    check_file(path, limits)
    try:
        # O_NONBLOCK: should the path turn into a FIFO after the check, opening it cannot block.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _os_error(path, exc) from exc
    with os.fdopen(fd, "rb") as handle:
        # Checked again on what was opened: the path may have been replaced since.
        size = _check_stat(path, os.fstat(handle.fileno()), limits)
        data = handle.read(size)
        if len(data) != size or handle.read(1):  # never more than the size that was checked
            raise DataError(f"'{path}' changed while it was read; try again once it is complete")
    return data


def check_file(path: Path, limits: IntakeLimits) -> int:
    """The size of the regular file at `path` (links followed) if within `limits`; a one-line
    DataError for a missing path, a folder, anything that is not a regular file (a device, a FIFO,
    a socket: reading /dev/zero never ends, opening a FIFO waits for a writer) or a file too big.
    Nothing is opened."""
    try:
        status = os.stat(path)
    except OSError as exc:
        raise _os_error(path, exc) from exc
    return _check_stat(path, status, limits)


def _check_stat(path: Path, status: os.stat_result, limits: IntakeLimits) -> int:
    if stat.S_ISDIR(status.st_mode):
        raise DataError(f"'{path}' is a folder; choose a file inside it")
    if not stat.S_ISREG(status.st_mode):
        raise DataError(
            f"'{path}' is {_file_kind(status.st_mode)}, not a regular file; copy the data into a "
            ".csv, .tsv, .xlsx or .parquet file and pass that file"
        )
    if status.st_size > limits.max_file_bytes:
        raise DataError(_too_big_message(path.name, status.st_size, limits))
    return status.st_size


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _os_error(path: Path, exc: OSError) -> DataError:
    if isinstance(exc, FileNotFoundError):
        return DataError(f"no such file: '{path}'; check the path")
    return DataError(f"cannot read '{path}': {exc.strerror or exc}; check its permissions")


def _read_stream(stream: IO[bytes], name: str, limits: IntakeLimits) -> bytes:
    seekable = getattr(stream, "seekable", None)
    if callable(seekable) and seekable():
        stream.seek(0)  # an UploadedFile may have been read before
    data = stream.read(limits.max_file_bytes + 1)  # one byte more tells "too big" apart
    if isinstance(data, str):
        raise DataError(f"'{name}' was opened in text mode; open it in binary mode ('rb')")
    return bytes(data)


def _too_big_message(name: str, size: int, limits: IntakeLimits) -> str:
    return (
        f"'{name}' is {size / MB:,.1f} MB, above the {limits.max_file_bytes / MB:g} MB limit; "
        f"split the file or raise the limit with {MAX_FILE_MB_ENV}"
    )


def _finish_table(raw: RawTable, name: str, limits: IntakeLimits) -> pd.DataFrame:
    """Name the columns, drop unnamed empty ones and trailing empty rows, apply the limits."""
    body = raw.body
    if len(body) > limits.max_rows:
        raise DataError(too_many_rows_message(name, limits))
    names = [(cell or "").strip() for cell in raw.header]
    keep = [i for i, col in enumerate(names) if col or body.iloc[:, i].notna().any()]
    names = [names[i] for i in keep]
    _check_column_names(names, keep, name)
    body = body.iloc[:, keep].copy()
    body.columns = names
    body = _trim_trailing_empty_rows(body)
    if body.empty:
        raise DataError(f"'{name}' has a header row but no data rows; add rows below the header")
    body.attrs = {"source": name, **raw.attrs}
    return body


def _check_column_names(names: list[str], positions: list[int], name: str) -> None:
    if not any(names):
        raise DataError(
            f"'{name}': the first row holds no column names; put the column names in row 1"
        )
    letters = [_column_letter(i) for i in positions]
    empty = [letter for letter, col in zip(letters, names, strict=True) if not col]
    if empty:
        raise DataError(
            f"'{name}': column {', '.join(empty)} has values but no name in the header row; "
            "give it a name or delete it"
        )
    seen: dict[str, list[str]] = defaultdict(list)
    for letter, col in zip(letters, names, strict=True):
        seen[col].append(letter)
    duplicated = [
        f"'{col}' (columns {', '.join(cols)})" for col, cols in seen.items() if len(cols) > 1
    ]
    if duplicated:
        raise DataError(
            f"'{name}' has duplicate column names: {'; '.join(duplicated)}; rename them"
        )


def _column_letter(position: int) -> str:
    """Spreadsheet letters of a 0-based column position (0 -> A, 26 -> AA), for any width."""
    letters = ""
    number = position + 1
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _trim_trailing_empty_rows(body: pd.DataFrame) -> pd.DataFrame:
    filled = np.flatnonzero(body.notna().any(axis=1).to_numpy())
    return body.iloc[: filled[-1] + 1] if len(filled) else body.iloc[:0]
