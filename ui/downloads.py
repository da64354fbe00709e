"""Download buttons for a table, CSV and XLSX side by side, through the formula-safe exporter
(core.data.export), so every page offers the same files the same way.

The CSV is made when the page runs. The XLSX (about ten seconds at 100,000 rows) is made only
after a click on "Prepare Excel file", once per table: its button then takes that table's place
until the table changes. Bytes are never deferred: Streamlit 1.67 can drop a deferred download's
callable when a rerun of the session ends at the wrong moment ("Deferred file ... not found" in
the server log, and the click downloads nothing). Files are cached (st.cache_data) under
core's table_digest, a hash of every row: Streamlit's own hash samples 10,000 rows of a large
frame, and a change outside the sample would download the old file.

Session state: "<xlsx key>.prepared" holds the digest of the table whose XLSX was asked for.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.data.export import table_digest, to_csv_bytes, to_xlsx_bytes
from core.errors import UserError

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@st.cache_data(max_entries=8, show_spinner=False)
def _csv_bytes(digest: str, _table: pd.DataFrame) -> bytes:
    return to_csv_bytes(_table)  # `_table` is not hashed: `digest` stands for it


@st.cache_data(max_entries=8, show_spinner=False)
def _xlsx_bytes(digest: str, _table: pd.DataFrame) -> bytes:
    return to_xlsx_bytes(_table)


def table_csv_bytes(table: pd.DataFrame) -> bytes:
    """`to_csv_bytes(table)`, made once for each distinct table content."""
    return _csv_bytes(table_digest(table), table)


def render_table_downloads(
    table: pd.DataFrame, stem: str, *, label: str, keys: tuple[str, str]
) -> None:
    """`label.format(fmt="CSV")` downloads `stem`.csv; beside it, after "Prepare Excel file",
    `label.format(fmt="XLSX")` downloads `stem`.xlsx. `keys` are the two download buttons'."""
    digest = table_digest(table)
    csv_column, xlsx_column = st.columns(2)
    csv_column.download_button(
        label.format(fmt="CSV"), _csv_bytes(digest, table), f"{stem}.csv", "text/csv", key=keys[0]
    )
    with xlsx_column:
        _render_xlsx_download(table, digest, stem, label=label.format(fmt="XLSX"), key=keys[1])


def _render_xlsx_download(
    table: pd.DataFrame, digest: str, stem: str, *, label: str, key: str
) -> None:
    prepared = f"{key}.prepared"
    if st.session_state.get(prepared) != digest:
        if not st.button("Prepare Excel file", key=f"{key}.prepare", icon=":material/table:"):
            return
        try:
            with st.spinner("Building the Excel file…"):
                _xlsx_bytes(digest, table)
        except UserError as error:  # a table larger than a sheet: the message says what to do
            st.error(str(error))
            return
        st.session_state[prepared] = digest
    st.download_button(label, _xlsx_bytes(digest, table), f"{stem}.xlsx", XLSX_MIME, key=key)
