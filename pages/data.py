"""Data page: load a complaint spreadsheet, the demo data or a data set saved on the server,
validate it, save it for the team, and train the bag of words."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.analysis.bag_of_words_eval import BagOfWordsEvaluation
from core.charts.results import (
    confusion_chart,
    label_counts_chart,
    per_class_frame,
    text_length_chart,
)
from core.data.columns import detect_columns
from core.data.dataset import Dataset
from core.data.export import safe_file_stem
from core.data.limits import DataError
from core.data.saved import (
    DatasetSave,
    datasets_root,
    find_by_fingerprint,
    list_datasets,
    suggest_name,
)
from core.data.saved_index import DatasetEntry, LineageCounts
from core.errors import UserError
from core.jobs import Job, JobStatus
from core.models.bag_of_words import BagOfWordsConfig
from core.review.library import retire_and_record, save_and_record
from core.tasks.bag_of_words import start_bow
from ui.auth import allowed, current_actor
from ui.caches import BOW_EVALUATIONS
from ui.datasets import (
    DEMO_KEY,
    DEMO_NAME,
    demo_table,
    saved_when,
    use_saved_dataset,
    validated,
)
from ui.downloads import render_table_downloads
from ui.errors import guarded
from ui.figures import show_chart
from ui.jobs import JobProgress, describe_job, get_job_queue, job_requester, render_job_progress
from ui.safe import md_escape
from ui.state import (
    ActiveDataset,
    get_active_dataset,
    get_active_model,
    get_bow_job,
    get_bow_run,
    get_store,
    set_active_dataset,
    set_bow_job,
    set_bow_run,
)
from ui.training import render_first_model
from ui.uploads import Upload, read_upload
from ui.widgets import SaveOutcome, remember_save, render_last_save, shown_frame

# "demo", "upload" or "saved": which input the user chose last ("saved": a saved data set was
# loaded, and neither the demo data nor the upload replaces it until chosen again)
SOURCE = "data.source"
PREVIEW_ROWS = 200
SAVED_OUTCOME = "data.saved_outcome"  # SaveOutcome of the last save, load or retirement
LISTED = 20  # saved data sets shown one per line; older ones are picked from a list
NO_LINEAGE = LineageCounts(0, 0, 0, 0, 0, 0, by_reviewer={})  # derived, lineage not recorded


def start_bow_job(dataset: Dataset, config: BagOfWordsConfig, val_fraction: float) -> None:
    """The bag-of-words evaluation, from the cache when one of the same data set and settings was
    made on this server, otherwise queued (long work on the shared CPUs)."""
    key = (dataset.fingerprint, config, val_fraction)
    found = BOW_EVALUATIONS.get(key)
    if found is not None:
        set_bow_run(found)
        return
    run = start_bow(
        dataset, config, val_fraction=val_fraction, queue=get_job_queue(),
        requester=job_requester(),
    )  # fmt: skip
    set_bow_job(run)


def describe_bow(job: Job[BagOfWordsEvaluation]) -> JobProgress | None:
    return describe_job(job, lambda snapshot, eta: f"Training the bag of words{eta}")


def render_bow_job(active: ActiveDataset) -> None:
    """The queued bag of words' progress; its result kept in the session (and the cache) once
    done."""
    run = get_bow_job()
    if run is None or run.dataset_fingerprint != active.dataset.fingerprint:
        return
    snapshot = run.job.snapshot()
    if snapshot.status.active:
        render_job_progress(run.job, describe=describe_bow, key="data.bow_cancel",
                            every=0.5)  # fmt: skip
        return
    set_bow_job(None)
    if snapshot.status is JobStatus.FAILED:
        st.error(md_escape(snapshot.error))
    elif snapshot.result is not None:
        key = (run.dataset_fingerprint, run.config, run.val_fraction)
        set_bow_run(BOW_EVALUATIONS.put(key, snapshot.result))


def render_source() -> Upload | None:
    """Upload or demo button; returns the chosen source's table and cache key, or None."""
    left, right = st.columns([3, 2])
    upload = left.file_uploader(
        "Upload labelled complaints (CSV, TSV, XLSX or Parquet)",
        type=["csv", "tsv", "xlsx", "parquet"],
        key="data.upload",
        on_change=guarded(lambda: st.session_state.update({SOURCE: "upload"})),
    )
    right.write("No file at hand?")
    if right.button("Use the demo data", key="data.demo", type="primary"):
        st.session_state[SOURCE] = "demo"
    right.caption("3,000 synthetic complaints for five desks, with a slice of word-order twins.")
    if st.session_state.get(SOURCE) == "upload" and upload is not None:
        return read_upload(upload)
    if st.session_state.get(SOURCE) == "demo":
        return Upload(DEMO_NAME, DEMO_KEY, demo_table())
    return None


