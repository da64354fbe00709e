"""Safe intake of labelled complaint spreadsheets: read CSV/TSV/XLSX/Parquet into all-string
tables, pick the text and label columns, validate them into a `Dataset` with a
`ValidationReport`, and split it into stratified training and validation sets.

Every failure is a `DataError` (a `ValueError`) whose message is one line saying what is wrong
and what to do; the command line prints it after ``error:``.
"""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import difflib
import hashlib
import io
import json
import math
import os
import re
import zipfile
import zlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from itertools import repeat
from operator import floordiv
from pathlib import Path
from typing import IO, Any
from xml.etree.ElementTree import ParseError

import numpy as np
import openpyxl
import openpyxl.xml
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from openpyxl.utils import get_column_letter
from openpyxl.utils.exceptions import InvalidFileException
from sklearn.model_selection import train_test_split

from core.text import WORD_PATTERN, words

Source = str | os.PathLike | bytes | bytearray | memoryview | IO[bytes]

MAX_FILE_MB_ENV = "GRIEVANCE_LENS_MAX_FILE_MB"
MAX_ROWS_ENV = "GRIEVANCE_LENS_MAX_ROWS"
SUPPORTED_SUFFIXES = (".csv", ".tsv", ".xlsx", ".parquet")
_REFUSED_SUFFIXES = {
    ".xls": ".xls workbooks are not supported; save it as .xlsx or .csv",
    ".xlsm": ".xlsm workbooks (with macros) are not supported; save it as .xlsx or .csv",
    ".xlsb": ".xlsb (binary) workbooks are not supported; save it as .xlsx or .csv",
}
_MB = 1024**2


class DataError(ValueError):
    """Unusable input; str() is one line that says what is wrong and what to do."""

    def __init__(self, message: str) -> None:
        # Library messages can span lines; the command line contract is a single line.
        super().__init__(" ".join(str(message).split()))


# ----------------------------------------------------------------------------------------------
# Limits


