"""Grievance Lens: router and frame. Pages, page config and the shared sidebar; nothing else."""

import streamlit as st

from ui.safe import md_escape
from ui.state import get_active_dataset

st.set_page_config(page_title="Grievance Lens", page_icon=":material/inbox:", layout="wide")

PAGES = [
    st.Page("pages/data.py", title="Data", icon=":material/table:", default=True),
]


def render_sidebar(container) -> None:
    """The active data set, always in view."""
    with container:
        st.markdown("**Grievance Lens**")
        active = get_active_dataset()
        if active is None:
            st.caption("No data set loaded. Open **Data** to upload one or use the demo data.")
            return
        st.caption(f"Data set: {md_escape(active.name)}")
        st.caption(
            f"{active.report.rows_kept:,} complaints · {len(active.report.labels)} desks · "
            f"text column {md_escape(active.report.text_col)}"
        )


page = st.navigation(PAGES)
sidebar = st.sidebar.container()
try:
    page.run()
finally:  # after the page, so the sidebar shows what this run loaded, even if it stopped early
    render_sidebar(sidebar)
