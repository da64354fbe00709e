"""The second wall of intake: an upload is read in a child process with a memory and time limit,
and comes back exactly as `load_table` would return it."""

from __future__ import annotations

import io

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.data import contained as contained_module
from core.data.contained import (
    CONTAIN_UPLOADS_ENV,
    Containment,
    contain_uploads,
    load_table_contained,
)
from core.data.intake import load_table
from core.data.limits import DataError, IntakeLimits
from core.errors import UserError
from tests.helpers import ROOT

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


def test_uploads_are_read_in_a_child_unless_the_operator_trusts_every_uploader():
    assert contain_uploads({}) and contain_uploads({CONTAIN_UPLOADS_ENV: "1"})
    assert not contain_uploads({CONTAIN_UPLOADS_ENV: " 0 "})
    refused = r"^GRIEVANCE_LENS_CONTAIN_UPLOADS must be 0 or 1, got 'no'; fix or unset it$"
    with pytest.raises(UserError, match=refused):
        contain_uploads({CONTAIN_UPLOADS_ENV: "no"})


def test_the_data_page_reads_an_upload_in_a_child_by_default(contained_uploads, monkeypatch):
    from streamlit.testing.v1 import AppTest

    children, run = [], contained_module.subprocess.run

    def spied_run(command, **kwargs):
        children.append(command)
        return run(command, **kwargs)

    monkeypatch.setattr(contained_module.subprocess, "run", spied_run)
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader[0].set_value(("complaints.csv", CSV, "text/csv")).run()
    assert not app.exception and not app.error
    assert [command[1:3] for command in children] == [["-m", "core.data.contained"]]


def test_children_reading_uploads_at_once_are_bounded(monkeypatch):
    # Each child may take a gigabyte: two slots, two reads in flight, a third caller is told to
    # come back rather than starting a third child.
    import subprocess
    import threading

    from core.data.contained import ReaderSlots

    slots = ReaderSlots(count=2, wait_seconds=0.05)
    in_flight, release, lock = [], threading.Event(), threading.Condition()

    def held_child(command, **kwargs):
        with lock:
            in_flight.append(command)
            lock.notify_all()
        assert release.wait(timeout=10), "the test never released the children"
        return subprocess.CompletedProcess(command, 0, b"E" + b"'a.csv' refused", b"")

    monkeypatch.setattr(contained_module.subprocess, "run", held_child)
    answers: list[BaseException] = []

    def read() -> None:
        try:
            load_table_contained(CSV, filename="a.csv", limits=LIMITS, slots=slots)
        except UserError as exc:
            answers.append(exc)

    readers = [threading.Thread(target=read, daemon=True) for _ in range(2)]
    for reader in readers:
        reader.start()
    with lock:
        assert lock.wait_for(lambda: len(in_flight) == 2, timeout=10)
    try:
        with pytest.raises(UserError) as busy:
            load_table_contained(CSV, filename="b.csv", limits=LIMITS, slots=slots)
    finally:
        release.set()
        for reader in readers:
            reader.join(timeout=10)
    assert str(busy.value) == (
        "the server is reading other uploads (2 at a time); try again in a minute"
    )
    assert len(in_flight) == 2 and [str(a) for a in answers] == ["'a.csv' refused"] * 2
    with pytest.raises(DataError, match=r"^'a.csv' refused$"):  # a child's answer: slots free
        load_table_contained(CSV, filename="c.csv", limits=LIMITS, slots=slots)


def test_the_number_of_upload_readers_is_a_setting(monkeypatch):
    from core.data.contained import UPLOAD_READERS_ENV, ReaderSlots, default_order_model_count

    assert ReaderSlots.from_env({UPLOAD_READERS_ENV: " 3 "}).count == 3
    assert ReaderSlots.from_env({}).count == default_order_model_count() >= 1
    assert default_order_model_count(cpus=16, memory_bytes=64 * 2**30) == 8
    assert default_order_model_count(cpus=2, memory_bytes=4 * 2**30) == 1
    assert default_order_model_count(cpus=4, memory_bytes=16 * 2**30) == 2
    with pytest.raises(UserError, match=r"^GRIEVANCE_LENS_UPLOAD_READERS must be a positive"):
        ReaderSlots.from_env({UPLOAD_READERS_ENV: "0"})
