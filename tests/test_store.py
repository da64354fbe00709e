"""Tests for core.review: the SQLite review store, its append-only trail, the triage queue and
apply_decisions.

Spawned writer processes import this module, so it imports only the store at the top; pandas,
core.data (which pulls in scikit-learn) are imported by the tests that use them.
"""

import io
import multiprocessing
import random
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.access import OPERATOR, Actor, Role
from core.paths import DATA_DIR_ENV
from core.review.records import ReviewDecision, TriageItem
from core.review.relabel import apply_decisions, plan_carry_over
from core.review.schema import SCHEMA_VERSION, switch_to_wal
from core.review.store import DB_NAME, Store, StoreBusyError, StoreError, default_db_path
from core.review.triage import (
    enqueue_uncertain,
    triage_batch_id,
    triage_training_rows,
    with_training_rows,
)

FP = "f" * 64


def _decision(row: int = 2, **changes) -> ReviewDecision:
    values = dict(
        fingerprint=FP,
        row=row,
        text=f"complaint on row {row}",
        given_label="Card Fraud",
        decision="keep",
        reviewer="asha",
    )
    return ReviewDecision(**{**values, **changes})


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


# ------------------------------------------------------------------------------ opening the file


def test_open_creates_missing_folders_file_and_schema(tmp_path):
    path = tmp_path / "not" / "yet" / "there.db"
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION >= 1
        assert store.integrity_check() == "ok"
    assert path.is_file()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {
        "decisions", "trail", "triage_items", "triage_decisions", "runs",
        "api_tokens", "api_token_revocations", "inbox", "inbox_requests", "inbox_resolutions",
    }  # fmt: skip


def test_open_on_an_empty_existing_file(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        store.record_decision(_decision(), actor=OPERATOR)
        assert len(store.decisions(FP)) == 1


def test_reopening_keeps_schema_and_runs_no_migration_twice(tmp_path):
    path = tmp_path / "lens.db"
    for _ in range(2):
        with Store.open(path) as store:
            store.record_decision(_decision(), actor=OPERATOR)
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert len(store.decisions(FP)) == 2


def test_busy_timeout_and_foreign_keys_are_set(store):
    assert store._query("PRAGMA busy_timeout")[0][0] >= 1000
    assert store._query("PRAGMA foreign_keys")[0][0] == 1


# ------------------------------------------------------------- a store another process holds


@pytest.fixture
def short_busy_timeout(monkeypatch):
    """A busy timeout short enough that waiting it out takes a tenth of a second."""
    from core.review import schema
    from core.review import store as store_module

    for module in (schema, store_module):
        monkeypatch.setattr(module, "BUSY_TIMEOUT_S", 0.1)


@pytest.fixture
def held(tmp_path, short_busy_timeout):
    """A store file another connection holds in a write transaction (BEGIN EXCLUSIVE)."""
    path = tmp_path / "lens.db"
    Store.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    yield path, holder
    holder.close()


def test_a_store_held_by_another_process_is_busy_not_broken(held):
    path, holder = held
    with pytest.raises(StoreBusyError) as caught:
        Store.open(path)
    message = str(caught.value)
    assert isinstance(caught.value, StoreError)  # a UserError: one line, exit code 2
    assert message == (
        f"the review store {path} is busy: another process holds it (database is locked); "
        "try again in a moment"
    )
    assert "not a readable" not in message and "move it aside" not in message
    holder.execute("ROLLBACK")  # once the other process lets go, the same file opens as it was
    with Store.open(path) as store:
        assert store.verify_chains().intact


def test_a_write_that_times_out_on_the_lock_is_busy_not_a_raw_sqlite_error(
    tmp_path, short_busy_timeout
):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreBusyError, match="is busy: another process holds it"):
                store.record_decision(_decision(), actor=OPERATOR)
        finally:
            holder.close()
        assert store.decisions(FP) == []  # nothing half-written; the next write goes through
        store.record_decision(_decision(), actor=OPERATOR)
        assert len(store.decisions(FP)) == 1


def test_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "state"))
    assert default_db_path() == tmp_path / "state" / DB_NAME
    with Store.open() as store:
        assert store.path == tmp_path / "state" / DB_NAME
    assert (tmp_path / "state" / DB_NAME).is_file()


def test_default_path_without_environment_is_data_lens_db(monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert default_db_path().parts[-2:] == ("data", DB_NAME)


def test_a_folder_is_not_a_database_path(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        Store.open(tmp_path)


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ValueError, match="newer than this code"):
        Store.open(path)


def test_a_corrupt_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "lens.db"
    path.write_bytes(random.Random(0).randbytes(8192))
    with pytest.raises(StoreError, match="is not a readable review store") as caught:
        Store.open(path)
    assert "\n" not in str(caught.value) and "restore a backup" in str(caught.value)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("DROP TRIGGER trail_no_delete", "trigger trail_no_delete is missing"),
        ("DROP TRIGGER decisions_no_update", "trigger decisions_no_update is missing"),
        (
            "DROP TRIGGER runs_no_update; CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs"
            " BEGIN SELECT 1; END",
            "trigger runs_no_update was altered",
        ),
        (
            "CREATE TRIGGER wipe AFTER INSERT ON decisions BEGIN SELECT 1; END",
            "unexpected trigger wipe",
        ),
        ("DROP INDEX decisions_by_row", "index decisions_by_row is missing"),
    ],
)
def test_a_store_whose_triggers_were_dropped_or_altered_is_refused(tmp_path, tamper, message):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        store.record_decision(_decision(), actor=OPERATOR)
    with sqlite3.connect(path) as raw:
        raw.executescript(tamper)
    raw.close()
    with pytest.raises(StoreError, match=message) as caught:
        Store.open(path)
    assert "\n" not in str(caught.value) and "not an intact review store" in str(caught.value)


