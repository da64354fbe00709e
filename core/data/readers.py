"""Format readers: the bytes of a CSV/TSV, XLSX or Parquet file into a `RawTable` of header
and body cells, refusing binary, encrypted, macro-enabled and zip-bomb files before parsing."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import io
import math
import re
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree.ElementTree import ParseError

import openpyxl
import openpyxl.xml
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from openpyxl.utils.exceptions import InvalidFileException

from core.data.limits import MAX_ROWS_ENV, MB, DataError, IntakeLimits


@dataclass(frozen=True)
class RawTable:
    """What a format reader found: header cells, body cells (columns 0..w-1) and notes."""

    header: list[str | None]
    body: pd.DataFrame
    attrs: dict[str, Any]


def too_many_rows_message(name: str, limits: IntakeLimits) -> str:
    return (
        f"'{name}' has more than {limits.max_rows:,} rows; split the file or raise the limit "
        f"with {MAX_ROWS_ENV}"
    )


_DELIMITERS = ",;\t"
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}
_SNIFF_CHARS = 32 * 1024
_OLE2_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_ZIP_MAGIC = b"PK\x03\x04"
_PARQUET_MAGIC = b"PAR1"


def read_csv(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> RawTable:
    _refuse_binary_container(data, name)
    text, encoding = _decode_text(data, name)
    if not text.strip():
        raise DataError(f"'{name}' is empty; choose a file with a header row and data")
    _refuse_nul(text, name)
    delimiter = "\t" if suffix == ".tsv" else _detect_delimiter(text)
    frame = _parse_csv(text, delimiter, name, limits)
    header = [cell_to_str(value) for value in frame.iloc[0]] if len(frame) else []
    body = frame.iloc[1:].reset_index(drop=True)
    body.columns = range(body.shape[1])
    attrs = {"format": suffix[1:], "encoding": encoding, "delimiter": delimiter}
    return RawTable(header, body, attrs)


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


_ENCRYPTED_MARKER = "EncryptedPackage".encode("utf-16-le")
_RATIO_MIN_BYTES = MB  # members smaller than this cannot hurt, whatever their ratio

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


def read_xlsx(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> RawTable:
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
            f"'{name}' unpacks to {total / MB:,.0f} MB, above the "
            f"{limits.max_xlsx_uncompressed_bytes / MB:g} MB limit for workbooks; "
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


def _parse_xlsx(data: bytes, name: str, limits: IntakeLimits) -> RawTable:
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
    return RawTable(header, _frame_of_rows(rows, width=len(header)), attrs)


def _xlsx_error_message(name: str, exc: BaseException) -> str:
    return (
        f"'{name}' could not be read as an .xlsx workbook ({type(exc).__name__}: {exc}); "
        "open it in Excel and save it again as .xlsx"
    )


def _sheet_cells(sheet: Any, limits: IntakeLimits) -> tuple[list, list[list]]:
    """Header and up to max_rows + 1 data rows, all padded to one width."""
    rows = sheet.iter_rows(values_only=True)
    header = [cell_to_str(value) for value in next(rows, ())]
    body: list[list[str | None]] = []
    for values in rows:
        body.append([cell_to_str(value) for value in values])
        if len(body) > limits.max_rows:
            break
    width = max([len(header), *(len(row) for row in body)])
    header += [None] * (width - len(header))
    return header, [row + [None] * (width - len(row)) for row in body]


def _frame_of_rows(rows: list[list[str | None]], *, width: int) -> pd.DataFrame:
    columns = {i: [row[i] for row in rows] for i in range(width)}
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)), dtype="str")


_PANDAS_INDEX_COLUMN = re.compile(r"__index_level_\d+__")


def read_parquet(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> RawTable:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        n_rows = parquet.metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc
    if n_rows > limits.max_rows:
        raise DataError(too_many_rows_message(name, limits))
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc
    # An unnamed pandas index is stored as a column of row positions, not data.
    names = [c for c in table.column_names if not _PANDAS_INDEX_COLUMN.fullmatch(c)]
    columns = {i: [cell_to_str(v) for v in table[c].to_pylist()] for i, c in enumerate(names)}
    body = pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows), dtype="str")
    return RawTable(list(names), body, {"format": "parquet"})


def _parquet_error_message(name: str, exc: BaseException) -> str:
    return (
        f"'{name}' could not be read as Parquet ({type(exc).__name__}: {exc}); "
        "export it again as Parquet or CSV"
    )


def cell_to_str(value: object) -> str | None:
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


def clean_cell(value: object) -> str | None:
    """A cell as stripped text, None when empty or missing."""
    if type(value) is str:  # the common case, kept fast for big files
        return value.strip() or None
    text = cell_to_str(value)
    return (text.strip() or None) if text is not None else None
