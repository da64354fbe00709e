"""Saved data sets: a data set kept on the server, one folder each under `<data folder>/datasets/`
(`data.parquet`, `summary.json`, and `retired.json` once retired), saved exclusively and
atomically, bounded like an upload, and read back only when it is still what was saved.

Folder format::

    datasets/<name>/  data.parquet   columns row, text, label, then the extra columns (a name
                                     that clashes gets "_original" appended; summary.json keeps
                                     the original names in order)
                      summary.json   name, fingerprint, rows, labels, validation, saved_by,
                                     saved_at (UTC, ISO 8601), parent, lineage, size_bytes (of
                                     data.parquet), data_sha256, columns
                      retired.json   by, at, reason (written when an admin retires it)
    datasets/.index.json             what a listing needs of every folder (core.data.saved_index)
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.access import Actor, Permission
from core.checks import SAFE_NAME, check_safe_name, folder_inside
from core.data.dataset import Dataset
from core.data.limits import MAX_DESKS_ENV, MB, IntakeLimits, parse_megabytes
from core.data.readers import cell_to_str
from core.data.saved_index import (
    MAX_SUMMARY_BYTES,
    RETIRED_NAME,
    SUMMARY_NAME,
    DatasetEntry,
    incomplete,
    indexed_entries,
    read_document,
    retired_fields,
    summary_fields,
)
from core.data.validation import DroppedRow, LengthStats, ValidationReport, validate
from core.errors import UserError
from core.paths import data_dir, write_atomically
from core.pending import (
    RETIRING,
    SAVING,
    Change,
    RecordedChange,
    created_held,
    finish_abandoned,
    move_into_name,
    new_change,
    pending_changes,
)

SAVED_DATA_MB_ENV = "GRIEVANCE_LENS_MAX_SAVED_DATA_MB"
DEFAULT_SAVED_DATA_MB = 2048
DATA_NAME = "data.parquet"
SUMMARY_FORMAT = "grievance-lens-dataset"
SUMMARY_VERSION = 1
LOCK_NAME = ".lock"  # flock'ed while a save or a retirement decides; never a data set
NAME_PATTERN = SAFE_NAME  # the same rule as model names: one safe path segment (core.checks)
BASE_COLUMNS = ("row", "text", "label")
# Dropped rows kept in the stored validation summary: an upload with half a million blank rows
# would otherwise make every load read megabytes. The total is kept beside them.
MAX_DROPPED_KEPT = 1000
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class SavedDataset:
    """What summary.json (and retired.json) say about one saved data set, in full; a listing
    gives the light DatasetEntry (core.data.saved_index) instead."""

    name: str
    fingerprint: str
    rows: int
    labels: dict[str, int]  # label -> rows, most frequent first
    validation: dict  # ValidationReport.to_json() of what was saved ({} when none was given)
    saved_by: str
    saved_at: str  # UTC, ISO 8601
    parent: str | None  # the data set this one was derived from
    lineage: dict  # how it was derived from `parent` ({} for an upload or the demo data)
    size_bytes: int  # of data.parquet
    path: Path
    retired: bool = False
    retired_by: str | None = None
    retired_reason: str = ""

    @property
    def desks(self) -> int:
        """Distinct labels, as a listing's DatasetEntry counts them."""
        return len(self.labels)


@dataclass(frozen=True)
class DatasetSave:
    """One data set to save: its name, its rows, and where they came from (what summary.json
    records beside them)."""

    name: str  # untrusted: checked against the data sets folder when saved
    dataset: Dataset
    validation: Mapping | None = None  # ValidationReport.to_json() of what is saved
    parent: str | None = None  # the saved data set it was derived from (must exist)
    lineage: Mapping | None = None  # how it was derived from `parent`


def datasets_root() -> Path:
    """Folder of saved data sets: `<data folder>/datasets` (follows GRIEVANCE_LENS_DATA_DIR)."""
    return data_dir() / "datasets"


