"""Spreadsheet export: formula injection neutralised, BOM for Excel, atomic writes."""

import csv
import io

import numpy as np
import openpyxl
import pandas as pd
import pytest

from core import paths
from core.data.export import (
    neutralise_formulas,
    safe_file_stem,
    table_digest,
    to_csv_bytes,
    to_xlsx_bytes,
    write_table,
)

# value -> what the exporter writes: a `'` at the start (OWASP), and one before every formula
# character that follows a line break, tab or ";" inside the cell.
DANGEROUS = {
    "=1+1": "'=1+1",
    "+1": "'+1",
    "-1": "'-1",
    "@SUM(A1:A2)": "'@SUM(A1:A2)",
    "  =cmd|' /C calc'!A0": "'  =cmd|' /C calc'!A0",
    "\t=1+1": "'\t'=1+1",
    "\r=1+1": "'\r'=1+1",
    "\n@x": "'\n'@x",
    "\tplain": "'\tplain",  # OWASP: a leading tab or CR alone is enough
    "＝1+1": "'＝1+1",  # full-width forms (U+FF1D, U+FF0B, U+FF0D, U+FF20)
    "＋1": "'＋1",
    "－1": "'－1",
    "\u3000＠x": "'\u3000＠x",  # after an ideographic space
    "Refund still pending\r=cmd|' /C calc'!A0": "Refund still pending\r'=cmd|' /C calc'!A0",
    "ok\n=1": "ok\n'=1",
    "ok\r\n  +1": "ok\r\n  '+1",
    "a\t@b": "a\t'@b",
    "a;-1": "a;'-1",
    "a; ;=1;＝2": "a; ;'=1;'＝2",
    "a\u2028=1": "a\u2028'=1",  # line breaks beyond CR and LF, as str.splitlines knows them
}
SAFE = [
    "hello",
    "UPI ref 412345678901",
    "₹500 debited",
    "मेरा पैसा वापस करो",
    "",
    "a=b",
    "x-1",
    "a, -1",
    "'=already text",
    "5 - 3",
    "a\t b",
    "x＝y",
]


def sample_frame():
    return pd.DataFrame(
        {
            "text": ['=HYPERLINK("http://x","click")', "₹1,200 debited twice", "मेरा UPI"],
            "=evil header": ["+91 98xxxx", "ok", None],
            "amount": [-1200.5, 3.0, np.nan],
            "count": [-1, 2, 3],
        }
    )


@pytest.mark.parametrize(("value", "expected"), DANGEROUS.items())
def test_each_dangerous_prefix_is_neutralised(value, expected):
    out = neutralise_formulas(pd.DataFrame({"c": [value]}))
    assert out["c"].tolist() == [expected]


@pytest.mark.parametrize("value", SAFE)
def test_safe_strings_are_untouched(value):
    assert neutralise_formulas(pd.DataFrame({"c": [value]}))["c"].tolist() == [value]


def test_numbers_missing_values_and_the_original_are_untouched():
    frame = sample_frame()
    before = frame.copy()
    out = neutralise_formulas(frame)
    pd.testing.assert_frame_equal(frame, before)
    assert out["amount"].dtype == np.float64 and out["amount"].iloc[0] == -1200.5
    assert out["count"].tolist() == [-1, 2, 3]
    assert out["text"].iloc[0].startswith("'=HYPERLINK")
    assert out["'=evil header"].tolist()[:2] == ["'+91 98xxxx", "ok"]
    assert out["'=evil header"].isna().iloc[2]


def test_mixed_object_category_and_str_columns():
    frame = pd.DataFrame(
        {
            "mixed": pd.Series([-1, "-1", 2.5, None], dtype=object),
            "category": pd.Series(["=a", "b", "=a", "'=a"], dtype="category"),
            "string": pd.Series(["@x", "y", None, "z"], dtype="string"),
        }
    )
    out = neutralise_formulas(frame)
    assert out["mixed"].tolist()[:3] == [-1, "'-1", 2.5]
    assert out["category"].tolist() == ["'=a", "b", "'=a", "'=a"]
    assert out["string"].tolist()[:2] == ["'@x", "y"]


