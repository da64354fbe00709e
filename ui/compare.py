"""The Train page's "Challenger against live" section: pick the model in use (A, by default the
team's live model) and a challenger (B, by default the newest other saved model), the rows (a
saved data set, by default the one B was trained on, plus the reviewers' triage verdicts since A
was trained), compare them on the queue, read the report, and (admins) promote B from it."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st

from core.access import Actor, Permission
from core.analysis.compare import Comparison, changed_frame
from core.charts.compare import per_desk_frame, per_desk_recall_chart, scores_frame
from core.data.dataset import Dataset
from core.data.saved import SavedDataset, datasets_root, find_by_fingerprint, list_datasets
from core.data.saved import load_dataset as load_saved_dataset
from core.errors import UserError
from core.models.card import card_digest, model_folder
from core.models.registry import ModelSummary
from core.paths import models_dir
from core.review.gold import gold_rows
from core.review.live import LiveModel, format_since, live_model, promote_model
from core.review.store import Store
from core.tasks.compare import ComparisonRequest, ComparisonRun, start_comparison
from ui.auth import allowed, current_actor
from ui.figures import show_chart
from ui.jobs import (
    JobProgress,
    counted,
    describe_job,
    get_job_queue,
    job_requester,
    render_unfinished,
)
from ui.safe import md_escape
from ui.state import ACTIVE_MODEL, get_active_dataset, get_store, saved_models
from ui.widgets import SaveOutcome, remember_save, render_last_save, shown_frame

COMPARE_RUN = "compare.run"  # ComparisonRun: this session's comparison (running or finished)
PROMOTED = "compare.promoted"  # SaveOutcome of the last promotion, shown once after the rerun
SESSION_ROWS = ""  # the rows choice that means the data set loaded in this session


@dataclass(frozen=True)
class Picks:
    """What the section's widgets chose."""

    a: ModelSummary
    b: ModelSummary
    rows: str  # a saved data set's name, or SESSION_ROWS
    gold_since: str | None  # A's created_at when the reviewers' verdicts are added, else None


def render_challenger_section() -> None:
    """The whole section; it draws nothing but a caption until there are two models to compare."""
    st.subheader("Challenger against live")
    render_last_save(PROMOTED)
    try:
        store = get_store()
    except UserError as exc:
        st.error(f"The review store cannot be used: {md_escape(exc)}")
        return
    actor = current_actor()
    summaries = saved_models()
    if len(summaries) < 2:
        st.caption("Comparing needs two saved models: the one in use and a challenger.")
        return
    live = live_model(store)
    picks = render_picks(store, summaries, live)
    if picks is not None and allowed(actor, Permission.RUN_JOBS, "Comparing models"):
        render_start(store, picks)
    run: ComparisonRun | None = st.session_state.get(COMPARE_RUN)
    if run is not None:
        render_run(store, actor, run)


def render_picks(
    store: Store, summaries: list[ModelSummary], live: LiveModel | None
) -> Picks | None:
    """The two models and the rows; None (with the reason shown) when nothing can be compared."""
    names = [s.name for s in summaries]
    by_name = {s.name: s for s in summaries}
    default_a = default_model_a(names, live)
    left, right = st.columns(2)
    a = left.selectbox("A: the model in use", names, index=names.index(default_a), key="compare.a")
    others = [n for n in names if n != a]
    b = right.selectbox("B: the challenger", others, key="compare.b")
    st.caption(live_caption(live, a))
    if b is None:
        return None
    rows = render_rows_pick(by_name[b])
    if rows is None:
        return None
    since = render_gold_pick(store, by_name[a])
    return Picks(by_name[a], by_name[b], rows, since)


def default_model_a(names: list[str], live: LiveModel | None) -> str:
    """The live model; if none is live (or it is gone), the session's model; else the newest."""
    if live is not None and live.name in names:
        return live.name
    active = st.session_state.get(ACTIVE_MODEL)
    name = Path(active).name if isinstance(active, str) else None
    return name if name in names else names[0]


def live_caption(live: LiveModel | None, a: str) -> str:
    if live is None:
        return "No model is live yet: promote one below once a comparison says it is good."
    since = f"live since {format_since(live.since)}"
    if live.name == a:
        return f"A is the team's live model ({since})."
    return f"A is not the live model; the live model is {md_escape(live.name)} ({since})."


def render_rows_pick(b: ModelSummary) -> str | None:
    """A saved data set (default: the one B was trained on) or this session's data set."""
    saved = list_datasets(datasets_root())
    trained_on = find_by_fingerprint(datasets_root(), b.data_fingerprint)
    if trained_on is not None and trained_on.name not in {s.name for s in saved}:
        saved.append(trained_on)  # retired since, still the fairest rows for B
    options = [s.name for s in saved]
    if get_active_dataset() is not None:
        options.append(SESSION_ROWS)
    if not options:
        st.caption("Save a data set on the Data page (or load one) to compare the models on.")
        return None
    # B's own data set: its held-out rows are the ones B was validated on and A, by the
    # inherited split, never trained on; else this session's data set; else the newest saved.
    default = trained_on.name if trained_on is not None else options[-1]
    if trained_on is None and SESSION_ROWS not in options:
        default = options[0]
    labels = {s.name: f"{s.name} ({s.rows:,} rows)" for s in saved}
    return st.selectbox(
        "Rows", options, index=options.index(default), key="compare.rows",
        format_func=lambda name: labels.get(name, "the data set loaded in this session"),
        help="Rows either model trained on are left out (their cards record them). Defaults to "
        "the data set B was trained on, whose held-out rows neither model saw.",
    )  # fmt: skip


