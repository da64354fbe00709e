"""The second wall of intake: an upload is read in a child process with a memory and time limit,
and comes back exactly as `load_table` would return it."""

from __future__ import annotations

import io

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.data.contained import Containment, load_table_contained
from core.data.intake import load_table
from core.data.limits import DataError, IntakeLimits

LIMITS = IntakeLimits()
CSV = "text,label\nrefund pending ₹500,UPI Dispute\n\ncard stolen abroad,Card Fraud\n".encode()


def _xlsx() -> bytes:
    workbook = openpyxl.Workbook()
    workbook.active.append(["text", "label"])
    workbook.active.append(["refund pending", "UPI Dispute"])
    workbook.active.append(["card stolen", "Card Fraud"])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, use_dictionary=True, compression="zstd")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("a.csv", CSV),
        ("a.xlsx", _xlsx()),
        ("a.parquet", _parquet(pa.table({"text": ["refund", "card"], "label": ["U", "C"]}))),
    ],
)
def test_the_child_returns_what_load_table_returns(name, data):
    contained = load_table_contained(data, filename=name, limits=LIMITS)
    pd.testing.assert_frame_equal(contained, load_table(data, filename=name, limits=LIMITS))
    assert contained.attrs == load_table(data, filename=name, limits=LIMITS).attrs


def test_a_refusal_is_the_readers_own_one_line_message():
    with pytest.raises(DataError) as refused:
        load_table_contained(b"text,label\n", filename="empty.csv", limits=LIMITS)
    assert str(refused.value) == (
        "'empty.csv' has a header row but no data rows; add rows below the header"
    )


def test_a_file_that_needs_more_memory_than_allowed_costs_the_child_only():
    # 200,000 rows of one 4 KB string: a few dozen KB on disk, 800 MB decoded. With the
    # Parquet check relaxed (the first wall), only the child's address-space cap stops it.
    rows = 200_000
    bomb = _parquet(pa.table({"text": ["refund " * 585] * rows, "label": ["A", "B"] * (rows // 2)}))
    relaxed = IntakeLimits(min_decoded_bytes=10**12)
    tight = Containment(min_extra_bytes=300 * 2**20, memory_per_file_byte=10)
    with pytest.raises(DataError, match=r"^'bomb.parquet' needs more than the 300 MB one upload"):
        load_table_contained(bomb, filename="bomb.parquet", limits=relaxed, containment=tight)


def test_a_read_that_takes_too_long_is_stopped():
    with pytest.raises(DataError, match=r"^'a.csv' took longer than 0.05 s to read"):
        load_table_contained(
            CSV, filename="a.csv", limits=LIMITS, containment=Containment(seconds=0.05)
        )