@dataclass(frozen=True)
class IntakeLimits:
    """Ceilings that keep a mistaken or hostile upload from exhausting memory or time."""

    max_file_bytes: int = 200 * _MB
    max_rows: int = 500_000
    # Sum of the sizes the members of an .xlsx zip declare for themselves once unpacked.
    max_xlsx_uncompressed_bytes: int = 500 * _MB
    # Longer texts are kept but warned about: models only ever read their beginning.
    max_text_chars: int = 100_000
    # An .xlsx member (over 1 MiB) that unpacks to more than this many times its packed size is
    # treated as a zip bomb; ordinary worksheet XML compresses 5 to 30 times.
    max_compression_ratio: float = 100.0

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_rows", "max_xlsx_uncompressed_bytes", "max_text_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(
                    f"IntakeLimits.{name} must be a positive whole number, got {value!r}"
                )
        if not self.max_compression_ratio > 1:
            raise DataError(
                "IntakeLimits.max_compression_ratio must be above 1, "
                f"got {self.max_compression_ratio!r}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> IntakeLimits:
        """Defaults overridden by GRIEVANCE_LENS_MAX_FILE_MB and GRIEVANCE_LENS_MAX_ROWS.

        `environ` defaults to `os.environ`; an unset or empty variable keeps the default.
        """
        env = os.environ if environ is None else environ
        overrides: dict[str, int] = {}
        if raw := env.get(MAX_FILE_MB_ENV, "").strip():
            overrides["max_file_bytes"] = _parse_megabytes(MAX_FILE_MB_ENV, raw)
        if raw := env.get(MAX_ROWS_ENV, "").strip():
            overrides["max_rows"] = _parse_count(MAX_ROWS_ENV, raw)
        return cls(**overrides)


DEFAULT_LIMITS = IntakeLimits()


def _parse_megabytes(variable: str, raw: str) -> int:
    message = f"{variable} must be a positive number of megabytes, got {raw!r}; fix or unset it"
    try:
        megabytes = float(raw)
    except ValueError as exc:
        raise DataError(message) from exc
    if not (math.isfinite(megabytes) and megabytes > 0):
        raise DataError(message)
    return max(1, int(megabytes * _MB))


def _parse_count(variable: str, raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and int(raw) >= 1):
        raise DataError(f"{variable} must be a positive whole number, got {raw!r}; fix or unset it")
    return int(raw)


# ----------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class _RawTable:
    """What a format reader found: header cells, body cells (columns 0..w-1) and notes."""

    header: list[str | None]
    body: pd.DataFrame
    attrs: dict[str, Any]


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
        ``delimiter`` (CSV/TSV) or ``sheet`` (XLSX: only the first sheet is read).
        XLSX formulas are never evaluated: a formula cell reads as the value Excel cached when
        it last saved the file, and as empty when there is none (e.g. files written by scripts).
    """
    name = _source_name(source, filename)
    suffix = _checked_suffix(name)
    data = _read_bytes(source, name, limits)
    if not data:
        raise DataError(f"'{name}' is empty (0 bytes); choose a file with a header row and data")
    readers = {".csv": _read_csv, ".tsv": _read_csv, ".xlsx": _read_xlsx, ".parquet": _read_parquet}
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
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise DataError(f"'{path}' is a folder; choose a file inside it")
        if size > limits.max_file_bytes:
            raise DataError(_too_big_message(path.name, size, limits))
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise DataError(f"no such file: '{path}'; check the path") from exc
    except OSError as exc:
        raise DataError(
            f"cannot read '{path}': {exc.strerror or exc}; check its permissions"
        ) from exc


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
        f"'{name}' is {size / _MB:,.1f} MB, above the {limits.max_file_bytes / _MB:g} MB limit; "
        f"split the file or raise the limit with {MAX_FILE_MB_ENV}"
    )


def _too_many_rows_message(name: str, limits: IntakeLimits) -> str:
    return (
        f"'{name}' has more than {limits.max_rows:,} rows; split the file or raise the limit "
        f"with {MAX_ROWS_ENV}"
    )


# CSV / TSV --------------------------------------------------------------------------------------

_DELIMITERS = ",;\t"
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}
_SNIFF_CHARS = 32 * 1024
_OLE2_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_ZIP_MAGIC = b"PK\x03\x04"
_PARQUET_MAGIC = b"PAR1"


def _read_csv(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> _RawTable:
    _refuse_binary_container(data, name)
    text, encoding = _decode_text(data, name)
    if not text.strip():
        raise DataError(f"'{name}' is empty; choose a file with a header row and data")
    _refuse_nul(text, name)
    delimiter = "\t" if suffix == ".tsv" else _detect_delimiter(text)
    frame = _parse_csv(text, delimiter, name, limits)
    header = [_cell_to_str(value) for value in frame.iloc[0]] if len(frame) else []
    body = frame.iloc[1:].reset_index(drop=True)
    body.columns = range(body.shape[1])
    attrs = {"format": suffix[1:], "encoding": encoding, "delimiter": delimiter}
    return _RawTable(header, body, attrs)


def _refuse_binary_container(data: bytes, name: str) -> None:
    """Name the real format of a workbook or Parquet file saved with a CSV suffix."""
    if data.startswith(_ZIP_MAGIC):
        raise DataError(
            f"'{name}' is a zip archive (perhaps an Excel workbook), not CSV text; "
            "if it is a workbook, give it the .xlsx suffix"
        )
    if data.startswith(_OLE2_MAGIC):
        raise DataError(
            f"'{name}' is an old-style or password-protected Excel workbook, not CSV "
            "text; open it in Excel and save it as .xlsx or CSV UTF-8"
        )
    if data.startswith(_PARQUET_MAGIC):
        raise DataError(f"'{name}' is a Parquet file, not CSV text; give it the .parquet suffix")


def _decode_text(data: bytes, name: str) -> tuple[str, str]:
    """Decode by byte-order mark, then as UTF-8, then as Windows-1252 (Excel's "CSV")."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise DataError(f"'{name}' is UTF-32 text, which is not supported; save it as CSV UTF-8")
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return _decode_marked(data, len(bom), encoding, name), encoding
    for encoding in ("utf-8", "cp1252"):
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError as exc:
            failure = exc
    line = data.count(b"\n", 0, failure.start) + 1
    raise DataError(
        f"'{name}' is neither UTF-8 nor Windows-1252 text (undecodable byte on line {line}); "
        "it may be a binary file; save the data as CSV UTF-8"
    )


def _decode_marked(data: bytes, bom_length: int, encoding: str, name: str) -> str:
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        return data[bom_length:].decode(codec)
    except UnicodeDecodeError as exc:
        raise DataError(
            f"'{name}' starts with a {encoding} byte-order mark but is not valid {codec} text "
            f"(bad bytes at byte {exc.start + bom_length}); save it again as CSV UTF-8"
        ) from exc


def _refuse_nul(text: str, name: str) -> None:
    position = text.find("\x00")
    if position >= 0:
        line = text.count("\n", 0, position) + 1
        raise DataError(
            f"'{name}' contains a NUL byte on line {line}, so it is not CSV text (perhaps a "
            "binary file renamed); export the data again as CSV UTF-8"
        )


def _detect_delimiter(text: str) -> str:
    """Comma, semicolon or tab: the sniffer's choice if the header uses it, else the header's
    most frequent candidate, else comma (a one-column file)."""
    header = re.split(r"\r\n|\r|\n", text, maxsplit=1)[0]
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # a cut-off last line misleads the sniffer
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        sniffed = ""
    if sniffed and sniffed in _DELIMITERS and sniffed in header:
        return sniffed
    best = max(_DELIMITERS, key=header.count)  # ties keep the order of _DELIMITERS
    return best if header.count(best) else ","


def _parse_csv(text: str, delimiter: str, name: str, limits: IntakeLimits) -> pd.DataFrame:
    """Header and data as plain rows; only empty cells become NaN, blank lines stay rows so
    that row numbers match the spreadsheet."""
    try:
        return pd.read_csv(
            io.StringIO(text),
            sep=delimiter,
            header=None,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            skip_blank_lines=False,
            nrows=limits.max_rows + 2,
            engine="c",
        )
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"'{name}' is empty; choose a file with a header row and data") from exc
    except pd.errors.ParserError as exc:
        raise DataError(_describe_parser_error(name, delimiter, str(exc))) from exc


def _describe_parser_error(name: str, delimiter: str, message: str) -> str:
    shown = _DELIMITER_NAMES[delimiter]
    if fields := re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message):
        expected, row, seen = fields.groups()
        return (
            f"'{name}' is not well-formed CSV: row {row} has {seen} cells but the header has "
            f"{expected} ({shown}-separated); quote cells that contain a {shown} or fix that row"
        )
    if eof := re.search(r"EOF inside string starting at row (\d+)", message):
        return (
            f"'{name}' is not well-formed CSV: a quoted cell that starts in row "
            f"{int(eof.group(1)) + 1} is never closed; remove or double the stray quote mark"
        )
    first = message.strip().splitlines()[0] if message.strip() else "unknown parser error"
    return f"'{name}' is not well-formed CSV ({first}); export it again as CSV UTF-8"


