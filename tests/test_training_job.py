"""Trainings as jobs of the server's queue (core.models.training_job): ten asked for at once run
one after another with their places in the queue, each saves itself, names never collide."""

import pytest

from core.access import OPERATOR, Actor, Role
from core.jobs import JobStatus, Requester
from core.models.training_job import train_and_save
from core.models.transformer.config import TrainConfig
from core.review.store import Store
from core.tasks.training import start_training
from tests.conftest import make_dataset, separable_rows

TINY = TrainConfig(backbone="tiny", lr=1e-3, batch_size=8, max_length=32, max_steps=2, device="cpu")


def test_ten_trainings_asked_at_once_run_one_after_another(job_queue, tmp_path):
    data = make_dataset(*separable_rows(6))
    leads = [Requester(Actor(f"lead{i % 5}@bank.in", Role.ADMIN, True)) for i in range(10)]
    models, store = tmp_path / "models", Store.open(tmp_path / "lens.db")
    where = {"dataset_name": "toy", "models_root": models, "queue": job_queue, "store": store}
    runs = [
        start_training(data, TINY, model_name=f"m{i}", requester=leads[i], **where)
        for i in range(10)
    ]
    positions = [run.job.snapshot().position for run in runs]
    assert positions[1:] == list(range(positions[1], positions[1] + 9))  # visible, in order
    snapshots = [run.job.wait(120) for run in runs]
    assert [s.status for s in snapshots] == [JobStatus.DONE] * 10
    assert sorted(p.name for p in models.iterdir()) == sorted(f"m{i}" for i in range(10))
    saves = store.events("model.saved")  # each save recorded under the admin who asked
    assert sorted((e.details["name"], e.actor) for e in saves) == sorted(
        (f"m{i}", leads[i].actor.user) for i in range(10)
    )
    infos = job_queue.jobs(seen_by=leads[0].actor)
    spans = sorted((i.submitted_at.timestamp() + i.waited_s, i.run_s) for i in infos)
    for (start, run_s), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= start + run_s - 0.05  # never two at once on one worker


def test_only_admins_train(job_queue, tmp_path):
    reviewer = Requester(Actor("anna@bank.in", Role.REVIEWER, signed_in=True))
    with pytest.raises(PermissionError, match="needs the admin role"):
        start_training(
            make_dataset(*separable_rows(6)), TINY, dataset_name="toy", models_root=tmp_path,
            model_name="m", queue=job_queue, requester=reviewer,
            store=Store.open(tmp_path / "lens.db"),
        )  # fmt: skip


def test_a_name_taken_while_training_gets_a_suffix(tmp_path):
    data = make_dataset(*separable_rows(4))
    where = {"models_root": tmp_path, "data_fingerprint": "f", "actor": OPERATOR}
    first = train_and_save(data, data, TINY, model_name="desk", **where)
    second = train_and_save(data, data, TINY, model_name="desk", **where)
    assert (first.folder.name, second.folder.name) == ("desk", "desk-2")
