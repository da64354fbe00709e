"""The saved data sets' index (core.data.saved_index) and the desk cap (issue 38): a listing, the
Data page's checks and a click parse no summary.json once the index is fresh; an index that is
missing, stale, corrupt or unwritable is rebuilt from the folders and never trusted for loading;
a data set with more desks than GRIEVANCE_LENS_MAX_DESKS is refused in one line."""

from __future__ import annotations

import builtins
import json
import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR, Actor, Role
from core.data.dataset import Dataset
from core.data.limits import IntakeLimits
from core.data.saved import (
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
)
from core.errors import UserError
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV, write_atomically
from core.roles import ROLES_ENV
from tests.helpers import AUTH
from ui.safe import md_escape
from ui.state import ACTIVE_DATASET

ADMIN = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
MAX_DESKS_ENV = "GRIEVANCE_LENS_MAX_DESKS"  # the setting the refusal names (a contract)
TEXTS = ["upi payment failed", "card stolen", "loan emi high", "kyc update please"]
LABELS = ["UPI Dispute", "Card Fraud", "Loan Query", "KYC Update"]
LINEAGE = {"decisions": [11, 12], "verdicts": [5], "relabelled_rows": [3], "excluded_rows": [5],
           "added_rows": [6], "stale": [], "by_reviewer": {"asha@bank.example": 2}}  # fmt: skip
APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.delenv(MAX_DESKS_ENV, raising=False)
    return datasets_root()