@pytest.fixture
def read_only_file(tmp_path):
    """A store with one decision whose file (and, as `chmod_folder`, folder) is read-only."""
    path = tmp_path / "ro" / "lens.db"
    with Store.open(path) as store:
        store.record_decision(_decision(), actor=OPERATOR)
    yield path
    path.parent.chmod(0o755)
    path.chmod(0o644)


@pytest.mark.parametrize("folder_too", [False, True])
def test_a_read_only_store_is_read_and_refuses_writes(read_only_file, folder_too):
    read_only_file.chmod(0o444)
    if folder_too:
        read_only_file.parent.chmod(0o555)
    before = read_only_file.read_bytes()
    with Store.open(read_only_file) as store:
        assert store.read_only
        assert [d.reviewer for d in store.decisions(FP)] == ["asha"]
        assert [e.action for e in store.trail(actor=OPERATOR)] == ["decision.recorded"]
        with pytest.raises(StoreError, match="is read-only.*nothing was saved"):
            store.record_decision(_decision(row=3), actor=OPERATOR)
        with pytest.raises(StoreError, match="is read-only"):
            store.enqueue_triage([_item()], actor=OPERATOR)
    assert read_only_file.read_bytes() == before


def test_read_only_on_request_and_never_migrated(tmp_path):
    path = tmp_path / "v1.db"
    _version_1_file(path)
    with pytest.raises(StoreError, match="schema version 1 and is read-only"):
        Store.open(path, read_only=True)
    with Store.open(path) as store:  # writable: migrated
        store.record_decision(_decision(), actor=OPERATOR)
    with Store.open(path, read_only=True) as store:
        assert store.read_only and len(store.decisions(FP)) == 2
        with pytest.raises(StoreError, match="read-only"):
            store.record_run("audit", parameters={}, metrics={}, actor=OPERATOR)


# ------------------------------------------------------------------------------ review decisions


def test_decision_round_trip(store):
    given = _decision(decision="relabel", new_label="UPI Dispute", note="mentions a UPI ref")
    decision_id = store.record_decision(given, actor=OPERATOR)
    (stored,) = store.decisions(FP)
    assert stored.id == decision_id
    assert stored == ReviewDecision(
        **{**given.__dict__, "id": decision_id, "created_at": stored.created_at}
    )
    created = datetime.fromisoformat(stored.created_at)
    assert created.utcoffset() == timedelta(0)
    assert store.decisions("0" * 64) == []


def test_latest_decision_per_row_wins(store):
    store.record_decision(_decision(row=2, decision="escalate"), actor=OPERATOR)
    store.record_decision(_decision(row=3), actor=OPERATOR)
    store.record_decision(
        _decision(row=2, decision="relabel", new_label="Other", reviewer="ben"), actor=OPERATOR
    )
    latest = store.latest_decisions(FP)
    assert set(latest) == {2, 3}
    assert (latest[2].decision, latest[2].new_label, latest[2].reviewer) == (
        "relabel",
        "Other",
        "ben",
    )
    assert [d.decision for d in store.decisions(FP)] == ["escalate", "keep", "relabel"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"reviewer": "  "}, "reviewer"),
        ({"reviewer": ""}, "reviewer"),
        ({"decision": "delete"}, "decision must be one of"),
        ({"decision": "relabel"}, "needs new_label"),
        ({"decision": "relabel", "new_label": " "}, "needs new_label"),
        ({"decision": "keep", "new_label": "Other"}, "new_label must be None"),
        ({"row": 0}, "1-based"),
        ({"fingerprint": ""}, "fingerprint"),
        ({"given_label": ""}, "given_label"),
    ],
)
def test_invalid_decisions_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        _decision(**changes)


def test_schema_rejects_a_relabel_without_new_label_even_bypassing_python(store):
    with pytest.raises(sqlite3.IntegrityError):
        store._conn.execute(
            "INSERT INTO decisions (fingerprint, row, text, given_label, decision, reviewer,"
            " created_at) VALUES ('x', 2, 't', 'A', 'relabel', 'asha', 'now')"
        )


def test_record_decision_needs_a_review_decision(store):
    with pytest.raises(TypeError, match="ReviewDecision"):
        store.record_decision({"row": 2}, actor=OPERATOR)


def test_a_decision_survives_closing_and_reopening(tmp_path):
    path = tmp_path / "lens.db"
    store = Store.open(path)
    store.record_decision(_decision(decision="relabel", new_label="KYC Update"), actor=OPERATOR)
    store.close()  # the app restarts
    with Store.open(path) as reopened:
        (decision,) = reopened.decisions(FP)
    assert decision.new_label == "KYC Update"


