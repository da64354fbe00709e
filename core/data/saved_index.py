"""The saved data sets' index (`<data sets folder>/.index.json`): what listing them and the
checks of a click need (name, fingerprint, rows, desks, who saved it and when, parent, lineage
counts, retirement, size), so a listing never parses a summary.json, whose labels, validation
report and lineage can take megabytes.

The index is derived, never trusted over the folders: each record keeps the identity (inode,
size, modification and change times) of the summary.json and retired.json it was read from, and
a record whose files changed, a folder it lacks (saved before the index existed, or since) and an
index that is missing, unreadable or of another format are read again from the folders. Nothing
writes it but a listing, so saving and retiring need not know it exists. Loading a data set reads
its summary.json and checks data_sha256 (core.data.saved), whatever the index says.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from core.data.limits import MB
from core.errors import UserError
from core.paths import read_json_object, write_atomically

log = logging.getLogger(__name__)

SUMMARY_NAME = "summary.json"
RETIRED_NAME = "retired.json"
# Lineage lists grow with the rows a version changes, so the ceiling is generous, but a summary
# is never parsed unbounded.
MAX_SUMMARY_BYTES = 64 * MB
INDEX_NAME = ".index.json"  # hidden: no data set name starts with "." (core.checks.SAFE_NAME)
INDEX_FORMAT = "grievance-lens-dataset-index"
INDEX_VERSION = 1
MAX_INDEX_BYTES = 16 * MB  # records are under 1 KB each: some 20,000 data sets
MAX_REVIEWERS_KEPT = 50  # a lineage's reviewers the list shows, most changes first
LINEAGE_LISTS = ("relabelled_rows", "excluded_rows", "added_rows", "decisions", "verdicts", "stale")


@dataclass(frozen=True)
class LineageCounts:
    """How a derived data set came from its parent, counted (the lineage lists their ids)."""

    relabelled_rows: int
    excluded_rows: int
    added_rows: int
    decisions: int  # label-audit decisions folded in
    verdicts: int  # triage verdicts folded in
    stale: int  # decisions not applied because their row had changed
    by_reviewer: dict[str, int]  # reviewer -> changes, at most MAX_REVIEWERS_KEPT of them


@dataclass(frozen=True)
class DatasetEntry:
    """One saved data set as listed: its summary.json without the labels (counted as `desks`),
    the validation report and the lineage (counted); `read_summary` gives those."""

    name: str
    fingerprint: str
    rows: int
    desks: int  # distinct labels
    saved_by: str
    saved_at: str  # UTC, ISO 8601
    parent: str | None  # the data set this one was derived from
    lineage: LineageCounts | None  # None: an upload or the demo data
    size_bytes: int  # of data.parquet
    path: Path
    retired: bool = False
    retired_by: str | None = None
    retired_reason: str = ""


def read_document(path: Path, name: str, *, missing: str) -> dict:
    """The JSON object in `path` (a file of data set `name`), read only when it is a regular
    file within MAX_SUMMARY_BYTES; a one-line UserError otherwise."""
    return read_json_object(
        path, max_bytes=MAX_SUMMARY_BYTES, what=f"{path.name} of data set {name!r}",
        fix="retire it", missing=missing,
    )  # fmt: skip


def summary_fields(summary: Mapping) -> dict:
    """fingerprint, rows, saved_by, saved_at, parent and size_bytes of a summary, typed;
    KeyError, TypeError or ValueError when one is missing or malformed."""
    parent = summary.get("parent")
    return {
        "fingerprint": str(summary["fingerprint"]),
        "rows": int(summary["rows"]),
        "saved_by": str(summary["saved_by"]),
        "saved_at": str(summary["saved_at"]),
        "parent": None if parent is None else str(parent),
        "size_bytes": int(summary["size_bytes"]),
    }


def retired_fields(retired: Mapping | None) -> dict:
    """retired, retired_by and retired_reason from retired.json (None: the data set is in use)."""
    if retired is None:
        return {"retired": False, "retired_by": None, "retired_reason": ""}
    by, reason = retired.get("by", ""), retired.get("reason", "")
    return {"retired": True, "retired_by": str(by), "retired_reason": str(reason)}


def incomplete(name: str, err: Exception) -> UserError:
    return UserError(f"summary.json of data set {name!r} is incomplete ({err}); retire it")


# ------------------------------------------------------------------------------- listing


def indexed_entries(root: Path, names: Sequence[str]) -> list[DatasetEntry]:
    """The entries of the data set folders `names` of `root`, from the index where its records
    still match the files and read from the folders where they do not; the index is rewritten
    when anything was read. A folder without summary.json is no data set; one whose files
    cannot be read is left out with a warning, each time it is listed."""
    index = _read_index(root)
    records, entries = {}, []
    for name in names:
        found = _current(root / name, index.get(name))
        if found is None:
            continue
        records[name], entry = found
        if isinstance(entry, str):
            warnings.warn(f"skipping saved data set {name!r}: {entry}", stacklevel=3)
        else:
            entries.append(entry)
    if records != index:
        _write_index(root, records)
    return entries


def _current(folder: Path, record: object) -> tuple[dict, DatasetEntry | str] | None:
    """The record of `folder` and its entry (or why it cannot be read): `record` when it still
    describes the files, else a new one read from them; None when there is no summary.json."""
    # The files are identified before they are read: a file replaced in between leaves a record
    # older than its files, read again next time, never a new file under an old record.
    stamps = [_stamp(folder / SUMMARY_NAME), _stamp(folder / RETIRED_NAME)]
    if stamps[0] is None:
        return None
    if isinstance(record, dict) and record.get("stamps") == stamps:
        found = _from_record(folder, record)
        if found is not None:
            return record, found
    record = {"stamps": stamps, **_read_record(folder)}
    return record, _from_record(folder, record)  # a record just read is never malformed


def _stamp(path: Path) -> list[int] | None:
    """Which file `path` is now (inode, size, modification and change times); None if none."""
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return None
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _read_record(folder: Path) -> dict:
    """What the index keeps of `folder`'s summary.json and retired.json, or the problem."""
    name = folder.name
    try:
        summary = read_document(
            folder / SUMMARY_NAME, name, missing=f"no saved data set named {name!r}"
        )
        retired = None
        if (folder / RETIRED_NAME).is_file():
            retired = read_document(folder / RETIRED_NAME, name, missing="")
        light = {**summary_fields(summary), "desks": len(dict(summary["labels"])),
                 "lineage": _lineage_counts(dict(summary.get("lineage") or {}))}  # fmt: skip
        marker = None if retired is None else retired_fields(retired)
    except UserError as exc:
        return {"problem": str(exc)}
    except (KeyError, TypeError, ValueError) as err:
        return {"problem": str(incomplete(name, err))}
    return {"summary": light, "retired": marker}


