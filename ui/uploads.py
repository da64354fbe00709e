"""Uploaded spreadsheets as every page reads them: one bounded reader, cached by content."""

import pandas as pd
import streamlit as st

from core.data.intake import load_table
from core.data.limits import IntakeLimits


@st.cache_data(show_spinner="Reading the file…", max_entries=4)
def read_upload(name: str, content: bytes) -> pd.DataFrame:
    """The uploaded file `name` as a table, within the intake limits; raises core.data.DataError."""
    return load_table(content, filename=name, limits=IntakeLimits.from_env())
