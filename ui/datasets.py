"""The built-in demo data set as every page loads it (one code path, cached once per day: its
received times end at the start of today in India, core.data.demo_times),
the validation of a loaded table, cached by the content key of its upload, and a data set saved
on the server made the active one."""

from datetime import date, datetime

import pandas as pd
import streamlit as st

from core.data.dataset import Dataset
from core.data.demo import DemoConfig, generate_demo_data
from core.data.demo_times import IST
from core.data.saved import datasets_root, load_dataset, validation_report
from core.data.saved_index import DatasetEntry
from core.data.validation import ValidationReport, validate
from ui.state import ActiveDataset, get_active_dataset, set_active_dataset

DEMO_NAME = "Built-in demo data"
DEMO_KEY = "built-in demo data"  # the cache key of the demo table (its texts never change)


@st.cache_data(show_spinner="Validating…", max_entries=8)
def validated(
    _table: pd.DataFrame, key: str, text_col: str, label_col: str
) -> tuple[Dataset, ValidationReport]:
    """`validate(_table, ...)` cached by `key`, the SHA-256 of the uploaded bytes
    (ui.uploads.Upload.key), never by the frame: Streamlit hashes only a 10,000-row sample of a
    large frame, so an upload with other labels outside that sample got the old result."""
    return validate(_table, text_col=text_col, label_col=label_col)


def demo_day() -> date:
    """Today in India: the demo queue's received times end at its start."""
    return datetime.now(IST).date()


@st.cache_data(show_spinner="Generating the demo complaints…", max_entries=2)
def _demo_table_of(day: date) -> pd.DataFrame:
    return generate_demo_data(DemoConfig(received_until=day))


def demo_table() -> pd.DataFrame:
    """Today's demo table. Keyed by the day, so a server that runs for weeks shows a queue of
    recent weeks, not one that ages from the day it started (texts and desks never change)."""
    return _demo_table_of(demo_day())


@st.cache_data(show_spinner="Validating…", max_entries=2)
def _demo_active(day: date) -> ActiveDataset:
    dataset, report = validate(_demo_table_of(day), text_col="text", label_col="desk")
    return ActiveDataset(name=DEMO_NAME, dataset=dataset, report=report)


def use_demo_dataset() -> ActiveDataset:
    """Make today's demo data the active data set and return it."""
    active = _demo_active(demo_day())
    set_active_dataset(active)
    return active


def require_dataset(page_key: str) -> ActiveDataset | None:
    """The active data set, or a prompt with a one-click demo fallback (None until clicked)."""
    active = get_active_dataset()
    if active is not None:
        return active
    prompt = st.empty()
    with prompt.container():
        st.info("No data set is loaded. Load one on the Data page, or use the built-in demo data.")
        clicked = st.button("Use the demo data", key=f"{page_key}.use_demo", type="primary")
    if not clicked:
        return None
    prompt.empty()  # the page goes on with the demo data: the prompt no longer applies
    return use_demo_dataset()


def use_saved_dataset(name: str) -> ActiveDataset:
    """Make saved data set `name` the active data set, exactly as an upload would be (its name,
    data and validation report); UserError when it cannot be loaded."""
    dataset, saved = load_dataset(datasets_root(), name)
    active = ActiveDataset(
        name=saved.name, dataset=dataset, report=validation_report(dataset, saved)
    )
    set_active_dataset(active)
    return active


def saved_when(saved: DatasetEntry) -> str:
    """When `saved` was saved, to the minute, in UTC ("2025-06-01 14:05 UTC")."""
    try:
        moment = datetime.fromisoformat(saved.saved_at)
    except ValueError:
        return saved.saved_at
    return moment.strftime("%Y-%m-%d %H:%M UTC")
