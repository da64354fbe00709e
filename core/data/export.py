"""CSV and XLSX export that cannot smuggle formulas into a spreadsheet (CSV/formula injection).

Complaint text is untrusted: `=HYPERLINK(...)` must reach the reader as text, whatever a
spreadsheet splits a cell on. What the exporter changes, and nothing else:

- Formula characters are = + - @ and their full-width forms ＝ ＋ － ＠ (U+FF1D, U+FF0B, U+FF0D,
  U+FF20), which some spreadsheets fold to ASCII.
- A cell whose first non-whitespace character is a formula character, or which starts with a tab
  or carriage return, gets a leading `'` (OWASP's advice): `=1+1` is written `'=1+1`.
- Inside a cell, a formula character that follows a line break (CR, LF or any other that
  `str.splitlines` knows), a tab or `;`, whitespace in between allowed, gets a `'` right before
  it: `ok\\r=1+1` is written `ok\\r'=1+1`. Where a spreadsheet or a paste splits the cell there,
  the new cell starts with `'` and stays text; read as one cell, the text shows one extra `'`.
- Column names are treated like cells; numbers stay numbers (only strings are touched).
- CSV quotes every field and ends rows with CR LF, so no line break inside a field starts a row.
- Characters a file cannot hold become U+FFFD (the replacement character) instead of failing the
  download: lone surrogates in both formats, and in XLSX also the control characters
  U+0000-U+0008, U+000B, U+000C, U+000E-U+001F and the non-characters U+FFFE, U+FFFF. (An XML
  reader, openpyxl's included, reads a CR in an XLSX cell back as LF.)
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import secrets
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from core.errors import UserError
from core.paths import write_atomically

FORMULA_CHARS = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# OWASP "CSV Injection": a leading tab or carriage return alone can hide a formula behind it.
DANGEROUS_FIRST_CHARS = ("\t", "\r")
# Where a spreadsheet (or a paste into one) may start a new cell: a line break, a tab, or ";"
# (the list separator of many European locales).
CELL_BREAKS = "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029\t;"
_IN_CELL_FORMULA = re.compile(
    f"([{re.escape(CELL_BREAKS)}]\\s*)(?=[{re.escape(''.join(FORMULA_CHARS))}])"
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# What XML 1.0 (so XLSX) cannot hold: most C0 controls, U+FFFE, U+FFFF and lone surrogates.
_NOT_IN_XLSX = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
# Every string neutralising (or making storable) changes matches these, so a pyarrow text column
# is searched in one pass in C and only its matches are cleaned. Literal characters, no escapes:
# pyarrow's RE2 and Python's re read them alike. Arrow strings cannot hold lone surrogates.
_MAY_NEUTRALISE = "^[\t\r]|[=+@\uff1d\uff0b\uff0d\uff20-]"
_MAY_CHANGE_IN_XLSX = _MAY_NEUTRALISE + "|[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]"
REPLACEMENT = "\ufffd"
XLSX_MAX_ROWS = 1_048_576  # header included
XLSX_MAX_COLUMNS = 16_384
CSV_BOM = "\ufeff"
# A secret per process: keyed with it, pandas' SipHash is a keyed hash, so no upload can be
# crafted to collide with another table's digest in a cache that all sessions share.
_DIGEST_KEY = secrets.token_hex(8)


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose string cells and column names can't start a formula.

    See the module docstring for the rule; numbers, missing values and `df` itself are kept.
    """
    return _map_strings(df, neutralise_value, _MAY_NEUTRALISE)


