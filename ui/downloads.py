"""Download buttons for a table as CSV and XLSX side by side, through the formula-safe exporter
(core.data.export), so every page offers the same two files the same way."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from core.data.export import to_csv_bytes, to_xlsx_bytes

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
_FORMATS = (("CSV", to_csv_bytes, "text/csv"), ("XLSX", to_xlsx_bytes, XLSX_MIME))


def render_table_downloads(
    table: pd.DataFrame | Callable[[], pd.DataFrame],
    stem: str,
    *,
    label: str,
    keys: tuple[str, str],
) -> None:
    """Two buttons, `label.format(fmt="CSV")` and `fmt="XLSX"`, saving `stem`.csv and .xlsx.

    A DataFrame is serialised now; a callable only when the button is clicked (for tables that
    are costly to build).
    """
    for column, (fmt, to_bytes, mime), key in zip(st.columns(2), _FORMATS, keys, strict=True):
        if isinstance(table, pd.DataFrame):
            data: bytes | Callable[[], bytes] = to_bytes(table)
        else:
            data = lambda to_bytes=to_bytes: to_bytes(table())  # noqa: E731
        column.download_button(label.format(fmt=fmt), data, f"{stem}.{fmt.lower()}", mime, key=key)
