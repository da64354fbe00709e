"""Saved data sets (core.data.saved) and their trail events (core.review.library): the round trip
keeps everything, names are exclusive, sizes are capped, a changed file is refused, retiring
hides without deleting, roles are enforced, and the trail names the actor."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.access import AccessDenied, Actor, Role
from core.data.dataset import Dataset
from core.data.limits import MAX_ROWS_ENV
from core.data.saved import (
    DATA_NAME,
    SAVED_DATA_MB_ENV,
    SUMMARY_NAME,
    DatasetSave,
    children_of,
    datasets_root,
    find_by_fingerprint,
    list_datasets,
    load_dataset,
    read_summary,
    retire_dataset,
    save_dataset,
    storage_used,
    suggest_name,
    validation_report,
)
from core.data.saved_index import INDEX_NAME
from core.data.validation import validate
from core.errors import UserError
from core.paths import DATA_DIR_ENV
from core.review.library import finish_interrupted_changes, retire_and_record, save_and_record
from core.review.store import Store, StoreError

ADMIN = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
VIEWER = Actor("vic@bank.example", Role.VIEWER, signed_in=True)
TEXTS = [
    "upi payment failed but money debited",
    "card used for a purchase i never made",
    "emi charged twice on my home loan",
    "please update my kyc address",
    "upi refund not received after failed payment",
]
LABELS = ["UPI Dispute", "Card Fraud", "Loan Query", "KYC Update", "UPI Dispute"]


def dataset(labels: list[str] = LABELS, *, rows: tuple[int, ...] = (2, 3, 5, 8, 9)) -> Dataset:
    """Five complaints with awkward extra columns: names that clash with row/text/label, a
    nullable integer column, a text column with gaps and one mixing numbers and text."""
    extra = pd.DataFrame(
        {
            "text": ["a", "b", "c", "d", "e"],  # the upload had its own "text" column too
            "label": ["x", None, "z", "w", "v"],
            "text_original": ["1", "2", "3", "4", "5"],
            "twin_group": pd.array([1, None, 1, None, 2], dtype="Int64"),
            "customer": pd.array(["ravi", None, "meena", "ali", "sam"], dtype="str"),
        }
    )
    return Dataset(TEXTS, labels, rows, extra)


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "state"))
    for variable in (SAVED_DATA_MB_ENV, MAX_ROWS_ENV):
        monkeypatch.delenv(variable, raising=False)
    return datasets_root()


def in_root(root: Path) -> list[str]:
    """What the data sets folder holds besides the listing's index (derived, rebuilt at will)."""
    return sorted(p.name for p in root.iterdir() if p.name != INDEX_NAME)


def test_the_root_follows_the_data_folder(root: Path, tmp_path: Path):
    assert root == tmp_path / "state" / "datasets"


# ------------------------------------------------------------------------------ round trip


def test_a_saved_data_set_loads_back_the_same(root: Path):
    original = dataset()
    saved = save_dataset(root, DatasetSave("complaints", original), actor=REVIEWER)
    loaded, summary = load_dataset(root, "complaints")
    assert loaded.fingerprint == original.fingerprint == saved.fingerprint == summary.fingerprint
    assert (loaded.texts, loaded.labels, loaded.rows) == (
        original.texts,
        original.labels,
        original.rows,
    )
    pd.testing.assert_frame_equal(loaded.extra, original.extra)
    assert saved.rows == 5 and saved.labels == {
        "UPI Dispute": 2,
        "Card Fraud": 1,
        "Loan Query": 1,
        "KYC Update": 1,
    }
    assert saved.saved_by == REVIEWER.user and saved.saved_at.endswith("+00:00")
    assert saved.size_bytes == (root / "complaints" / DATA_NAME).stat().st_size
    assert saved.parent is None and saved.lineage == {} and not saved.retired


