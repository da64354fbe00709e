"""The Label audit page's run: the form that starts an audit of the active data set on the queue
(by the bag of words, the embedding audit or the fine-tune audit), its progress, and its finished
result, cached per server process by data fingerprint and settings and recorded once in the
review store."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import streamlit as st

from core.access import Actor, Permission
from core.analysis.audit import AuditConfig, AuditResult, audit_cache_key
from core.analysis.audit_cache import AuditCache
from core.analysis.audit_embedding import (
    EMBEDDING_AUDIT,
    embedding_audit_config,
    embedding_train_config,
)
from core.analysis.audit_fine_tune import (
    FINE_TUNE_AUDIT,
    model_audit_settings,
    train_config_from_card,
)
from core.data.dataset import Dataset
from core.errors import UserError
from core.jobs import JobSnapshot, JobStatus
from core.models.transformer.config import QUICK, TrainConfig, backbone_label
from core.review.store import Store
from core.tasks import audit as audit_tasks
from core.tasks.audit import AuditRun, finished_audit, record_audit_run
from ui.auth import allowed
from ui.jobs import (
    JobProgress,
    describe_job,
    get_job_queue,
    job_requester,
    render_job_progress,
)
from ui.safe import md_escape
from ui.state import ActiveDataset, get_active_model, get_audit_job, set_audit_job
from ui.widgets import render_not_live_notice

if TYPE_CHECKING:  # the bag-of-words audit needs no torch; a loaded model brings it along
    from core.models.registry import LoadedModel

# The three audits' models, by their names in results and cache keys (ARCHITECTURE.md, "Glossary").
BOW, EMBEDDING, FINE_TUNE = "bow", EMBEDDING_AUDIT, FINE_TUNE_AUDIT
MODEL_NAMES = {
    BOW: "Bag of words (seconds)",
    EMBEDDING: "Quick: MiniLM embeddings + a linear head, blended with the bag of words "
    "(about a minute per 3,000 rows)",
    FINE_TUNE: "Transformer, fine-tuned per fold with the active model's settings (hours)",
}
MODEL_CAPTIONS = {
    BOW: "Sees which words occur, not their order: word-order twins look mislabelled.",
    EMBEDDING: "The pretrained encoder embeds each row once and never sees labels; a head per fold "
    "learns the desks, and its probabilities are mixed with the bag of words' as their held-out "
    "fit says. Sees word order as far as the pretrained encoder does.",
    FINE_TUNE: "Fine-tunes the whole encoder on each fold's rows: learns word order from your "
    "labels. Hours on a CPU, minutes on a GPU.",
}


@st.cache_resource(show_spinner=False)
def finished_audits() -> AuditCache:
    """Finished audits of this server process by `audit_cache_key`, shared by all sessions."""
    return AuditCache()


def render_audit_run(active: ActiveDataset, store: Store, actor: Actor) -> AuditResult | None:
    """The audit form (for those who may run jobs), then this session's audit of the active data
    set: its progress while it runs, its result once done (None until then)."""
    if allowed(actor, Permission.RUN_JOBS, "Running an audit"):
        model = get_active_model()
        render_not_live_notice(model, key="audit.use_live")
        render_audit_form(active, model)
    return current_result(get_audit_job(), active, store, actor)


# ---------------------------------------------------------------------------------- starting


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
        st.caption("The fine-tune audit needs a model: train or load one on **Train**.")
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
            f"quick model over {backbone_label(config.backbone)}: the fine-tune audit runs "
            "as the embedding audit, with its encoder"
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
    """The AuditConfig and, for the embedding and fine-tune audits, the TrainConfig (the
    embedding audit's names the bundled MiniLM, whose encoder it uses frozen)."""
    config = AuditConfig(folds=folds)
    if choice == BOW:
        return config, None
    if choice == EMBEDDING:
        return embedding_audit_config(config), embedding_train_config()
    if model is None:
        raise UserError("no active model: train or load one on Train, or audit with bag of words")
    return model_audit_settings(model.card, config)  # a quick model is audited the quick way


# ---------------------------------------------------------------------------------- following


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


def remember(key: str, result: AuditResult, store: Store, actor: Actor) -> None:
    """Cache a finished audit (evicting the oldest) and record the run once in the store under
    `actor` (when the store is writable and the actor may still run audits)."""
    if not finished_audits().add(key, result) or store.read_only:
        return
    if not actor.can(Permission.RUN_JOBS):  # their role changed while the audit ran
        return
    record_audit_run(store, result, actor=actor)
