"""The review store's tamper evidence: INSERT OR REPLACE refused inside the file, every row
hash-chained, the chain verified on open and by `python -m core verify-store`, and stores from
before the chains chained once when they are opened."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.access import OPERATOR
from core.review.records import ReviewDecision, TriageItem
from core.review.schema import MIGRATIONS, SCHEMA_VERSION, _statements
from core.review.store import Store, StoreError
from tests.helpers import run_cli

FP = "f" * 64


def _fill(path: Path) -> None:
    """One row in every table: a decision, a queued and decided item, a run (and their trail)."""
    with Store.open(path) as store:
        store.record_decision(
            ReviewDecision(FP, 2, "card lost", "Card Fraud", "keep", "asha", note="ok"),
            actor=OPERATOR,
        )
        item = TriageItem(
            batch="b", text="upi failed", predicted_label="UPI Dispute", confidence=0.4
        )
        (item_id,) = store.enqueue_triage([item], actor=OPERATOR)
        store.decide_triage(item_id, final_label="Other", reviewer="asha", actor=OPERATOR)
        store.record_run("audit", parameters={"folds": 5}, metrics={"issues": 1}, actor=OPERATOR)


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    path = tmp_path / "lens.db"
    _fill(path)
    return path


# ---------------------------------------------------------------------- INSERT OR REPLACE


H = "'" + "a" * 64 + "'"  # a hash of the right length: only the replace trigger may refuse


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT OR REPLACE INTO decisions (id, fingerprint, row, text, given_label, decision,"
        f" reviewer, note, created_at, hash) VALUES (1, 'x', 2, 't', 'Card Fraud', 'keep',"
        f" 'mallory', '', 't', {H})",
        "REPLACE INTO trail (id, created_at, action, actor, details, hash)"
        f" VALUES (1, 't', 'forged', 'x', '{{}}', {H})",
        "INSERT OR REPLACE INTO triage_items (id, batch, text, predicted_label, confidence,"
        f" probabilities, created_at, hash) VALUES (1, 'b', 't', 'Other', 0.1, '{{}}', 't', {H})",
        "INSERT OR REPLACE INTO triage_decisions (item_id, status, final_label, reviewer,"
        f" created_at, hash) VALUES (1, 'corrected', 'Loan Query', 'mallory', 't', {H})",
        "INSERT OR REPLACE INTO runs (id, kind, parameters, metrics, created_at, hash)"
        f" VALUES (1, 'x', '{{}}', '{{}}', 't', {H})",
    ],
)
def test_insert_or_replace_cannot_overwrite_a_row(filled: Path, statement: str):
    raw = sqlite3.connect(filled)  # a plain connection: recursive_triggers is off
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    raw.close()
    with Store.open(filled) as store:
        assert store.decisions(FP)[0].reviewer == "asha"
        (item,) = store.triage_items()
        assert (item.predicted_label, item.final_label, item.reviewer) == (
            "UPI Dispute", "Other", "asha",
        )  # fmt: skip
        assert [r.kind for r in store.runs()] == ["audit"]
        assert store.trail(actor=OPERATOR)[-1].action == "decision.recorded"


def test_a_row_without_its_hash_is_refused(filled: Path):
    raw = sqlite3.connect(filled)
    with pytest.raises(sqlite3.IntegrityError, match="hash-chained"):
        raw.execute(
            "INSERT INTO runs (kind, parameters, metrics, created_at) VALUES ('x', '{}', '{}', 't')"
        )
    raw.close()


# ---------------------------------------------------------------------- the chain


def test_every_row_is_chained_and_the_chain_verifies(filled: Path):
    with Store.open(filled) as store:
        report = store.verify_chains()
    assert report.intact and report.broken is None
    rows = {head.table: head.rows for head in report.heads if head.rows}
    assert rows == {"decisions": 1, "trail": 4, "triage_items": 1, "triage_decisions": 1, "runs": 1}
    assert all(len(head.head) == 64 and head.head != "0" * 64 for head in report.heads if head.rows)


def _edit_behind_the_triggers(path: Path, edit: str) -> None:
    """What someone with write access to the file can do: drop the no-update trigger, edit a
    row, and re-create the trigger with exactly the text it had, so the schema check passes."""
    raw = sqlite3.connect(path, isolation_level=None)
    table = edit.split()[1]
    name = f"{table}_no_update"
    (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    raw.execute(f"DROP TRIGGER {name}")
    raw.execute(edit)
    raw.execute(sql)
    raw.close()


@pytest.mark.parametrize(
    ("edit", "table"),
    [
        ("UPDATE decisions SET decision = 'escalate' WHERE id = 1", "decisions"),
        ("UPDATE trail SET actor = 'someone else' WHERE id = 2", "trail"),
        ("UPDATE triage_decisions SET final_label = 'Loan Query' WHERE id = 1", "triage_decisions"),
    ],
)
def test_an_edit_behind_re_created_triggers_is_refused_on_open(filled: Path, edit, table):
    _edit_behind_the_triggers(filled, edit)
    with pytest.raises(StoreError, match="tamper") as caught:
        Store.open(filled)
    message = str(caught.value)
    row_id = edit.rsplit("=", 1)[1].strip()
    assert f"table {table}, row id {row_id}" in message and "\n" not in message


def test_a_row_removed_behind_the_triggers_breaks_the_chain_at_the_next_row(tmp_path: Path):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        for row in (2, 3, 4):
            decision = ReviewDecision(FP, row, f"row {row}", "Card Fraud", "keep", "asha")
            store.record_decision(decision, actor=OPERATOR)
    raw = sqlite3.connect(path, isolation_level=None)
    (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'decisions_no_delete'")
    raw.execute("DROP TRIGGER decisions_no_delete")
    raw.execute("DELETE FROM decisions WHERE id = 2")
    raw.execute(sql[0])
    raw.close()
    with pytest.raises(StoreError, match="table decisions, row id 3"):
        Store.open(path)


# ---------------------------------------------------------------------- verify-store


def test_verify_store_says_intact_and_names_each_chain_head(filled: Path):
    result = run_cli("verify-store", "--db", str(filled), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["intact"] is True and document["broken"] is None
    assert document["tables"]["trail"]["rows"] == 4
    assert len(document["tables"]["decisions"]["head"]) == 64
    plain = run_cli("verify-store", "--db", str(filled))
    assert plain.returncode == 0 and "intact" in plain.stdout


def test_verify_store_exits_1_naming_the_first_broken_link(filled: Path):
    _edit_behind_the_triggers(filled, "UPDATE runs SET metrics = '{}' WHERE id = 1")
    result = run_cli("verify-store", "--db", str(filled), "--json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["intact"] is False
    assert document["broken"] == {"table": "runs", "row_id": 1}
    plain = run_cli("verify-store", "--db", str(filled))
    assert plain.returncode == 1 and "table runs, row id 1" in plain.stdout + plain.stderr


def test_verify_store_exits_1_when_a_trigger_was_dropped(filled: Path):
    raw = sqlite3.connect(filled, isolation_level=None)
    raw.execute("DROP TRIGGER decisions_no_update")
    raw.close()
    result = run_cli("verify-store", "--db", str(filled))
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "decisions_no_update" in result.stderr


def test_verify_store_refuses_a_missing_file_in_one_line(tmp_path: Path):
    result = run_cli("verify-store", "--db", str(tmp_path / "nothing.db"))
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert not (tmp_path / "nothing.db").exists()  # verifying never creates a store


# ---------------------------------------------------------------------- migration


def _version_3_file(path: Path) -> None:
    """A store as schema version 3 left it (before the chains): a row in every table."""
    raw = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:3]:
        for statement in _statements(script):
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 3")
    raw.executescript(
        f"""
        INSERT INTO decisions (fingerprint, row, text, given_label, decision, reviewer, created_at)
            VALUES ('{FP}', 2, 'card lost', 'Card Fraud', 'keep', 'asha', 't0');
        INSERT INTO trail (created_at, action, entity_id, actor, details)
            VALUES ('t0', 'decision.recorded', 1, 'asha', '{{}}');
        INSERT INTO trail (created_at, action, entity_id, actor, details)
            VALUES ('t1', 'run.recorded', 1, NULL, '{{}}');
        INSERT INTO triage_items (batch, row, text, predicted_label, confidence, probabilities,
            created_at) VALUES ('b', 7, 'upi failed', 'UPI Dispute', 0.4, '{{}}', 't1');
        INSERT INTO triage_decisions (item_id, status, final_label, reviewer, created_at)
            VALUES (1, 'corrected', 'Other', 'ben', 't2');
        INSERT INTO runs (kind, parameters, metrics, created_at) VALUES ('a', '{{}}', '{{}}', 't0');
        """
    )
    raw.close()


def test_an_old_store_is_chained_once_on_open_and_then_verifies(tmp_path: Path):
    path = tmp_path / "v3.db"
    _version_3_file(path)
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        report = store.verify_chains()
        assert [d.reviewer for d in store.decisions(FP)] == ["asha"]
        assert store.triage_items()[0].final_label == "Other"
    assert report.intact and {h.table: h.rows for h in report.heads}["trail"] == 2
    raw = sqlite3.connect(path)
    hashes = raw.execute("SELECT hash FROM decisions UNION ALL SELECT hash FROM trail").fetchall()
    raw.close()
    assert len(hashes) == 3 and all(h[0] is not None and len(h[0]) == 64 for h in hashes)
    assert run_cli("verify-store", "--db", str(path)).returncode == 0
    with Store.open(path) as store:  # a second open migrates nothing and still verifies
        assert store.verify_chains().heads == report.heads
        store.record_run("audit", parameters={}, metrics={}, actor=OPERATOR)
        assert store.verify_chains().intact
