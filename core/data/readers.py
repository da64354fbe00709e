"""Format readers: the bytes of a CSV/TSV, XLSX or Parquet file into a `RawTable` of header
and body cells, refusing binary, encrypted, macro-enabled and zip-bomb files before parsing."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import io
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree.ElementTree import ParseError

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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
    source = _prepare_csv(data, name=name, suffix=suffix, limits=limits)
    frame = _parse_csv(source.utf8, source.delimiter, name, limits)
    header = [cell_to_str(value) for value in frame.iloc[0]] if len(frame) else []
    body = frame.iloc[1:].reset_index(drop=True)
    body.columns = range(body.shape[1])
    attrs = {"format": suffix[1:], "encoding": source.encoding, "delimiter": source.delimiter}
    if source.warnings:
        attrs["warnings"] = list(source.warnings)
    return RawTable(header, body, attrs)


@dataclass(frozen=True)
class _CsvSource:
    """A CSV file checked and ready for pandas: its text as UTF-8 bytes and what was found."""

    utf8: bytes
    encoding: str
    delimiter: str
    warnings: tuple[str, ...]


def _prepare_csv(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> _CsvSource:
    """Decode, find the delimiter and check the shape; the decoded text dies with this call."""
    text, encoding, warnings = _decode_text(data, name)
    if not text or text.isspace():  # not text.strip(): that would copy a huge file
        raise DataError(f"'{name}' is empty; choose a file with a header row and data")
    _refuse_nul(text, name)
    delimiter = "\t" if suffix == ".tsv" else _detect_delimiter(text)
    _check_csv_shape(text, delimiter, name=name, file_bytes=len(data), limits=limits)
    # pandas parses bytes in chunks; a str would go through StringIO, four bytes a character.
    utf8 = data if encoding == "utf-8" and not warnings else text.encode("utf-8")
    return _CsvSource(utf8, encoding, delimiter, warnings)


def _check_csv_shape(
    text: str, delimiter: str, *, name: str, file_bytes: int, limits: IntakeLimits
) -> None:
    """Refuse a header wider than max_columns, or more cells than the file size allows, before
    pandas builds a row: pandas pads every row, blank lines included, to the header's width."""
    width = _header_width(text, delimiter, name)
    if width > limits.max_columns:
        raise DataError(too_many_columns_message(name, width, limits))
    rows = max(text.count("\n"), text.count("\r")) + 1  # quoted line breaks overcount: safe
    check_cells(name, rows=rows, width=width, file_bytes=file_bytes, limits=limits)


def _header_width(text: str, delimiter: str, name: str) -> int:
    """Fields of the first record, read by the csv module from lines sliced one at a time."""
    try:
        return len(next(csv.reader(_lines(text), delimiter=delimiter), []))
    except csv.Error as exc:  # e.g. a header cell above the csv module's 131,072 characters
        raise DataError(
            f"'{name}': the header row could not be read ({exc}); the first row must hold "
            "the column names"
        ) from exc


def _lines(text: str) -> Iterator[str]:
    """Lines of `text`, ends kept, without splitting the whole text at once."""
    for match in _LINE.finditer(text):
        if match.group():
            yield match.group()


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_FIRST_LINE = re.compile(r"[^\r\n]*")


def too_many_columns_message(name: str, width: int, limits: IntakeLimits) -> str:
    return (
        f"'{name}' has {width:,} columns; at most {limits.max_columns:,} are read; delete the "
        "columns you do not need (keep the complaint text and its label) and save it again"
    )


def check_cells(name: str, *, rows: int, width: int, file_bytes: int, limits: IntakeLimits) -> None:
    """Refuse a table of rows x width cells that the file's size does not justify."""
    budget = limits.max_cells(file_bytes)
    if rows * width > budget:
        raise DataError(
            f"'{name}' would make {rows * width:,} cells ({rows:,} rows x {width:,} columns), "
            f"above the {budget:,} a file of {file_bytes:,} bytes may hold; delete empty rows "
            "and columns or split the file"
        )


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


# A well-formed UTF-8 sequence of two to four bytes; Windows-1252 text almost never holds one.
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
    rb"|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
_REPLACEMENT = "\ufffd"