# XLSX -------------------------------------------------------------------------------------------

_ENCRYPTED_MARKER = "EncryptedPackage".encode("utf-16-le")
_RATIO_MIN_BYTES = _MB  # members smaller than this cannot hurt, whatever their ratio
_XLSX_ERRORS = (
    InvalidFileException,
    KeyError,  # a part the workbook refers to is missing from the zip
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    ParseError,
    ValueError,  # includes defusedxml's refusals (entities, external references)
    TypeError,
)


def _read_xlsx(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> _RawTable:
    _check_xlsx_container(data, name, limits)
    _require_defusedxml()
    return _parse_xlsx(data, name, limits)


def _check_xlsx_container(data: bytes, name: str, limits: IntakeLimits) -> None:
    """Refuse encrypted, corrupt and bomb-like workbooks from the zip directory alone."""
    if data.startswith(_OLE2_MAGIC):
        raise DataError(_ole2_message(data, name))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise DataError(
            f"'{name}' is not a valid .xlsx workbook (not a readable zip archive: {exc}); "
            "open it in Excel and save it again as .xlsx"
        ) from exc
    _check_member_sizes(members, name, limits)
    if not any(member.filename == "[Content_Types].xml" for member in members):
        raise DataError(
            f"'{name}' is a zip archive but not an Excel workbook; save the data "
            "from Excel as .xlsx"
        )


def _ole2_message(data: bytes, name: str) -> str:
    if _ENCRYPTED_MARKER in data:
        return (
            f"'{name}': the workbook is password-protected; remove the password "
            "(File > Info > Protect Workbook) and save again"
        )
    return (
        f"'{name}': the workbook is password-protected or an old .xls file renamed to .xlsx; "
        "remove the password, or open it in Excel and save it again as .xlsx"
    )


def _check_member_sizes(
    members: Sequence[zipfile.ZipInfo], name: str, limits: IntakeLimits
) -> None:
    # Declared sizes are safe to trust: zipfile stops reading a member at its declared size.
    total = sum(member.file_size for member in members)
    if total > limits.max_xlsx_uncompressed_bytes:
        raise DataError(
            f"'{name}' unpacks to {total / _MB:,.0f} MB, above the "
            f"{limits.max_xlsx_uncompressed_bytes / _MB:g} MB limit for workbooks; "
            "save the data as CSV or split the workbook"
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > _RATIO_MIN_BYTES and ratio > limits.max_compression_ratio:
            raise DataError(
                f"'{name}' looks like a zip bomb: its part '{member.filename}' unpacks to "
                f"{ratio:,.0f} times its packed size; refusing to open it (save the data as CSV)"
            )


def _require_defusedxml() -> None:
    if not openpyxl.xml.DEFUSEDXML:
        raise DataError(
            "refusing to read .xlsx: openpyxl is not using defusedxml (install defusedxml and "
            "do not set OPENPYXL_DEFUSEDXML=False); or save the data as CSV"
        )


def _parse_xlsx(data: bytes, name: str, limits: IntakeLimits) -> _RawTable:
    try:
        workbook = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False
        )
    except _XLSX_ERRORS as exc:
        raise DataError(_xlsx_error_message(name, exc)) from exc
    try:
        if not workbook.worksheets:
            raise DataError(f"'{name}' has no worksheets; put the data on the first sheet")
        sheet = workbook.worksheets[0]
        header, rows = _sheet_cells(sheet, limits)
    except DataError:
        raise
    except _XLSX_ERRORS as exc:  # read-only sheets parse lazily, while rows are read
        raise DataError(_xlsx_error_message(name, exc)) from exc
    finally:
        workbook.close()
    attrs = {"format": "xlsx", "sheet": sheet.title, "sheets": len(workbook.sheetnames)}
    return _RawTable(header, _frame_of_rows(rows, width=len(header)), attrs)


def _xlsx_error_message(name: str, exc: BaseException) -> str:
    return (
        f"'{name}' could not be read as an .xlsx workbook ({type(exc).__name__}: {exc}); "
        "open it in Excel and save it again as .xlsx"
    )


def _sheet_cells(sheet: Any, limits: IntakeLimits) -> tuple[list, list[list]]:
    """Header and up to max_rows + 1 data rows, all padded to one width."""
    rows = sheet.iter_rows(values_only=True)
    header = [_cell_to_str(value) for value in next(rows, ())]
    body: list[list[str | None]] = []
    for values in rows:
        body.append([_cell_to_str(value) for value in values])
        if len(body) > limits.max_rows:
            break
    width = max([len(header), *(len(row) for row in body)])
    header += [None] * (width - len(header))
    return header, [row + [None] * (width - len(row)) for row in body]


def _frame_of_rows(rows: list[list[str | None]], *, width: int) -> pd.DataFrame:
    columns = {i: [row[i] for row in rows] for i in range(width)}
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)), dtype="str")