def test_a_committed_decision_is_on_disk_before_close(tmp_path):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        store.record_decision(_decision(), actor=OPERATOR)
        # another connection (as after a crash of this process) sees the committed row
        with sqlite3.connect(path) as raw:
            assert raw.execute("SELECT count(*) FROM decisions").fetchone()[0] == 1


# ------------------------------------------------------------------------------ audit trail


def test_every_write_appends_a_trail_event(store):
    store.record_decision(_decision(), actor=OPERATOR)
    store.enqueue_triage([_item()], actor=OPERATOR)
    store.record_run("audit", parameters={"folds": 5}, metrics={"issues": 3}, actor=OPERATOR)
    actions = [e.action for e in store.trail(actor=OPERATOR)]
    assert actions == ["run.recorded", "triage.enqueued", "decision.recorded"]
    assert store.trail(actor=OPERATOR)[-1].details["reviewer"] == "asha"
    assert len(store.trail(limit=1, actor=OPERATOR)) == 1


@pytest.mark.parametrize(
    "statement",
    ["UPDATE trail SET action = 'forged'", "DELETE FROM trail", "DELETE FROM trail WHERE id = 1"],
)
def test_trail_rows_can_never_be_updated_or_deleted(tmp_path, statement):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        store.record_decision(_decision(), actor=OPERATOR)
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    raw.close()
    with Store.open(path) as store:
        assert [e.action for e in store.trail(actor=OPERATOR)] == ["decision.recorded"]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE decisions SET reviewer = 'mallory'",
        "DELETE FROM decisions",
        "UPDATE triage_items SET predicted_label = 'Other'",
        "DELETE FROM triage_items",
        "UPDATE triage_decisions SET final_label = 'Other'",
        "DELETE FROM triage_decisions",
        "UPDATE runs SET metrics = '{}'",
        "DELETE FROM runs",
    ],
)
def test_every_table_is_append_only(tmp_path, statement):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        store.record_decision(_decision(), actor=OPERATOR)
        (item_id,) = store.enqueue_triage([_item()], actor=OPERATOR)
        store.decide_triage(item_id, final_label="Other", reviewer="asha", actor=OPERATOR)
        store.record_run("audit", parameters={}, metrics={"issues": 1}, actor=OPERATOR)
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    raw.close()
    with Store.open(path) as store:
        assert store.decisions(FP)[0].reviewer == "asha"
        (item,) = store.triage_items()
        assert (item.status, item.final_label, item.reviewer) == ("corrected", "Other", "asha")
        assert len(store.runs()) == 1


def _version_1_file(path) -> None:
    """A store as version 1 of the schema left it: a decision, a run, a decided and an open
    triage item (decided by UPDATE, as version 1 did)."""
    from core.review.schema import MIGRATIONS, _statements

    raw = sqlite3.connect(path, isolation_level=None)
    for statement in _statements(MIGRATIONS[0]):
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.execute(
        "INSERT INTO decisions (fingerprint, row, text, given_label, decision, reviewer,"
        f" created_at) VALUES ('{FP}', 2, 'card lost', 'Card Fraud', 'keep', 'asha', 't0')"
    )
    raw.execute(
        "INSERT INTO runs (kind, parameters, metrics, created_at) VALUES ('a', '{}', '{}', 't0')"
    )
    for row in (7, 8):
        raw.execute(
            "INSERT INTO triage (batch, row, text, predicted_label, confidence, probabilities,"
            f" created_at) VALUES ('b', {row}, 'upi failed', 'UPI Dispute', 0.4, '{{}}', 't1')"
        )
    raw.execute(
        "UPDATE triage SET status = 'corrected', final_label = 'Other', reviewer = 'ben',"
        " decided_at = 't2' WHERE row = 7"
    )
    raw.close()


def test_a_version_1_store_is_migrated_keeping_every_row(tmp_path):
    path = tmp_path / "v1.db"
    _version_1_file(path)
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        assert [(d.row, d.reviewer) for d in store.decisions(FP)] == [(2, "asha")]
        assert [r.kind for r in store.runs()] == ["a"]
        decided, waiting = store.triage_items()
        assert (decided.row, decided.status, decided.final_label) == (7, "corrected", "Other")
        assert (decided.reviewer, decided.decided_at) == ("ben", "t2")
        assert (waiting.row, waiting.status, waiting.reviewer) == (8, "open", None)
        assert decided.decided_by == waiting.decided_by == "transformer"  # before blends
        store.decide_triage(waiting.id, final_label="UPI Dispute", reviewer="asha", actor=OPERATOR)
        assert store.open_triage() == []
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store._query("UPDATE decisions SET reviewer = 'mallory'")


# ------------------------------------------------------------------------------ concurrency


def _write_decisions(path: str, worker: int, count: int) -> None:
    """Open a store and record `count` decisions on rows of this worker (thread or process)."""
    with Store.open(path) as store:
        for i in range(count):
            store.record_decision(
                _decision(row=2 + worker * 1000 + i, reviewer=f"w{worker}"), actor=OPERATOR
            )


