"""Label audit page: find rows whose label looks wrong, decide each one, export the corrections.

The audit (bag of words, quick or transformer) runs in a worker thread
(core.tasks.audit.AuditRun) polled by a fragment; finished audits are cached per
server process by data fingerprint and settings. Every decision goes to the review store (SQLite)
in one transaction and is shown as saved only after the write returned. Page-private session
keys: "audit.row" (the issue under review, a widget), "audit.last_save" (SaveOutcome of the last
decision, shown once) and "audit.carry_over" (SaveOutcome of carrying decisions over from the
legacy fingerprint, shown once)."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.analysis.audit import AuditConfig, AuditResult, LabelIssue, audit_cache_key
from core.analysis.audit_cache import AuditCache
from core.analysis.audit_quick import QUICK_AUDIT, quick_audit_config, quick_train_config
from core.analysis.audit_transformer import model_audit_settings, train_config_from_card
from core.data.dataset import Dataset
from core.data.export import safe_file_stem
from core.errors import UserError
from core.jobs import JobSnapshot, JobStatus
from core.models.transformer.config import TrainConfig, backbone_label
from core.review.records import ReviewDecision
from core.review.relabel import apply_decisions, plan_carry_over
from core.review.store import Store
from core.tasks import audit as audit_tasks
from core.tasks.audit import AuditRun, finished_audit
from ui.auth import allowed, current_actor
from ui.datasets import require_dataset
from ui.downloads import render_table_downloads
from ui.jobs import (
    JobProgress,
    describe_job,
    get_job_queue,
    job_requester,
    render_job_progress,
)
from ui.safe import md_escape
from ui.state import (
    EXPLAIN_ROW_PARAM,
    ActiveDataset,
    get_active_model,
    get_audit_job,
    set_audit_job,
)
from ui.widgets import (
    SaveOutcome,
    remember_save,
    render_last_save,
    render_not_live_notice,
    render_reviewer,
    require_store,
    shown_frame,
    shown_text,
)

if TYPE_CHECKING:  # the bag-of-words audit needs no torch; a loaded model brings it along
    from core.models.registry import LoadedModel

BOW, QUICK, TRANSFORMER = "bow", QUICK_AUDIT, "transformer"
MODEL_NAMES = {
    BOW: "Bag of words (seconds)",
    QUICK: "Quick: MiniLM embeddings + a linear head (about a minute per 3,000 rows)",
    TRANSFORMER: "Transformer, fine-tuned per fold with the active model's settings (hours)",
}
MODEL_CAPTIONS = {
    BOW: "Sees which words occur, not their order: word-order twins look mislabelled.",
    QUICK: "The pretrained encoder embeds each row once and never sees labels; a head per fold "
    "learns the desks. Sees word order as far as the pretrained encoder does.",
    TRANSFORMER: "Fine-tunes the whole encoder on each fold's rows: learns word order from your "
    "labels. Hours on a CPU, minutes on a GPU.",
}
ROW_KEY = "audit.row"
LAST_SAVE_KEY = "audit.last_save"
CARRY_OVER_KEY = "audit.carry_over"
DECISION_LABELS = {
    "keep": "Keep the given label",
    "relabel": "Relabel to …",
    "escalate": "Escalate (unsure: ask someone else)",
    "exclude": "Exclude (drop this row from the next version)",
}
EXPLAIN_PAGE = "pages/explain.py"


@st.cache_resource(show_spinner=False)
def finished_audits() -> AuditCache:
    """Finished audits of this server process by `audit_cache_key`, shared by all sessions."""
    return AuditCache()


def remember(key: str, result: AuditResult, store: Store, actor: Actor) -> None:
    """Cache a finished audit (evicting the oldest) and record the run once in the store under
    `actor` (when the store is writable and the actor may still run audits)."""
    if not finished_audits().add(key, result) or store.read_only:
        return
    if not actor.can(Permission.RUN_JOBS):  # their role changed while the audit ran
        return
    store.record_run(
        "audit",
        parameters={
            "model": result.model,
            "folds": result.folds,
            "fingerprint": result.fingerprint,
        },
        metrics={"issues": len(result.issues), "seconds": round(result.seconds, 3)},
        actor=actor,
    )


# ---------------------------------------------------------------------------------- running


def render_audit_form(active: ActiveDataset, model: LoadedModel | None) -> None:
    """Model and folds; on submit, start (or reuse) the audit of the active data set."""
    with st.form("audit.form"):
        left, right = st.columns([3, 1])
        choice = left.radio(
            "Model that predicts each row without having seen it",
            list(MODEL_NAMES),
            key="audit.model",
            format_func=MODEL_NAMES.get,
            captions=list(MODEL_CAPTIONS.values()),
        )
        folds = right.number_input("Folds", 2, 10, 5, key="audit.folds")
        submitted = st.form_submit_button("Run the audit", type="primary")
    if model is None:
        st.caption("The transformer audit needs a model: train or load one on **Train**.")
    else:
        st.caption(f"Active model: {md_escape(model.path.name)} ({_settings_text(model)}).")
    if submitted:
        start_audit(active.dataset, choice, int(folds), model)


def _settings_text(model: LoadedModel) -> str:
    try:
        config = train_config_from_card(model.card)
    except UserError as exc:
        return md_escape(exc)
    if config.recipe == QUICK:
        return md_escape(
            f"quick model over {backbone_label(config.backbone)}: the transformer audit runs "
            "the quick way with its encoder"
        )
    return md_escape(
        f"backbone {backbone_label(config.backbone)}, {config.epochs} epochs, lr {config.lr:g}, "
        f"max length {config.max_length}"
    )


def start_audit(dataset: Dataset, choice: str, folds: int, model: LoadedModel | None) -> None:
    """Start the chosen audit in a worker thread, or reuse a finished one with equal settings."""
    try:
        config, train_config = audit_settings(choice, folds, model)
    except UserError as exc:
        st.error(md_escape(exc))
        return
    fit_settings = asdict(train_config) if train_config is not None else None
    key = audit_cache_key(dataset, config, fit_settings=fit_settings)
    cached = finished_audits().get(key)
    if cached is not None:
        set_audit_job(finished_audit(dataset, cached, key=key))
        return
    try:
        set_audit_job(audit_tasks.start_audit(dataset, config, train_config=train_config, key=key,
                                  queue=get_job_queue(), requester=job_requester()))  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))


def audit_settings(
    choice: str, folds: int, model: LoadedModel | None
) -> tuple[AuditConfig, TrainConfig | None]:
    """The AuditConfig and, for the quick and transformer audits, the TrainConfig (the quick
    audit's names the bundled MiniLM, whose encoder it uses frozen)."""
    config = AuditConfig(folds=folds)
    if choice == BOW:
        return config, None
    if choice == QUICK:
        return quick_audit_config(config), quick_train_config()
    if model is None:
        raise UserError("no active model: train or load one on Train, or audit with bag of words")
    return model_audit_settings(model.card, config)  # a quick model is audited the quick way


def describe_audit(run: AuditRun) -> JobProgress | None:
    """Where the audit is (fold and step, or texts embedded), elapsed and left, for the progress
    fragment; None once it has ended."""

    def text(snapshot: JobSnapshot, eta: str) -> str:
        first = f"Fold 1 of {run.config.folds}"  # what runs before the first report
        latest = snapshot.latest
        where = latest.detail if latest is not None and latest.detail else first
        return f"{where} · {snapshot.elapsed_s:.0f} s elapsed{eta}"

    return describe_job(run, text)


def _caption_cancelling() -> None:
    st.caption("Cancelling at the next step…")


# ---------------------------------------------------------------------------------- results


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
            "decision": [_decision_text(latest.get(x.row)) for x in issues],
        }
    )