def test_a_column_mixing_numbers_and_text_is_kept_as_text(root: Path):
    mixed = Dataset(TEXTS, LABELS, extra=pd.DataFrame({"ref": [1, "A-2", 3.5, None, "x"]}))
    save_dataset(root, DatasetSave("mixed", mixed), actor=REVIEWER)
    loaded, _ = load_dataset(root, "mixed")
    assert loaded.extra["ref"].tolist()[:3] == ["1", "A-2", "3.5"]
    assert pd.isna(loaded.extra["ref"][3]) and loaded.fingerprint == mixed.fingerprint


def test_the_validation_report_comes_back_as_it_was_saved(root: Path):
    table = pd.DataFrame({"complaint": [*TEXTS, ""], "desk": [*LABELS, "Card Fraud"]})
    data, report = validate(table, text_col="complaint", label_col="desk")
    save_dataset(root, DatasetSave("validated", data, validation=report.to_json()), actor=REVIEWER)
    loaded, saved = load_dataset(root, "validated")
    assert saved.validation["dropped"] == [{"row": 7, "reason": "empty text"}]
    assert validation_report(loaded, saved) == report


def test_a_data_set_saved_without_a_report_is_validated_afresh(root: Path):
    save_dataset(root, DatasetSave("bare", dataset()), actor=REVIEWER)
    loaded, saved = load_dataset(root, "bare")
    report = validation_report(loaded, saved)
    assert report.rows_kept == 5 and report.labels["UPI Dispute"] == 2


def test_a_derived_data_set_records_its_parent_and_lineage(root: Path):
    save_dataset(root, DatasetSave("v1", dataset()), actor=REVIEWER)
    lineage = {"parent_fingerprint": dataset().fingerprint, "decisions": [4, 7],
               "relabelled_rows": [3], "excluded_rows": [], "added_rows": [],
               "by_reviewer": {"asha@bank.example": 2}}  # fmt: skip
    relabelled = dataset(["UPI Dispute", "UPI Dispute", *LABELS[2:]])
    save_dataset(root, DatasetSave("v2", relabelled, parent="v1", lineage=lineage), actor=ADMIN)
    child = read_summary(root, "v2")
    assert child.parent == "v1" and child.lineage == lineage
    assert [s.name for s in children_of(root, "v1")] == ["v2"]
    assert find_by_fingerprint(root, relabelled.fingerprint).name == "v2"
    assert find_by_fingerprint(root, "0" * 64) is None
    with pytest.raises(UserError, match="no saved data set named 'v0'"):
        save_dataset(root, DatasetSave("v3", relabelled, parent="v0"), actor=ADMIN)


def test_the_list_is_newest_first(root: Path):
    for name in ("first", "second", "third"):
        save_dataset(root, DatasetSave(name, dataset()), actor=REVIEWER)
    assert [s.name for s in list_datasets(root)] == ["third", "second", "first"]


# ------------------------------------------------------------------------------ exclusive


@pytest.mark.parametrize("name", ["../escape", "a b", "", ".hidden", "x" * 65, "a/b", "..."])
def test_unsafe_names_are_refused(root: Path, name: str):
    with pytest.raises(UserError, match="is not allowed"):
        save_dataset(root, DatasetSave(name, dataset()), actor=REVIEWER)
    assert list_datasets(root) == []


def test_a_taken_name_is_refused_in_any_casing_and_the_first_is_kept(root: Path):
    first = save_dataset(root, DatasetSave("Complaints", dataset()), actor=REVIEWER)
    other = dataset(["Card Fraud", *LABELS[1:]])
    for name in ("Complaints", "complaints"):
        with pytest.raises(UserError, match="already exists; choose another name"):
            save_dataset(root, DatasetSave(name, other), actor=ADMIN)
    assert load_dataset(root, "Complaints")[0].fingerprint == first.fingerprint
    assert in_root(root) == [".lock", "Complaints"]  # nothing staged