def _check_all_written(path, workers: int, count: int) -> None:
    with Store.open(path) as store:
        rows = sorted(d.row for d in store.decisions(FP))
        assert rows == sorted(2 + w * 1000 + i for w in range(workers) for i in range(count))
        assert len(store.trail(limit=10_000, actor=OPERATOR)) == workers * count
        assert store.integrity_check() == "ok"


def test_four_threads_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "lens.db")
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            _write_decisions(path, worker, 50)
        except BaseException as err:  # collected and re-raised in the main thread below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    _check_all_written(path, 4, 50)


def test_one_store_shared_by_threads(store):
    def work(worker: int) -> None:
        for i in range(25):
            store.record_decision(_decision(row=2 + worker * 1000 + i), actor=OPERATOR)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.decisions(FP)) == 100
    assert len({d.id for d in store.decisions(FP)}) == 100


def test_three_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "lens.db")
    Store.open(path).close()  # schema first, so the workers race on writes, not on creation
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_decisions, args=(path, w, 50)) for w in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    _check_all_written(path, 3, 50)


def test_processes_racing_to_create_the_schema(tmp_path):
    path = str(tmp_path / "fresh" / "lens.db")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_decisions, args=(path, w, 5)) for w in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0]
    _check_all_written(path, 2, 5)


# ------------------------------------------------------------------------------ triage queue


def _item(**changes) -> TriageItem:
    values = dict(
        batch="classify-1",
        text="paisa kat gaya but merchant ko nahi mila",
        predicted_label="UPI Dispute",
        confidence=0.41,
        probabilities={"UPI Dispute": 0.41, "Card Fraud": 0.39, "Other": 0.2},
        row=7,
    )
    return TriageItem(**{**values, **changes})


def test_triage_lifecycle(store):
    ids = store.enqueue_triage(
        [_item(), _item(row=8), _item(row=9, batch="classify-2")], actor=OPERATOR
    )
    assert len(set(ids)) == 3
    assert [i.row for i in store.open_triage()] == [7, 8, 9]
    assert [i.row for i in store.open_triage(batch="classify-1")] == [7, 8]
    first = store.open_triage()[0]
    assert first.probabilities == {"UPI Dispute": 0.41, "Card Fraud": 0.39, "Other": 0.2}
    assert (first.status, first.final_label, first.decided_at) == ("open", None, None)

    confirmed = store.decide_triage(
        ids[0], final_label="UPI Dispute", reviewer="asha", actor=OPERATOR
    )
    corrected = store.decide_triage(
        ids[1], final_label="Card Fraud", reviewer="ben", actor=OPERATOR
    )
    assert (confirmed.status, confirmed.final_label, confirmed.reviewer) == (
        "confirmed",
        "UPI Dispute",
        "asha",
    )
    assert (corrected.status, corrected.final_label) == ("corrected", "Card Fraud")
    assert corrected.decided_at is not None
    assert [i.id for i in store.open_triage()] == [ids[2]]
    assert [i.id for i in store.triage_items(status="corrected")] == [ids[1]]
    assert store.trail(actor=OPERATOR)[0].details["status"] == "corrected"


def test_a_triage_item_is_decided_once(store):
    (item_id,) = store.enqueue_triage([_item()], actor=OPERATOR)
    store.decide_triage(item_id, final_label="Other", reviewer="asha", actor=OPERATOR)
    with pytest.raises(ValueError, match="already corrected"):
        store.decide_triage(item_id, final_label="UPI Dispute", reviewer="ben", actor=OPERATOR)
    with pytest.raises(ValueError, match="no triage item"):
        store.decide_triage(item_id + 100, final_label="Other", reviewer="ben", actor=OPERATOR)
    with pytest.raises(ValueError, match="reviewer"):
        store.decide_triage(item_id, final_label="Other", reviewer=" ", actor=OPERATOR)


