"""The Label audit page's review: the suspected issues, most likely error first, with the audit's
own estimate of how many are real errors, and one at a time kept, relabelled, escalated or
excluded, each decision saved at once. Session keys: "audit.row" (the issue under
review, a widget), "audit.last_save" (SaveOutcome of the last decision, shown once)."""

from __future__ import annotations

import sqlite3

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.analysis.audit import AuditResult, LabelIssue
from core.errors import UserError
from core.review.records import ReviewDecision
from core.review.store import Store
from ui.auth import allowed, current_actor
from ui.errors import guarded
from ui.safe import md_escape
from ui.state import EXPLAIN_ROW_PARAM, ActiveDataset
from ui.widgets import (
    SaveOutcome,
    remember_save,
    render_last_save,
    render_reviewer,
    shown_frame,
    shown_text,
)

ROW_KEY = "audit.row"
LAST_SAVE_KEY = "audit.last_save"
DECISION_LABELS = {
    "keep": "Keep the given label",
    "relabel": "Relabel to …",
    "escalate": "Escalate (unsure: ask someone else)",
    "exclude": "Exclude (drop this row from the next version)",
}
EXPLAIN_PAGE = "pages/explain.py"


def render_audit_review(
    active: ActiveDataset, result: AuditResult, store: Store, actor: Actor
) -> None:
    """The suspected issues with their decisions so far, then (for those who may decide) the
    review of one issue at a time."""
    latest = store.latest_decisions(active.dataset.fingerprint)
    st.subheader(f"Suspected issues ({result.model}, {result.folds} folds, {result.seconds:.0f} s)")
    render_summary(result.issues, latest)
    render_estimate(result)
    render_issue_table(result.issues, latest)
    st.subheader("Review")
    render_last_save(LAST_SAVE_KEY)
    reviewer = None
    if allowed(actor, Permission.DECIDE, "Deciding on flagged rows"):
        prompt = "Your name, saved with each decision"
        reviewer = render_reviewer("audit", prompt=prompt, actor=actor)
    if not result.issues:
        st.success("No suspected label issues in this data set with these settings.")
    elif reviewer is not None:
        render_review(active, result.issues, latest, reviewer, store)


def decision_text(decision: ReviewDecision | None) -> str:
    """A decision in a few words ("keep", "relabel to X"); "" for none."""
    if decision is None:
        return ""
    if decision.decision == "relabel":
        return f"relabel to {decision.new_label}"
    return decision.decision


# ---------------------------------------------------------------------------------- the issues


def render_summary(issues: tuple[LabelIssue, ...], latest: dict[int, ReviewDecision]) -> None:
    decided = [latest[x.row] for x in issues if x.row in latest]
    counts = {kind: sum(d.decision == kind for d in decided) for kind in DECISION_LABELS}
    cols = st.columns(6)
    cols[0].metric("Flagged rows", f"{len(issues):,}")
    cols[1].metric("Decided", f"{len(decided):,}")
    cols[2].metric("Relabelled", f"{counts['relabel']:,}")
    cols[3].metric("Kept", f"{counts['keep']:,}")
    cols[4].metric("Escalated", f"{counts['escalate']:,}")
    cols[5].metric("Excluded", f"{counts['exclude']:,}")
    if issues:
        share = len(decided) / len(issues)
        st.progress(share, text=f"Review progress: {len(decided)} of {len(issues)} decided")


def render_estimate(result: AuditResult) -> None:
    """How many flagged rows the audit expects to be real errors, and how it chose its model."""
    if result.estimate is None:
        return
    st.info(md_escape(result.estimate.sentence()))
    if result.chosen:
        st.caption(
            md_escape(f"Chosen by out-of-fold log-loss: {result.chosen}. ")
            + "The model flags as many rows as cleanlab estimates there are label errors."
        )


def issues_frame(issues: tuple[LabelIssue, ...], latest: dict[int, ReviewDecision]) -> pd.DataFrame:
    """The ranked issues as a table, with the current decision of each row."""
    return pd.DataFrame(
        {
            "rank": range(1, len(issues) + 1),
            "row": [x.row for x in issues],
            "text": [x.text for x in issues],
            "given": [x.given_label for x in issues],
            "suggested": [x.suggested_label for x in issues],
            "quality": [x.quality for x in issues],
            "reason": [x.reason for x in issues],
            "decision": [decision_text(latest.get(x.row)) for x in issues],
        }
    )


def render_issue_table(issues: tuple[LabelIssue, ...], latest: dict[int, ReviewDecision]) -> None:
    st.dataframe(
        shown_frame(issues_frame(issues, latest)),
        hide_index=True,
        width="stretch",
        height=320,
        column_config={
            "quality": st.column_config.ProgressColumn(
                "quality",
                help="cleanlab label quality: low = suspicious",
                format="%.3f",
                min_value=0.0,
                max_value=1.0,
            ),
            "text": st.column_config.TextColumn("text", width="large"),
            "reason": st.column_config.TextColumn("reason", width="medium"),
        },
    )