def render_column_pickers(name: str, table: pd.DataFrame) -> tuple[str, str]:
    """Text and label column pickers, pre-filled by detection."""
    columns = list(table.columns)
    try:
        guess = detect_columns(table)
        text_index, label_index = columns.index(guess.text_col), columns.index(guess.label_col)
    except DataError as exc:
        st.info(f"Pick the columns yourself: {md_escape(exc)}")
        text_index, label_index = 0, min(1, len(columns) - 1)
    left, right = st.columns(2)
    suffix = f"{name}:{'|'.join(columns)}"  # new file, new detection
    text_col = left.selectbox("Text column", columns, index=text_index, key=f"data.text.{suffix}")
    label_col = right.selectbox(
        "Label column", columns, index=label_index, key=f"data.label.{suffix}"
    )
    return text_col, label_col


def render_report(active: ActiveDataset) -> None:
    report = active.report
    cols = st.columns(6)
    cols[0].metric("Rows read", f"{report.rows_read:,}")
    cols[1].metric("Rows kept", f"{report.rows_kept:,}")
    cols[2].metric("Dropped", f"{len(report.dropped):,}")
    cols[3].metric("Desks", len(report.labels))
    cols[4].metric("Duplicate texts", f"{report.duplicates:,}")
    cols[5].metric("Conflicting labels", f"{report.conflicts:,}")
    for warning in report.warnings:
        st.warning(md_escape(warning))
    labels_tab, lengths_tab, dropped_tab, preview_tab = st.tabs(
        ["Labels", "Lengths", f"Dropped rows ({len(report.dropped)})", "Preview"]
    )
    show_chart(label_counts_chart(report), stem="complaints-per-desk",
               key="data.figure.labels", container=labels_tab, width="stretch")  # fmt: skip
    render_lengths(lengths_tab, active)
    dropped = pd.DataFrame([{"row": d.row, "reason": d.reason} for d in report.dropped])
    if dropped.empty:
        dropped_tab.write("No rows were dropped.")
    else:
        dropped_tab.dataframe(dropped, hide_index=True, width="stretch")
    preview_tab.caption(
        f"The first {PREVIEW_ROWS} kept rows; text is shown as given, unless masked."
    )
    preview_tab.dataframe(
        shown_frame(active.dataset.to_frame().head(PREVIEW_ROWS)), hide_index=True
    )


def render_lengths(container, active: ActiveDataset) -> None:
    stats = active.report.word_stats
    show_chart(text_length_chart(active.dataset), stem="complaint-lengths",
               key="data.figure.lengths", container=container, width="stretch")  # fmt: skip
    container.caption(
        f"Words per complaint: median {stats.median:g}, 95th percentile {stats.p95:g}, "
        f"longest {stats.max:g}. Texts over the model's maximum length are truncated."
    )


def render_downloads(active: ActiveDataset) -> None:
    frame = active.dataset.to_frame()
    stem = "cleaned-" + safe_file_stem(active.name)
    render_table_downloads(
        frame,
        stem,
        label="Download cleaned {fmt}",
        keys=("data.download_csv", "data.download_xlsx"),
    )
    st.caption("Cells that a spreadsheet would run as formulas are prefixed with ' for safety.")


def render_bow_form(active: ActiveDataset) -> None:
    with st.form("data.bow_form"):
        cols = st.columns(4)
        kind = cols[0].selectbox(
            "Model",
            ["logreg", "nb"],
            key="data.kind",
            format_func={
                "logreg": "TF-IDF + logistic regression",
                "nb": "TF-IDF + multinomial naive Bayes",
            }.get,
        )
        ngram_max = cols[1].selectbox(
            "Words per feature",
            [1, 2],
            key="data.ngram",
            format_func={1: "unigrams (pure bag of words)", 2: "uni- and bigrams"}.get,
        )
        val_fraction = cols[2].slider("Validation share", 0.1, 0.5, 0.2, 0.05, key="data.val")
        seed = cols[3].number_input("Seed", 0, 2**31 - 1, 0, key="data.seed")
        submitted = st.form_submit_button("Train the bag of words", type="primary")
    if submitted:
        config = BagOfWordsConfig(kind=kind, ngram_max=ngram_max, seed=int(seed))
        try:
            start_bow_job(active.dataset, config, float(val_fraction))
        except UserError as exc:
            st.error(md_escape(exc))