def _decode_text(data: bytes, name: str) -> tuple[str, str, tuple[str, ...]]:
    """Text, encoding and warnings: by byte-order mark, else UTF-8; Windows-1252 (Excel's "CSV")
    only for a file with no UTF-8 character at all; bad bytes of a UTF-8 file are replaced."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise DataError(f"'{name}' is UTF-32 text, which is not supported; save it as CSV UTF-8")
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return _decode_marked(data, len(bom), encoding, name), encoding, ()
    try:
        return data.decode("utf-8"), "utf-8", ()
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    if _UTF8_MULTIBYTE.search(data):  # one real UTF-8 character: cp1252 would garble it
        return _decode_replacing(data, first_bad)
    try:
        return data.decode("cp1252"), "cp1252", ()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"'{name}' is neither UTF-8 nor Windows-1252 text (undecodable byte on line "
            f"{line}); it may be a binary file; save the data as CSV UTF-8"
        ) from exc


def _decode_replacing(data: bytes, first_bad: int) -> tuple[str, str, tuple[str, ...]]:
    """UTF-8 with each bad byte sequence replaced by U+FFFD, and a warning that counts them."""
    text = data.decode("utf-8", errors="replace")
    replaced = text.count(_REPLACEMENT) - data.count(_REPLACEMENT.encode("utf-8"))
    line = data.count(b"\n", 0, first_bad) + 1
    also = f"; {replaced - 1:,} more in the file" if replaced > 1 else ""
    warning = (
        f"line {line} has a byte that is not UTF-8 (replaced by {_REPLACEMENT}{also}); "
        "save the file as CSV UTF-8"
    )
    return text, "utf-8", (warning,)


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
    header = _FIRST_LINE.match(text).group()  # re.split would copy the rest of the text
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


def _parse_csv(utf8: bytes, delimiter: str, name: str, limits: IntakeLimits) -> pd.DataFrame:
    """Header and data as plain rows; only empty cells become NaN, blank lines stay rows so
    that row numbers match the spreadsheet."""
    try:
        return pd.read_csv(
            io.BytesIO(utf8),  # shares the bytes, no copy
            encoding="utf-8",
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

# Besides openpyxl's own InvalidFileException (added by `_xlsx_errors`: openpyxl is imported only
# when a workbook is read, so that CSV and Parquet never pay for it).
_XLSX_ERRORS = (
    KeyError,  # a part the workbook refers to is missing from the zip
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    ParseError,
    ValueError,  # includes defusedxml's refusals (entities, external references)
    TypeError,
)


def _xlsx_errors() -> tuple[type[BaseException], ...]:
    from openpyxl.utils.exceptions import InvalidFileException

    return (InvalidFileException, *_XLSX_ERRORS)


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
    _check_unpacked_sizes(memoryview(data), members, name)
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


_UNPACK_STEP = 64 * 1024  # bytes a part is unpacked by, at most, while its size is checked
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then name and extra field lengths


def _check_unpacked_sizes(data: memoryview, members: Sequence[zipfile.ZipInfo], name: str) -> None:
    """Refuse a part that unpacks to more than its declared size. zipfile cuts a part at that
    size only after unpacking it: `read()` of a whole part (openpyxl reads workbook.xml,
    styles.xml and the rels that way) unpacks everything first, so a part declaring 1 KB that
    holds 1 GB of spaces cost 1 GB (2 GB per part at most). Unpacked here in bounded steps."""
    for member in members:
        if member.compress_type == zipfile.ZIP_STORED:
            continue  # read as stored: never more than its packed bytes, inside the file
        if member.compress_type != zipfile.ZIP_DEFLATED:
            raise DataError(
                f"'{name}': its part '{member.filename}' is packed with a method Excel never "
                "uses; open it in Excel and save it again as .xlsx"
            )
        if not _inflates_within(_packed_bytes(data, member, name), member.file_size):
            raise DataError(
                f"'{name}' looks like a zip bomb: its part '{member.filename}' unpacks to more "
                f"than the {member.file_size:,} bytes it declares; refusing to open it (save "
                "the data as CSV)"
            )


def _packed_bytes(data: memoryview, member: zipfile.ZipInfo, name: str) -> memoryview:
    """The packed bytes of `member`, found through its local header as zipfile finds them."""
    start = member.header_offset
    try:
        signature, name_length, extra_length = _LOCAL_HEADER.unpack_from(data, start)
    except struct.error:
        signature = b""
    if signature != b"PK\x03\x04":
        raise DataError(
            f"'{name}' is not a valid .xlsx workbook (part '{member.filename}' is damaged); "
            "open it in Excel and save it again as .xlsx"
        )
    start += _LOCAL_HEADER.size + name_length + extra_length
    return data[start : start + member.compress_size]


def _inflates_within(packed: memoryview, limit: int) -> bool:
    """Whether the raw deflate stream `packed` unpacks to at most `limit` bytes, unpacking at
    most _UNPACK_STEP bytes from at most _UNPACK_STEP packed bytes at a time."""
    inflater, produced = zlib.decompressobj(-zlib.MAX_WBITS), 0
    try:
        for start in range(0, len(packed), _UNPACK_STEP):
            pending: bytes | memoryview = packed[start : start + _UNPACK_STEP]
            while pending and not inflater.eof:
                produced += len(inflater.decompress(pending, _UNPACK_STEP))
                if produced > limit:
                    return False
                pending = inflater.unconsumed_tail
        while not inflater.eof and (out := inflater.decompress(b"", _UNPACK_STEP)):
            produced += len(out)  # output zlib still held after the last packed byte
            if produced > limit:
                return False
    except zlib.error:
        return True  # damaged, not oversized: zipfile reports it when the part is read
    return True


def _require_defusedxml() -> None:
    import openpyxl.xml

    if not openpyxl.xml.DEFUSEDXML:
        raise DataError(
            "refusing to read .xlsx: openpyxl is not using defusedxml (install defusedxml and "
            "do not set OPENPYXL_DEFUSEDXML=False); or save the data as CSV"
        )


def _parse_xlsx(data: bytes, name: str, limits: IntakeLimits) -> RawTable:
    import openpyxl

    errors = _xlsx_errors()
    try:
        workbook = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False
        )
    except errors as exc:
        raise DataError(_xlsx_error_message(name, exc)) from exc
    try:
        if not workbook.worksheets:
            raise DataError(f"'{name}' has no worksheets; put the data on the first sheet")
        sheet = workbook.worksheets[0]
        cells = _sheet_cells(workbook, sheet, name=name, file_bytes=len(data), limits=limits)
    except DataError:
        raise
    except errors as exc:  # read-only sheets parse lazily, while rows are read
        raise DataError(_xlsx_error_message(name, exc)) from exc
    finally:
        workbook.close()
    attrs = {"format": "xlsx", "sheet": sheet.title, "sheets": len(workbook.sheetnames)}
    return RawTable(cells.header(), cells.body(), attrs)


def _xlsx_error_message(name: str, exc: BaseException) -> str:
    return (
        f"'{name}' could not be read as an .xlsx workbook ({type(exc).__name__}: {exc}); "
        "open it in Excel and save it again as .xlsx"
    )


@dataclass
class _SparseSheet:
    """The cells of a sheet that hold a value, by spreadsheet row and column (both from 1)."""

    cells: list[tuple[int, int, str]]
    n_rows: int = 0  # last spreadsheet row holding a value (row 1 is the header)
    width: int = 0  # last column holding a value

    def header(self) -> list[str | None]:
        header: list[str | None] = [None] * self.width
        for row, column, value in self.cells:
            if row == 1:
                header[column - 1] = value
        return header

    def body(self) -> pd.DataFrame:
        """Rows 2..n_rows as a frame (n_rows - 1, width); rows missing from the sheet are empty."""
        n_body = max(self.n_rows - 1, 0)
        columns: list[list[str | None]] = [[None] * n_body for _ in range(self.width)]
        for row, column, value in self.cells:
            if row > 1:
                columns[column - 1][row - 2] = value
        frame = dict(enumerate(columns))
        return pd.DataFrame(frame, index=pd.RangeIndex(n_body), dtype="str")


def _sheet_cells(
    workbook: Any, sheet: Any, *, name: str, file_bytes: int, limits: IntakeLimits
) -> _SparseSheet:
    """Stream the sheet's XML keeping only cells with a value: openpyxl's own row iterator
    would yield every row of a gap, each padded to the widest row."""
    found = _SparseSheet(cells=[])
    for row, cells in _sheet_rows(workbook, sheet):
        values = [(cell["column"], cell_to_str(cell["value"])) for cell in cells]
        values = [(column, value) for column, value in values if value is not None]
        if not values:
            continue  # an empty row costs nothing; gaps are filled when the frame is built
        if row > limits.max_rows + 1:  # row 1 is the header
            raise DataError(too_many_rows_message(name, limits))
        widest = max(column for column, _ in values)
        if widest > limits.max_columns:
            raise DataError(_cell_beyond_columns_message(name, row, widest, limits))
        found.n_rows, found.width = row, max(found.width, widest)
        check_cells(name, rows=row, width=found.width, file_bytes=file_bytes, limits=limits)
        found.cells.extend((row, column, value) for column, value in values)
    return found


def _sheet_rows(workbook: Any, sheet: Any) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(spreadsheet row, cells present) for each <row> element, as openpyxl 3.1's
    ReadOnlyWorksheet._cells_by_row parses them, without its padding."""
    from openpyxl.worksheet._reader import WorkSheetParser

    with sheet._get_source() as source:
        parser = WorkSheetParser(
            source,
            sheet._shared_strings,
            data_only=True,
            epoch=workbook.epoch,
            date_formats=workbook._date_formats,
            timedelta_formats=workbook._timedelta_formats,
        )
        yield from parser.parse()