# ---------------------------------------------------------------------------------- deciding


def render_review(
    active: ActiveDataset,
    issues: tuple[LabelIssue, ...],
    latest: dict[int, ReviewDecision],
    reviewer: str,
    store: Store,
) -> None:
    """Pick an issue, read it, and keep / relabel / escalate / exclude it with a note (an
    excluded row is dropped from the next version built by Train's "Retrain from corrections")."""
    by_row = {x.row: x for x in issues}
    rows = list(by_row)
    if st.session_state.get(ROW_KEY) not in by_row:
        st.session_state[ROW_KEY] = _next_undecided(rows, set(latest), after=None)
    row = st.selectbox(
        "Issue to review",
        rows,
        key=ROW_KEY,
        format_func=lambda r: _issue_option(by_row[r], latest.get(r)),
    )
    issue = by_row[row]
    st.text(shown_text(issue.text))
    st.caption(f"Why: {md_escape(issue.reason)} · quality {issue.quality:.3f}")
    render_explain_link(row)
    render_decision_form(active, issue, rows, set(latest), reviewer, store)


def _issue_option(issue: LabelIssue, decision: ReviewDecision | None) -> str:
    status = f" · {decision_text(decision)}" if decision is not None else ""
    return f"row {issue.row}: {issue.given_label} → {issue.suggested_label}{status}"


def _next_undecided(rows: list[int], decided: set[int], *, after: int | None) -> int:
    """The first undecided row after `after` (wrapping around), else `after` or the first."""
    start = rows.index(after) + 1 if after in rows else 0
    for row in rows[start:] + rows[:start]:
        if row not in decided:
            return row
    return after if after in rows else rows[0]


def render_explain_link(row: int) -> None:
    st.page_link(
        EXPLAIN_PAGE,
        label=f"Explain row {row}",
        icon=":material/search:",
        query_params={EXPLAIN_ROW_PARAM: str(row)},
    )


def render_decision_form(
    active: ActiveDataset,
    issue: LabelIssue,
    rows: list[int],
    decided: set[int],
    reviewer: str,
    store: Store,
) -> None:
    """Decision, new label and note for one row; saving happens in `save_decision`."""
    labels = [c for c in active.dataset.classes if c != issue.given_label]
    suggested = labels.index(issue.suggested_label) if issue.suggested_label in labels else 0
    with st.form(f"audit.decide.{issue.row}"):
        st.radio(
            "Decision",
            list(DECISION_LABELS),
            key=f"audit.decision.{issue.row}",
            format_func=DECISION_LABELS.get,
            horizontal=True,
        )
        st.selectbox(
            "New label (for a relabel)", labels, index=suggested, key=f"audit.label.{issue.row}"
        )
        st.text_input("Note (optional)", key=f"audit.note.{issue.row}", max_chars=500)
        st.form_submit_button(
            "Save decision",
            type="primary",
            on_click=guarded(save_decision),
            args=(store, active.dataset.fingerprint, issue, reviewer, rows, decided),
        )


def save_decision(
    store: Store,
    fingerprint: str,
    issue: LabelIssue,
    reviewer: str,
    rows: list[int],
    decided: set[int],
) -> None:
    """Form callback: write the decision (one transaction), then move on to the next issue.

    The actor is resolved now, at the click, not taken from the run that drew the form: a role
    changed or removed since then applies to this click. The outcome is kept for the rerun;
    "saved" is only ever reported after the write returned.
    """
    actor = current_actor()  # stops the run with a refusal when this user may no longer act
    row = issue.row
    choice = st.session_state[f"audit.decision.{row}"]
    try:
        decision_id = store.record_decision(
            ReviewDecision(
                fingerprint=fingerprint,
                row=row,
                text=issue.text,
                given_label=issue.given_label,
                decision=choice,
                reviewer=reviewer,
                new_label=st.session_state[f"audit.label.{row}"] if choice == "relabel" else None,
                note=st.session_state.get(f"audit.note.{row}", "").strip(),
            ),
            actor=actor,
        )
    except (UserError, sqlite3.Error) as exc:
        remember_save(LAST_SAVE_KEY, SaveOutcome(False, f"Not saved: {exc}"))
        return
    done = decision_text(store.latest_decisions(fingerprint).get(row))
    message = f"Saved decision #{decision_id}: row {row}, {done}."
    remember_save(LAST_SAVE_KEY, SaveOutcome(True, message))
    st.session_state[ROW_KEY] = _next_undecided(rows, {*decided, row}, after=row)