# Parquet ----------------------------------------------------------------------------------------

_PANDAS_INDEX_COLUMN = re.compile(r"__index_level_\d+__")


def _read_parquet(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> _RawTable:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        n_rows = parquet.metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc
    if n_rows > limits.max_rows:
        raise DataError(_too_many_rows_message(name, limits))
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc
    # An unnamed pandas index is stored as a column of row positions, not data.
    names = [c for c in table.column_names if not _PANDAS_INDEX_COLUMN.fullmatch(c)]
    columns = {i: [_cell_to_str(v) for v in table[c].to_pylist()] for i, c in enumerate(names)}
    body = pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows), dtype="str")
    return _RawTable(list(names), body, {"format": "parquet"})


def _parquet_error_message(name: str, exc: BaseException) -> str:
    return (
        f"'{name}' could not be read as Parquet ({type(exc).__name__}: {exc}); "
        "export it again as Parquet or CSV"
    )


# Shared ----------------------------------------------------------------------------------------


def _cell_to_str(value: object) -> str | None:
    """One cell as text, None for an empty one; numbers keep their own spelling."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"  # as Excel shows them
    if isinstance(value, dt.datetime):
        midnight = value.time() == dt.time(0) and value.tzinfo is None
        return value.date().isoformat() if midnight else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _finish_table(raw: _RawTable, name: str, limits: IntakeLimits) -> pd.DataFrame:
    """Name the columns, drop unnamed empty ones and trailing empty rows, apply the limits."""
    body = raw.body
    if len(body) > limits.max_rows:
        raise DataError(_too_many_rows_message(name, limits))
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
    letters = [get_column_letter(i + 1) for i in positions]
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


def _trim_trailing_empty_rows(body: pd.DataFrame) -> pd.DataFrame:
    filled = np.flatnonzero(body.notna().any(axis=1).to_numpy())
    return body.iloc[: filled[-1] + 1] if len(filled) else body.iloc[:0]


# ----------------------------------------------------------------------------------------------
# Columns

TEXT_NAMES = (
    "text", "complaint", "complaint_text", "narrative", "description", "message", "body",
    "details", "consumer_complaint_narrative",
)  # fmt: skip
LABEL_NAMES = (
    "label", "category", "desk", "class", "product", "queue", "department", "intent", "target",
)  # fmt: skip
_ID_LIKE = re.compile(r"(^|_)(id|uuid|guid|key|ref|reference|no|num|number|index)$|^unnamed")
_MAX_LABELS = 50
_MIN_TEXT_WORDS = 2.0  # a text column holds phrases, not codes or single words
_SHOWN_COLUMNS = 30
_TEXT_SAMPLE_ROWS = 5_000
_MAX_RAW_LABEL_VALUES = 20 * _MAX_LABELS  # before stripping whitespace variants


@dataclass(frozen=True)
class ColumnChoice:
    """The text and label columns and, for each, why it was chosen."""

    text_col: str
    label_col: str
    text_reason: str
    label_reason: str


def detect_columns(
    df: pd.DataFrame, *, text_col: str | None = None, label_col: str | None = None
) -> ColumnChoice:
    """Choose the complaint-text and label columns of `df`.

    By name first (case, surrounding whitespace and space/underscore/hyphen ignored), in the
    priority order of TEXT_NAMES and LABEL_NAMES; otherwise the column with the longest texts
    (mean of at least two words, mostly distinct values) and a column with 2 to 50 distinct values
    that cover at most half the rows (id-like names excluded). Columns passed in are kept as given.
    """
    df = df.rename(columns=str)
    columns = list(df.columns)
    for given in (text_col, label_col):
        if given is not None:
            _require_column(given, columns)
    if text_col is not None and text_col == label_col:
        raise DataError(f"the text and label columns are both '{text_col}'; choose two columns")
    text_by_name = _match_name(columns, TEXT_NAMES, exclude=label_col) if text_col is None else None
    label_by_name = (
        _match_name(columns, LABEL_NAMES, exclude=text_col or text_by_name)
        if label_col is None
        else None
    )
    text_col, text_reason = _pick_text(
        df, text_col, text_by_name, exclude=label_col or label_by_name
    )
    label_col, label_reason = _pick_label(df, label_col, label_by_name, exclude=text_col)
    return ColumnChoice(text_col, label_col, text_reason, label_reason)


def _normalise_name(name: str) -> str:
    return re.sub(r"[\s\-_]+", "_", name.strip().casefold())


def _match_name(columns: list[str], wanted: tuple[str, ...], *, exclude: str | None) -> str | None:
    normalised = {}
    for col in columns:
        if col != exclude:
            normalised.setdefault(_normalise_name(col), col)
    return next((normalised[w] for w in wanted if w in normalised), None)


def _pick_text(
    df: pd.DataFrame, given: str | None, by_name: str | None, *, exclude: str | None
) -> tuple[str, str]:
    if given is not None:
        return given, "given"
    if by_name is not None:
        return by_name, f"named '{by_name}'"
    sample = df.iloc[:_TEXT_SAMPLE_ROWS]  # enough to judge a column, cheap on big files
    stats = {col: _text_stats(sample[col]) for col in df.columns if col != exclude}
    fits = {
        col: mean_chars
        for col, (mean_chars, mean_words, distinct_share) in stats.items()
        if not _is_id_like(col) and mean_words >= _MIN_TEXT_WORDS and distinct_share > 0.5
    }
    if not fits:
        raise DataError(
            "could not tell which column holds the complaint text; the file has: "
            f"{_column_list(df.columns)}; pass --text-col (and --label-col) to name them"
        )
    best = max(fits, key=fits.__getitem__)
    return best, f"longest texts on average ({fits[best]:.0f} characters)"


def _text_stats(series: pd.Series) -> tuple[float, float, float]:
    """Mean characters, mean words and share of distinct values among the filled cells."""
    values = [v for v in map(_clean_cell, series.tolist()) if v is not None]
    if not values:
        return 0.0, 0.0, 0.0
    mean_chars = sum(map(len, values)) / len(values)
    mean_words = sum(len(words(v)) for v in values) / len(values)
    return mean_chars, mean_words, len(set(values)) / len(values)


def _pick_label(
    df: pd.DataFrame, given: str | None, by_name: str | None, *, exclude: str
) -> tuple[str, str]:
    if given is not None:
        return given, "given"
    if by_name is not None:
        return by_name, f"named '{by_name}'"
    candidates = _label_candidates(df, exclude=exclude)
    if not candidates:
        raise DataError(
            "could not tell which column holds the labels (none is named like "
            f"{'/'.join(LABEL_NAMES[:4])} and none has 2 to {_MAX_LABELS} repeated values); "
            f"the file has: {_column_list(df.columns)}; pass --label-col to name it"
        )
    # The fullest candidate wins; on a tie the rightmost, where labels usually sit.
    best = max(candidates, key=candidates.__getitem__)
    others = [str(c) for c in candidates if c != best]
    reason = f"{candidates[best][2]} distinct values in {len(df)} rows"
    return best, reason + (f" (other candidates: {', '.join(others)})" if others else "")


def _label_candidates(df: pd.DataFrame, *, exclude: str) -> dict[str, tuple[int, int, int]]:
    """Label-like columns -> (filled cells, position, distinct values)."""
    candidates = {}
    for position, col in enumerate(df.columns):
        if col == exclude or _is_id_like(col):
            continue
        filled, distinct = _filled_and_distinct(df[col])
        if 2 <= distinct <= min(_MAX_LABELS, 0.5 * len(df)):
            candidates[col] = (filled, position, distinct)
    return candidates


def _filled_and_distinct(series: pd.Series) -> tuple[int, int]:
    """Non-empty cells and their distinct stripped values; (0, 0) for a column with too many
    distinct raw values to be labels (ids, texts), which is decided without a row loop."""
    counts = series.value_counts(dropna=True)
    if len(counts) > _MAX_RAW_LABEL_VALUES:
        return 0, 0
    cleaned = [(_clean_cell(value), n) for value, n in counts.items()]
    return sum(n for value, n in cleaned if value), len({value for value, _ in cleaned if value})


def _is_id_like(column: object) -> bool:
    return bool(_ID_LIKE.search(_normalise_name(str(column))))


def _column_list(columns: Sequence[object]) -> str:
    names = [str(c) for c in columns]
    shown = ", ".join(names[:_SHOWN_COLUMNS])
    return shown + (
        f" … ({len(names) - _SHOWN_COLUMNS} more)" if len(names) > _SHOWN_COLUMNS else ""
    )


def _require_column(column: str, columns: list[str]) -> None:
    if column in columns:
        return
    close = difflib.get_close_matches(column, columns, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise DataError(f"no column '{column}'; the file has: {_column_list(columns)}{hint}")


# ----------------------------------------------------------------------------------------------
# Validation results

# Token estimate for WordPiece encoders, for length warnings only: each word of core.text.words
# is one token plus one per 8 full characters, each other non-space character (punctuation,
# symbols) one token, plus [CLS] and [SEP]. Against the all-MiniLM-L6-v2 tokenizer it averages
# 1.12x the true count on the CFPB sample (5th-95th percentile 0.96x-1.27x; 98% agree on
# "longer than 256") and 0.90x on hand-written Indian banking complaints.
_SPECIAL_TOKENS = 2
_CHARS_PER_EXTRA_TOKEN = 8


@dataclass(frozen=True)
class DroppedRow:
    """A row left out of the data set; `row` is the spreadsheet row (header = row 1)."""

    row: int
    reason: str


@dataclass(frozen=True)
class LengthStats:
    """Summary of per-text lengths (in words or estimated tokens)."""

    min: int
    median: float
    mean: float
    p95: float
    max: int

    @classmethod
    def of(cls, lengths: Sequence[int]) -> LengthStats:
        """Statistics of `lengths` (n_texts,), n_texts >= 1."""
        array = np.asarray(lengths, dtype=float)
        return cls(
            min=int(array.min()),
            median=round(float(np.median(array)), 2),
            mean=round(float(array.mean()), 2),
            p95=round(float(np.percentile(array, 95)), 2),
            max=int(array.max()),
        )


@dataclass(frozen=True)
class ValidationReport:
    """What validation kept, dropped and noticed; `to_json` is the `validate --json` output."""

    text_col: str
    label_col: str
    rows_read: int
    rows_kept: int
    dropped: tuple[DroppedRow, ...]
    labels: dict[str, int]  # label -> rows, most frequent first, then by name
    duplicates: int  # rows whose exact text appeared in an earlier kept row
    conflicts: int  # distinct texts that carry two or more different labels
    warnings: tuple[str, ...]
    casing_variants: tuple[tuple[str, ...], ...]  # labels equal but for casing, never merged
    small_classes: tuple[str, ...]  # labels with fewer than min_class_size rows
    word_stats: LengthStats
    token_stats: LengthStats  # estimated tokens, see _length_in_words_and_tokens
    truncated: int  # texts whose estimated tokens exceed max_tokens
    long_texts: int  # texts longer than IntakeLimits.max_text_chars characters
    max_tokens: int
    min_class_size: int
    text_reason: str
    label_reason: str
    encoding: str | None = None  # CSV/TSV only
    sheet: str | None = None  # XLSX only: the first sheet, the only one read

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the contract keys of `validate --json`, then extras."""
        return {
            "text_col": self.text_col,
            "label_col": self.label_col,
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "dropped": [{"row": d.row, "reason": d.reason} for d in self.dropped],
            "labels": dict(self.labels),
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "warnings": list(self.warnings),
            "casing_variants": [list(group) for group in self.casing_variants],
            "small_classes": list(self.small_classes),
            "word_stats": asdict(self.word_stats),
            "token_stats": asdict(self.token_stats),
            "truncated": self.truncated,
            "long_texts": self.long_texts,
            "max_tokens": self.max_tokens,
            "min_class_size": self.min_class_size,
            "text_reason": self.text_reason,
            "label_reason": self.label_reason,
            "encoding": self.encoding,
            "sheet": self.sheet,
        }


