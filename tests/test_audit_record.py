"""core.tasks.audit.record_audit_run: a finished audit becomes one "audit" run in the review store,
the same record whether the Label audit page or the command line ran it."""

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st

from core.access import OPERATOR, AccessDenied, Actor, Role
from core.analysis.audit import AuditConfig, AuditResult, run_audit
from core.data.validation import validate
from core.errors import UserError
from core.review.store import Store, StoreError, default_db_path
from core.tasks.audit import record_audit_run
from tests.conftest import make_dataset, separable_rows
from tests.helpers import open_page
from ui.state import ACTIVE_DATASET, AUDIT_JOB, ActiveDataset

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "label_audit.py")


@pytest.fixture(scope="module")
def audited() -> AuditResult:
    """A bag-of-words audit of 30 separable rows with one label flipped, in 3 folds."""
    texts, labels = separable_rows(10)
    labels[0] = next(label for label in labels if label != labels[0])
    return run_audit(make_dataset(texts, labels), AuditConfig(folds=3))


@pytest.fixture
def store():
    """The review store where the command line opens it ($GRIEVANCE_LENS_DATA_DIR, per test)."""
    with Store.open(default_db_path()) as opened:
        yield opened


def test_a_finished_audit_is_one_run_with_its_settings_and_counts(store, audited):
    run_id = record_audit_run(store, audited, actor=OPERATOR)
    (run,) = store.runs(kind="audit")
    assert run.id == run_id
    assert run.parameters == {
        "model": "bow",
        "folds": 3,
        "fingerprint": audited.fingerprint,
    }
    assert run.metrics == {"issues": len(audited.issues), "seconds": round(audited.seconds, 3)}
    assert audited.issues  # the flipped row at least: the count is not trivially zero
    (event,) = store.trail(actor=OPERATOR)
    assert (event.action, event.entity_id, event.actor) == ("run.recorded", run_id, "operator")


def test_each_call_records_a_run_of_its_own(store, audited):
    """Recording once per audit is the caller's part (the page records a cached audit once)."""
    first = record_audit_run(store, audited, actor=OPERATOR)
    second = record_audit_run(store, audited, actor=OPERATOR)
    assert second > first and len(store.runs(kind="audit")) == 2


def test_a_cancelled_audit_is_not_recorded(store, audited):
    cancelled = replace(audited, pred_probs=None, issues=(), cancelled=True)
    with pytest.raises(UserError, match="cancelled audit is not recorded"):
        record_audit_run(store, cancelled, actor=OPERATOR)
    assert store.runs() == []


def test_a_viewer_may_not_record_an_audit(store, audited):
    viewer = Actor("vera@bank.example", Role.VIEWER, signed_in=True)
    with pytest.raises(AccessDenied, match="needs the reviewer role"):
        record_audit_run(store, audited, actor=viewer)
    reviewer = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
    record_audit_run(store, audited, actor=reviewer)
    (event,) = store.trail(actor=OPERATOR)
    assert event.actor == "asha@bank.example"


def test_a_read_only_store_refuses_the_record(audited):
    Store.open(default_db_path()).close()  # the file exists; now opened for reading only
    with Store.open(default_db_path(), read_only=True) as store:
        with pytest.raises(StoreError, match="read-only"):
            record_audit_run(store, audited, actor=OPERATOR)
        assert store.runs() == []


def test_the_label_audit_page_records_its_audit_once_with_the_same_record():
    """The page records through record_audit_run: a finished audit once, not again when the same
    audit is served from the cache."""
    st.cache_resource.clear()  # no finished audits of other tests
    texts, labels = separable_rows(10)
    dataset, report = validate(pd.DataFrame({"text": texts, "desk": labels}), label_col="desk")
    active = ActiveDataset(name="toy", dataset=dataset, report=report)
    at = open_page(PAGE, {ACTIVE_DATASET: active}).run()
    at.number_input(key="audit.folds").set_value(3)
    for _ in range(2):  # the second time from the cache
        at.button(key="FormSubmitter:audit.form-Run the audit").click().run()
        result = at.session_state[AUDIT_JOB].wait(timeout=300).result
        at.run()
        assert not at.exception
    with Store.open(default_db_path()) as store:
        (run,) = store.runs(kind="audit")
    assert run.parameters == {"model": "bow", "folds": 3, "fingerprint": dataset.fingerprint}
    assert run.metrics == {"issues": len(result.issues), "seconds": round(result.seconds, 3)}