def test_racing_reviewers_decide_a_triage_item_exactly_once(tmp_path):
    path = tmp_path / "lens.db"
    with Store.open(path) as store:
        (item_id,) = store.enqueue_triage([_item()], actor=OPERATOR)
    outcomes: list[str] = []

    def work(reviewer: str) -> None:
        with Store.open(path) as mine:
            try:
                mine.decide_triage(item_id, final_label="Other", reviewer=reviewer, actor=OPERATOR)
                outcomes.append("decided")
            except ValueError:
                outcomes.append("refused")

    threads = [threading.Thread(target=work, args=(f"r{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["decided", "refused", "refused", "refused"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"predicted_label": ""}, "predicted_label"),
        ({"batch": ""}, "batch"),
        ({"probabilities": {"A": "high"}}, "probabilities"),
        ({"status": "done"}, "status"),
    ],
)
def test_invalid_triage_items_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        _item(**changes)


def test_only_open_items_can_be_enqueued(store):
    with pytest.raises(ValueError, match="open"):
        store.enqueue_triage([_item(status="confirmed", final_label="Other")], actor=OPERATOR)
    assert store.open_triage() == []


# ------------------------------------------------------------------------------ run history


def test_run_history_round_trip(store):
    first = store.record_run(
        "train", parameters={"epochs": 3}, metrics={"macro_f1": 0.91}, actor=OPERATOR
    )
    second = store.record_run(
        "audit", parameters={"folds": 5}, metrics={"issues": 12}, actor=OPERATOR
    )
    assert [r.id for r in store.runs()] == [second, first]
    (audit,) = store.runs(kind="audit")
    assert (audit.parameters, audit.metrics) == ({"folds": 5}, {"issues": 12})
    with pytest.raises(ValueError, match="JSON"):
        store.record_run("train", parameters={"model": object()}, metrics={}, actor=OPERATOR)
    with pytest.raises(ValueError, match="kind"):
        store.record_run("", parameters={}, metrics={}, actor=OPERATOR)
    assert len(store.runs()) == 2


# ------------------------------------------------------------------------------ apply_decisions


def _dataset():
    import pandas as pd

    from core.data.dataset import Dataset

    return Dataset(
        texts=("card blocked", '=HYPERLINK("http://x")', "upi failed", "kyc pending"),
        labels=("Card Fraud", "Other", "Card Fraud", "KYC Update"),
        extra=pd.DataFrame({"channel": ["app", "email", "chat", "branch"]}),
    )


def test_apply_decisions_relabels_and_says_what_changed():
    data = _dataset()
    fp = data.fingerprint
    decisions = [
        _decision(row=4, fingerprint=fp, text="upi failed", decision="escalate"),
        _decision(
            row=4, fingerprint=fp, text="upi failed", decision="relabel", new_label="UPI Dispute"
        ),
        _decision(row=2, fingerprint=fp, text="card blocked"),
        _decision(
            row=5, fingerprint=fp, text="kyc pending", given_label="KYC Update", decision="escalate"
        ),
    ]
    frame = apply_decisions(data, decisions, actor=OPERATOR)
    assert list(frame.columns) == ["row", "text", "label", "original_label", "review", "channel"]
    assert frame["label"].tolist() == ["Card Fraud", "Other", "UPI Dispute", "KYC Update"]
    assert frame["original_label"].tolist() == list(data.labels)
    assert frame["review"].tolist() == ["kept", "", "relabelled from Card Fraud", "escalated"]
    assert frame["channel"].tolist() == ["app", "email", "chat", "branch"]


def test_apply_decisions_accepts_latest_decisions_from_the_store(store):
    data = _dataset()
    relabel = _decision(
        row=3,
        fingerprint=data.fingerprint,
        text='=HYPERLINK("http://x")',
        given_label="Other",
        decision="relabel",
        new_label="Card Fraud",
    )
    store.record_decision(relabel, actor=OPERATOR)
    frame = apply_decisions(data, store.latest_decisions(data.fingerprint), actor=OPERATOR)
    assert frame.loc[1, "label"] == "Card Fraud"
    assert frame.loc[1, "review"] == "relabelled from Other"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fingerprint": "0" * 64}, "not this one"),
        ({"row": 99}, "not in this data set"),
        ({"given_label": "Other"}, "row 2 is labelled 'Card Fraud'.*review the row again"),
        ({"text": "upi failed"}, "row 2 now holds 'card blocked'.*review the row again"),
    ],
)
def test_apply_decisions_refuses_decisions_of_other_data(changes, message):
    data = _dataset()
    values = {"fingerprint": data.fingerprint, "text": "card blocked", **changes}
    decision = _decision(**values)
    with pytest.raises(ValueError, match=message):
        apply_decisions(data, [decision], actor=OPERATOR)


def _card_files():
    """The same complaints before and after a blank row 2 was removed from the file."""
    from core.data.dataset import Dataset

    texts = ("someone used my card abroad", "card blocked without reason")
    labels = ("Card Fraud", "Card Fraud")
    return Dataset(texts, labels, rows=(3, 4)), Dataset(texts, labels, rows=(2, 3))


def test_a_relabel_never_lands_on_the_complaint_that_moved_into_its_row(store):
    before, after = _card_files()
    store.record_decision(
        _decision(
            row=3,
            fingerprint=before.fingerprint,
            text="someone used my card abroad",
            decision="relabel",
            new_label="Other",
        ),
        actor=OPERATOR,
    )
    assert before.fingerprint != after.fingerprint
    frame = apply_decisions(after, store.latest_decisions(after.fingerprint), actor=OPERATOR)
    assert frame["label"].tolist() == ["Card Fraud", "Card Fraud"]
    moved = [replace(d, fingerprint=after.fingerprint) for d in store.decisions(before.fingerprint)]
    with pytest.raises(ValueError, match="row 3 now holds 'card blocked without reason'"):
        apply_decisions(after, moved, actor=OPERATOR)