def neutralise_value(value: object) -> object:
    """`value` with a `'` before each formula character that could start a cell, if a string."""
    if not isinstance(value, str):
        return value
    text = _IN_CELL_FORMULA.sub(r"\1'", value)
    if value.startswith(DANGEROUS_FIRST_CHARS) or value.lstrip().startswith(FORMULA_CHARS):
        return "'" + text
    return text


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """UTF-8 CSV with a byte-order mark (so Excel shows ₹ and Devanagari), no index, neutralised,
    every field quoted and rows ended by CR LF."""
    safe = _map_strings(df, _csv_cell, _MAY_NEUTRALISE)
    text = safe.to_csv(index=False, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    return (CSV_BOM + text).encode("utf-8")


def to_xlsx_bytes(df: pd.DataFrame, *, sheet_name: str = "Sheet1") -> bytes:
    """An XLSX workbook of `df` (no index) whose cells are values, never formulas.

    openpyxl stores any string starting with "=" as a formula, so neutralising comes first.
    Characters XLSX cannot hold become U+FFFD. Raises UserError if `df` does not fit a sheet.
    """
    _check_xlsx_size(df)
    safe = _map_strings(df, _xlsx_cell, _MAY_CHANGE_IN_XLSX)
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        safe.to_excel(writer, index=False, sheet_name=sheet_name)
    return buffer.getvalue()


def table_digest(df: pd.DataFrame) -> str:
    """SHA-256 (hex) of all an export of `df` depends on, to key caches of exported files.

    Column names, dtypes, every row (unlike Streamlit's own hash, which samples 10,000 rows of a
    large frame) and, in object columns, each value's type (1 and "1" export differently).
    Stable within one process only.
    """
    header = [(type(name).__name__, repr(name), str(dtype)) for name, dtype in df.dtypes.items()]
    digest = hashlib.sha256(repr((df.shape, header)).encode("utf-8", "surrogatepass"))
    if df.shape[1]:  # pandas cannot hash the rows of a frame without columns
        digest.update(_row_hashes(df))
    for position in range(df.shape[1]):
        column = df.iloc[:, position]
        if pd.api.types.is_object_dtype(column.dtype):
            digest.update(_row_hashes(column.map(lambda value: type(value).__name__)))
    return digest.hexdigest()


def safe_file_stem(name: str) -> str:
    """`name` as part of a download's file name: every character but letters and digits becomes
    "-", and dashes at either end are dropped (no paths, quotes or control characters remain)."""
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write `df` as .csv or .xlsx (by suffix) atomically: a temporary file, then a rename.

    The whole file is serialised before anything touches the disk, and on any failure no
    temporary file is left behind and an existing file at `path` is unchanged.
    """
    path = Path(path)
    serialise = _serialiser(path)
    if not path.parent.is_dir():
        raise UserError(f"folder {path.parent} does not exist; create it first")
    write_atomically(path, serialise(df))
    return path


def _row_hashes(data: pd.DataFrame | pd.Series) -> bytes:
    hashes = pd.util.hash_pandas_object(data, index=False, hash_key=_DIGEST_KEY)
    return hashes.to_numpy().tobytes()


def _map_strings(df: pd.DataFrame, clean: Callable[[object], object], suspect: str) -> pd.DataFrame:
    """`clean` applied to the column names and string cells of a copy of `df`; `suspect` matches
    every string that `clean` changes."""
    out = df.rename(columns=clean)
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        if _is_textual(column):
            out.isetitem(position, _map_column(column, clean, suspect))
    return out


def _csv_cell(value: object) -> object:
    if isinstance(value, str):
        value = _LONE_SURROGATE.sub(REPLACEMENT, value)  # UTF-8 cannot encode them
    return neutralise_value(value)


def _xlsx_cell(value: object) -> object:
    if isinstance(value, str):
        value = _NOT_IN_XLSX.sub(REPLACEMENT, value)  # before neutralising: U+FFFD breaks no cell
    return neutralise_value(value)


def _is_textual(column: pd.Series) -> bool:
    dtype = column.dtype
    return (
        pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or isinstance(dtype, pd.CategoricalDtype)
    )


def _map_column(column: pd.Series, clean: Callable[[object], object], suspect: str) -> pd.Series:
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)  # renamed categories could collide; plain values can't
    if getattr(column.dtype, "storage", None) != "pyarrow":
        return column.map(clean)  # objects (numbers and strings mixed), python strings
    suspects = column.str.contains(suspect, regex=True, na=False)
    if not suspects.any():
        return column
    out = column.copy()
    out[suspects] = column[suspects].map(clean)
    return out


def _check_xlsx_size(df: pd.DataFrame) -> None:
    rows, columns = df.shape
    if rows + 1 > XLSX_MAX_ROWS or columns > XLSX_MAX_COLUMNS:
        raise UserError(
            f"{rows:,} rows x {columns:,} columns do not fit an XLSX sheet "
            f"({XLSX_MAX_ROWS - 1:,} rows x {XLSX_MAX_COLUMNS:,} columns at most); export as .csv"
        )


def _serialiser(path: Path) -> Callable[[pd.DataFrame], bytes]:
    serialisers = {".csv": to_csv_bytes, ".xlsx": to_xlsx_bytes}
    suffix = path.suffix.lower()
    if suffix not in serialisers:
        raise UserError(f"cannot export to {path.name!r}: use .csv or .xlsx")
    return serialisers[suffix]
