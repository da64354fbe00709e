"""Schema migration 5: review decisions may "exclude" a row. The decisions table is rebuilt (SQLite
cannot change a CHECK constraint) with its rows, hashes, index and append-only triggers, so a
version-4 store migrates with its chain intact and stays append-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from core.access import OPERATOR
from core.errors import UserError
from core.review.chain import insert_chained, verify_chains
from core.review.records import ReviewDecision
from core.review.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    _run_migration,
    expected_schema,
    schema_of,
)
from core.review.store import Store
from tests.helpers import run_cli

FP = "e" * 64
ROWS = [  # (row, text, given_label, decision, new_label, reviewer)
    (2, "card lost at the mall", "Card Fraud", "keep", None, "asha"),
    (3, "upi failed, money gone", "Other", "relabel", "UPI Dispute", "ravi"),
    (4, "kyc rejected", "KYC Update", "escalate", None, "asha"),
]


def _version_4_file(path: Path) -> None:
    """A store as schema version 4 left it: three chained decisions and their trail events."""
    raw = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:4]:
        _run_migration(raw, migration)
    raw.execute("PRAGMA user_version = 4")
    for i, (row, text, given, decision, new, reviewer) in enumerate(ROWS):
        values = {
            "fingerprint": FP, "row": row, "text": text, "given_label": given,
            "decision": decision, "new_label": new, "reviewer": reviewer, "note": f"n{i}",
            "created_at": f"2025-01-0{i + 1}T00:00:00",
        }  # fmt: skip
        decision_id = insert_chained(raw, "decisions", values)
        event = {"created_at": values["created_at"], "action": "decision.recorded",
                 "entity_id": decision_id, "actor": reviewer, "details": "{}"}  # fmt: skip
        insert_chained(raw, "trail", event)
    raw.close()


@pytest.fixture
def v4(tmp_path: Path) -> Path:
    path = tmp_path / "v4.db"
    _version_4_file(path)
    return path


def _heads(path: Path):
    raw = sqlite3.connect(path)
    try:
        return verify_chains(raw)
    finally:
        raw.close()


def test_a_version_4_store_refuses_exclude_so_the_migration_is_needed(v4: Path):
    raw = sqlite3.connect(v4, isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint"):
        insert_chained(raw, "decisions", {
            "fingerprint": FP, "row": 5, "text": "t", "given_label": "Other",
            "decision": "exclude", "new_label": None, "reviewer": "asha", "note": "",
            "created_at": "2025-01-09T00:00:00",
        })  # fmt: skip
    raw.close()


def test_a_version_4_store_migrates_keeping_rows_hashes_and_chain(v4: Path):
    before = _heads(v4)
    assert before.intact
    with Store.open(v4) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        report = store.verify_chains()
        decisions = store.decisions(FP)
    assert report.intact and report.heads[: len(before.heads)] == before.heads  # same hashes
    assert [(d.id, d.row, d.decision, d.new_label, d.reviewer, d.note) for d in decisions] == [
        (i + 1, row, decision, new, reviewer, f"n{i}")
        for i, (row, _, _, decision, new, reviewer) in enumerate(ROWS)
    ]
    raw = sqlite3.connect(v4)
    assert schema_of(raw) == expected_schema(SCHEMA_VERSION)
    raw.close()
    result = run_cli("verify-store", "--db", str(v4))
    assert result.returncode == 0, result.stderr


def test_an_exclude_decision_is_recorded_chained_and_read_back(v4: Path):
    exclude = ReviewDecision(FP, 5, "not a complaint at all", "Other", "exclude", "asha",
                             note="spam")  # fmt: skip
    with Store.open(v4) as store:
        decision_id = store.record_decision(exclude, actor=OPERATOR)
        assert store.latest_decisions(FP)[5].decision == "exclude"
        assert store.latest_decisions(FP)[5].new_label is None
        assert store.verify_chains().intact
        (event,) = [e for e in store.trail(actor=OPERATOR) if e.entity_id == decision_id
                    and e.action == "decision.recorded"]  # fmt: skip
    assert decision_id == len(ROWS) + 1 and event.details["decision"] == "exclude"
    with pytest.raises(UserError, match="new_label must be None"):
        ReviewDecision(FP, 5, "t", "Other", "exclude", "asha", new_label="UPI Dispute")


def test_the_rebuilt_table_still_refuses_update_delete_replace_and_unhashed_rows(v4: Path):
    Store.open(v4).close()  # migrate
    raw = sqlite3.connect(v4, isolation_level=None)
    refusals = {
        "UPDATE decisions SET decision = 'exclude' WHERE id = 1": "append-only: record a new",
        "DELETE FROM decisions WHERE id = 2": "append-only: rows cannot be deleted",
        "INSERT OR REPLACE INTO decisions (id, fingerprint, row, text, given_label, decision,"
        " reviewer, created_at, hash) VALUES (1, 'x', 2, 't', 'l', 'exclude', 'r', 't', "
        f"'{'0' * 64}')": "rows cannot be replaced",
        "INSERT INTO decisions (fingerprint, row, text, given_label, decision, reviewer,"
        " created_at) VALUES ('x', 2, 't', 'l', 'exclude', 'r', 't')": "a row needs its hash",
        # the pair rule of migration 1 holds for the new decision too
        "INSERT INTO decisions (fingerprint, row, text, given_label, decision, new_label,"
        " reviewer, created_at, hash) VALUES ('x', 2, 't', 'l', 'exclude', 'Other', 'r', 't',"
        f" '{'0' * 64}')": "CHECK constraint",
    }
    for sql, message in refusals.items():
        with pytest.raises(sqlite3.DatabaseError, match=message):
            raw.execute(sql)
    raw.close()
    with Store.open(v4) as store:  # nothing changed: still verifies
        assert store.verify_chains().intact and len(store.decisions(FP)) == len(ROWS)


def test_a_new_store_is_created_at_the_latest_version_and_accepts_exclude(tmp_path: Path):
    with Store.open(tmp_path / "new.db") as store:
        assert store.schema_version == SCHEMA_VERSION
        store.record_decision(
            ReviewDecision(FP, 2, "t", "Other", "exclude", "asha"), actor=OPERATOR
        )
        assert [d.decision for d in store.decisions(FP)] == ["exclude"]
