"""The few documented session-state keys, each holding a dataclass.

Session state holds only what one browser tab is looking at; anything that must survive a
restart goes through core.store (SQLite).
"""

from dataclasses import dataclass

import streamlit as st

from core.baseline_eval import BaselineEvaluation
from core.data import Dataset, ValidationReport

ACTIVE_DATASET = "active_dataset"  # ActiveDataset: the data set every page works on
BASELINE_RUN = "baseline_run"  # BaselineEvaluation of the active data set, if trained


@dataclass(frozen=True)
class ActiveDataset:
    """The validated data set the pages work on, and where it came from."""

    name: str
    dataset: Dataset
    report: ValidationReport


def get_active_dataset() -> ActiveDataset | None:
    return st.session_state.get(ACTIVE_DATASET)


def set_active_dataset(active: ActiveDataset) -> None:
    previous = get_active_dataset()
    if previous is None or previous.dataset.fingerprint != active.dataset.fingerprint:
        st.session_state.pop(BASELINE_RUN, None)  # results of another data set would mislead
    st.session_state[ACTIVE_DATASET] = active


def get_baseline_run() -> BaselineEvaluation | None:
    return st.session_state.get(BASELINE_RUN)


def set_baseline_run(run: BaselineEvaluation) -> None:
    st.session_state[BASELINE_RUN] = run