def test_decisions_under_the_legacy_fingerprint_are_carried_over_only_where_rows_still_fit(store):
    before, after = _card_files()
    legacy = after.legacy_fingerprint
    fits = _decision(row=2, fingerprint=legacy, text="someone used my card abroad", note="abroad")
    moved = _decision(row=2, fingerprint=legacy, text="card blocked without reason")
    first, second = (
        store.record_decision(fits, actor=OPERATOR),
        store.record_decision(moved, actor=OPERATOR),
    )
    plan = plan_carry_over(
        after, store.decisions(legacy), store.decisions(after.fingerprint), actor=OPERATOR
    )
    assert [d.id for d in plan.mismatched] == [second] and plan.mismatched_rows == [2]
    (copy,) = plan.pending
    assert (copy.fingerprint, copy.row, copy.reviewer) == (after.fingerprint, 2, "asha")
    assert copy.note == f"abroad (carried over from decision #{first})"
    store.record_decision(copy, actor=OPERATOR)
    again = plan_carry_over(
        after, store.decisions(legacy), store.decisions(after.fingerprint), actor=OPERATOR
    )
    assert (again.pending, again.carried) == ((), 1)
    frame = apply_decisions(after, store.latest_decisions(after.fingerprint), actor=OPERATOR)
    assert frame["review"].tolist() == ["kept", ""]


def test_corrected_export_neutralises_formula_looking_text():
    import openpyxl
    import pandas as pd

    from core.data.export import to_csv_bytes, to_xlsx_bytes

    data = _dataset()
    keep = _decision(
        row=3,
        fingerprint=data.fingerprint,
        text=data.texts[1],
        given_label="Other",
        decision="keep",
    )
    frame = apply_decisions(data, [keep], actor=OPERATOR)
    read_back = pd.read_csv(io.StringIO(to_csv_bytes(frame).decode("utf-8-sig")))
    assert read_back.loc[1, "text"] == '\'=HYPERLINK("http://x")'
    assert read_back.loc[1, "review"] == "kept"
    sheet = openpyxl.load_workbook(io.BytesIO(to_xlsx_bytes(frame))).active
    texts = [row[1] for row in sheet.iter_rows(min_row=2, values_only=True)]
    assert texts[1] == '\'=HYPERLINK("http://x")'
    assert sheet.cell(row=3, column=2).data_type == "s"  # a string, never a formula


# ------------------------------------------------------------------------ uncertain predictions


class _Prediction:
    """Shaped like core.models.classifier.Prediction (label, confidence, probabilities)."""

    def __init__(self, label: str, confidence: float) -> None:
        self.label, self.confidence = label, confidence
        self.probabilities = {label: confidence, "Other": round(1 - confidence, 6)}


def test_enqueue_uncertain_queues_only_predictions_below_the_threshold(store):
    texts = ["upi failed", "card stolen", "kyc?", "loan emi"]
    predictions = [
        _Prediction("UPI Dispute", 0.41),
        _Prediction("Card Fraud", 0.95),
        _Prediction("KYC Update", 0.5),  # at the threshold: confident enough
        _Prediction("Loan Query", 0.2),
    ]
    ids = enqueue_uncertain(
        store,
        texts,
        predictions,
        threshold=0.5,
        batch="file.csv · abc",
        rows=[2, 3, 4, 5],
        actor=OPERATOR,
    )
    queued = store.open_triage()
    assert [i.id for i in queued] == ids and len(ids) == 2
    assert [(i.row, i.text, i.predicted_label) for i in queued] == [
        (2, "upi failed", "UPI Dispute"),
        (5, "loan emi", "Loan Query"),
    ]
    assert queued[0].probabilities == {"UPI Dispute": 0.41, "Other": 0.59}
    assert queued[0].confidence == pytest.approx(0.41) and queued[0].batch == "file.csv · abc"
    assert [e.action for e in store.trail(limit=2, actor=OPERATOR)] == ["triage.enqueued"] * 2


def test_enqueued_items_say_which_model_made_the_call(store, tmp_path):
    texts, predictions = ["upi failed", "card gone"], [_Prediction("UPI Dispute", 0.3)] * 2
    enqueue_uncertain(store, texts[:1], predictions[:1], threshold=0.6, batch="a", actor=OPERATOR)
    enqueue_uncertain(store, texts[1:], predictions[1:], threshold=0.6, batch="b",
                      decided_by="blend", actor=OPERATOR)  # fmt: skip
    queued = [(i.batch, i.decided_by) for i in store.open_triage()]
    assert queued == [("a", "transformer"), ("b", "blend")]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store._query("UPDATE triage_items SET decided_by = 'transformer'")


def test_enqueue_uncertain_twice_queues_each_row_once(store):
    texts, predictions = ["upi failed", "upi failed"], [_Prediction("UPI Dispute", 0.3)] * 2
    first = enqueue_uncertain(
        store, texts, predictions, threshold=0.6, batch="b", rows=[2, 3], actor=OPERATOR
    )
    store.decide_triage(first[0], final_label="UPI Dispute", reviewer="asha", actor=OPERATOR)
    again = enqueue_uncertain(
        store, texts, predictions, threshold=0.6, batch="b", rows=[2, 3], actor=OPERATOR
    )
    other_batch = enqueue_uncertain(
        store, texts[:1], predictions[:1], threshold=0.6, batch="c", actor=OPERATOR
    )
    assert len(first) == 2 and again == [] and len(other_batch) == 1
    assert len(store.triage_items()) == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": 0.5, "rows": [2, 3]}, "equally long"),
        ({"threshold": 0.5, "batch": " "}, "batch"),
    ],
)
def test_enqueue_uncertain_refuses_bad_input(store, options, message):
    options = {"batch": "b", "actor": OPERATOR, **options}
    with pytest.raises(ValueError, match=message):
        enqueue_uncertain(store, ["upi failed"], [_Prediction("UPI Dispute", 0.3)], **options)
    assert store.triage_items() == []


