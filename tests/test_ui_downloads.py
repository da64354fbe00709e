"""AppTest for ui.downloads.render_table_downloads: the CSV at once, the XLSX only when asked for,
each built once per table content."""

from __future__ import annotations

import io

import openpyxl
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import ui.downloads
from core.data import export


def downloads_page() -> None:
    """The table in session state, offered for download."""
    import streamlit as st

    from ui.downloads import render_table_downloads

    render_table_downloads(
        st.session_state["table"], "complaints", label="Download {fmt}",
        keys=("test.csv", "test.xlsx"),
    )  # fmt: skip


@pytest.fixture
def built(monkeypatch) -> dict[str, list[bytes]]:
    """Every file the exporter builds, by format; caches start empty."""
    st.cache_data.clear()
    files: dict[str, list[bytes]] = {"csv": [], "xlsx": []}

    def recording(fmt, build):
        def record(table):
            files[fmt].append(build(table))
            return files[fmt][-1]

        return record

    monkeypatch.setattr(ui.downloads, "to_csv_bytes", recording("csv", export.to_csv_bytes))
    monkeypatch.setattr(ui.downloads, "to_xlsx_bytes", recording("xlsx", export.to_xlsx_bytes))
    return files


def large_table(rows: int = 60_000) -> pd.DataFrame:
    """Large enough that Streamlit's own hash would look at a sample of 10,000 rows only."""
    return pd.DataFrame({"text": [f"complaint {i}" for i in range(rows)], "label": "UPI"})


def open_page(table: pd.DataFrame) -> AppTest:
    at = AppTest.from_function(downloads_page, default_timeout=60)
    at.session_state["table"] = table
    return at.run()


def labels(at: AppTest) -> list[str]:
    return [button.proto.label for button in at.get("download_button")]


def test_the_xlsx_is_built_only_after_a_click_and_only_once(built):
    at = open_page(pd.DataFrame({"text": ["=1+1", "ok"]}))
    assert not at.exception
    assert labels(at) == ["Download CSV"] and built["xlsx"] == []
    at.button(key="test.xlsx.prepare").click().run()
    assert labels(at) == ["Download CSV", "Download XLSX"]
    sheet = openpyxl.load_workbook(io.BytesIO(built["xlsx"][0])).active
    assert [cell.value for cell in sheet["A"]] == ["text", "'=1+1", "ok"]
    at.run()
    at.run()
    assert labels(at) == ["Download CSV", "Download XLSX"] and len(at.button) == 0
    assert len(built["xlsx"]) == 1 and len(built["csv"]) == 1  # reruns build nothing


def test_a_changed_table_is_built_again_and_asks_again_for_its_xlsx(built):
    table = large_table()
    at = open_page(table)
    at.button(key="test.xlsx.prepare").click().run()
    changed = table.copy()
    changed.iat[59_999, 0] = "=changed"  # outside the rows Streamlit's hash would sample
    at.session_state["table"] = changed
    at.run()
    assert not at.exception
    assert labels(at) == ["Download CSV"] and at.button(key="test.xlsx.prepare")
    assert len(built["csv"]) == 2 and built["csv"][1].endswith(b'"\'=changed","UPI"\r\n')
    assert len(built["xlsx"]) == 1


def test_a_table_larger_than_a_sheet_gets_a_message_not_a_crash(built):
    at = open_page(pd.DataFrame({"n": range(1_048_576)}))
    at.button(key="test.xlsx.prepare").click().run()
    assert not at.exception
    assert [error.value for error in at.error] == [
        "1,048,576 rows x 1 columns do not fit an XLSX sheet (1,048,575 rows x 16,384 columns at "
        "most); export as .csv"
    ]
    assert labels(at) == ["Download CSV"]


def test_table_csv_bytes_follows_the_content_not_a_sample(built):
    table = large_table()
    changed = table.copy()
    changed.iat[59_999, 0] = "changed"
    assert ui.downloads.table_csv_bytes(table) == export.to_csv_bytes(table)
    assert ui.downloads.table_csv_bytes(changed) == export.to_csv_bytes(changed)
    assert ui.downloads.table_csv_bytes(table.copy()) == built["csv"][0]
    assert len(built["csv"]) == 2  # the equal copy came from the cache
