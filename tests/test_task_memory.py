"""The queue's memory stays flat however many tasks finish: a finished training keeps its
reports and the saved model's name, never the trained models or the data it was given."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from core.access import OPERATOR
from core.jobs import JobQueue, JobStatus, QueueConfig, Requester
from core.models.transformer.config import TrainConfig
from core.review.store import Store
from core.tasks.training import start_training
from tests.conftest import make_dataset, separable_rows

TRAININGS = 100
# Kept whole, each finished training of this tiny model held about 0.75 MB (its weights, the
# bag of words, the split): 80 of them, some 60 MB. Flat, the process grew by under 1 MB.
MAX_GROWTH_MB = 15


def resident_mb() -> float:
    """This process's resident memory (Linux /proc), after a garbage collection."""
    gc.collect()
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads Linux's /proc")
def test_memory_stays_flat_over_a_hundred_finished_trainings(tmp_path: Path):
    data = make_dataset(*separable_rows(40))
    config = TrainConfig(backbone="tiny", max_steps=1, batch_size=6, max_length=32, device="cpu")
    queue = JobQueue(QueueConfig(), cpus=2)
    requester, after_warm_up, jobs = Requester(OPERATOR), 0.0, []
    store = Store.open(tmp_path / "lens.db")
    try:
        for i in range(TRAININGS):
            run = start_training(
                data, config, dataset_name="toy", models_root=tmp_path / "models",
                model_name=f"m{i}", queue=queue, requester=requester, store=store,
            )  # fmt: skip
            assert run.job.wait(60).status is JobStatus.DONE
            jobs.append(run.job)
            if i == 19:  # allocator pools and library caches have settled by now
                after_warm_up = resident_mb()
        grown = resident_mb() - after_warm_up
        summary = jobs[-1].snapshot().result
        assert summary.folder.name == f"m{TRAININGS - 1}" and summary.result.neural is None
        assert summary.result.neural_report is not None  # what the page shows is kept
        assert grown < MAX_GROWTH_MB, f"grew {grown:.1f} MB over {TRAININGS - 20} trainings"
    finally:
        queue.shutdown()
