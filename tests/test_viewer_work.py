"""CPU work a visitor can start goes through the job queue with the role the README's role table
gives it (#24): the Data page's bag of words and the Explain page's sample are long work (reviewers
and admins); the positional ablation and the Attention lab's timing run on the short lane, the
timing bounded in core and stopped by cancel."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import Actor, Role
from core.analysis.bag_of_words_eval import evaluate_bow
from core.errors import UserError
from core.jobs import Requester
from core.lab.self_attention import TimingConfig, measure_attention_vs_lstm
from core.models.bag_of_words import BagOfWordsConfig
from core.models.registry import load_model
from core.progress import Cancelled
from core.roles import ROLES_ENV
from core.tasks.bag_of_words import start_bow
from core.tasks.probes import start_review
from tests.conftest import make_dataset
from tests.helpers import AUTH
from ui.jobs import get_job_queue
from ui.state import ACTIVE_MODEL

ROOT = Path(__file__).resolve().parent.parent
VIEWER = Actor("vera@bank.example", Role.VIEWER, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)


def _data():
    texts = [f"card stolen at shop {i}" for i in range(12)] + [f"upi refund {i}" for i in range(12)]
    return make_dataset(texts, ["Card Fraud"] * 12 + ["UPI Dispute"] * 12)


def test_a_viewer_may_not_queue_the_bag_of_words_or_the_explain_sample(job_queue, tiny_model_dir):
    data = _data()
    config = BagOfWordsConfig(seed=0)
    with pytest.raises(UserError, match="reviewer"):
        start_bow(data, config, val_fraction=0.25, queue=job_queue, requester=Requester(VIEWER))
    loaded = load_model(tiny_model_dir)
    with pytest.raises(UserError, match="reviewer"):
        start_review(
            loaded.neural, loaded.bow, data, max_rows=10, model_path="m",
            dataset_fingerprint=data.fingerprint, queue=job_queue, requester=Requester(VIEWER),
        )  # fmt: skip


def test_the_bow_task_gives_what_evaluate_bow_gives(job_queue):
    data = _data()
    config = BagOfWordsConfig(seed=3)
    run = start_bow(data, config, val_fraction=0.25, queue=job_queue, requester=Requester(REVIEWER))
    result = run.job.wait(60).result
    _, direct = evaluate_bow(data, config=config, val_fraction=0.25, seed=3)
    assert result.report.accuracy == direct.report.accuracy
    assert (result.train_size, result.val_size) == (direct.train_size, direct.val_size)


def test_timing_is_bounded_in_core_and_stops_when_cancelled():
    with pytest.raises(UserError, match="max_n may be at most 1,024"):
        TimingConfig(max_n=1 << 20)
    with pytest.raises(UserError, match="d may be at most 768"):
        TimingConfig(d=100_000, heads=8)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        measure_attention_vs_lstm(TimingConfig(max_n=16, d=8, heads=2, repeats=1), cancel=cancel)


@pytest.fixture()
def viewer_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Sign-in on, a roles file where vera is a viewer."""
    roles = tmp_path / "roles.toml"
    roles.write_text('admin = ["lead@bank.example"]\nviewer = ["vera@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(roles))
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))

    def open_as_viewer(page: str, state: dict) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.secrets["auth"] = AUTH
        at.user = {"is_logged_in": True, "email": "vera@bank.example", "email_verified": True}
        for key, value in state.items():
            at.session_state[key] = value
        at.run()  # through the router: pages link to each other
        return at.switch_page(str(ROOT / "pages" / page)).run()

    return open_as_viewer


ADMIN = Actor("local", Role.ADMIN, signed_in=False)  # sees every job's title


def _job_ids() -> set[int]:
    return {j.id for j in get_job_queue().jobs(seen_by=ADMIN)}


def _new_jobs(before: set[int]) -> list[str]:
    """Kind and title of each job the server's queue lists that was not in `before`."""
    jobs = get_job_queue().jobs(seen_by=ADMIN)
    return [part for j in jobs if j.id not in before for part in (j.kind, j.title)]


def _captions(at: AppTest) -> str:
    return "\n".join(str(c.value) for c in [*at.caption, *at.info])


def test_a_viewer_sees_the_data_page_without_the_bag_of_words_form(viewer_session):
    at = viewer_session("data.py", {"data.source": "demo"})
    assert not at.exception, at.exception
    assert "Training the bag of words on the shared CPUs needs the reviewer role" in _captions(at)
    assert not [b for b in at.button if "baseline_form" in str(b.key)]


def test_a_viewer_may_explain_a_typed_complaint_but_not_classify_a_sample(
    viewer_session, tiny_model_dir
):
    from ui.datasets import DEMO_KEY, DEMO_NAME, demo_table, validated
    from ui.state import ACTIVE_DATASET, ActiveDataset

    table = demo_table()
    dataset, report = validated(table, DEMO_KEY, "text", "desk")
    state = {
        ACTIVE_MODEL: str(tiny_model_dir),
        ACTIVE_DATASET: ActiveDataset(DEMO_NAME, dataset, report),
        "explain.source": "Pick one from the data set",
    }
    before = _job_ids()
    at = viewer_session("explain.py", state)
    assert not at.exception, at.exception
    assert "Classifying a sample of the data set needs the reviewer role" in _captions(at)
    assert "review" not in _new_jobs(before)  # (the queue keeps only its newest finished jobs)


def test_the_positional_ablation_runs_on_the_short_lane_once_per_text(
    tiny_bert_cls_model_dir, monkeypatch
):
    import ui.caches
    from core.memo import MB, ByteBoundedCache

    monkeypatch.setattr(ui.caches, "ABLATIONS", ByteBoundedCache(MB))  # empty: other tests ran
    before = _job_ids()
    at = AppTest.from_file(str(ROOT / "pages" / "order_probes.py"), default_timeout=120)
    at.session_state[ACTIVE_MODEL] = str(tiny_bert_cls_model_dir)
    at.run()
    assert not at.exception, at.exception
    assert _new_jobs(before).count("Positional ablation") == 1
    at.run()  # a rerun (any click) asks the cache, not the models
    assert _new_jobs(before).count("Positional ablation") == 1
