"""CSV and XLSX export that cannot smuggle formulas into a spreadsheet (CSV/formula injection).

Complaint text is untrusted: a cell such as `=HYPERLINK(...)` must reach the reader as text.
Following OWASP's guidance, such cells get a leading single quote before anything is written.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

from core.paths import write_atomically

# OWASP "CSV Injection": cells starting with these are read as formulas (tab and carriage return
# can hide a formula behind them).
DANGEROUS_FIRST_CHARS = ("=", "+", "-", "@", "\t", "\r")
# Some spreadsheet apps skip leading whitespace before deciding a cell is a formula.
FORMULA_CHARS = ("=", "+", "-", "@")
CSV_BOM = "\ufeff"


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose string cells and column names can't start a formula.

    A string starting with = + - @ tab or carriage return, or whose first non-whitespace
    character is one of = + - @, gets a leading `'`. Other values, numbers included, are kept.
    """
    out = df.rename(columns=neutralise_value)
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        if _is_textual(column):
            out.isetitem(position, _neutralise_column(column))
    return out


def neutralise_value(value: object) -> object:
    """`value` with a leading `'` if it is a string a spreadsheet could read as a formula."""
    if isinstance(value, str) and _is_dangerous(value):
        return "'" + value
    return value


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """UTF-8 CSV with a byte-order mark (so Excel shows ₹ and Devanagari), no index, neutralised."""
    text = neutralise_formulas(df).to_csv(index=False, lineterminator="\n")
    return (CSV_BOM + text).encode("utf-8")


def to_xlsx_bytes(df: pd.DataFrame, *, sheet_name: str = "Sheet1") -> bytes:
    """An XLSX workbook of `df` (no index) whose cells are values, never formulas.

    openpyxl stores any string starting with "=" as a formula, so neutralising comes first.
    """
    safe = neutralise_formulas(df)
    _check_xlsx_characters(safe)
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        safe.to_excel(writer, index=False, sheet_name=sheet_name)
    return buffer.getvalue()


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
        raise ValueError(f"folder {path.parent} does not exist; create it first")
    write_atomically(path, serialise(df))
    return path


def _is_dangerous(value: str) -> bool:
    return value.startswith(DANGEROUS_FIRST_CHARS) or value.lstrip().startswith(FORMULA_CHARS)


def _is_textual(column: pd.Series) -> bool:
    dtype = column.dtype
    return (
        pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or isinstance(dtype, pd.CategoricalDtype)
    )


def _neutralise_column(column: pd.Series) -> pd.Series:
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)  # renamed categories could collide; plain values can't
    return column.map(neutralise_value)


def _check_xlsx_characters(df: pd.DataFrame) -> None:
    """Refuse control characters that XLSX cannot store, naming where they are."""
    for name in df.columns:
        if isinstance(name, str) and ILLEGAL_CHARACTERS_RE.search(name):
            raise ValueError(f"column name {name!r} has a control character; rename it")
    for position in range(df.shape[1]):
        column = df.iloc[:, position]
        if not _is_textual(column):
            continue
        bad = column.map(lambda v: isinstance(v, str) and bool(ILLEGAL_CHARACTERS_RE.search(v)))
        if bad.any():
            row = int(bad.to_numpy().argmax()) + 1
            raise ValueError(
                f"column {df.columns[position]!r}, data row {row} has a control character that "
                "XLSX cannot store; remove it or export as .csv"
            )


def _serialiser(path: Path) -> Callable[[pd.DataFrame], bytes]:
    serialisers = {".csv": to_csv_bytes, ".xlsx": to_xlsx_bytes}
    suffix = path.suffix.lower()
    if suffix not in serialisers:
        raise ValueError(f"cannot export to {path.name!r}: use .csv or .xlsx")
    return serialisers[suffix]