def test_triage_batch_id_is_stable_per_file_content():
    first = triage_batch_id("march.csv", ["a", "b"])
    assert first == triage_batch_id("march.csv", ["a", "b"]) and first.startswith("march.csv · ")
    assert first != triage_batch_id("march.csv", ["a", "c"])
    with pytest.raises(ValueError, match="name"):
        triage_batch_id("", ["a"])


def test_reviewed_triage_rows_become_labelled_training_rows(store):
    ids = store.enqueue_triage(
        [_item(), _item(row=8, text="=cmd|' /C calc'!A0"), _item(row=9)], actor=OPERATOR
    )
    store.decide_triage(ids[0], final_label="UPI Dispute", reviewer="asha", actor=OPERATOR)
    store.decide_triage(ids[1], final_label="Card Fraud", reviewer="ben", actor=OPERATOR)
    items = store.triage_items()
    rows = triage_training_rows(items, actor=OPERATOR)
    assert list(rows.columns) == ["text", "label", "source", "batch", "row"]
    assert rows["label"].tolist() == ["UPI Dispute", "Card Fraud"]  # the open item is left out
    assert rows["source"].tolist() == [
        f"triage #{ids[0]}, confirmed",
        f"triage #{ids[1]}, corrected from UPI Dispute",
    ]
    assert rows["row"].tolist() == [7, 8]
    corrected = triage_training_rows(items, include_confirmed=False, actor=OPERATOR)
    assert corrected["text"].tolist() == ["=cmd|' /C calc'!A0"]

    import pandas as pd

    from core.data.columns import detect_columns
    from core.data.export import to_csv_bytes

    read_back = pd.read_csv(io.StringIO(to_csv_bytes(rows).decode("utf-8-sig")))
    assert read_back.loc[1, "text"] == "'=cmd|' /C calc'!A0"  # formula neutralised
    choice = detect_columns(read_back.astype(str))
    assert (choice.text_col, choice.label_col) == ("text", "label")


def test_training_rows_are_appended_to_the_data_set_with_their_source(store):
    data = _dataset()
    (item_id,) = store.enqueue_triage([_item()], actor=OPERATOR)
    store.decide_triage(item_id, final_label="Card Fraud", reviewer="asha", actor=OPERATOR)
    combined = with_training_rows(data, triage_training_rows(store.triage_items(), actor=OPERATOR))
    assert len(combined) == len(data) + 1
    assert combined["label"].tolist() == [*data.labels, "Card Fraud"]
    assert combined["source"].tolist()[0] == "data set row 2"
    assert combined["source"].tolist()[-1] == f"triage #{item_id}, corrected from UPI Dispute"
    assert combined["channel"].tolist()[:4] == ["app", "email", "chat", "branch"]
    with pytest.raises(ValueError, match="'text' and 'label'"):
        with_training_rows(data, combined.drop(columns=["label"]))


class _LockedTwice:
    """A connection whose first two journal-mode switches find the database locked."""

    def __init__(self) -> None:
        self.calls = 0

    def execute(self, sql: str):
        self.calls += 1
        if self.calls <= 2:
            raise sqlite3.OperationalError("database is locked")
        return sqlite3.connect(":memory:").execute("SELECT 'wal'")


def test_switch_to_wal_waits_out_a_lock_and_gives_up_after_the_timeout():
    conn = _LockedTwice()
    assert switch_to_wal(conn) == "wal" and conn.calls == 3
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        switch_to_wal(_LockedTwice(), timeout_s=0.0)


# ----------------------------------------------------------------------- every write has an actor


def _actors():
    from core.access import Actor, Role

    viewer = Actor("vera@bank.example", Role.VIEWER, signed_in=True)
    reviewer = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
    return viewer, reviewer


def test_queuing_and_recording_runs_need_the_reviewer_role(store):
    from core.access import AccessDenied

    viewer, _ = _actors()
    with pytest.raises(AccessDenied, match="needs the reviewer role"):
        store.enqueue_triage([_item()], actor=viewer)
    with pytest.raises(AccessDenied, match="needs the reviewer role"):
        enqueue_uncertain(
            store, ["upi failed"], [_Prediction("UPI Dispute", 0.3)], threshold=0.5,
            batch="b", actor=viewer,
        )  # fmt: skip
    with pytest.raises(AccessDenied, match="needs the reviewer role"):
        store.record_run("audit", parameters={}, metrics={}, actor=viewer)
    assert store.triage_items() == [] and store.runs() == []
    assert store.trail(actor=OPERATOR) == []


def test_every_trail_event_names_its_actor(store):
    _, reviewer = _actors()
    (item_id,) = store.enqueue_triage([_item()], actor=reviewer)
    store.record_run("audit", parameters={}, metrics={}, actor=reviewer)
    store.decide_triage(item_id, final_label="Other", reviewer=reviewer.user, actor=reviewer)
    events = store.trail(actor=OPERATOR)
    assert [(e.action, e.actor) for e in events] == [
        ("triage.decided", reviewer.user),
        ("run.recorded", reviewer.user),
        ("triage.enqueued", reviewer.user),
    ]
    assert len(store.trail(actor=reviewer)) == 3  # their own events, now that they are named