def validate_dataset_name(name: object) -> str:
    """Return `name` if it is a safe folder name; raise UserError saying what to change."""
    return check_safe_name("data set", name)


def dataset_folder(root: str | Path, name: str) -> Path:
    """The folder of data set `name` directly inside `root` (need not exist); UserError when the
    name is unsafe or the folder is a link or lies elsewhere."""
    return folder_inside(root, name, kind="data set", place="the data sets folder")


def suggest_name(root: str | Path, source: str) -> str:
    """A free, valid data set name made from `source` (a file name or a label): its stem with
    every other character as "-", numbered when taken ("complaints", "complaints-2", ...)."""
    stem = Path(str(source)).stem if "." in str(source) else str(source)
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._").lower()[:56] or "dataset"
    taken = {name.lower() for name in _folder_names(Path(root))}
    candidates = (base if n == 1 else f"{base}-{n}" for n in range(1, 10_000))
    return next(c for c in candidates if c.lower() not in taken)


def saved_data_cap(environ: Mapping[str, str] | None = None) -> int:
    """Bytes all saved data sets together may take: $GRIEVANCE_LENS_MAX_SAVED_DATA_MB (default
    2048) megabytes."""
    env = os.environ if environ is None else environ
    raw = env.get(SAVED_DATA_MB_ENV, "").strip()
    return parse_megabytes(SAVED_DATA_MB_ENV, raw) if raw else DEFAULT_SAVED_DATA_MB * MB


def storage_used(root: str | Path) -> int:
    """Bytes the files of every data set folder in `root` take: retired ones (they stay on disk)
    and changes in progress or left by a killed process (they take the disk too) included."""
    root = Path(root)
    folders = [root / name for name in _folder_names(root)]
    folders += [change.folder for change in pending_changes(root)]
    return sum(
        entry.stat().st_size
        for folder in folders
        for entry in folder.iterdir()
        if entry.is_file() and not entry.is_symlink()
    )


# ------------------------------------------------------------------------------------ saving


# Called with a change ready but hidden, with the details its trail event records (the change's
# id included, core.pending); if it raises, the change is undone (core.review.library).
DatasetRecorder = Callable[[dict[str, Any]], None]


def save_dataset(
    root: str | Path, request: DatasetSave, *, actor: Actor, record: DatasetRecorder | None = None
) -> SavedDataset:
    """Save `request.dataset` as data set `request.name` of `root`; `actor` needs DECIDE
    (reviewer or admin).

    Exclusive: a name that is taken (in any casing, retired data sets included) is refused, and
    of two saves racing for one name exactly one wins. Atomic: everything is written and flushed
    in a hidden folder its process holds (core.pending), told to `record` (the trail), and only
    then renamed into place, so a crash leaves no half data set and none the trail does not
    know. Bounded: the intake limits (rows, columns, desks, file size) and the total-size cap.
    """
    actor.require(Permission.DECIDE)
    root, name = Path(root), request.name
    target = dataset_folder(root, name)
    if request.parent is not None:
        # a parent that does not exist would be a broken lineage
        read_summary(root, request.parent)
    data = _encode(request.dataset, IntakeLimits.from_env())
    summary = _summary_document(request, data, actor)
    root.mkdir(parents=True, exist_ok=True)
    staging = new_change(root, name, SAVING)
    details = {
        "name": name, "fingerprint": request.dataset.fingerprint, "rows": len(request.dataset),
        "parent": request.parent, "change": staging.id,
    }  # fmt: skip
    try:
        with created_held(staging):
            _write_folder(staging.folder, data, summary)
            with _locked(root):
                _check_name_free(root, name)
                _check_cap(root, incoming=0)  # the staging folder is counted already
                if record is not None:
                    record(details)
                _rename_into_place(staging.folder, target, name)
        _fsync_folder(root)
    finally:
        if staging.folder.exists():
            shutil.rmtree(staging.folder)
    return read_summary(root, name)