@dataclass(frozen=True)
class Dataset:
    """Cleaned complaints: texts (n,), labels (n,), their spreadsheet rows (n,), and the other
    original columns of those rows in `extra` (n rows, index 0..n-1).

    Lists are accepted and stored as tuples; `rows` defaults to 2..n+1 and `extra` to no columns.
    """

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    rows: tuple[int, ...] | None = None
    extra: pd.DataFrame | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.texts)
        rows = tuple(range(2, n + 2)) if self.rows is None else self.rows
        extra = pd.DataFrame(index=pd.RangeIndex(n)) if self.extra is None else self.extra
        extra = extra.reset_index(drop=True)
        object.__setattr__(self, "texts", tuple(self.texts))
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "rows", tuple(int(r) for r in rows))
        object.__setattr__(self, "extra", extra)
        if not len(self.labels) == len(self.rows) == len(extra) == n:
            raise DataError(
                f"Dataset needs equally long texts ({n}), labels ({len(self.labels)}), rows "
                f"({len(self.rows)}) and extra ({len(extra)})"
            )

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def classes(self) -> tuple[str, ...]:
        """The distinct labels, sorted."""
        return tuple(sorted(set(self.labels)))

    @cached_property
    def fingerprint(self) -> str:
        """sha256 hex digest of the (text, label) pairs in order; the same in every run."""
        digest = hashlib.sha256()
        for text, label in zip(self.texts, self.labels, strict=True):
            digest.update(json.dumps([text, label], ensure_ascii=False).encode("utf-8"))
            digest.update(b"\n")
        return digest.hexdigest()

    def subset(self, indices: Sequence[int]) -> Dataset:
        """The rows at positions `indices` (k,), in that order."""
        positions = [int(i) for i in indices]
        if any(not 0 <= i < len(self) for i in positions):
            raise DataError(f"subset positions must lie in 0..{len(self) - 1}")
        return Dataset(
            texts=tuple(self.texts[i] for i in positions),
            labels=tuple(self.labels[i] for i in positions),
            rows=tuple(self.rows[i] for i in positions),
            extra=self.extra.iloc[positions].reset_index(drop=True),
        )

    def to_frame(self) -> pd.DataFrame:
        """Columns row, text, label, then the extra columns: the cleaned data set for download."""
        columns = {"row": list(self.rows), "text": list(self.texts), "label": list(self.labels)}
        base = pd.DataFrame(columns)
        clash = {c: f"{c}_original" for c in self.extra.columns if c in base.columns}
        extra = self.extra.rename(columns=clash).reset_index(drop=True)
        return pd.concat([base, extra], axis=1)