def render_bow_result(run: BagOfWordsEvaluation) -> None:
    cols = st.columns(4)
    cols[0].metric("Accuracy", f"{run.report.accuracy:.1%}")
    cols[1].metric("Macro F1", f"{run.report.macro_f1:.3f}")
    cols[2].metric("Train / validation rows", f"{run.train_size:,} / {run.val_size:,}")
    if "twin" in run.slices:
        cols[3].metric("Accuracy on word-order twins", f"{run.slices['twin'].accuracy:.1%}")
        st.caption(
            "Twins share exactly the same bag of words but belong to different desks, so a "
            "unigram bag-of-words model must give every member of a group the same answer."
        )
    left, right = st.columns([3, 2])
    left.dataframe(
        per_class_frame(run.report),
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.3f") for c in ("precision", "recall", "f1")
        },
    )
    show_chart(confusion_chart(run.report), stem="bag-of-words-confusion",
               key="data.figure.confusion", container=right, width="stretch")  # fmt: skip


def render_saved_section(actor: Actor, active: ActiveDataset | None) -> None:
    """The data sets saved on the server: save the active one (reviewers and admins), load any
    in one click (everyone), their lineage, and retire one (admins)."""
    st.subheader("Saved data sets")
    render_last_save(SAVED_OUTCOME)
    root = datasets_root()
    if active is not None:
        render_save_form(actor, active)
    show_retired = st.toggle("Show retired data sets", key="data.show_retired")
    saved = list_datasets(root, include_retired=show_retired)
    if not saved:
        st.caption("No data set is saved on the server yet.")
        return
    for item in saved[:LISTED]:
        render_saved_row(item, active)
    if len(saved) > LISTED:
        render_older_picker(saved[LISTED:])
    if actor.can(Permission.MANAGE_DATA):
        render_retire_form(actor, [item for item in saved if not item.retired])


def render_save_form(actor: Actor, active: ActiveDataset) -> None:
    """Save the active data set under a name (a free one made from its source is offered)."""
    root = datasets_root()
    existing = find_by_fingerprint(root, active.dataset.fingerprint)
    if existing is not None and not existing.retired:
        st.caption(f"This data set is saved on the server as **{md_escape(existing.name)}**.")
        return
    if not allowed(actor, Permission.DECIDE, "Saving a data set on the server"):
        return
    with st.form("data.save_form"):
        name = st.text_input(
            "Save this data set on the server as",
            value=suggest_name(root, active.name),
            max_chars=64,
            key=f"data.save_name.{active.dataset.fingerprint[:16]}",  # a new data set, a new name
            help="1-64 letters, digits, '_', '-' or '.'; the team sees it on this page.",
        )
        submitted = st.form_submit_button("Save on the server")
    if submitted:
        save_active(actor, active, name.strip())


def save_active(actor: Actor, active: ActiveDataset, name: str) -> None:
    try:
        request = DatasetSave(name, active.dataset, validation=active.report.to_json())
        saved = save_and_record(get_store(), datasets_root(), request, actor=actor)
    except UserError as exc:
        remember_save(SAVED_OUTCOME, SaveOutcome(False, str(exc)))
    else:
        message = f"Saved {saved.rows:,} rows on the server as {saved.name}."
        remember_save(SAVED_OUTCOME, SaveOutcome(True, message))
    st.rerun()


def render_saved_row(item: DatasetEntry, active: ActiveDataset | None) -> None:
    """One saved data set: name, rows, desks, who saved it and when, its parent, and Load."""
    left, right = st.columns([5, 1], vertical_alignment="center")
    retired = " · retired" if item.retired else ""
    left.markdown(
        f"**{md_escape(item.name)}** · {item.rows:,} rows · {item.desks:,} desks{retired}"
    )
    left.caption(md_escape(describe_saved(item)))
    if item.parent is not None or item.lineage is not None:
        with left.expander("Lineage"):
            render_lineage(item.parent, item.lineage)
    if active is not None and active.dataset.fingerprint == item.fingerprint:
        right.caption("Loaded")
    else:
        right.button(
            "Load", key=f"data.load.{item.name}", on_click=guarded(load_saved), args=(item.name,)
        )