def _encode(dataset: Dataset, limits: IntakeLimits) -> bytes:
    """`dataset` as Parquet bytes, refused (before and after encoding) beyond the intake limits."""
    _check_desks(dataset, limits)
    if len(dataset) == 0:
        raise UserError("the data set has no rows; load complaints before saving")
    if len(dataset) > limits.max_rows:
        raise UserError(
            f"the data set has {len(dataset):,} rows, above the {limits.max_rows:,} an upload "
            "may have; save a smaller data set or raise GRIEVANCE_LENS_MAX_ROWS"
        )
    width = len(BASE_COLUMNS) + len(dataset.extra.columns)
    if width > limits.max_columns:
        raise UserError(
            f"the data set has {width} columns, above the {limits.max_columns} an upload may "
            "have; drop columns before saving"
        )
    sink = pa.BufferOutputStream()
    pq.write_table(_arrow_table(_storage_frame(dataset)), sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    if len(data) > limits.max_file_bytes:
        raise UserError(
            f"the data set takes {len(data) / MB:,.1f} MB as Parquet, above the "
            f"{limits.max_file_bytes / MB:,.0f} MB an upload may take; save a smaller data set "
            "or raise GRIEVANCE_LENS_MAX_FILE_MB"
        )
    return data


def _check_desks(dataset: Dataset, limits: IntakeLimits) -> None:
    """Refuse more desks than `limits.max_desks` (see IntakeLimits), before anything is
    encoded: summary.json counts the rows of every desk."""
    desks = len(set(dataset.labels))
    if desks > limits.max_desks:
        raise UserError(
            f"the data set has {desks:,} desks, above the {limits.max_desks:,} a saved data set "
            f"may have; check that the label column holds desks, not ids or texts, or raise "
            f"{MAX_DESKS_ENV}"
        )


def _storage_frame(dataset: Dataset) -> pd.DataFrame:
    """Columns row, text, label, then the extra columns under unique names (see the module)."""
    used, names = set(BASE_COLUMNS), []
    for column in dataset.extra.columns:
        stored = str(column)
        while stored in used:
            stored += "_original"
        used.add(stored)
        names.append(stored)
    extra = dataset.extra.reset_index(drop=True).set_axis(names, axis=1)
    base = pd.DataFrame(
        {"row": pd.Series(dataset.rows, dtype="int64"), "text": list(dataset.texts),
         "label": list(dataset.labels)}
    )  # fmt: skip
    return pd.concat([base, extra], axis=1)


def _arrow_table(frame: pd.DataFrame) -> pa.Table:
    """`frame` as an Arrow table; a column mixing kinds (numbers and text in one object column,
    as a hand-built frame may) is stored as text, spelled as intake spells cells."""
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        mixed = [c for c in frame.columns if frame[c].dtype == object]
        text = frame.assign(**{c: frame[c].map(cell_to_str) for c in mixed})
        return pa.Table.from_pandas(text, preserve_index=False)


def _summary_document(request: DatasetSave, data: bytes, actor: Actor) -> bytes:
    name, dataset = request.name, request.dataset
    summary = {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "name": name,
        "fingerprint": dataset.fingerprint,
        "rows": len(dataset),
        "labels": dict(Counter(dataset.labels).most_common()),
        "validation": _compact_validation(request.validation),
        "saved_by": actor.user,
        "saved_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "parent": request.parent,
        "lineage": dict(request.lineage or {}),
        "size_bytes": len(data),
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "columns": [str(c) for c in dataset.extra.columns],
    }
    document = json.dumps(summary, ensure_ascii=False, indent=1, allow_nan=False).encode()
    if len(document) > MAX_SUMMARY_BYTES:
        raise UserError(
            f"the summary of data set {name!r} would take {len(document) / MB:,.0f} MB, above "
            f"{MAX_SUMMARY_BYTES / MB:,.0f} MB; derive it in smaller steps"
        )
    return document


def _compact_validation(validation: Mapping | None) -> dict:
    """The validation summary as stored: at most MAX_DROPPED_KEPT dropped rows listed, with
    their total as `dropped_total`."""
    compact = dict(validation or {})
    dropped = list(compact.get("dropped") or [])
    if "dropped" in compact:
        compact["dropped"] = dropped[:MAX_DROPPED_KEPT]
        compact["dropped_total"] = len(dropped)
    return compact


def _write_folder(folder: Path, data: bytes, summary: bytes) -> None:
    """The empty folder `folder` given data.parquet and summary.json, flushed to disk."""
    write_atomically(folder / DATA_NAME, data)
    write_atomically(folder / SUMMARY_NAME, summary)
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    """Flush `folder`'s entries (the names just created or renamed in it) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold the data sets' lock (flock on `root/.lock`: per open file, so threads and processes
    alike wait for each other) while a save or retirement checks and changes the folder."""
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _check_name_free(root: Path, name: str) -> None:
    """Refuse a name that a data set (or any folder) has, in any casing: on a case-insensitive
    disk they would be one folder, and to people they read as one name."""
    clash = next((n for n in _folder_names(root) if n.lower() == name.lower()), None)
    if clash is not None or (root / name).exists():
        taken = clash or name
        raise UserError(f"a data set named {taken!r} already exists; choose another name")


def _check_cap(root: Path, *, incoming: int) -> None:
    cap, used = saved_data_cap(), storage_used(root)
    if used + incoming > cap:
        raise UserError(
            f"saved data sets use {used / MB:,.1f} MB of the {cap / MB:,.0f} MB allowed and "
            f"this one needs {incoming / MB:,.1f} MB more; remove data sets no longer needed "
            f"from {root} (retired ones stay on disk) or raise {SAVED_DATA_MB_ENV}"
        )


def _rename_into_place(staging: Path, target: Path, name: str) -> None:
    """Rename the complete `staging` to `target`; POSIX refuses to rename onto a folder with
    files in it, so a data set that got there first is never replaced."""
    try:
        os.rename(staging, target)
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        raise UserError(f"a data set named {name!r} already exists; choose another name") from err


# ----------------------------------------------------------------------------------- reading


def _folder_names(root: Path) -> list[str]:
    """Names of the data set folders of `root` (valid names only: staging folders are hidden)."""
    if not root.is_dir():
        return []
    return sorted(
        entry.name
        for entry in root.iterdir()
        if NAME_PATTERN.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink()
    )


def list_datasets(root: str | Path, *, include_retired: bool = False) -> list[DatasetEntry]:
    """The saved data sets of `root`, newest first; retired ones only when asked for. Read from
    the index (core.data.saved_index): no summary.json is parsed unless it changed."""
    root = Path(root)
    found = indexed_entries(root, _folder_names(root))
    kept = [s for s in found if include_retired or not s.retired]
    return sorted(kept, key=lambda s: (s.saved_at, s.name), reverse=True)


def read_summary(root: str | Path, name: str) -> SavedDataset:
    """What data set `name` of `root` is, in full (its summary.json and retired.json);
    UserError when there is no such data set."""
    return _saved(*_documents(root, name))


def _documents(root: str | Path, name: str) -> tuple[Path, dict, dict | None]:
    """The folder of data set `name`, its summary.json and its retired.json (None: in use)."""
    folder = dataset_folder(root, name)
    missing = f"no saved data set named {name!r}"
    summary = read_document(folder / SUMMARY_NAME, name, missing=missing)
    retired = None
    if (folder / RETIRED_NAME).is_file():
        retired = read_document(folder / RETIRED_NAME, name, missing="")
    return folder, summary, retired


def _saved(folder: Path, summary: dict, retired: dict | None) -> SavedDataset:
    try:
        return SavedDataset(
            name=folder.name,
            labels={str(k): int(v) for k, v in dict(summary["labels"]).items()},
            validation=dict(summary.get("validation") or {}),
            lineage=dict(summary.get("lineage") or {}),
            path=folder,
            **summary_fields(summary),
            **retired_fields(retired),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise incomplete(folder.name, err) from err


def load_dataset(root: str | Path, name: str) -> tuple[Dataset, SavedDataset]:
    """Data set `name` of `root` as saved: the same rows, texts, labels, extra columns and
    fingerprint. Refused (UserError naming it) when its file changed since it was saved."""
    folder, summary, retired = _documents(root, name)  # summary.json parsed once
    saved = _saved(folder, summary, retired)
    data = _read_data(saved, str(summary.get("data_sha256", "")))
    dataset = _dataset_from_frame(_decode(data, name), summary.get("columns") or [], name)
    if dataset.fingerprint != saved.fingerprint:
        raise UserError(_changed_message(name))
    return dataset, saved


def _changed_message(name: str) -> str:
    return (
        f"saved data set {name!r} changed on disk since it was saved (its data no longer "
        "matches its summary); load it from its source file and save it again"
    )


def _read_data(saved: SavedDataset, sha256: str) -> bytes:
    """data.parquet's bytes, after checking its size (before reading) and its digest: only the
    file this app wrote is ever parsed."""
    path = saved.path / DATA_NAME
    if path.is_symlink() or not path.is_file():
        raise UserError(f"saved data set {saved.name!r} has no {DATA_NAME}; retire it")
    if path.stat().st_size != saved.size_bytes:
        raise UserError(_changed_message(saved.name))
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise UserError(_changed_message(saved.name))
    return data


def _decode(data: bytes, name: str) -> pd.DataFrame:
    try:
        return pq.read_table(pa.BufferReader(data)).to_pandas()
    except (pa.ArrowException, OSError) as err:
        raise UserError(f"saved data set {name!r} cannot be read ({err}); retire it") from err


def _dataset_from_frame(frame: pd.DataFrame, columns: list, name: str) -> Dataset:
    """The Dataset of a stored frame: extra columns get their original names back."""
    expected = len(BASE_COLUMNS) + len(columns)
    if list(frame.columns[: len(BASE_COLUMNS)]) != list(BASE_COLUMNS) or frame.shape[1] != expected:
        raise UserError(_changed_message(name))
    extra = frame.iloc[:, len(BASE_COLUMNS) :].set_axis([str(c) for c in columns], axis=1)
    return Dataset(
        texts=tuple(frame["text"].tolist()),
        labels=tuple(frame["label"].tolist()),
        rows=tuple(int(r) for r in frame["row"].tolist()),
        extra=extra,
    )


def find_by_fingerprint(root: str | Path, fingerprint: str) -> DatasetEntry | None:
    """The newest saved data set holding exactly the data with `fingerprint` (one in use before
    a retired one), or None."""
    matches = [s for s in list_datasets(root, include_retired=True) if s.fingerprint == fingerprint]
    return min(matches, key=lambda s: s.retired, default=None)  # min is stable: newest first


def children_of(root: str | Path, name: str) -> list[DatasetEntry]:
    """The data sets derived from `name` (retired ones included), newest first; `read_summary`
    gives a child's lineage."""
    return [s for s in list_datasets(root, include_retired=True) if s.parent == name]


# ---------------------------------------------------------------------------------- retiring


def retire_dataset(
    root: str | Path,
    name: str,
    *,
    actor: Actor,
    reason: str,
    record: DatasetRecorder | None = None,
) -> SavedDataset:
    """Hide data set `name` from the list (its files stay: models and decisions may refer to
    it); `actor` needs MANAGE_DATA (admin) and gives a reason. The marker is written in a hidden
    folder, told to `record` (the trail), and only then moved into the data set (core.pending)."""
    actor.require(Permission.MANAGE_DATA)
    reason = " ".join(str(reason).split())
    if not reason:
        raise UserError("give a reason for retiring the data set")
    if len(reason) > MAX_REASON_CHARS:
        raise UserError(f"the reason is {len(reason):,} characters; keep it to {MAX_REASON_CHARS}")
    saved = read_summary(root, name)
    marker = {"by": actor.user, "at": datetime.now(UTC).isoformat(timespec="seconds"),
              "reason": reason}  # fmt: skip
    change = new_change(Path(root), name, RETIRING)
    details = {"name": name, "fingerprint": saved.fingerprint, "rows": saved.rows,
               "parent": saved.parent, "reason": reason, "change": change.id}  # fmt: skip
    with _locked(Path(root)):
        if (saved.path / RETIRED_NAME).exists():
            raise UserError(f"data set {name!r} is already retired")
        try:
            with created_held(change):
                document = json.dumps(marker, ensure_ascii=False, indent=1).encode()
                write_atomically(change.folder / RETIRED_NAME, document)
                if record is not None:
                    record(details)
                os.rename(change.folder / RETIRED_NAME, saved.path / RETIRED_NAME)
        finally:
            if change.folder.exists():
                shutil.rmtree(change.folder)
    return read_summary(root, name)


def finish_dataset_changes(root: str | Path, recorded: RecordedChange) -> list[str]:
    """Finish or undo the saves and retirements of data sets that processes killed midway left
    (hidden change folders no live process holds), by what the trail says (`recorded(id)`: the
    event's details, or None); one line per change, for the log."""
    root = Path(root)
    with _locked(root) if root.is_dir() else nullcontext():
        return finish_abandoned(
            root, recorded, lambda change, details: _finish(root, change, details is not None)
        )


def _finish(root: Path, change: Change, recorded: bool) -> str:
    target = root / change.name
    if change.kind == SAVING:
        if not recorded:
            shutil.rmtree(change.folder)
            return f"data set {change.name!r}: removed a save that was never recorded"
        if move_into_name(change.folder, target):
            return f"data set {change.name!r}: finished its recorded save"
        return f"data set {change.name!r}: its recorded save waits in {change.folder.name}"
    marker = change.folder / RETIRED_NAME  # a retirement: gone already if it was moved in
    finished = recorded and marker.is_file() and target.is_dir()
    if finished and not (target / RETIRED_NAME).exists():
        os.rename(marker, target / RETIRED_NAME)
    shutil.rmtree(change.folder)
    if recorded:
        return f"data set {change.name!r}: finished its recorded retirement"
    return f"data set {change.name!r}: undid a retirement that was never recorded"


# ------------------------------------------------------------------------ validation report


def validation_report(dataset: Dataset, saved: SavedDataset) -> ValidationReport:
    """The validation report of a loaded data set: the one stored when it was saved, or (a data
    set derived from another, saved without one) a fresh validation of its texts and labels."""
    stored = _stored_report(saved.validation)
    if stored is not None and stored.rows_kept == len(dataset):
        return stored
    table = pd.DataFrame({"text": list(dataset.texts), "label": list(dataset.labels)})
    return validate(table, text_col="text", label_col="label")[1]


def _stored_report(data: Mapping) -> ValidationReport | None:
    """A ValidationReport rebuilt from its `to_json()` (as stored), or None when incomplete."""
    fields = dict(data)
    total = fields.pop("dropped_total", None)
    try:
        fields["dropped"] = tuple(
            DroppedRow(int(d["row"]), str(d["reason"])) for d in data["dropped"]
        )
        fields["word_stats"] = LengthStats(**data["word_stats"])
        fields["token_stats"] = LengthStats(**data["token_stats"])
        fields["casing_variants"] = tuple(tuple(g) for g in data["casing_variants"])
        fields["small_classes"] = tuple(data["small_classes"])
        fields["warnings"] = _with_total(tuple(data["warnings"]), total, len(fields["dropped"]))
        return ValidationReport(**fields)
    except (KeyError, TypeError, ValueError):
        return None  # saved without a (complete) report: validation_report recomputes it


def _with_total(warnings: tuple[str, ...], total: object, listed: int) -> tuple[str, ...]:
    if not isinstance(total, int) or total <= listed:
        return warnings
    return (
        *warnings,
        f"{total:,} rows were dropped when it was loaded; the first {listed:,} are listed",
    )
