"""The built-in demo data set as every page loads it: one code path, cached once per process."""

import pandas as pd
import streamlit as st

from core.data.demo import DemoConfig, generate_demo_data
from core.data.validation import validate
from ui.state import ActiveDataset, get_active_dataset, set_active_dataset

DEMO_NAME = "Built-in demo data"


@st.cache_data(show_spinner="Generating the demo complaints…")
def demo_table() -> pd.DataFrame:
    return generate_demo_data(DemoConfig())


@st.cache_data(show_spinner="Validating…")
def _demo_active() -> ActiveDataset:
    dataset, report = validate(demo_table(), text_col="text", label_col="desk")
    return ActiveDataset(name=DEMO_NAME, dataset=dataset, report=report)


def use_demo_dataset() -> ActiveDataset:
    """Make the demo data the active data set and return it."""
    active = _demo_active()
    set_active_dataset(active)
    return active


def require_dataset(page_key: str) -> ActiveDataset | None:
    """The active data set, or a prompt with a one-click demo fallback (None until clicked)."""
    active = get_active_dataset()
    if active is not None:
        return active
    st.info("No data set is loaded. Load one on the Data page, or use the built-in demo data.")
    if st.button("Use the demo data", key=f"{page_key}.use_demo", type="primary"):
        return use_demo_dataset()
    return None
