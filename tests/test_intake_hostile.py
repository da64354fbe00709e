"""Hostile intake files: each is small, claims far more than it holds, and must be refused in one
line or read within memory bounded by its size; plus texts cut before tokenising."""

from __future__ import annotations

import io
import os
import tracemalloc
from pathlib import Path

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from openpyxl.worksheet._read_only import ReadOnlyWorksheet

from core.cli import main
from core.data import readers
from core.data.intake import load_table
from core.data.limits import DataError, IntakeLimits
from core.data.validation import load_dataset, validate
from core.models.tiny.tokenizer import TinyTokenizer
from core.models.transformer.inference import encode_batch
from core.text import token_char_cap


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def _sparse_xlsx(path: Path, cells: dict[tuple[int, int], str]) -> Path:
    """A workbook holding only `cells` ((row, column) -> value): openpyxl writes no others."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    for (row, column), value in cells.items():
        sheet.cell(row=row, column=column, value=value)
    workbook.save(path)
    return path


def _parquet_bytes(table: pa.Table, **options) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **options)
    return buffer.getvalue()


# ----------------------------------------------------------------------------------------------
# 1. Column cap


def test_wide_csv_header_is_refused_before_parsing(monkeypatch):
    data = (",".join(f"c{i}" for i in range(501)) + "\nx" + "," * 500 + "\n").encode()

    def no_parsing(*args, **kwargs):
        raise AssertionError("pandas was asked to parse a refused file")

    monkeypatch.setattr(pd, "read_csv", no_parsing)
    with pytest.raises(DataError) as error:
        load_table(data, filename="wide.csv")
    assert "'wide.csv' has 501 columns; at most 500 are read; delete the columns" in (
        _one_line(error)
    )


def test_columns_beyond_excel_letters_give_a_data_error():
    # 20,000 columns is past openpyxl's get_column_letter (ZZZ = 18,278), which used to escape
    # load_table as a bare ValueError for an unnamed column with a value.
    header = ",".join(f"c{i}" for i in range(19_999)) + ","
    data = (header + "\n" + "x," * 19_999 + "stray\n").encode()
    with pytest.raises(DataError) as error:
        load_table(data, filename="w.csv", limits=IntakeLimits(max_columns=20_000))
    assert "column ACOF has values but no name" in _one_line(error)


def test_xlsx_cell_beyond_the_column_cap_is_refused(tmp_path):
    path = _sparse_xlsx(tmp_path / "xfd.xlsx", {(1, 1): "text", (2, 1): "a", (3, 16384): "x"})
    with pytest.raises(DataError) as error:
        load_table(path)
    message = _one_line(error)
    assert "has a value in column 16,384 (row 3); at most 500 columns are read" in message


def test_parquet_width_is_refused_from_metadata():
    data = _parquet_bytes(pa.table({f"c{i}": ["x"] for i in range(4)}))
    with pytest.raises(DataError) as error:
        load_table(data, filename="w.parquet", limits=IntakeLimits(max_columns=3))
    assert "'w.parquet' has 4 columns; at most 3 are read" in _one_line(error)


# ----------------------------------------------------------------------------------------------
# 2. Cell cap: rows x columns bounded by the file's size


def test_blank_lines_under_a_wide_header_are_refused_before_parsing():
    data = ("a,b,c,d,e,f,g,h,i,j\n" + "x,y\n" + "\n" * 200).encode()
    limits = IntakeLimits(min_cells=1000)
    with pytest.raises(DataError) as error:
        load_table(data, filename="pad.csv", limits=limits)
    message = _one_line(error)
    assert "would make 2,030 cells (203 rows x 10 columns), above the 1,000" in message
    assert len(load_table(data[:40], filename="ok.csv", limits=limits)) == 1


def test_xlsx_rows_far_apart_are_counted_as_cells(tmp_path):
    cells = {(1, c): f"h{c}" for c in range(1, 11)} | {(2, 1): "a", (500, 1): "b"}
    path = _sparse_xlsx(tmp_path / "gap.xlsx", cells)
    with pytest.raises(DataError, match=r"would make 5,000 cells \(500 rows x 10 columns\)"):
        load_table(path, limits=IntakeLimits(min_cells=1000, cells_per_byte=0.01))


def test_parquet_cells_are_counted_from_metadata():
    data = _parquet_bytes(pa.table({"text": ["t"] * 2000, "label": ["A"] * 2000}))
    limits = IntakeLimits(min_cells=1000, cells_per_byte=0.01)
    with pytest.raises(DataError, match=r"4,000 cells \(2,000 rows x 2 columns\)"):
        load_table(data, filename="c.parquet", limits=limits)


# ----------------------------------------------------------------------------------------------
# 3. XLSX read sparsely: no padding across row gaps


def test_xlsx_gap_rows_are_not_padded_and_keep_row_numbers(tmp_path, monkeypatch):
    cells = {(1, 1): "text", (1, 2): "label", (2, 1): "card blocked", (2, 2): "Card"}
    cells |= {(9, 1): "upi stuck", (9, 2): "UPI", (9, 5): "note", (1, 5): "extra"}
    path = _sparse_xlsx(tmp_path / "gap.xlsx", cells)

    def no_padding(*args, **kwargs):
        raise AssertionError("openpyxl's padded row iterator was used")

    monkeypatch.setattr(ReadOnlyWorksheet, "_cells_by_row", no_padding)
    df = load_table(path)
    assert list(df.columns) == ["text", "label", "extra"]  # empty unnamed C and D are dropped
    assert len(df) == 8  # spreadsheet rows 2..9; trailing empty rows are trimmed
    assert df["text"].iloc[[0, 7]].tolist() == ["card blocked", "upi stuck"]
    assert df.iloc[1:7].isna().all().all()
    assert df["extra"].iloc[7] == "note"
    _, report = validate(df, min_class_size=1)
    assert [d.row for d in report.dropped] == list(range(3, 9))


def test_xlsx_xfd_cell_far_below_is_refused_quickly(tmp_path, monkeypatch):
    path = _sparse_xlsx(
        tmp_path / "bomb.xlsx", {(1, 1): "text", (2, 1): "a", (400_000, 16384): "x"}
    )
    assert path.stat().st_size < 10_000
    rows_read, cells_read = _count_sheet_rows(monkeypatch)

    def never(*args, **kwargs):
        raise AssertionError("a padded row or frame was built for a file that claims too much")

    monkeypatch.setattr(ReadOnlyWorksheet, "_cells_by_row", never)
    monkeypatch.setattr(readers._SparseSheet, "body", never)
    with pytest.raises(DataError, match="cells"):
        load_table(path, limits=IntakeLimits(max_columns=16384))
    # Quick by construction: the reader touched the three cells the file holds, not the
    # 400,000 x 16,384 it claims (a wall-clock bound would fail on a busy machine instead).
    assert rows_read == [1, 2, 400_000] and sum(cells_read) == 3


def _count_sheet_rows(monkeypatch) -> tuple[list[int], list[int]]:
    """Record each <row> the xlsx reader parses: (its row numbers, its cell counts)."""
    rows: list[int] = []
    cells: list[int] = []
    original = readers._sheet_rows

    def counting(workbook, sheet):
        for row, present in original(workbook, sheet):
            rows.append(row)
            cells.append(len(present))
            yield row, present

    monkeypatch.setattr(readers, "_sheet_rows", counting)
    return rows, cells


# ----------------------------------------------------------------------------------------------
# 4. Parquet: nested columns and decoded size checked before and while reading


def test_nested_parquet_column_is_refused_by_name():
    table = pa.table({"text": ["a", "b"], "tags": [["x", "y"], []]})
    with pytest.raises(DataError) as error:
        load_table(_parquet_bytes(table), filename="n.parquet")
    assert "column 'tags' holds nested values (list<element: string>)" in _one_line(error)


def test_dictionary_encoded_parquet_is_refused_while_decoding():
    rows = 5000
    table = pa.table({"text": ["x" * 4096] * rows, "label": ["A"] * rows})
    data = _parquet_bytes(table, use_dictionary=True, compression="zstd")
    assert len(data) < 20_000  # 20 MB of text once decoded
    limits = IntakeLimits(min_decoded_bytes=1024**2)
    with pytest.raises(DataError) as error:
        load_table(data, filename="dict.parquet", limits=limits)
    # counted from the dictionary and its indices, one batch of 4,096 rows, before decoding
    assert "'dict.parquet' unpacks to more than 16 MB of text, above the 1 MB allowed" in (
        _one_line(error)
    )
    assert len(load_table(data, filename="dict.parquet")) == rows  # the default allows 32 MB


def test_parquet_uncompressed_size_is_refused_from_metadata(monkeypatch):
    table = pa.table({"text": ["y" * 4096] * 2000, "label": ["A"] * 2000})
    data = _parquet_bytes(table, use_dictionary=False, compression="zstd")

    def no_reading(*args, **kwargs):
        raise AssertionError("a batch was read")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_reading)
    limits = IntakeLimits(min_decoded_bytes=1024**2, max_decoded_ratio=10.0)
    with pytest.raises(DataError, match=r"'u.parquet' unpacks to 8 MB, above the 1 MB"):
        load_table(data, filename="u.parquet", limits=limits)


# ----------------------------------------------------------------------------------------------
# 5. One huge cell: memory bounded by the file


def test_one_huge_csv_cell_is_read_and_validated_in_bounded_memory():
    size = 4 * 1024**2
    data = b"text,label\n" + b"word " * (size // 5) + b",A\nshort one,B\n"
    tracemalloc.start()
    try:
        df = load_table(data, filename="cell.csv")
        _, report = validate(df, min_class_size=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(df.loc[0, "text"]) == size // 5 * 5  # kept in full
    assert report.word_stats.max == pytest.approx(size // 5, rel=0.01)
    assert report.long_texts == 1
    assert "cut at 8,192 characters before the transformer reads them" in " ".join(report.warnings)
    # Python-side allocations (StringIO, word lists) used to peak at 28 times the cell.
    assert peak < 4 * size


# ----------------------------------------------------------------------------------------------
# 6. Texts cut to a character cap before tokenising


def test_tiny_tokenizer_cuts_a_huge_text_before_tokenising(monkeypatch):
    import core.models.tiny.tokenizer as tiny

    tokenizer = TinyTokenizer.build(["refund pending for my card"], max_length=16)
    ordinary = "refund pending for my card, please help " * 3
    assert tokenizer.encode(ordinary) == tokenizer.encode(ordinary, truncation=False)[:16]
    huge = "refund pending " * (2 * 1024**2 // 15)
    cap = token_char_cap(16)
    seen: list[int] = []
    original_words, original_spans = tiny.words, tiny.word_spans
    monkeypatch.setattr(tiny, "words", lambda text: seen.append(len(text)) or original_words(text))
    monkeypatch.setattr(
        tiny, "word_spans", lambda text: seen.append(len(text)) or original_spans(text)
    )
    ids = tokenizer.encode(huge)
    # Bounded by construction: one pass over `cap` characters, not over the 2 MB (a wall-clock
    # bound would fail on a busy machine instead).
    assert seen == [cap]
    assert ids == tokenizer.encode(huge[:cap]) and len(ids) == 16
    assert max(seen) <= cap
    seen.clear()
    offsets = tokenizer.word_offsets(huge)
    assert seen == [cap]
    assert offsets == tokenizer.word_offsets(huge[:cap])


def test_encode_batch_gives_the_tokenizer_only_the_cut_text():
    tokenizer = TinyTokenizer.build(["refund pending for my card"], max_length=64)
    received: list[str] = []

    def recording(texts, **options):
        received.extend(texts)
        return tokenizer(texts, **options)

    ordinary, huge = "refund pending for my card", "card " * 400_000
    batch = encode_batch(recording, [ordinary, huge], 8, torch.device("cpu"))
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert received == [ordinary, huge[: token_char_cap(8)]]
    plain = tokenizer([ordinary, huge[:256]], truncation=True, max_length=8)
    assert torch.equal(ids, plain["input_ids"]) and torch.equal(mask, plain["attention_mask"])


# ----------------------------------------------------------------------------------------------
# 7. Encoding: a stray byte in a UTF-8 file is replaced and reported, not the whole file garbled

STRAY = "text,label\n₹500 refund,A\nit\x00s late,B\n".encode().replace(b"\x00", b"\x92")


def test_stray_byte_in_utf8_is_replaced_and_reported():
    df = load_table(STRAY, filename="stray.csv")
    assert df["text"].tolist() == ["₹500 refund", "it\ufffds late"]
    assert df.attrs["encoding"] == "utf-8"
    expected = (
        "line 3 has a byte that is not UTF-8 (replaced by \ufffd); save the file as CSV UTF-8"
    )
    assert df.attrs["warnings"] == [expected]
    _, report = validate(df, min_class_size=1)
    assert report.warnings[0] == expected


def test_several_bad_bytes_are_counted():
    data = STRAY + b"another\x00one,B\nok,A\n".replace(b"\x00", b"\x93")
    (warning,) = load_table(data, filename="s.csv").attrs["warnings"]
    assert warning.startswith("line 3 has a byte that is not UTF-8 (replaced by \ufffd; 1 more")


def test_excel_cp1252_export_without_utf8_characters_stays_cp1252():
    data = "text,label\nit’s “late”,A\ncafé,B\n".encode("cp1252")
    df = load_table(data, filename="excel.csv")
    assert df.attrs["encoding"] == "cp1252" and "warnings" not in df.attrs
    assert df["text"].tolist() == ["it’s “late”", "café"]


def test_encoding_warning_reaches_the_command_line(tmp_path, capsys):
    path = tmp_path / "stray.csv"
    path.write_bytes(STRAY + b"more,A\nagain,B\n")
    assert main(["validate", str(path)]) == 0
    assert "warning: line 3 has a byte that is not UTF-8" in capsys.readouterr().out
    _, report = load_dataset(path)
    assert report.encoding == "utf-8"


def test_encoding_warning_reaches_the_data_page(contained_uploads):
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader[0].set_value(("stray.csv", STRAY + b"more,A\nagain,B\n", "text/csv"))
    app.run()
    assert not app.exception
    assert any(w.value.startswith("line 3 has a byte that is not UTF") for w in app.warning)


# ----------------------------------------------------------------------------------------------
# 8. Only regular files are read: a link to a device, a FIFO or a device is refused before open


def _forbid_opening(monkeypatch, path: Path) -> None:
    """Every open of `path`'s target fails the test: reading /dev/zero never ends (it took
    `validate` to 11 GB in 30 s) and opening a FIFO with no writer blocks for ever."""
    import builtins

    target = os.path.realpath(path)

    def guard(opener):
        def guarded(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == target:
                raise AssertionError(f"{target} was opened")
            return opener(file, *args, **kwargs)

        return guarded

    for owner in (os, io, builtins):
        monkeypatch.setattr(owner, "open", guard(owner.open))


def _within_deadline(call, seconds: float = 10):
    """What `call()` returned or raised, from a thread given `seconds` to finish."""
    import threading

    outcome: list = []

    def attempt() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert outcome, f"no answer within {seconds} s"
    return outcome[0]


def _refused_without_opening(monkeypatch, path: Path, **options) -> str:
    """The one-line DataError `load_table(path)` raises without opening `path`."""
    _forbid_opening(monkeypatch, path)
    refusal = _within_deadline(lambda: load_table(path, **options))
    assert isinstance(refusal, DataError), f"expected a DataError, got {refusal!r}"
    message = str(refusal)
    assert "\n" not in message
    return message


def test_a_link_to_dev_zero_named_csv_is_refused_before_reading(tmp_path, monkeypatch):
    link = tmp_path / "x.csv"
    link.symlink_to("/dev/zero")
    message = _refused_without_opening(monkeypatch, link)
    assert message.startswith(f"'{link}' is a device, not a regular file;")
    assert "copy the data into a .csv, .tsv, .xlsx or .parquet file" in message


def test_a_fifo_named_csv_is_refused_without_waiting_for_a_writer(tmp_path, monkeypatch):
    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    message = _refused_without_opening(monkeypatch, fifo)
    assert message.startswith(f"'{fifo}' is a named pipe (FIFO), not a regular file;")


def test_a_character_device_is_refused_whatever_its_name(tmp_path, monkeypatch):
    message = _refused_without_opening(monkeypatch, Path("/dev/null"), filename="x.csv")
    assert message.startswith("'/dev/null' is a device, not a regular file;")
    link = tmp_path / "null.xlsx"
    link.symlink_to("/dev/null")
    assert _refused_without_opening(monkeypatch, link).startswith(f"'{link}' is a device")


def test_validate_refuses_a_link_to_dev_zero_in_one_line(tmp_path, capsys, monkeypatch):
    link = tmp_path / "x.csv"
    link.symlink_to("/dev/zero")
    _forbid_opening(monkeypatch, link)
    assert _within_deadline(lambda: main(["validate", str(link)])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: '{link}' is a device, not a regular")


# ----------------------------------------------------------------------------------------------
# 9. XLSX parts hold no more than they declare


def _xlsx_with_a_lying_part(part: str, padding: int) -> bytes:
    """A valid workbook whose `part` holds `padding` more bytes (trailing spaces) than its zip
    headers declare; the declared size and CRC are those of the honest part, so zipfile cuts
    the data at the declared size and sees nothing wrong."""
    import struct
    import zipfile
    import zlib

    buffer = io.BytesIO()
    workbook = openpyxl.Workbook()
    workbook.active.append(["text", "label"])
    workbook.active.append(["refund pending", "UPI"])
    workbook.save(buffer)
    honest = zipfile.ZipFile(buffer)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as writer:
        for info in honest.infolist():
            body = honest.read(info.filename)
            writer.writestr(info.filename, body + b" " * padding if info.filename == part else body)
    data = bytearray(out.getvalue())
    declared = honest.read(part)
    lying = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(part)
    central = data.index(b"PK\x01\x02")  # the central directory: one entry per part
    while data[central + 46 : central + 46 + len(part)] != part.encode():
        name, extra, comment = struct.unpack_from("<HHH", data, central + 28)
        central += 46 + name + extra + comment
    for header, crc_at, size_at in ((lying.header_offset, 14, 22), (central, 16, 24)):
        struct.pack_into("<I", data, header + crc_at, zlib.crc32(declared))
        struct.pack_into("<I", data, header + size_at, len(declared))
    return bytes(data)


def test_an_xlsx_part_that_unpacks_beyond_its_declared_size_is_refused():
    # zipfile's read() of a whole part unpacks everything before cutting it to the declared
    # size: 390 KB of styles.xml took 760 MB. Refused from the parts, before openpyxl reads.
    data = _xlsx_with_a_lying_part("xl/styles.xml", 4 * 1024**2)
    assert len(data) < 20_000
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as error:
            load_table(data, filename="lying.xlsx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _one_line(error).startswith(
        "'lying.xlsx' looks like a zip bomb: its part 'xl/styles.xml' unpacks to more than the "
    )
    assert peak < 1024**2
    assert len(load_table(_xlsx_with_a_lying_part("xl/styles.xml", 0), filename="ok.xlsx")) == 1