def test_duplicate_column_names_are_each_neutralised():
    frame = pd.DataFrame([["=1", "=2"]], columns=["c", "c"])
    assert neutralise_formulas(frame).values.tolist() == [["'=1", "'=2"]]


def test_csv_has_bom_no_index_and_neutralised_cells():
    data = to_csv_bytes(sample_frame())
    assert data.startswith(b"\xef\xbb\xbf") and not data[3:].startswith(b"\xef\xbb\xbf")
    text = data.decode("utf-8-sig")
    assert text.split("\r\n")[0] == '"text","\'=evil header","amount","count"'
    assert "₹1,200 debited twice" in text and "मेरा UPI" in text
    back = pd.read_csv(io.BytesIO(data), encoding="utf-8-sig")
    assert back["text"].iloc[0] == '\'=HYPERLINK("http://x","click")'
    assert back["count"].tolist() == [-1, 2, 3]


def _cells(data):
    sheet = openpyxl.load_workbook(io.BytesIO(data)).active
    return [cell for row in sheet.iter_rows() for cell in row]


def test_unneutralised_strings_would_become_formulas_in_openpyxl():
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        pd.DataFrame({"c": ["=1+1"]}).to_excel(writer, index=False)
    assert any(cell.data_type == "f" for cell in _cells(buffer.getvalue()))  # the hazard


def test_xlsx_has_no_formula_cells_and_keeps_numbers():
    cells = _cells(to_xlsx_bytes(sample_frame()))
    assert cells and all(cell.data_type != "f" for cell in cells)
    values = [cell.value for cell in cells]
    assert "'=evil header" in values and '\'=HYPERLINK("http://x","click")' in values
    assert "मेरा UPI" in values
    assert -1200.5 in values and -1 in values  # numbers stay numbers, not "'-1"


def _csv_rows(data):
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def test_csv_quotes_every_field_so_a_bare_carriage_return_starts_no_row():
    frame = pd.DataFrame({"text": ["Refund still pending\r=cmd|' /C calc'!A0", "ok\n-2"]})
    data = to_csv_bytes(frame)
    text = data.decode("utf-8-sig")
    assert text == '"text"\r\n"Refund still pending\r\'=cmd|\' /C calc\'!A0"\r\n"ok\n\'-2"\r\n'
    assert _csv_rows(data) == [
        ["text"],
        ["Refund still pending\r'=cmd|' /C calc'!A0"],
        ["ok\n'-2"],
    ]


def test_csv_keeps_numbers_as_numbers():
    frame = pd.DataFrame({"amount": [-1200.5, 3.0], "count": [-1, 2], "text": ["-1", "a"]})
    back = pd.read_csv(io.BytesIO(to_csv_bytes(frame)), encoding="utf-8-sig")
    assert back["amount"].tolist() == [-1200.5, 3.0] and back["count"].tolist() == [-1, 2]
    assert back["text"].tolist() == ["'-1", "a"]  # a string that looks like a number is text


def test_xlsx_replaces_characters_it_cannot_store():
    frame = pd.DataFrame(
        {
            "text": ["fine", "bell\x07 tab\t", "vt\x0b=1", "\x00", "nonchar\uffff\ufffe"],
            "name\x1f": ["a", "b", "c", "d", "e"],
        }
    )
    cells = _cells(to_xlsx_bytes(frame))
    assert [c.value for c in cells[::2]] == [
        "text", "fine", "bell\ufffd tab\t", "vt\ufffd=1", "\ufffd", "nonchar\ufffd\ufffd",
    ]  # fmt: skip
    assert cells[1].value == "name\ufffd"
    assert all(cell.data_type == "s" for cell in cells)


def test_xlsx_replaces_lone_surrogates_and_csv_too():
    frame = pd.DataFrame({"text": pd.Series(["a\ud800b"], dtype=object)})
    assert _cells(to_xlsx_bytes(frame))[1].value == "a\ufffdb"
    assert _csv_rows(to_csv_bytes(frame))[1] == ["a\ufffdb"]