# ----------------------------------------------------------------------------------------------
# Validation


def validate(
    df: pd.DataFrame,
    *,
    text_col: str | None = None,
    label_col: str | None = None,
    max_tokens: int = 256,
    min_class_size: int = 5,
    limits: IntakeLimits | None = None,
) -> tuple[Dataset, ValidationReport]:
    """Clean `df` (n_rows, n_columns) into a Dataset and report what was kept and noticed.

    Texts and labels are stripped of surrounding whitespace and otherwise kept verbatim (HTML
    included). Rows with an empty text or a missing label are dropped and listed; duplicates,
    conflicting labels, casing variants, small classes and long texts are kept and warned about.
    Row numbers assume `df` is a sheet read by `load_table`: data row i is spreadsheet row i + 2.
    """
    limits = limits or DEFAULT_LIMITS
    _check_validate_options(max_tokens, min_class_size)
    df = df.rename(columns=str)
    if not df.columns.is_unique:
        raise DataError(f"the table has duplicate column names: {_column_list(df.columns)}")
    choice = detect_columns(df, text_col=text_col, label_col=label_col)
    texts = [_clean_cell(v) for v in df[choice.text_col].tolist()]
    labels = [_clean_cell(v) for v in df[choice.label_col].tolist()]
    kept, dropped = _split_usable(texts, labels)
    if not kept:
        raise DataError(
            f"no usable rows: every row has an empty text or a missing label (text column "
            f"'{choice.text_col}', label column '{choice.label_col}')"
        )
    extra = df.drop(columns=[choice.text_col, choice.label_col]).iloc[kept]
    dataset = Dataset(
        texts=tuple(texts[i] for i in kept),
        labels=tuple(labels[i] for i in kept),
        rows=tuple(i + 2 for i in kept),
        extra=extra.reset_index(drop=True),
    )
    _require_two_labels(dataset, choice.label_col)
    report = _build_report(df, dataset, choice, dropped, max_tokens, min_class_size, limits)
    return dataset, report