def _decision_text(decision: ReviewDecision | None) -> str:
    if decision is None:
        return ""
    if decision.decision == "relabel":
        return f"relabel to {decision.new_label}"
    return decision.decision


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
    status = f" · {_decision_text(decision)}" if decision is not None else ""
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
            on_click=save_decision,
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
    done = _decision_text(store.latest_decisions(fingerprint).get(row))
    message = f"Saved decision #{decision_id}: row {row}, {done}."
    remember_save(LAST_SAVE_KEY, SaveOutcome(True, message))
    st.session_state[ROW_KEY] = _next_undecided(rows, {*decided, row}, after=row)


# ---------------------------------------------------------------------------------- export, history


def render_carry_over(dataset: Dataset, store: Store, actor: Actor) -> None:
    """Decisions saved under the data set's legacy fingerprint: never applied silently, never lost.

    Those whose row still holds the same complaint and label can be carried over with a click;
    the others are named so the reviewer can decide those rows again.
    """
    render_last_save(CARRY_OVER_KEY)
    legacy = store.decisions(dataset.legacy_fingerprint)
    if not legacy:
        return
    plan = plan_carry_over(dataset, legacy, store.decisions(dataset.fingerprint), actor=actor)
    if plan.mismatched:
        rows = ", ".join(map(str, plan.mismatched_rows[:10]))
        more = " …" if len(plan.mismatched_rows) > 10 else ""
        st.warning(
            f"{len(plan.mismatched)} decisions saved before row numbers were part of a data "
            f"set's fingerprint no longer match their rows ({rows}{more}): the complaint or label "
            "there is different now, so they are not applied. Review these rows again."
        )
    if plan.pending:
        st.warning(
            f"{len(plan.pending)} decisions were saved on this data set before row numbers were "
            "part of its fingerprint. Their rows still hold the same complaints and labels; they "
            "are not applied until you carry them over."
        )
        st.button(
            f"Carry over {len(plan.pending)} decisions",
            key="audit.carry_over_button",
            on_click=carry_over,
            args=(store, plan.pending),
        )


def carry_over(store: Store, pending: tuple[ReviewDecision, ...]) -> None:
    """Button callback: store the carried-over copies (each its own transaction, in order), as
    the actor signed in at the click."""
    actor = current_actor()
    try:
        for decision in pending:
            store.record_decision(decision, actor=actor)
    except (UserError, sqlite3.Error) as exc:
        remember_save(CARRY_OVER_KEY, SaveOutcome(False, f"Not all carried over: {exc}"))
        return
    remember_save(CARRY_OVER_KEY, SaveOutcome(True, f"Carried over {len(pending)} decisions."))