def render_gold_pick(store: Store, a: ModelSummary) -> str | None:
    """Whether to add the triage verdicts reviewers gave since A was trained; A's time if so."""
    if not a.created_at:
        return None
    try:
        count = len(gold_rows(store, since=a.created_at))
    except UserError:  # a card whose time cannot be read: no verdicts can be dated against it
        return None
    add = st.checkbox(
        f"Add the {count:,} triage verdicts reviewers gave since A was trained", value=True,
        key="compare.gold", disabled=count == 0,
    )  # fmt: skip
    return a.created_at if add and count else None


def render_start(store: Store, picks: Picks) -> None:
    run: ComparisonRun | None = st.session_state.get(COMPARE_RUN)
    busy = run is not None and run.snapshot().status.active
    if not st.button("Compare", key="compare.start", type="primary", disabled=busy):
        return
    try:
        dataset, name = rows_dataset(picks.rows)
        gold = gold_rows(store, since=picks.gold_since) if picks.gold_since else None
        request = ComparisonRequest(picks.a.name, picks.b.name, dataset, gold=gold,
                                    dataset_name=name)  # fmt: skip
        new = start_comparison(
            store, models_dir(), request, queue=get_job_queue(), requester=job_requester()
        )
    except UserError as exc:
        st.error(md_escape(exc))
        return
    if run is not None:
        run.cancel()
    st.session_state[COMPARE_RUN] = new


def rows_dataset(choice: str) -> tuple[Dataset, str]:
    """The chosen rows and what to call them."""
    if choice == SESSION_ROWS:
        active = get_active_dataset()
        if active is None:
            raise UserError("no data set is loaded in this session any more; pick a saved one")
        return active.dataset, active.name
    dataset, saved = load_saved_dataset(datasets_root(), choice)
    return dataset, saved_label(saved)


def saved_label(saved: SavedDataset) -> str:
    return f"saved data set {saved.name}"


def describe_comparison(run: ComparisonRun) -> JobProgress | None:
    def text(snapshot, eta: str) -> str:
        latest = snapshot.latest
        if latest is None or latest.phase == "load":
            return "Loading both models…"
        return f"{counted(latest)} complaints routed (both models){eta}"

    return describe_job(run.job, text)


def render_run(store: Store, actor: Actor, run: ComparisonRun) -> None:
    snapshot = run.snapshot()
    if render_unfinished(run, snapshot, describe=describe_comparison, key="compare.cancel",
                         cancelled="The comparison was cancelled."):  # fmt: skip
        return
    comparison = run.comparison or snapshot.result
    if comparison is None:
        st.info("This comparison is no longer kept on the server; compare again.")
        return
    if run.comparison is None:
        st.session_state[COMPARE_RUN] = replace(run, comparison=comparison)
    render_report(comparison, run.dataset_name)
    render_promote(store, actor, run, comparison)


def render_report(comparison: Comparison, dataset_name: str) -> None:
    """The verdict, both models' figures, per-desk recall, the changed complaints, the JSON."""
    st.info(md_escape(comparison.verdict))
    st.caption(
        f"{comparison.rows:,} rows of {md_escape(dataset_name or 'the data set')} and the "
        f"reviewers' verdicts ({comparison.gold_rows:,} of them); {comparison.excluded_trained:,} "
        f"left out because a model trained on them. Review load: decisions below "
        f"{comparison.threshold:.0%} confidence."
    )
    for warning in comparison.warnings:
        st.warning(md_escape(warning))
    st.dataframe(scores_frame(comparison), hide_index=True, width="stretch")
    show_chart(per_desk_recall_chart(comparison), stem="per-desk-recall",
               key="compare.figure.recall", width="stretch")  # fmt: skip
    st.dataframe(per_desk_frame(comparison), hide_index=True, width="stretch")
    st.markdown(f"**{len(comparison.changed):,} complaints change desk**")
    if comparison.changed:
        st.dataframe(shown_frame(changed_frame(comparison)), hide_index=True, width="stretch")
    st.download_button(
        "Download the report (JSON)", json.dumps(comparison.to_json(), indent=2),
        file_name=f"comparison-{comparison.a.name}-{comparison.b.name}.json",
        mime="application/json", key="compare.json",
    )  # fmt: skip


def render_promote(store: Store, actor: Actor, run: ComparisonRun, comparison: Comparison) -> None:
    """Admins: promote B with a reason; the report is saved with the promotion."""
    if not allowed(actor, Permission.MANAGE_MODELS, "Promoting a model"):
        return
    live = live_model(store)
    b = run.b
    if live is not None and (live.name, live.digest) == (b.name, b.digest):
        st.caption(f"{md_escape(b.name)} is the live model.")
        return
    with st.form("compare.promote_form"):
        reason = st.text_area("Why promote B? (kept in the trail with this report)",
                              key="compare.reason")  # fmt: skip
        submitted = st.form_submit_button(f"Promote {b.name} to live", type="primary")
    if submitted:
        promote(store, actor, run, comparison, reason)


def promote(
    store: Store, actor: Actor, run: ComparisonRun, comparison: Comparison, reason: str
) -> None:
    """Promote B unless it was saved again since it was compared (the report would not be
    about the model promoted)."""
    b = run.b
    try:
        if card_digest(model_folder(models_dir(), b.name)) != b.digest:
            raise UserError(f"{b.name} was saved again since this comparison; compare again")
        promote_model(store, models_dir(), b.name, reason=reason, actor=actor,
                      report=comparison.to_json())  # fmt: skip
    except UserError as exc:
        st.error(md_escape(exc))
        return
    remember_save(PROMOTED, SaveOutcome(True, f"{b.name} is now the team's live model."))
    st.rerun()
