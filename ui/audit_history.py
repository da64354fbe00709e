"""The Label audit page's history: the decisions on the active data set and the append-only audit
trail, each as the actor may see it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.review.records import ReviewDecision
from core.review.store import Store
from ui.audit_review import decision_text
from ui.safe import md_escape


def render_audit_history(fingerprint: str, store: Store, actor: Actor) -> None:
    """Decisions on this data set and the trail, as the actor may see them: other reviewers'
    names and notes only with SEE_ALL_TRAIL (the store applies the trail's rule to both)."""
    history_tab, trail_tab = st.tabs(["Decision history", "Audit trail"])
    with history_tab:
        render_decision_history(fingerprint, store, actor)
    with trail_tab:
        render_trail(store, actor)


def render_decision_history(fingerprint: str, store: Store, actor: Actor) -> None:
    decisions = store.decision_history(fingerprint, actor=actor)
    if not decisions:
        st.write("No decisions yet for this data set.")
        return
    last = decisions[-1]
    st.caption(
        f"{len(decisions)} decisions on this data set; the latest: row {last.row}, "
        f"{md_escape(decision_text(last))}, by {md_escape(last.reviewer)} "
        f"at {last.created_at[:19].replace('T', ' ')} UTC."
    )
    st.dataframe(history_frame(decisions), hide_index=True, width="stretch")


def history_frame(decisions: list[ReviewDecision]) -> pd.DataFrame:
    """Every decision on this data set, newest first."""
    newest = decisions[::-1]
    return pd.DataFrame(
        {
            "decision": [d.id for d in newest],
            "time": [d.created_at for d in newest],
            "row": [d.row for d in newest],
            "given": [d.given_label for d in newest],
            "verdict": [decision_text(d) for d in newest],
            "reviewer": [d.reviewer for d in newest],
            "note": [d.note for d in newest],
        }
    )


def render_trail(store: Store, actor: Actor) -> None:
    """The latest 200 trail events the actor may see (every data set)."""
    events = store.trail(limit=200, actor=actor)
    whose = "everyone's" if actor.can(Permission.SEE_ALL_TRAIL) else "your own"
    st.caption(f"The latest 200 of {whose} events in the append-only trail (every data set).")
    st.dataframe(
        pd.DataFrame(
            {
                "time": [e.created_at for e in events],
                "action": [e.action for e in events],
                "id": [e.entity_id for e in events],
                "by": [e.actor for e in events],
                "details": [str(e.details) for e in events],
            }
        ),
        hide_index=True,
        width="stretch",
    )