def render_export(active: ActiveDataset, store: Store, actor: Actor) -> None:
    """Corrected data set downloads, built from the store (not the session), formula-safe."""
    dataset = active.dataset
    try:
        corrected = apply_decisions(
            dataset, store.latest_decisions(dataset.fingerprint), actor=actor
        )
    except UserError as exc:
        st.error(f"The corrected data set cannot be built: {md_escape(exc)}")
        return
    stem = "corrected-" + safe_file_stem(active.name)
    render_table_downloads(
        corrected, stem, label="Download the corrected data set ({fmt})",
        keys=("audit.export_csv", "audit.export_xlsx"),
    )  # fmt: skip
    st.caption(
        "Relabelled rows carry the new label; `original_label` keeps the old one and `review` "
        "says what changed. Excluded rows stay in this file, marked `excluded` in `review`; the "
        "next version built on Train leaves them out. Cells a spreadsheet would run as formulas "
        "are prefixed with '."
    )


def render_history(fingerprint: str, store: Store, actor: Actor) -> None:
    """Decisions on this data set and the trail, as the actor may see them: other reviewers'
    names and notes only with SEE_ALL_TRAIL (the store applies the trail's rule to both)."""
    history_tab, trail_tab = st.tabs(["Decision history", "Audit trail"])
    decisions = store.decision_history(fingerprint, actor=actor)
    if decisions:
        last = decisions[-1]
        history_tab.caption(
            f"{len(decisions)} decisions on this data set; the latest: row {last.row}, "
            f"{md_escape(_decision_text(last))}, by {md_escape(last.reviewer)} "
            f"at {last.created_at[:19].replace('T', ' ')} UTC."
        )
        history_tab.dataframe(history_frame(decisions), hide_index=True, width="stretch")
    else:
        history_tab.write("No decisions yet for this data set.")
    events = store.trail(limit=200, actor=actor)
    whose = "everyone's" if actor.can(Permission.SEE_ALL_TRAIL) else "your own"
    trail_tab.caption(
        f"The latest 200 of {whose} events in the append-only trail (every data set)."
    )
    trail_tab.dataframe(
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


def history_frame(decisions: list[ReviewDecision]) -> pd.DataFrame:
    """Every decision on this data set, newest first."""
    newest = decisions[::-1]
    return pd.DataFrame(
        {
            "decision": [d.id for d in newest],
            "time": [d.created_at for d in newest],
            "row": [d.row for d in newest],
            "given": [d.given_label for d in newest],
            "verdict": [_decision_text(d) for d in newest],
            "reviewer": [d.reviewer for d in newest],
            "note": [d.note for d in newest],
        }
    )


# ---------------------------------------------------------------------------------- page


def current_result(
    run: AuditRun | None, active: ActiveDataset, store: Store, actor: Actor
) -> AuditResult | None:
    """The session's finished audit of the active data set; progress while it runs."""
    if run is None or run.fingerprint != active.dataset.fingerprint:
        return None
    snapshot = run.snapshot()
    if snapshot.status.active:
        render_job_progress(
            run, describe=describe_audit, key="audit.cancel", every=1.0,
            cancel_label="Cancel the audit", on_cancel=_caption_cancelling,
        )  # fmt: skip
        return None
    if snapshot.status is JobStatus.FAILED:
        st.error(f"The audit failed: {md_escape(snapshot.error)}")
        return None
    if snapshot.status is JobStatus.CANCELLED:
        st.warning("The audit was cancelled; run it again to see issues.")
        return None
    result = snapshot.result or finished_audits().get(run.key)  # the queue keeps recent results
    if result is None:
        st.info("This audit is no longer kept on the server; run it again.")
        return None
    remember(run.key, result, store, actor)
    return result


st.title("Label audit")
st.write(
    "Find rows whose label looks wrong: a model trained without each row predicts it, and "
    "cleanlab flags rows where it confidently disagrees; identical or same-words texts with "
    "other labels are listed too. Decide each one; every decision is saved at once."
)
actor = current_actor()
active = require_dataset("audit")
if active is None:
    st.stop()
store = require_store()
if allowed(actor, Permission.RUN_JOBS, "Running an audit"):
    render_not_live_notice(get_active_model(), key="audit.use_live")
    render_audit_form(active, get_active_model())
result = current_result(get_audit_job(), active, store, actor)
if result is not None:
    latest = store.latest_decisions(active.dataset.fingerprint)
    st.subheader(f"Suspected issues ({result.model}, {result.folds} folds, {result.seconds:.0f} s)")
    render_summary(result.issues, latest)
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
st.subheader("Export and history")
if allowed(actor, Permission.DECIDE, "Exporting the corrected data set"):
    render_carry_over(active.dataset, store, actor)
    render_export(active, store, actor)
render_history(active.dataset.fingerprint, store, actor)