def _cell_beyond_columns_message(name: str, row: int, column: int, limits: IntakeLimits) -> str:
    return (
        f"'{name}' has a value in column {column:,} (row {row:,}); at most "
        f"{limits.max_columns:,} columns are read; delete the columns beyond them and save again"
    )


_PANDAS_INDEX_COLUMN = re.compile(r"__index_level_\d+__")


_PARQUET_BATCH_ROWS = 4096  # rows decoded at a time; text is counted before it becomes str


def read_parquet(data: bytes, *, name: str, suffix: str, limits: IntakeLimits) -> RawTable:
    """Check the footer (rows, columns, types, uncompressed size), then decode in batches,
    counting the text as it comes: dictionary encoding lets a small file decode to gigabytes."""
    parquet = _open_parquet(data, name)
    _check_parquet_metadata(parquet, name=name, file_bytes=len(data), limits=limits)
    schema = parquet.schema_arrow
    # An unnamed pandas index is stored as a column of row positions, not data.
    names = [f.name for f in schema if not _PANDAS_INDEX_COLUMN.fullmatch(f.name)]
    texts = [f.name for f in schema if f.name in names and _is_text(f.type)]
    # Text columns stay dictionary-encoded as read, so their decoded size is known beforehand.
    parquet = _open_parquet(data, name, read_dictionary=texts)
    columns = _read_parquet_columns(parquet, names, name=name, file_bytes=len(data), limits=limits)
    frame = dict(enumerate(columns))
    body = pd.DataFrame(frame, index=pd.RangeIndex(parquet.metadata.num_rows), dtype="str")
    return RawTable(list(names), body, {"format": "parquet"})