@pytest.mark.parametrize("name", ["out.csv", "OUT.XLSX"])
def test_write_table_writes_what_the_bytes_functions_return(tmp_path, name):
    path = write_table(sample_frame(), tmp_path / name)
    assert path == tmp_path / name
    assert [p.name for p in tmp_path.iterdir()] == [name]
    if name.endswith(".csv"):
        assert path.read_bytes() == to_csv_bytes(sample_frame())
    else:
        assert all(cell.data_type != "f" for cell in _cells(path.read_bytes()))


def test_write_table_replaces_an_existing_file(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old", encoding="utf-8")
    write_table(pd.DataFrame({"a": [1]}), path)
    assert path.read_bytes() == b'\xef\xbb\xbf"a"\r\n"1"\r\n'


@pytest.mark.parametrize("name", ["out.txt", "out.xls", "out"])
def test_write_table_refuses_other_suffixes(tmp_path, name):
    with pytest.raises(ValueError, match=r"use \.csv or \.xlsx"):
        write_table(sample_frame(), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_write_table_refuses_a_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        write_table(sample_frame(), tmp_path / "missing" / "out.csv")
    assert list(tmp_path.iterdir()) == []


def test_xlsx_refuses_a_table_larger_than_a_sheet_before_building_it():
    rows = pd.DataFrame({"n": np.arange(1_048_576)})  # with the header, one row too many
    with pytest.raises(ValueError, match=r"1,048,576 rows x 1 columns do not fit .*as \.csv"):
        to_xlsx_bytes(rows)
    with pytest.raises(ValueError, match=r"16,385 columns"):
        to_xlsx_bytes(pd.DataFrame(np.zeros((1, 16_385))))


def test_failed_serialisation_leaves_nothing_behind(tmp_path):
    with pytest.raises(ValueError, match="do not fit an XLSX sheet"):
        write_table(pd.DataFrame({"n": np.arange(1_048_576)}), tmp_path / "out.xlsx")
    assert list(tmp_path.iterdir()) == []


def test_failed_rename_removes_the_temp_file_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    path.write_text("old", encoding="utf-8")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(paths.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_table(sample_frame(), path)
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    assert path.read_text(encoding="utf-8") == "old"


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("Built-in demo data", "Built-in-demo-data"),
        ("../../etc/passwd", "etc-passwd"),
        ('say "hi"\r\n.csv', "say--hi----csv"),
        ("Müller ₹500.xlsx", "Müller--500-xlsx"),
        ("...", ""),
    ],
)
def test_safe_file_stem_keeps_letters_and_digits_only(name, stem):
    assert safe_file_stem(name) == stem


def _large_frame(rows=60_000):
    return pd.DataFrame({"text": [f"complaint {i}" for i in range(rows)], "n": np.arange(rows)})


def test_table_digest_is_equal_for_equal_tables():
    assert table_digest(_large_frame()) == table_digest(_large_frame())
    assert table_digest(sample_frame()) == table_digest(sample_frame().copy())


def _one_cell_changed(frame):
    frame = frame.copy()
    frame.iat[59_999, 0] = "changed"  # a row that Streamlit's 10,000-row sample skips
    return frame


@pytest.mark.parametrize(
    "change",
    [
        _one_cell_changed,
        lambda f: f.rename(columns={"n": "m"}),
        lambda f: f.astype({"n": float}),
        lambda f: f.drop(index=59_999),
        lambda f: f.assign(extra=1),
    ],
    ids=["one cell of 60,000 rows", "a column name", "a dtype", "a row fewer", "a column more"],
)
def test_table_digest_changes_with_anything_an_export_shows(change):
    frame = _large_frame()
    assert table_digest(change(frame)) != table_digest(frame)


def test_table_digest_tells_a_number_from_its_text():
    number = pd.DataFrame({"c": pd.Series([-1], dtype=object)})
    text = pd.DataFrame({"c": pd.Series(["-1"], dtype=object)})
    assert to_csv_bytes(number) != to_csv_bytes(text)  # so a shared cache must not mix them up
    assert table_digest(number) != table_digest(text)