def _check_validate_options(max_tokens: int, min_class_size: int) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise DataError(f"max_tokens must be a positive whole number, got {max_tokens!r}")
    if (
        isinstance(min_class_size, bool)
        or not isinstance(min_class_size, int)
        or min_class_size < 1
    ):
        raise DataError(f"min_class_size must be a positive whole number, got {min_class_size!r}")


def _clean_cell(value: object) -> str | None:
    """A cell as stripped text, None when empty or missing."""
    if type(value) is str:  # the common case, kept fast for big files
        return value.strip() or None
    text = _cell_to_str(value)
    return (text.strip() or None) if text is not None else None


def _split_usable(
    texts: list[str | None], labels: list[str | None]
) -> tuple[list[int], tuple[DroppedRow, ...]]:
    kept, dropped = [], []
    for i, (text, label) in enumerate(zip(texts, labels, strict=True)):
        if text is None:
            dropped.append(DroppedRow(i + 2, "empty text"))
        elif label is None:
            dropped.append(DroppedRow(i + 2, "missing label"))
        else:
            kept.append(i)
    return kept, tuple(dropped)


def _require_two_labels(dataset: Dataset, label_col: str) -> None:
    if len(dataset.classes) < 2:
        raise DataError(
            f"only one label ('{dataset.classes[0]}') remains in column '{label_col}' after "
            "dropping unusable rows; a classifier needs at least two labels"
        )


def _build_report(
    df: pd.DataFrame,
    dataset: Dataset,
    choice: ColumnChoice,
    dropped: tuple[DroppedRow, ...],
    max_tokens: int,
    min_class_size: int,
    limits: IntakeLimits,
) -> ValidationReport:
    counts = Counter(dataset.labels)
    labels = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    lengths = [_length_in_words_and_tokens(text) for text in dataset.texts]
    tokens = [n_tokens for _, n_tokens in lengths]
    report = ValidationReport(
        text_col=choice.text_col,
        label_col=choice.label_col,
        rows_read=len(df),
        rows_kept=len(dataset),
        dropped=dropped,
        labels=labels,
        duplicates=_count_duplicates(dataset.texts),
        conflicts=_count_conflicts(dataset.texts, dataset.labels),
        warnings=(),
        casing_variants=_casing_variants(labels),
        small_classes=tuple(label for label, n in labels.items() if n < min_class_size),
        word_stats=LengthStats.of([n_words for n_words, _ in lengths]),
        token_stats=LengthStats.of(tokens),
        truncated=sum(n > max_tokens for n in tokens),
        long_texts=sum(len(text) > limits.max_text_chars for text in dataset.texts),
        max_tokens=max_tokens,
        min_class_size=min_class_size,
        text_reason=choice.text_reason,
        label_reason=choice.label_reason,
        encoding=df.attrs.get("encoding"),
        sheet=df.attrs.get("sheet"),
    )
    return _with_warnings(report, limits)


def _length_in_words_and_tokens(text: str) -> tuple[int, int]:
    """Words of `text` and its estimated encoder tokens, [CLS] and [SEP] included."""
    found = WORD_PATTERN.findall(text)  # the words of core.text.words, casing kept (faster)
    word_lengths = list(map(len, found))
    others = len("".join(text.split())) - sum(word_lengths)  # punctuation and symbols
    extra = sum(map(floordiv, word_lengths, repeat(_CHARS_PER_EXTRA_TOKEN)))
    return len(found), _SPECIAL_TOKENS + len(found) + extra + others


def _count_duplicates(texts: Sequence[str]) -> int:
    return len(texts) - len(set(texts))


def _count_conflicts(texts: Sequence[str], labels: Sequence[str]) -> int:
    labels_of: dict[str, set[str]] = defaultdict(set)
    for text, label in zip(texts, labels, strict=True):
        labels_of[text].add(label)
    return sum(len(found) > 1 for found in labels_of.values())


