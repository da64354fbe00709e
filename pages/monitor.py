"""Monitor page: how the live model routes what arrives through the intake API, against the rows
it was validated on: complaints per day by channel and desk, the shares sent to people and
fitting no desk, the confidence distribution, a drift figure per ISO week with the threshold at
which it warns, and the routing latency. Everything is counted in core.monitor from the review
store; this page only draws. Viewers may read it. It redraws itself every REFRESH_S seconds."""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from core.review.store import Store
from ui.auth import current_actor
from ui.monitor import (
    monitor_report,
    render_baseline,
    render_days,
    render_drift,
    render_headline,
    render_since,
    render_warnings,
)
from ui.safe import md_escape
from ui.widgets import require_store

REFRESH_S = 60.0  # seconds between redraws: weekly figures move slowly


def render_monitor(store: Store, since: datetime) -> None:
    report = monitor_report(store, since)
    if report is None:
        return
    render_baseline(report)
    render_warnings(report)
    if report.complaints == 0:
        st.info(
            f"No complaint from the intake API was received since {md_escape(report.since[:10])}. "
            "The bank's systems post complaints with a token (an admin creates one on API "
            "tokens); they show here as they arrive."
        )
        return
    render_headline(report)
    render_days(report)
    render_drift(report)


st.title("Monitor")
st.write(
    "Is the live model still routing the complaints it was trained for? What arrives through the "
    "intake API, against the rows the model was validated on."
)
current_actor()  # every role may read it; the page stops for a visitor who may not use the app
store = require_store()
since = render_since()
st.fragment(render_monitor, run_every=REFRESH_S)(store, since)