def test_one_user_queues_at_most_the_hourly_cap(store, monkeypatch):
    from core.review import store as store_module
    from core.review.limits import TriageLimits

    _, reviewer = _actors()
    limits = TriageLimits(max_items_per_hour=3)
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).isoformat(timespec="microseconds")
    monkeypatch.setattr(store_module, "utc_now", lambda: two_hours_ago)
    store.enqueue_triage([_item(row=r) for r in (1, 2, 3)], actor=reviewer, limits=limits)
    monkeypatch.undo()  # those three are outside the last hour now
    store.enqueue_triage([_item(row=r) for r in (4, 5)], actor=reviewer, limits=limits)
    with pytest.raises(ValueError, match="queue 3 items for review per hour") as caught:
        store.enqueue_triage([_item(row=6), _item(row=7)], actor=reviewer, limits=limits)
    assert "GRIEVANCE_LENS_MAX_TRIAGE_PER_HOUR" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert len(store.open_triage()) == 5  # nothing of the refused batch was queued
    store.enqueue_triage([_item(row=8)], actor=reviewer, limits=limits)  # up to the cap
    store.enqueue_triage([_item(row=9)], actor=OPERATOR, limits=limits)  # another user's own cap
    assert len(store.open_triage()) == 7


def test_the_hourly_cap_comes_from_the_environment(monkeypatch):
    from core.review.limits import TRIAGE_PER_HOUR_ENV, TriageLimits

    assert TriageLimits.from_env({}).max_items_per_hour == 10_000
    assert TriageLimits.from_env({TRIAGE_PER_HOUR_ENV: "25"}).max_items_per_hour == 25
    for bad in ("many", "0"):
        with pytest.raises(ValueError, match=TRIAGE_PER_HOUR_ENV):
            TriageLimits.from_env({TRIAGE_PER_HOUR_ENV: bad})


def test_pages_of_the_queue_reach_every_open_item(store):
    from core.review.limits import TriageLimits

    lots = TriageLimits(max_items_per_hour=100)
    ids = store.enqueue_triage([_item(row=r) for r in range(1, 26)], actor=OPERATOR, limits=lots)
    store.enqueue_triage([_item(row=99, batch="new")], actor=OPERATOR, limits=lots)
    store.decide_triage(ids[0], final_label="Other", reviewer="asha", actor=OPERATOR)
    pages = [store.open_triage(limit=10, offset=offset) for offset in (0, 10, 20, 30)]
    assert [len(page) for page in pages] == [10, 10, 5, 0]
    seen = [item.row for page in pages for item in page]
    assert seen == [*range(2, 26), 99]  # the newest item too, however many came before it
    assert store.triage_counts() == {"open": 25, "confirmed": 0, "corrected": 1}
    assert store.triage_counts(batch="new") == {"open": 1, "confirmed": 0, "corrected": 0}
    assert store.triage_batches() == ["classify-1", "new"]
    with pytest.raises(ValueError, match="offset"):
        store.open_triage(offset=-1)


def test_decision_history_hides_other_reviewers_names_and_notes_by_the_trail_rule(store):
    viewer, reviewer = _actors()
    mine = _decision(row=2, reviewer=reviewer.user, note="checked the form")
    theirs = _decision(row=3, reviewer="ravi@bank.example", note="ravi's private note")
    store.record_decision(mine, actor=reviewer)
    store.record_decision(theirs, actor=OPERATOR)
    as_viewer = store.decision_history(FP, actor=viewer)
    assert [(d.row, d.decision, d.reviewer, d.note) for d in as_viewer] == [
        (2, "keep", "another reviewer", ""),
        (3, "keep", "another reviewer", ""),
    ]
    as_reviewer = store.decision_history(FP, actor=reviewer)
    assert [(d.reviewer, d.note) for d in as_reviewer] == [
        (reviewer.user, "checked the form"),
        ("another reviewer", ""),
    ]
    assert store.decision_history(FP, actor=OPERATOR) == store.decisions(FP)  # admin: all


def test_the_reviewed_triage_list_follows_the_trails_rule_for_names():
    from core.review.records import OTHER_REVIEWER, TriageItem
    from core.review.triage import as_seen_by

    def decided(reviewer):
        return TriageItem(
            batch="b", text="t", predicted_label="A", confidence=0.4, status="confirmed",
            reviewer=reviewer, final_label="A",
        )  # fmt: skip

    items = [decided("asha@bank.example"), decided("ravi@bank.example")]
    viewer = Actor("vera@bank.example", Role.VIEWER, signed_in=True)
    asha = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
    admin = Actor("lead@bank.example", Role.ADMIN, signed_in=True)
    assert [i.reviewer for i in as_seen_by(items, viewer)] == [OTHER_REVIEWER] * 2
    assert [i.reviewer for i in as_seen_by(items, asha)] == ["asha@bank.example", OTHER_REVIEWER]
    assert [i.reviewer for i in as_seen_by(items, admin)] == [i.reviewer for i in items]