@pytest.fixture()
def summary_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every summary.json opened from now on (Path.read_text and read_bytes go through
    Path.open; json.load needs open)."""
    opened: list[Path] = []
    path_open, plain_open = Path.open, builtins.open

    def spied_path_open(self: Path, *args, **kwargs):
        if self.name == SUMMARY_NAME:
            opened.append(self)
        return path_open(self, *args, **kwargs)

    def spied_open(file, *args, **kwargs):
        if isinstance(file, str | os.PathLike) and Path(file).name == SUMMARY_NAME:
            opened.append(Path(file))
        return plain_open(file, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spied_path_open)
    monkeypatch.setattr(builtins, "open", spied_open)
    return opened


def index_file(root: Path) -> Path:
    from core.data.saved_index import INDEX_NAME

    return root / INDEX_NAME


def save_family(root: Path) -> tuple[Dataset, Dataset]:
    """ "v1" (an upload), "v2" derived from it with a lineage, and "old", retired."""
    parent = Dataset(TEXTS, LABELS)
    child = Dataset(TEXTS, ["UPI Dispute", "UPI Dispute", "Loan Query", "KYC Update"])
    save_dataset(root, DatasetSave("v1", parent), actor=OPERATOR)
    save_dataset(root, DatasetSave("v2", child, parent="v1", lineage=LINEAGE), actor=OPERATOR)
    save_dataset(root, DatasetSave("old", Dataset(TEXTS[:2], LABELS[:2])), actor=OPERATOR)
    retire_dataset(root, "old", actor=ADMIN, reason="superseded")
    return parent, child


def described(root: Path) -> list[tuple]:
    return [(e.name, e.rows, e.desks, e.parent, e.retired, e.retired_reason)
            for e in list_datasets(root, include_retired=True)]  # fmt: skip


EXPECTED = [("old", 2, 2, None, True, "superseded"), ("v2", 4, 3, "v1", False, ""),
            ("v1", 4, 4, None, False, "")]  # fmt: skip


# --------------------------------------------------------------------------- a fresh index


def test_a_fresh_index_answers_listing_and_checks_without_reading_a_summary(root, summary_reads):
    parent, child = save_family(root)
    list_datasets(root)  # the first listing after the saves reads them into the index
    summary_reads.clear()
    listed = list_datasets(root, include_retired=True)
    found = (
        find_by_fingerprint(root, child.fingerprint),
        find_by_fingerprint(root, parent.fingerprint),
    )
    children = children_of(root, "v1")
    assert summary_reads == []
    assert [e.name for e in listed] == ["old", "v2", "v1"] and described(root) == EXPECTED
    assert [e.name for e in list_datasets(root)] == ["v2", "v1"]
    assert [e.name for e in found] == ["v2", "v1"] and [e.name for e in children] == ["v2"]
    counts = children[0].lineage
    assert (counts.decisions, counts.verdicts, counts.relabelled_rows, counts.stale) == (2, 1, 1, 0)
    assert counts.by_reviewer == {"asha@bank.example": 2} and summary_reads == []
    # the one data set a page shows in full is read on demand, once
    assert read_summary(root, "v2").lineage == LINEAGE and summary_reads == [
        root / "v2" / SUMMARY_NAME
    ]


def test_a_listing_that_found_nothing_new_writes_nothing(root):
    save_family(root)
    list_datasets(root)
    before = index_file(root).stat()
    list_datasets(root, include_retired=True)
    after = index_file(root).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_lineage_lists_its_busiest_reviewers_only(root, monkeypatch):
    import core.data.saved_index as saved_index

    monkeypatch.setattr(saved_index, "MAX_REVIEWERS_KEPT", 2)
    lineage = {**LINEAGE, "by_reviewer": {"a@x": 1, "b@x": 5, "c@x": 3, "d@x": "many"}}
    save_dataset(root, DatasetSave("v1", Dataset(TEXTS, LABELS)), actor=OPERATOR)
    save_dataset(root, DatasetSave("v2", Dataset(TEXTS, LABELS[::-1]), parent="v1",
                                   lineage=lineage), actor=OPERATOR)  # fmt: skip
    (entry,) = children_of(root, "v1")
    assert entry.lineage.by_reviewer == {"b@x": 5, "c@x": 3}
    assert find_by_fingerprint(root, Dataset(TEXTS, LABELS).fingerprint).lineage is None


# ------------------------------------------------------------------- rebuilt from the folders


def test_folders_saved_before_the_index_still_list(root):
    save_family(root)
    index_file(root).unlink(missing_ok=True)
    assert described(root) == EXPECTED
    assert index_file(root).is_file()  # rebuilt by that listing


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b"[1, 2]",
        b'{"format": "grievance-lens-dataset-index", "version": 99, "records": {}}',
        b"\xff\xfe",
    ],
    ids=["not-json", "not-an-object", "another-version", "not-utf8"],
)
def test_a_corrupt_index_is_rebuilt(root, damage: bytes):
    save_family(root)
    list_datasets(root)
    index_file(root).write_bytes(damage)
    assert described(root) == EXPECTED
    assert json.loads(index_file(root).read_text())["version"] == 1


def test_a_record_of_the_wrong_shape_is_read_again_even_when_its_stamps_match(root):
    save_family(root)
    list_datasets(root)
    index = json.loads(index_file(root).read_text())
    index["records"]["v1"]["summary"]["rows"] = "many"
    del index["records"]["v2"]["summary"]["desks"]
    index["records"]["old"]["retired"] = ["not", "a", "marker"]
    index_file(root).write_text(json.dumps(index))
    assert described(root) == EXPECTED


def test_an_index_over_its_ceiling_is_not_read(root, monkeypatch, summary_reads):
    import core.data.saved_index as saved_index

    save_family(root)
    list_datasets(root)
    size = index_file(root).stat().st_size
    monkeypatch.setattr(saved_index, "MAX_INDEX_BYTES", size - 1)
    summary_reads.clear()
    assert described(root) == EXPECTED
    assert sorted(p.parent.name for p in summary_reads) == ["old", "v1", "v2"]


def test_a_changed_retired_new_or_removed_folder_is_seen(root):
    save_family(root)
    list_datasets(root)
    summary = json.loads((root / "v1" / SUMMARY_NAME).read_text())
    write_atomically(root / "v1" / SUMMARY_NAME, json.dumps({**summary, "rows": 40}).encode())
    retire_dataset(root, "v2", actor=ADMIN, reason="wrong export")
    shutil.rmtree(root / "old")
    save_dataset(root, DatasetSave("v3", Dataset(TEXTS[:3], LABELS[:3])), actor=OPERATOR)
    assert described(root) == [
        ("v3", 3, 3, None, False, ""), ("v2", 4, 3, "v1", True, "wrong export"),
        ("v1", 40, 4, None, False, ""),
    ]  # fmt: skip
    assert sorted(json.loads(index_file(root).read_text())["records"]) == ["v1", "v2", "v3"]


def test_a_summary_rewritten_in_place_is_read_again(root):
    save_dataset(root, DatasetSave("v1", Dataset(TEXTS, LABELS)), actor=OPERATOR)
    list_datasets(root)
    path = root / "v1" / SUMMARY_NAME
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "saved_by": "someone-else"}))  # same inode
    assert list_datasets(root)[0].saved_by == "someone-else"


def test_a_damaged_summary_is_warned_about_at_every_listing_and_parsed_once(root, summary_reads):
    save_family(root)
    (root / "v1" / SUMMARY_NAME).write_text('{"rows": 4}')
    with pytest.warns(UserWarning, match="skipping saved data set 'v1': .*incomplete"):
        assert [e.name for e in list_datasets(root)] == ["v2"]
    summary_reads.clear()
    with pytest.warns(UserWarning, match="skipping saved data set 'v1'"):
        assert [e.name for e in list_datasets(root)] == ["v2"]
    assert summary_reads == []


def test_an_index_that_cannot_be_written_still_lists(root, monkeypatch, caplog):
    import core.data.saved_index as saved_index

    def read_only(path: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    save_family(root)
    monkeypatch.setattr(saved_index, "write_atomically", read_only)
    assert described(root) == EXPECTED
    assert not index_file(root).exists()
    assert "index" in caplog.text and "cannot be written" in caplog.text


def test_the_index_is_never_trusted_for_loading(root):
    parent, _ = save_family(root)
    list_datasets(root)
    index = json.loads(index_file(root).read_text())
    index["records"]["v1"]["summary"].update(fingerprint="0" * 64, size_bytes=1)
    index_file(root).write_text(json.dumps(index))
    dataset, saved = load_dataset(root, "v1")
    assert dataset.fingerprint == saved.fingerprint == parent.fingerprint
    assert read_summary(root, "v1").size_bytes == (root / "v1" / "data.parquet").stat().st_size


# ------------------------------------------------------------------------------- desk cap


def many_desks(n: int) -> Dataset:
    return Dataset([f"complaint {i}" for i in range(n)], [f"desk {i}" for i in range(n)])


def test_more_desks_than_the_setting_allows_are_refused_in_one_line(root, monkeypatch):
    monkeypatch.setenv(MAX_DESKS_ENV, "3")
    with pytest.raises(UserError) as refused:
        save_dataset(root, DatasetSave("wide", Dataset(TEXTS, LABELS)), actor=REVIEWER)
    assert str(refused.value) == (
        "the data set has 4 desks, above the 3 a saved data set may have; check that the label "
        f"column holds desks, not ids or texts, or raise {MAX_DESKS_ENV}"
    )
    assert list_datasets(root) == [] and not (root / "wide").exists()
    monkeypatch.setenv(MAX_DESKS_ENV, "4")
    saved = save_dataset(root, DatasetSave("wide", Dataset(TEXTS, LABELS)), actor=REVIEWER)
    assert saved.desks == 4 and list_datasets(root)[0].desks == 4


def test_by_default_a_thousand_desks_are_allowed_and_no_more(root):
    assert save_dataset(root, DatasetSave("ok", many_desks(1000)), actor=REVIEWER).desks == 1000
    with pytest.raises(UserError, match=r"^the data set has 1,001 desks, above the 1,000 "):
        save_dataset(root, DatasetSave("ids", many_desks(1001)), actor=REVIEWER)


def test_a_bad_desk_setting_is_named():
    assert IntakeLimits.from_env({MAX_DESKS_ENV: " 50 "}).max_desks == 50
    with pytest.raises(UserError, match=f"{MAX_DESKS_ENV} must be a positive whole number"):
        IntakeLimits.from_env({MAX_DESKS_ENV: "lots"})


# --------------------------------------------------------------------------- the Data page


def test_the_data_page_reads_a_summary_only_for_the_data_set_it_loads(
    tmp_path, monkeypatch, summary_reads
):
    roles = tmp_path / "roles.toml"
    roles.write_text('viewer = ["*@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    root = datasets_root()
    save_family(root)
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "vic@bank.example", "email_verified": True}
    at.run()
    summary_reads.clear()
    at.run()  # a click: the list, its lineage and the checks, all from the index
    assert not at.exception and summary_reads == []
    assert f"**{md_escape('v2')}** · 4 rows · 3 desks" in [m.value for m in at.markdown]
    (expander,) = [e for e in at.expander if e.label == "Lineage"]
    assert {m.label: m.value for m in expander.metric} == {
        "Relabelled rows": "1", "Excluded rows": "1", "Added rows": "1"
    }  # fmt: skip
    at.button(key="data.load.v2").click().run()  # loading one reads that one's summary, once
    assert not at.exception and at.session_state[ACTIVE_DATASET].name == "v2"
    assert summary_reads == [root / "v2" / SUMMARY_NAME]