def describe_saved(item: DatasetEntry) -> str:
    parts = [f"saved by {item.saved_by} on {saved_when(item)}"]
    if item.parent is not None:
        parts.append(f"derived from {item.parent}")
    if item.retired:
        parts.append(f"retired by {item.retired_by}: {item.retired_reason}")
    return " · ".join(parts)


def render_lineage(parent: str | None, counts: LineageCounts | None) -> None:
    """How a derived data set came from its parent: rows changed and whose decisions did it
    (counted in the list's index: the lineage itself is never read here)."""
    st.markdown(f"Derived from **{md_escape(parent or 'unknown')}**.")
    counts = counts or NO_LINEAGE
    cols = st.columns(3)
    cols[0].metric("Relabelled rows", f"{counts.relabelled_rows:,}")
    cols[1].metric("Excluded rows", f"{counts.excluded_rows:,}")
    cols[2].metric("Added rows", f"{counts.added_rows:,}")
    st.caption(
        f"From {counts.decisions:,} label-audit decisions and {counts.verdicts:,} triage "
        f"verdicts; {counts.stale:,} decisions were not applied because their row had changed."
    )
    if counts.by_reviewer:
        frame = pd.DataFrame(
            [{"reviewer": who, "changes": n} for who, n in counts.by_reviewer.items()]
        )
        st.dataframe(frame, hide_index=True)


def render_older_picker(older: list[DatasetEntry]) -> None:
    """The saved data sets beyond the first LISTED: pick one, then load it."""
    names = [item.name for item in older]
    left, right = st.columns([5, 1], vertical_alignment="bottom")
    name = left.selectbox(f"{len(older):,} older data sets", names, key="data.older")
    right.button("Load", key="data.load_older", on_click=guarded(load_saved), args=(name,))


def load_saved(name: str) -> None:
    """A Load button's callback: the saved data set becomes the active one before the page
    runs, and the upload or demo choice no longer replaces it."""
    try:
        active = use_saved_dataset(name)
    except UserError as exc:
        remember_save(SAVED_OUTCOME, SaveOutcome(False, str(exc)))
        return
    st.session_state[SOURCE] = "saved"
    message = f"Loaded the saved data set {active.name} ({len(active.dataset):,} rows)."
    remember_save(SAVED_OUTCOME, SaveOutcome(True, message))


def render_retire_form(actor: Actor, items: list[DatasetEntry]) -> None:
    """Admins hide a data set from the list; its files stay for the models and decisions that
    refer to it."""
    if not items:
        return
    with st.expander("Retire a data set"), st.form("data.retire_form"):
        name = st.selectbox("Data set", [item.name for item in items], key="data.retire_name")
        reason = st.text_input("Reason", max_chars=500, key="data.retire_reason")
        submitted = st.form_submit_button("Retire")
    if not submitted:
        return
    try:
        retire_and_record(get_store(), datasets_root(), name, actor=actor, reason=reason)
    except UserError as exc:
        remember_save(SAVED_OUTCOME, SaveOutcome(False, str(exc)))
    else:
        message = f"Retired {name}: it is hidden from the list and kept on disk."
        remember_save(SAVED_OUTCOME, SaveOutcome(True, message))
    st.rerun()


st.title("Data")
st.write("Load labelled complaints, check them, and train the bag of words.")
actor = current_actor()  # the frame's check again: a page reached without app.py stops here too
try:
    source = render_source()
    if source is not None:
        text_col, label_col = render_column_pickers(source.name, source.table)
        dataset, report = validated(source.table, source.key, text_col, label_col)
        set_active_dataset(ActiveDataset(name=source.name, dataset=dataset, report=report))
except DataError as exc:
    st.error(md_escape(exc))
    st.stop()

active = get_active_dataset()
render_saved_section(actor, active)
if active is None:
    st.info("Upload a spreadsheet or use the demo data to begin, or load a saved data set.")
    st.stop()
st.subheader(f"Validation report: {md_escape(active.name)}")
render_report(active)
render_downloads(active)
if get_active_model() is None:
    st.subheader("A transformer model")
    render_first_model(active, "data", stop=False)
st.subheader("Bag of words")
if allowed(actor, Permission.RUN_JOBS, "Training the bag of words on the shared CPUs"):
    render_bow_form(active)
render_bow_job(active)
run = get_bow_run()
if run is not None and run.dataset_fingerprint == active.dataset.fingerprint:
    render_bow_result(run)