def test_of_racing_saves_of_one_name_exactly_one_wins(root: Path):
    versions = [dataset([LABELS[0], LABELS[i % 4], *LABELS[2:]]) for i in range(6)]
    barrier, outcomes = threading.Barrier(len(versions)), []

    def save(version: Dataset) -> None:
        barrier.wait()
        try:
            outcomes.append(
                save_dataset(root, DatasetSave("race", version), actor=REVIEWER).fingerprint
            )
        except UserError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=save, args=(v,)) for v in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if "already exists" not in o]
    assert len(winners) == 1 and len(outcomes) == len(versions)
    assert load_dataset(root, "race")[0].fingerprint == winners[0]
    assert in_root(root) == [".lock", "race"]


def test_a_free_name_is_suggested_from_the_source(root: Path):
    assert suggest_name(root, "Complaints June.csv") == "complaints-june"
    save_dataset(root, DatasetSave("complaints-june", dataset()), actor=REVIEWER)
    assert suggest_name(root, "complaints june.xlsx") == "complaints-june-2"
    assert suggest_name(root, "Built-in demo data") == "built-in-demo-data"
    assert suggest_name(root, "../../..") == "dataset"


# -------------------------------------------------------------------------------- bounded


def test_the_total_size_cap_refuses_in_one_line_and_saves_nothing(root, monkeypatch):
    first = save_dataset(root, DatasetSave("first", dataset()), actor=REVIEWER)
    used = storage_used(root)
    assert used >= first.size_bytes
    monkeypatch.setenv(SAVED_DATA_MB_ENV, str((used + 100) / 1024**2))
    with pytest.raises(UserError) as refused:
        save_dataset(root, DatasetSave("second", dataset()), actor=REVIEWER)
    message = str(refused.value)
    assert "\n" not in message and SAVED_DATA_MB_ENV in message
    assert message.startswith("saved data sets use 0.0 MB of the 0 MB allowed")
    assert [s.name for s in list_datasets(root)] == ["first"]
    assert in_root(root) == [".lock", "first"]


def test_a_bad_cap_setting_is_named(root, monkeypatch):
    monkeypatch.setenv(SAVED_DATA_MB_ENV, "lots")
    with pytest.raises(UserError, match=SAVED_DATA_MB_ENV):
        save_dataset(root, DatasetSave("first", dataset()), actor=REVIEWER)


def test_the_intake_row_limit_applies_to_a_save(root, monkeypatch):
    monkeypatch.setenv(MAX_ROWS_ENV, "4")
    with pytest.raises(UserError, match="5 rows, above the 4 an upload may have"):
        save_dataset(root, DatasetSave("big", dataset()), actor=REVIEWER)
    assert list_datasets(root) == []


# ------------------------------------------------------------------------------- tampering


def _rewrite(root: Path, name: str, labels: list[str], *, keep_digest: bool) -> None:
    """Replace data.parquet with other labels; with `keep_digest` the summary is made to match
    the new file (size and digest), so only the fingerprint can tell."""
    import hashlib
    import json

    folder = root / name
    frame = pq.read_table(folder / DATA_NAME).to_pandas()
    frame["label"] = labels
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / DATA_NAME)
    if keep_digest:
        data = (folder / DATA_NAME).read_bytes()
        summary = json.loads((folder / SUMMARY_NAME).read_text())
        summary.update(size_bytes=len(data), data_sha256=hashlib.sha256(data).hexdigest())
        (folder / SUMMARY_NAME).write_text(json.dumps(summary))


@pytest.mark.parametrize("keep_digest", [False, True])
def test_a_file_changed_on_disk_is_refused_by_name(root: Path, keep_digest: bool):
    save_dataset(root, DatasetSave("complaints", dataset()), actor=REVIEWER)
    _rewrite(root, "complaints", ["Card Fraud"] * 5, keep_digest=keep_digest)
    with pytest.raises(UserError, match="saved data set 'complaints' changed on disk"):
        load_dataset(root, "complaints")


def test_a_damaged_summary_hides_only_its_own_data_set(root: Path):
    save_dataset(root, DatasetSave("good", dataset()), actor=REVIEWER)
    save_dataset(root, DatasetSave("bad", dataset()), actor=REVIEWER)
    (root / "bad" / SUMMARY_NAME).write_text("{not json")
    with pytest.warns(UserWarning, match="skipping saved data set 'bad'"):
        assert [s.name for s in list_datasets(root)] == ["good"]
    with pytest.raises(UserError, match="not valid JSON"):
        load_dataset(root, "bad")


