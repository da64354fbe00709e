"""Download buttons for a table as CSV and XLSX side by side, through the formula-safe exporter
(core.data.export), so every page offers the same two files the same way.

The bytes are made when the page runs, never deferred: Streamlit 1.67 can drop a deferred
download's callable when a rerun of the session ends at the wrong moment ("Deferred file ... not
found" in the server log, and the click downloads nothing). Identical tables are serialised once
(st.cache_data), so a rerun that changes nothing costs a hash, not a new XLSX.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.data.export import to_csv_bytes, to_xlsx_bytes

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
_FORMATS = (("CSV", "text/csv"), ("XLSX", XLSX_MIME))


@st.cache_data(max_entries=8, show_spinner=False)
def _file_bytes(table: pd.DataFrame, fmt: str) -> bytes:
    return to_xlsx_bytes(table) if fmt == "XLSX" else to_csv_bytes(table)


def render_table_downloads(
    table: pd.DataFrame, stem: str, *, label: str, keys: tuple[str, str]
) -> None:
    """Two buttons, `label.format(fmt="CSV")` and `fmt="XLSX"`, saving `stem`.csv and .xlsx."""
    for column, (fmt, mime), key in zip(st.columns(2), _FORMATS, keys, strict=True):
        column.download_button(
            label.format(fmt=fmt), _file_bytes(table, fmt), f"{stem}.{fmt.lower()}", mime, key=key
        )