def _lineage_counts(lineage: dict) -> dict | None:
    """LineageCounts of a lineage, as the index stores it (None for an empty lineage)."""
    if not lineage:
        return None
    counts = {key: len(v) if isinstance(v := lineage.get(key), list) else 0
              for key in LINEAGE_LISTS}  # fmt: skip
    given = lineage.get("by_reviewer")
    changes = [(str(who), n) for who, n in (given.items() if isinstance(given, dict) else ())
               if isinstance(n, int) and not isinstance(n, bool)]  # fmt: skip
    kept = sorted(changes, key=lambda pair: -pair[1])[:MAX_REVIEWERS_KEPT]
    return asdict(LineageCounts(**counts, by_reviewer=dict(kept)))


def _from_record(folder: Path, record: dict) -> DatasetEntry | str | None:
    """The entry a record describes, its problem, or None when the record is malformed (an
    index written by another version or by hand): the folder is read again then."""
    if isinstance(record.get("problem"), str):
        return record["problem"]
    try:
        light, marker = record["summary"], record["retired"]
        counts = light["lineage"]
        lineage = None if counts is None else _typed_counts(counts)
        retired = retired_fields(None) if marker is None else {
            "retired": True, "retired_by": str(marker["retired_by"]),
            "retired_reason": str(marker["retired_reason"]),
        }  # fmt: skip
        return DatasetEntry(
            name=folder.name, path=folder, desks=int(light["desks"]), lineage=lineage,
            **summary_fields(light), **retired,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _typed_counts(counts: Mapping) -> LineageCounts:
    reviewers = {str(who): int(n) for who, n in dict(counts["by_reviewer"]).items()}
    return LineageCounts(**{key: int(counts[key]) for key in LINEAGE_LISTS}, by_reviewer=reviewers)


# --------------------------------------------------------------------------------- the file


def _read_index(root: Path) -> dict:
    """The index's records by folder name; empty when it is missing, unreadable, too large or
    of another format, so that every folder is read again (the folders are the truth)."""
    try:
        index = read_json_object(
            root / INDEX_NAME, max_bytes=MAX_INDEX_BYTES, what="the data sets' index",
            fix="it is rebuilt", missing="no index yet",
        )  # fmt: skip
    except UserError:
        return {}
    records = index.get("records")
    fits = index.get("format") == INDEX_FORMAT and index.get("version") == INDEX_VERSION
    return records if fits and isinstance(records, dict) else {}


def _write_index(root: Path, records: dict) -> None:
    """Replace the index atomically (two listings racing write equally valid ones). A folder
    this process cannot write keeps working, read in full each time: the index only saves time."""
    if not root.is_dir():
        return  # nothing saved yet: a listing does not create the folder
    document = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "records": records}
    data = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    if len(data) > MAX_INDEX_BYTES:
        log.warning("the saved data sets' index would take %d bytes; listed without it", len(data))
        return
    try:
        write_atomically(root / INDEX_NAME, data)
    except OSError as err:
        log.warning("the saved data sets' index in %s cannot be written: %s", root, err)