def _casing_variants(labels: Mapping[str, int]) -> tuple[tuple[str, ...], ...]:
    """Groups of labels that differ only in letter case or inner spacing."""
    groups: dict[str, list[str]] = defaultdict(list)
    for label in labels:
        groups[" ".join(label.casefold().split())].append(label)
    return tuple(sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1))


def _with_warnings(report: ValidationReport, limits: IntakeLimits) -> ValidationReport:
    found = [
        *_dropped_warnings(report.dropped),
        *(
            f"labels {' / '.join(repr(v) for v in group)} differ only in casing or spacing; they "
            "are kept apart, so fix the spelling if they mean the same desk"
            for group in report.casing_variants
        ),
        *_small_class_warnings(report),
        *_repeat_warnings(report),
        *_length_warnings(report, limits),
    ]
    return replace(report, warnings=tuple(found))


def _dropped_warnings(dropped: tuple[DroppedRow, ...]) -> list[str]:
    if not dropped:
        return []
    reasons = Counter(d.reason for d in dropped)
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    return [f"{_rows(len(dropped))} dropped ({parts}); 'dropped' lists their row numbers"]


def _small_class_warnings(report: ValidationReport) -> list[str]:
    if not report.small_classes:
        return []
    named = ", ".join(f"'{label}' ({report.labels[label]})" for label in report.small_classes)
    return [
        f"{_labels_have(len(report.small_classes))} fewer than {report.min_class_size} rows: "
        f"{named}; add examples or merge them into another label"
    ]


def _repeat_warnings(report: ValidationReport) -> list[str]:
    found = []
    if report.duplicates:
        found.append(
            f"{_rows(report.duplicates, verb='repeat')} the text of an earlier row exactly; "
            "duplicates are kept, but a repeated text can land in both training and validation"
        )
    if report.conflicts:
        texts = "text appears" if report.conflicts == 1 else "texts appear"
        found.append(
            f"{report.conflicts} {texts} with different labels; conflicting rows are kept, so "
            "review them (the label audit lists them)"
        )
    return found


def _length_warnings(report: ValidationReport, limits: IntakeLimits) -> list[str]:
    found = []
    if report.long_texts:
        found.append(
            f"{_texts_are(report.long_texts)} longer than {limits.max_text_chars:,} characters; "
            "they are kept, but models read only their beginning"
        )
    if report.truncated:
        found.append(
            f"{_texts_are(report.truncated)} longer than {report.max_tokens} tokens and will be "
            "truncated"
        )
    return found


def _rows(n: int, *, verb: str = "") -> str:
    """'1 row repeats' / '3 rows repeat'."""
    if n == 1:
        return f"1 row {verb}s" if verb else "1 row"
    return f"{n:,} rows {verb}".rstrip()


def _labels_have(n: int) -> str:
    return "1 label has" if n == 1 else f"{n:,} labels have"


def _texts_are(n: int) -> str:
    return "1 text is" if n == 1 else f"{n:,} texts are"


# ----------------------------------------------------------------------------------------------
# Split and convenience


SLICE_COLUMN = "slice"  # optional column naming evaluation slices, e.g. the demo's "twin" rows


def slice_rows(dataset: Dataset, name: str) -> list[int]:
    """Positions of the rows whose `slice` column equals `name` (empty without that column)."""
    if SLICE_COLUMN not in dataset.extra.columns:
        return []
    return [i for i, value in enumerate(dataset.extra[SLICE_COLUMN].tolist()) if value == name]


def split_dataset(
    dataset: Dataset, *, val_fraction: float = 0.2, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """Stratified (train, validation) split; labels with a single row go to train.

    Deterministic for a given `seed`; both parts keep the original row order.
    """
    if (
        isinstance(val_fraction, bool)
        or not isinstance(val_fraction, (int, float))
        or not (0 < val_fraction <= 0.5)
    ):
        raise DataError(f"val_fraction must be above 0 and at most 0.5, got {val_fraction!r}")
    counts = Counter(dataset.labels)
    singles = [i for i, label in enumerate(dataset.labels) if counts[label] == 1]
    pool = [i for i, label in enumerate(dataset.labels) if counts[label] > 1]
    try:
        train, val = train_test_split(
            pool,
            test_size=val_fraction,
            random_state=seed,
            stratify=[dataset.labels[i] for i in pool],
        )
    except ValueError as exc:
        raise DataError(
            f"cannot hold out a stratified {val_fraction:.0%} validation set from {len(pool)} "
            f"rows with {len(set(dataset.labels))} labels ({exc}); add rows or change the "
            "validation fraction"
        ) from exc
    return dataset.subset(sorted([*singles, *train])), dataset.subset(sorted(val))


def load_dataset(
    source: Source,
    *,
    filename: str | None = None,
    text_col: str | None = None,
    label_col: str | None = None,
    limits: IntakeLimits | None = None,
    max_tokens: int = 256,
) -> tuple[Dataset, ValidationReport]:
    """`load_table` then `validate`; `limits` defaults to `IntakeLimits.from_env()`."""
    limits = IntakeLimits.from_env() if limits is None else limits
    table = load_table(source, filename=filename, limits=limits)
    return validate(
        table, text_col=text_col, label_col=label_col, max_tokens=max_tokens, limits=limits
    )
