"""The few documented session-state keys, each holding a dataclass, and the shared model cache.

Session state holds only what one browser tab is looking at; anything that must survive a
restart goes through core.review.store (SQLite) or core.models.registry (saved model folders).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from core.access import Actor
from core.errors import UserError
from core.models.card import (
    ModelChange,
    card_digest,
    folder_signature,
    load_refusal,
    model_change,
)
from core.paths import models_dir
from ui.safe import md_escape

# Types only: the app starts (app.py imports this module) without importing torch or
# transformers; core functions are imported where they are first needed.
if TYPE_CHECKING:
    from core.analysis.bag_of_words_eval import BagOfWordsEvaluation
    from core.data.dataset import Dataset
    from core.data.validation import ValidationReport
    from core.models.cache import ModelCache
    from core.models.registry import LoadedModel, ModelSummary
    from core.review.live import LiveModel
    from core.review.store import Store
    from core.tasks.audit import AuditRun
    from core.tasks.bag_of_words import BagOfWordsRun
    from core.tasks.probes import ReviewRun, ScanRun

ACTIVE_DATASET = "active_dataset"  # ActiveDataset: the data set every page works on
BOW_RUN = "bow_run"  # BagOfWordsEvaluation of the active data set, if trained
BOW_JOB = "bow_job"  # core.tasks.bag_of_words.BagOfWordsRun: the evaluation on the queue
ACTIVE_MODEL = "active_model"  # str: folder of the saved model every page uses
# str: card digest (core.models.card.card_digest) of the version of ACTIVE_MODEL this session
# chose; recorded at the first use when absent. Another digest on disk means another model.
ACTIVE_MODEL_DIGEST = "active_model.digest"
# bool: True while ACTIVE_MODEL is the team's live model by default rather than the user's choice,
# so that the session follows the next promotion; absent once the user picks a model.
ACTIVE_MODEL_FOLLOWS_LIVE = "active_model.follows_live"
# (digest, message): the live model version that failed to load in this session, and why; it is
# not tried again on every rerun (a failed load hashes every file first).
LIVE_MODEL_REFUSED = "active_model.live_refused"
TRAIN_JOB = "train.job"  # TrainingRun: this session's training job (running or finished)
CLASSIFY_JOB = "classify.job"  # ClassifyRun: this session's file classification job
AUDIT_JOB = "audit.job"  # AuditRun: this session's label audit (running or done)
PROBE_SCAN = "probes.scan"  # ScanRun: this session's data set scan (running or done)
EXPLAIN_REVIEW = "explain.review"  # ReviewRun: the Explain page's classified sample
# str: the reviewer's name, entered once per session when sign-in is off (signed in, the
# reviewer is the actor's e-mail: ui.auth.current_actor)
REVIEWER = "reviewer"
# bool, the sidebar toggle: pages mask personal data in the complaint text they show (default on,
# so a demo in front of stakeholders never shows a card number). Read it with `shown_text`.
MASK_DISPLAY = "sidebar.mask_personal_data"
# bool, this run only: the page is in presenter mode (ui.presenter.presenter_on sets it; app.py
# clears it before each page runs, so it never outlives the page that set it). Charts read it.
PRESENTING = "presenter.presenting"
# Query parameter that opens the Explain page on one row: `?row=N`, N the 1-based spreadsheet row
# (core.data.Dataset.rows, header = row 1) of the active data set. Read it with `explain_row()`.
EXPLAIN_ROW_PARAM = "row"
# The Explain page's source radio, its two options and its text box: other pages open a
# complaint there with `open_in_explain`.
EXPLAIN_SOURCE, EXPLAIN_TEXT = "explain.source", "explain.text"
EXPLAIN_TYPED, EXPLAIN_PICKED = "Type a complaint", "Pick one from the data set"
EXPLAIN_PAGE = "pages/explain.py"


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
        st.session_state.pop(BOW_RUN, None)  # results of another data set would mislead
    st.session_state[ACTIVE_DATASET] = active


def get_bow_run() -> BagOfWordsEvaluation | None:
    return st.session_state.get(BOW_RUN)


def set_bow_run(run: BagOfWordsEvaluation) -> None:
    st.session_state[BOW_RUN] = run


def get_bow_job() -> BagOfWordsRun | None:
    return st.session_state.get(BOW_JOB)


def set_bow_job(run: BagOfWordsRun | None) -> None:
    st.session_state[BOW_JOB] = run


@st.cache_resource(show_spinner=False)
def _model_cache() -> ModelCache:
    """The process's one cache of loaded models (core.models.cache), shared by every session.

    One loaded copy per saved model version, never mutated, keyed on its card digest (a model
    saved again under the same name is another entry), the least recently used dropped first
    once the models outgrow GRIEVANCE_LENS_MODEL_CACHE_MB.
    """
    from core.models.cache import ModelCache

    return ModelCache.from_env()


def saved_models() -> list[ModelSummary]:
    """The saved models, newest first (core.models.registry.list_models), parsed again only when
    a card changed: keyed by every model folder's card digest, so a rerun of a page that lists
    them hashes each card.json instead of parsing it (a card holds its split's text keys)."""
    root = models_dir()
    folders = sorted(f for f in root.iterdir() if f.is_dir()) if root.is_dir() else []
    return _listed_models(str(root), tuple((f.name, card_digest(f)) for f in folders))


@st.cache_data(max_entries=4, show_spinner=False)
def _listed_models(root: str, cards: tuple[tuple[str, str | None], ...]) -> list[ModelSummary]:
    from core.models.registry import list_models

    return list_models(root)  # `cards` is the key: the content of every card under `root`


def model_refusal(folder: str | Path) -> str | None:
    """Why the loader would refuse the model in `folder` (core.models.card.load_refusal: a
    pickle, shipped code, a file its card does not list), naming it by name; None when it
    would not. Worked out again only when a file in the folder is added, removed or rewritten
    (keyed by `folder_signature`), so a page that lists models reads no card per rerun."""
    return _model_refusal(str(folder), folder_signature(folder))


@st.cache_data(max_entries=64, show_spinner=False)
def _model_refusal(folder: str, signature: tuple[tuple[str, int, int], ...]) -> str | None:
    return load_refusal(folder)  # `signature` is the key: every file's name, size and time


def load_shared_model(folder: str, digest: str) -> LoadedModel:
    """The model at `folder` with card digest `digest`, from the shared cache; load_model
    refuses a folder whose digest is no longer `digest`."""
    cache = _model_cache()
    if cache.holds(folder, digest):
        return cache.get(folder, digest)
    with st.spinner("Loading the model…"):
        return cache.get(folder, digest)


def set_active_model(folder: str | Path) -> None:
    """Make the model in `folder` (a folder of the models folder) this session's model: the
    user's choice, kept when another model is promoted."""
    st.session_state[ACTIVE_MODEL] = str(folder)
    st.session_state[ACTIVE_MODEL_DIGEST] = card_digest(folder)
    st.session_state.pop(ACTIVE_MODEL_FOLLOWS_LIVE, None)


def use_live_model() -> None:
    """Let this session follow the team's live model again (from the next `get_active_model`)."""
    _forget_active_model()


def get_active_model() -> LoadedModel | None:
    """The active saved model, loaded once and shared; None when none is chosen and no model
    is live.

    A session that has not picked a model uses the team's live model, and follows the next
    promotion on its next rerun; a model the user picked stays. When the model changed on disk
    since this session chose it (saved again, replaced, deleted or renamed), it stops being
    active and the session is told so in one line, instead of silently classifying with another
    model. A model the loader refuses (a file its card does not list, a pickle, a file changed
    since its save) stops being active too, with the reason; the session then goes on as one
    that picked none (the live model, if it loads), so no page breaks on it.
    """
    _follow_live_model()
    folder = st.session_state.get(ACTIVE_MODEL)
    if folder is None:
        return None
    digest = st.session_state.get(ACTIVE_MODEL_DIGEST) or card_digest(folder)
    change = ModelChange.GONE if digest is None else model_change(folder, digest)
    if change is ModelChange.SAME:
        st.session_state[ACTIVE_MODEL_DIGEST] = digest
        try:
            return _load_active_model(folder, digest)
        except ValueError as exc:
            change = model_change(folder, digest)
            if change is ModelChange.SAME:  # the model itself is refused, not replaced
                if not isinstance(exc, UserError):
                    raise
                return _refuse_active_model(folder, digest, exc)
    _drop_active_model(Path(folder).name, change)
    return None


def _load_active_model(folder: str, digest: str) -> LoadedModel:
    """The model from the shared cache, once the loader's cheap checks pass: a copy loaded
    before a stray file or a pickle appeared in its folder is not handed out either, so a
    session and the Train page's list agree on what can be used."""
    refusal = model_refusal(folder)
    if refusal is not None:
        raise UserError(refusal)
    return load_shared_model(folder, digest)


def _refuse_active_model(folder: str, digest: str, exc: UserError) -> LoadedModel | None:
    """This session's model (this digest) is refused at load: the live model is marked refused
    (`_refuse_live_model`); a model the user picked is forgotten, with one warning, and the
    session goes on with the live model, as a session that picked none."""
    if st.session_state.get(ACTIVE_MODEL_FOLLOWS_LIVE):
        _refuse_live_model(digest, exc)
        return None
    message = " ".join(str(exc).split())
    _forget_active_model()
    live = get_live_status().live
    if live is not None and (live.name, live.digest) == (Path(folder).name, digest):
        st.session_state[LIVE_MODEL_REFUSED] = (digest, message)  # the live one: not followed
    st.warning(
        f"The model you chose cannot be used, so it is no longer active: {md_escape(message)}",
        icon=":material/error:",
    )
    return get_active_model()  # forgotten: the live model, or None; never this one again


def _refuse_live_model(digest: str, exc: UserError) -> None:
    """The live model (this digest) does not load: this session goes without a model and is
    told why, here and in the sidebar (LiveStatus.problem), and it is not loaded again on
    every rerun."""
    message = " ".join(str(exc).split())
    st.session_state[LIVE_MODEL_REFUSED] = (digest, message)
    _forget_active_model()
    st.warning(f"The live model cannot be used: {md_escape(message)}", icon=":material/error:")


def get_active_model_name() -> str | None:
    """The name of this session's model (the live one when the session has not picked one),
    without loading or checking it: for the frame drawn before a page runs."""
    _follow_live_model()
    folder = st.session_state.get(ACTIVE_MODEL)
    return None if folder is None else Path(folder).name


def _follow_live_model() -> None:
    """Point a session that has not picked a model at the live model (or at none, when the one
    it followed can no longer be used); a model the user picked is left alone."""
    state = st.session_state
    if state.get(ACTIVE_MODEL) is not None and not state.get(ACTIVE_MODEL_FOLLOWS_LIVE):
        return
    status = get_live_status()
    if status.live is None or status.folder is None:
        if state.get(ACTIVE_MODEL_FOLLOWS_LIVE):
            _forget_active_model()
        return
    if state.get(ACTIVE_MODEL) != str(status.folder) or (
        state.get(ACTIVE_MODEL_DIGEST) != status.live.digest
    ):
        state[ACTIVE_MODEL] = str(status.folder)
        state[ACTIVE_MODEL_DIGEST] = status.live.digest
        state[ACTIVE_MODEL_FOLLOWS_LIVE] = True


def _forget_active_model() -> None:
    for key in (ACTIVE_MODEL, ACTIVE_MODEL_DIGEST, ACTIVE_MODEL_FOLLOWS_LIVE):
        st.session_state.pop(key, None)


@dataclass(frozen=True)
class LiveStatus:
    """The team's live model as this session sees it on this rerun."""

    live: LiveModel | None  # the latest promotion; None when no model was ever promoted
    folder: Path | None  # its folder, when it still holds the promoted version and loads
    problem: str | None = None  # one line when it cannot be used (gone, saved again, broken)


def get_live_status() -> LiveStatus:
    """The live model (core.review.live) in the store at default_db_path(): one small query
    per call. No store file means no promotion yet (the file is not created to ask)."""
    from core.review.live import checked_live_folder, live_model
    from core.review.store import default_db_path

    if not default_db_path().is_file():
        return LiveStatus(None, None)
    try:
        live = live_model(get_store())
    except UserError as exc:  # a store that cannot be read: no live model to follow
        return LiveStatus(None, None, f"the review store cannot be read ({exc})")
    if live is None:
        return LiveStatus(None, None)
    refused = st.session_state.get(LIVE_MODEL_REFUSED)
    if refused is not None and refused[0] == live.digest:
        return LiveStatus(live, None, refused[1])
    try:
        return LiveStatus(live, checked_live_folder(live, models_dir()))
    except UserError as exc:
        return LiveStatus(live, None, str(exc))


def is_live_model(model: LoadedModel, status: LiveStatus) -> bool:
    """Whether `model` is the live model's promoted version: the same name and card digest (a
    model version's identity, as `LoadedModel.key` and the shared model cache have it)."""
    live = status.live
    return live is not None and (model.path.name, model.digest) == (live.name, live.digest)


def _drop_active_model(name: str, change: ModelChange) -> None:
    _forget_active_model()
    what = "saved again or replaced" if change is ModelChange.CHANGED else "deleted or renamed"
    st.warning(
        f"Model {md_escape(name)} was {what} since you chose it, so it is no longer active; "
        "choose a model again on the Train page.",
        icon=":material/sync_problem:",
    )


def _close_store(store: Store) -> None:
    store.close()


# Closed when Streamlit drops it (st.cache_resource.clear(), the menu's "Clear cache"), as the job
# queue is shut down (ui.jobs): the connection and its WAL files go with the entry, not whenever
# the object is collected. Streamlit does not promise the call at shutdown; the process exit
# closes the file then.
@st.cache_resource(show_spinner=False, on_release=_close_store)
def _open_store(path: str) -> Store:
    """One connection per database file, shared by every session (Store serialises calls).
    Opened once per server: the moment to finish what a killed process left half done in the
    models folder and the saved data sets (core.review.library)."""
    from core.data.saved import datasets_root
    from core.paths import models_dir
    from core.review.library import finish_interrupted_changes
    from core.review.store import Store

    store = Store.open(path)
    finish_interrupted_changes(store, models_root=models_dir(), datasets_root=datasets_root())
    return store


def get_store() -> Store:
    """The review store at core.review.store.default_db_path() (follows GRIEVANCE_LENS_DATA_DIR)."""
    from core.review.store import default_db_path

    return _open_store(str(default_db_path()))


def get_reviewer(actor: Actor) -> str | None:
    """Who is reviewing: the signed-in e-mail when sign-in is on (nothing typed can change it),
    else the name entered once in this session (None until then)."""
    if actor.signed_in:
        return actor.user
    name = st.session_state.get(REVIEWER)
    return name if isinstance(name, str) and name.strip() else None


def set_reviewer(name: str) -> None:
    st.session_state[REVIEWER] = " ".join(name.split())


def get_audit_job() -> AuditRun | None:
    return st.session_state.get(AUDIT_JOB)


def set_audit_job(run: AuditRun) -> None:
    """Keep `run` as this session's audit; a running previous one is cancelled first."""
    _keep_run(AUDIT_JOB, run)


def get_probe_scan() -> ScanRun | None:
    return st.session_state.get(PROBE_SCAN)


def set_probe_scan(run: ScanRun) -> None:
    """Keep `run` as this session's data set scan; a running previous one is cancelled first."""
    _keep_run(PROBE_SCAN, run)


def get_explain_review() -> ReviewRun | None:
    return st.session_state.get(EXPLAIN_REVIEW)


def set_explain_review(run: ReviewRun) -> None:
    """Keep `run` as this session's Explain sample; a running previous one is cancelled first."""
    _keep_run(EXPLAIN_REVIEW, run)


def _keep_run(key: str, run: AuditRun | ScanRun | ReviewRun) -> None:
    """Keep `run` under `key`: one run of each kind per session, so the previous one (still
    running or not) is cancelled rather than left working for nobody."""
    previous = st.session_state.get(key)
    if previous is not None and previous is not run:
        previous.cancel()
    st.session_state[key] = run


def set_presenting(on: bool) -> None:
    """Whether this run's page is in presenter mode (see PRESENTING)."""
    st.session_state[PRESENTING] = on


def is_presenting() -> bool:
    """Whether this run's page is in presenter mode."""
    return bool(st.session_state.get(PRESENTING))


def open_in_explain(*, row: int | None = None, text: str = "") -> None:
    """Switch to the Explain page on `row` of the active data set (its picker), or else with
    `text` typed in its box. Does not return (st.switch_page ends this run)."""
    if row is not None:
        st.session_state[EXPLAIN_SOURCE] = EXPLAIN_PICKED
        st.switch_page(EXPLAIN_PAGE, query_params={EXPLAIN_ROW_PARAM: str(row)})
    st.session_state[EXPLAIN_SOURCE] = EXPLAIN_TYPED
    st.session_state[EXPLAIN_TEXT] = text
    st.switch_page(EXPLAIN_PAGE)


def explain_row() -> int | None:
    """The spreadsheet row asked for with `?row=N` (see EXPLAIN_ROW_PARAM), or None.

    Anything that is not a whole number >= 2 (row 1 is the header) reads as None.
    """
    raw = st.query_params.get(EXPLAIN_ROW_PARAM)
    if raw is None or not raw.strip().isascii() or not raw.strip().isdigit():
        return None
    row = int(raw.strip())
    return row if row >= 2 else None
