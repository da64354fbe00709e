"""The router and frame app.py runs for every page view: page config, sign-in, the pages and the
shared sidebar; nothing else. ui.auth.current_actor() runs before navigation: a visitor who may
not use the app (not signed in, not listed, or a public server without sign-in) sees its one
page and nothing else."""

import streamlit as st

from core.models.transformer.config import backbone_label
from ui.auth import current_actor, render_account
from ui.errors import shown_errors
from ui.safe import md_escape
from ui.state import (
    get_active_dataset,
    get_active_model,
    get_active_model_name,
    set_presenting,
)
from ui.widgets import render_live_model_status, render_mask_toggle


def pages() -> list:
    """The app's pages, in the sidebar's order (paths relative to app.py's folder)."""
    return [
        st.Page("pages/data.py", title="Data", icon=":material/table:", default=True),
        st.Page("pages/train.py", title="Train", icon=":material/model_training:"),
        st.Page("pages/classify.py", title="Classify", icon=":material/alt_route:"),
        st.Page("pages/explain.py", title="Explain", icon=":material/search:"),
        st.Page("pages/order_probes.py", title="Order probes", icon=":material/swap_horiz:"),
        st.Page("pages/label_audit.py", title="Label audit", icon=":material/fact_check:"),
        st.Page("pages/triage.py", title="Triage queue", icon=":material/pending_actions:"),
        st.Page("pages/new_desks.py", title="New desks", icon=":material/add_box:"),
        st.Page("pages/board.py", title="Routing board", icon=":material/timer:"),
        st.Page("pages/monitor.py", title="Monitor", icon=":material/monitor_heart:"),
        st.Page("pages/attention_lab.py", title="Attention lab", icon=":material/grid_on:"),
        st.Page("pages/jobs.py", title="Jobs", icon=":material/queue:"),
        st.Page("pages/tokens.py", title="API tokens", icon=":material/key:"),
    ]


def render_sidebar(container, *, load: bool = True) -> None:
    """The active model, the team's live model and the data set, always in view. `load=False`
    (drawn before the page): the active model by name only, nothing loaded, dropped or said."""
    with container:
        st.markdown("**Grievance Lens**")
        render_model_line(load)
        render_live_model_status()
        active = get_active_dataset()
        if active is None:
            st.caption("No data set loaded. Open **Data** to upload one or use the demo data.")
            return
        st.caption(f"Data set: {md_escape(active.name)}")
        st.caption(
            f"{active.report.rows_kept:,} complaints · {len(active.report.labels)} desks · "
            f"text column {md_escape(active.report.text_col)}"
        )


NO_MODEL = "No model loaded. Train or load one on **Train**."


def render_model_line(load: bool) -> None:
    """This session's model: loaded (after the page), or by its name only (before it)."""
    if not load:
        name = get_active_model_name()
        st.caption(f"Model: {md_escape(name)}" if name else NO_MODEL)
        return
    model = get_active_model()
    if model is None:
        st.caption(NO_MODEL)
    else:
        backbone = md_escape(backbone_label(str(model.card.get("backbone", "?"))))
        st.caption(f"Model: {md_escape(model.path.name)} ({backbone})")


def run() -> None:
    """One page view: the frame around the page the visitor asked for."""
    st.set_page_config(page_title="Grievance Lens", page_icon=":material/inbox:", layout="wide")
    actor = current_actor()  # stops here with the sign-in page, a refusal or the loopback rule
    page = st.navigation(pages(), expanded=True)  # every page in view, however many
    sidebar = st.sidebar.empty()
    # Drawn before the page as well: after a page's st.stop() nothing more can be drawn in this
    # run, so a page that stops early (no data set yet, no model) still has the frame and the
    # live model.
    render_sidebar(sidebar.container(), load=False)
    with st.sidebar:  # before the page runs, so the page reads this run's choice
        render_account(actor)
        render_mask_toggle()
    set_presenting(False)  # a page in presenter mode turns it on for its own run only
    with shown_errors():  # a bug in a page: a reference to the server log, never a traceback
        page.run()
    render_sidebar(sidebar.container())  # again, replacing it: what this run loaded