# ---------------------------------------------------------------------------------- retire


def test_retiring_hides_the_data_set_and_keeps_its_files(root: Path):
    save_dataset(root, DatasetSave("old", dataset()), actor=REVIEWER)
    save_dataset(root, DatasetSave("new", dataset()), actor=REVIEWER)
    retired = retire_dataset(root, "old", actor=ADMIN, reason="  superseded by  new ")
    assert retired.retired and retired.retired_by == ADMIN.user
    assert retired.retired_reason == "superseded by new"
    assert [s.name for s in list_datasets(root)] == ["new"]
    assert [s.name for s in list_datasets(root, include_retired=True)] == ["new", "old"]
    assert (root / "old" / DATA_NAME).is_file()
    assert load_dataset(root, "old")[0].fingerprint == dataset().fingerprint
    with pytest.raises(UserError, match="already retired"):
        retire_dataset(root, "old", actor=ADMIN, reason="again")
    with pytest.raises(UserError, match="give a reason"):
        retire_dataset(root, "new", actor=ADMIN, reason="   ")
    with pytest.raises(UserError, match="already exists"):  # the name stays taken
        save_dataset(root, DatasetSave("old", dataset()), actor=REVIEWER)


# ----------------------------------------------------------------------------- permissions


def test_viewers_cannot_save_and_only_admins_retire(root: Path):
    with pytest.raises(AccessDenied, match="decide needs the reviewer role"):
        save_dataset(root, DatasetSave("mine", dataset()), actor=VIEWER)
    assert not root.exists() or list_datasets(root) == []
    save_dataset(root, DatasetSave("mine", dataset()), actor=REVIEWER)
    for actor in (VIEWER, REVIEWER):
        with pytest.raises(AccessDenied, match="manage data needs the admin role"):
            retire_dataset(root, "mine", actor=actor, reason="no")
    assert not read_summary(root, "mine").retired


# ---------------------------------------------------------------------------------- trail


@pytest.fixture()
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def test_saves_and_retirements_are_in_the_trail_under_their_actor(root: Path, store: Store):
    saved = save_and_record(store, root, DatasetSave("v1", dataset()), actor=REVIEWER)
    retire_and_record(store, root, "v1", actor=ADMIN, reason="wrong export")
    (saved_event,) = store.events("dataset.saved")
    (retired_event,) = store.events("dataset.retired")
    assert saved_event.actor == REVIEWER.user and retired_event.actor == ADMIN.user
    assert saved_event.details.pop("change").startswith("saving-")  # core.pending
    assert saved_event.details == {"name": "v1", "fingerprint": saved.fingerprint, "rows": 5,
                                   "parent": None}  # fmt: skip
    assert retired_event.details["reason"] == "wrong export"
    assert retired_event.details["fingerprint"] == saved.fingerprint


def test_roles_are_checked_before_anything_is_written(root: Path, store: Store):
    with pytest.raises(AccessDenied):
        save_and_record(store, root, DatasetSave("v1", dataset()), actor=VIEWER)
    save_and_record(store, root, DatasetSave("v1", dataset()), actor=REVIEWER)
    with pytest.raises(AccessDenied):
        retire_and_record(store, root, "v1", actor=REVIEWER, reason="no")
    assert [e.action for e in store.events("dataset.saved")] == ["dataset.saved"]
    assert store.events("dataset.retired") == [] and not read_summary(root, "v1").retired


def test_a_change_the_trail_cannot_record_is_undone(root: Path, store: Store, monkeypatch):
    def broken(*args, **kwargs):
        raise StoreError("the disk is full")

    save_and_record(store, root, DatasetSave("kept", dataset()), actor=REVIEWER)
    monkeypatch.setattr(store, "record_event", broken)
    with pytest.raises(StoreError, match="disk is full"):
        save_and_record(store, root, DatasetSave("lost", dataset()), actor=REVIEWER)
    with pytest.raises(StoreError, match="disk is full"):
        retire_and_record(store, root, "kept", actor=ADMIN, reason="old")
    assert [s.name for s in list_datasets(root, include_retired=True)] == ["kept"]
    assert not read_summary(root, "kept").retired
    assert in_root(root) == [".lock", "kept"]