def _open_parquet(data: bytes, name: str, *, read_dictionary: Sequence[str] = ()) -> Any:
    try:
        return pq.ParquetFile(pa.BufferReader(data), read_dictionary=list(read_dictionary))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc


def _is_text(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _check_parquet_metadata(
    parquet: Any, *, name: str, file_bytes: int, limits: IntakeLimits
) -> None:
    """Refuse from the footer alone: too many rows, columns or cells, nested columns, or more
    uncompressed data than the file's size allows."""
    metadata = parquet.metadata
    if metadata.num_rows > limits.max_rows:
        raise DataError(too_many_rows_message(name, limits))
    width = len(parquet.schema_arrow)
    if width > limits.max_columns:
        raise DataError(too_many_columns_message(name, width, limits))
    check_cells(name, rows=metadata.num_rows, width=width, file_bytes=file_bytes, limits=limits)
    for field in parquet.schema_arrow:
        if pa.types.is_nested(field.type):
            raise DataError(
                f"'{name}': column '{field.name}' holds nested values ({field.type}); only "
                "flat columns of text, numbers or dates are read; flatten it or save as CSV"
            )
    unpacked = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    if unpacked > limits.max_decoded_bytes(file_bytes):
        raise DataError(_decoded_too_big_message(name, unpacked, file_bytes, limits))


def _read_parquet_columns(
    parquet: Any, names: list[str], *, name: str, file_bytes: int, limits: IntakeLimits
) -> list[list[str | None]]:
    columns: list[list[str | None]] = [[] for _ in names]
    budget, decoded = limits.max_decoded_bytes(file_bytes), 0
    try:
        batches = parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=names)
        for batch in batches:
            decoded += sum(_decoded_bytes(column) for column in batch.columns)
            if decoded > budget:
                raise DataError(
                    _decoded_too_big_message(name, decoded, file_bytes, limits, so_far=True)
                )
            for cells, column in zip(columns, batch.columns, strict=True):
                cells.extend(cell_to_str(value) for value in column.to_pylist())
    except (pa.ArrowException, OSError) as exc:
        raise DataError(_parquet_error_message(name, exc)) from exc
    return columns


def _decoded_bytes(column: pa.Array) -> int:
    """Bytes of text `column` holds once decoded; 0 for numbers, dates and the like."""
    if pa.types.is_dictionary(column.type) and _is_text(column.type.value_type):
        lengths = pc.take(pc.binary_length(column.dictionary), column.indices)
    elif _is_text(column.type):
        lengths = pc.binary_length(column)
    else:
        return 0
    return pc.sum(lengths).as_py() or 0


def _decoded_too_big_message(
    name: str, size: int, file_bytes: int, limits: IntakeLimits, *, so_far: bool = False
) -> str:
    amount = f"more than {size / MB:,.0f} MB of text" if so_far else f"{size / MB:,.0f} MB"
    return (
        f"'{name}' unpacks to {amount}, above the {limits.max_decoded_bytes(file_bytes) / MB:,.0f}"
        f" MB allowed for a Parquet file of {file_bytes:,} bytes; save the data as CSV or split "
        "the file"
    )


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
