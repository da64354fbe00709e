"""Property test of the exporter: hostile text in cells and column names, written as CSV and XLSX
and read back by Python's csv module, pandas and openpyxl, never yields a formula or a new row."""

import csv
import io
import re

import openpyxl
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.export import neutralise_value, to_csv_bytes, to_xlsx_bytes

# Written out here, not imported, so the test checks the exporter against the rule as documented.
FORMULA = tuple("=+-@＝＋－＠")
CELL_BREAK = re.compile("[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029\t;]")
NOT_IN_XLSX = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
PIECES = [
    *FORMULA, "\r", "\n", "\r\n", "\t", ";", '"', "'", ",", " ", "\u3000", "\x00", "\x07", "\x0b",
    "\x0c", "\x1c", "\x1f", "\x85", "\u2028", "\ufffe", "\uffff", "\ufeff", "cmd|' /C calc'!A0",
    'HYPERLINK("http://x")', "SUM(A1:A2)", "₹1,200", "मेरा", "1", "-1.5", "_x000D_",
]  # fmt: skip

# Lone surrogates cannot reach a str column; their replacement has its own test in test_export.
hostile_text = st.lists(st.sampled_from(PIECES) | st.characters(codec="utf-8"), max_size=10).map(
    "".join
)


@st.composite
def hostile_frames(draw) -> pd.DataFrame:
    """1-4 columns of hostile text (missing values too) or integers, 0-5 rows, hostile names;
    text as pandas' str dtype or as objects (the exporter takes a different path for each)."""
    n_rows = draw(st.integers(0, 5))
    names = draw(st.lists(hostile_text, min_size=1, max_size=4))
    number = st.integers(-(10**9), 10**9)
    columns = [
        draw(st.lists(number if draw(st.booleans()) else hostile_text | st.none(),
                      min_size=n_rows, max_size=n_rows))
        for _ in names
    ]  # fmt: skip
    frame = pd.DataFrame(dict(enumerate(columns)), index=range(n_rows))
    frame.columns = names  # duplicates allowed, as in a real upload
    return frame.astype(object) if draw(st.booleans()) else frame


def exposes_formula(cell: str) -> bool:
    """Whether the cell, or any piece a spreadsheet could split it into, starts a formula."""
    return any(piece.strip().startswith(FORMULA) for piece in CELL_BREAK.split(cell))


def check_text(read: str, original: str) -> None:
    """Safe, and the original apart from the `'` marks the neutralisation adds (at most one per
    piece of the cell)."""
    assert not exposes_formula(read), (read, original)
    assert read.replace("'", "") == original.replace("'", ""), (read, original)
    assert read.count("'") - original.count("'") <= 1 + len(CELL_BREAK.findall(original))


def expected_cells(frame: pd.DataFrame) -> list[list[object]]:
    """Header and rows as the frame holds them, missing text as ""."""
    rows = frame.astype(object).where(frame.notna(), "").values.tolist()
    return [list(frame.columns), *rows]


def check_table(read: list[list[object]], frame: pd.DataFrame, *, written, clean) -> None:
    """`read` has the frame's shape; its text is `written(value)` (what the exporter promises)
    and passes check_text against `clean(value)` (the text a format can hold)."""
    expected = expected_cells(frame)
    assert len(read) == len(expected), "rows were added or lost"
    for read_row, row in zip(read, expected, strict=True):
        assert len(read_row) == len(row), "columns were added or lost"
        for got, value in zip(read_row, row, strict=True):
            if isinstance(value, str):
                check_text(got, clean(value))
                assert got == written(value)
            else:
                assert int(got) == value  # a number, never given a `'`


def xlsx_clean(text: str) -> str:
    """What XLSX keeps: unstorable characters as U+FFFD, and CR as LF (XML line ends)."""
    text = NOT_IN_XLSX.sub("\ufffd", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def xlsx_written(text: str) -> str:
    """Storable first, then neutralised (U+FFFD splits no cell), then CR read back as LF."""
    return xlsx_clean(neutralise_value(NOT_IN_XLSX.sub("\ufffd", text)))


# Deterministic and stateless: the same 200 examples on every run, no example database on disk.
PROPERTY = settings(max_examples=200, deadline=None, derandomize=True, database=None)


@PROPERTY
@given(hostile_frames())
def test_csv_read_back_by_csv_and_pandas_has_no_formula_and_no_new_row(frame):
    data = to_csv_bytes(frame)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    check_table(rows, frame, written=neutralise_value, clean=lambda text: text)
    back = pd.read_csv(io.BytesIO(data), encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert back.shape == frame.shape
    assert back.values.tolist() == rows[1:]  # pandas reads the same cells as the csv module
    assert data == to_csv_bytes(frame.astype(object))  # both paths write the same file


@PROPERTY
@given(hostile_frames())
def test_xlsx_read_back_by_openpyxl_has_no_formula_and_no_new_row(frame):
    sheet = openpyxl.load_workbook(io.BytesIO(to_xlsx_bytes(frame))).active
    cells = [list(row) for row in sheet.iter_rows()]
    assert all(cell.data_type != "f" for row in cells for cell in row)
    values = [["" if cell.value is None else cell.value for cell in row] for row in cells]
    check_table(values, frame, written=xlsx_written, clean=xlsx_clean)