def test_a_read_only_store_refuses_before_any_file_is_written(root: Path, tmp_path: Path):
    Store.open(tmp_path / "lens.db").close()
    with (
        Store.open(tmp_path / "lens.db", read_only=True) as store,
        pytest.raises(StoreError, match="read-only"),
    ):
        save_and_record(store, root, DatasetSave("v1", dataset()), actor=REVIEWER)
    assert list_datasets(root) == []


# ---------------------------------------------- recorded before it is seen, whatever crashes


def test_a_save_is_recorded_before_the_data_set_can_be_seen(root: Path, store: Store):
    listed_when_recorded = []
    real = store.record_event

    def spying(*args, **kwargs):
        listed_when_recorded.append([s.name for s in list_datasets(root)])
        return real(*args, **kwargs)

    store.record_event = spying
    save_and_record(store, root, DatasetSave("v1", dataset()), actor=REVIEWER)
    retire_and_record(store, root, "v1", actor=ADMIN, reason="wrong export")
    assert listed_when_recorded == [[], ["v1"]]  # unsaved, then not yet retired


def killed_at_the_record(store: Store, root: Path, change, *, recorded: bool) -> None:
    """Run `change(store, root)` (a save or a retirement) in a forked child that kill -9s
    itself when the trail is asked to record it: after the event was appended, or before."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            child_store = Store.open(store.path)
            real = child_store.record_event

            def then_killed(*args, **kwargs):
                if recorded:
                    real(*args, **kwargs)
                os.kill(os.getpid(), signal.SIGKILL)

            child_store.record_event = then_killed
            change(child_store, root)
        finally:
            os._exit(3)  # only if the kill did not happen
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def save_v2(store: Store, root: Path) -> None:
    save_and_record(store, root, DatasetSave("v2", dataset()), actor=REVIEWER)


def retire_v1(store: Store, root: Path) -> None:
    retire_and_record(store, root, "v1", actor=ADMIN, reason="superseded")


@pytest.mark.parametrize("recorded", [True, False])
def test_a_save_killed_at_its_record_is_finished_or_undone_by_the_trail(
    root: Path, store: Store, recorded: bool
):
    killed_at_the_record(store, root, save_v2, recorded=recorded)
    (left,) = [name for name in in_root(root) if ".v2.saving-" in name]
    assert storage_used(root) > 0  # what a killed save left counts toward the cap
    lines = finish_interrupted_changes(store, datasets_root=root)
    assert len(lines) == 1 and ("finished" in lines[0]) == recorded
    assert [s.name for s in list_datasets(root)] == (["v2"] if recorded else [])
    assert left not in in_root(root) and len(store.events("dataset.saved")) == int(recorded)


@pytest.mark.parametrize("recorded", [True, False])
def test_a_retirement_killed_at_its_record_is_finished_or_undone_by_the_trail(
    root: Path, store: Store, recorded: bool
):
    save_and_record(store, root, DatasetSave("v1", dataset()), actor=REVIEWER)
    killed_at_the_record(store, root, retire_v1, recorded=recorded)
    assert not read_summary(root, "v1").retired  # not in effect until finished
    finish_interrupted_changes(store, datasets_root=root)
    assert read_summary(root, "v1").retired == recorded
    assert in_root(root) == [".lock", "v1"]
    assert not [name for name in in_root(root) if "retiring" in name]
    assert len(store.events("dataset.retired")) == int(recorded)


def test_the_next_save_sweeps_what_a_killed_save_left(root: Path, store: Store):
    killed_at_the_record(store, root, save_v2, recorded=False)
    save_and_record(store, root, DatasetSave("v3", dataset()), actor=REVIEWER)
    assert not [name for name in in_root(root) if "saving" in name]
