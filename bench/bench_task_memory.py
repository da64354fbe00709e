"""The queue's memory over many finished trainings: this process's resident memory after 20, 60
and 100 trainings of the tiny model through the server's queue, as the queue keeps them now
(a summary; results only for the newest 16 jobs) against the baseline of finished jobs that keep
their trained models and inputs, as before #22. Each mode runs in a fresh process.

    python -m bench.bench_task_memory            # both modes, one after the other
    python -m bench.bench_task_memory --mode now  # one mode (what each child runs)

Memory does not depend on load, but the bench records it like every bench (bench.machine)."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("now", "kept")  # kept: finished jobs hold their models and inputs (the baseline)
MARKS = (20, 60, 100)


def resident_mb() -> float:
    gc.collect()
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20


def measure(mode: str) -> list[float]:
    """Resident MB after each of MARKS trainings, in this process."""
    import torch

    import core.jobs
    from core.access import OPERATOR
    from core.data.dataset import Dataset
    from core.jobs import JobQueue, QueueConfig, Requester
    from core.models.transformer.config import TrainConfig
    from core.tasks import training

    torch.set_num_threads(1)
    if mode == "kept":
        core.jobs.KEEP_RESULTS = 10**6
        training.train_and_keep_reports = training.train_and_save
        core.jobs.Job._finish = _finish_keeping_work(core.jobs.Job._finish)
    phrases = {"UPI Dispute": "upi payment failed", "Card Fraud": "card stolen fraud charge",
               "Loan Query": "loan emi interest rate"}  # fmt: skip
    texts = [f"{p} {i}" for i in range(40) for p in phrases.values()]
    labels = [d for _ in range(40) for d in phrases]
    data = Dataset(texts=tuple(texts), labels=tuple(labels))
    config = TrainConfig(backbone="tiny", max_steps=1, batch_size=6, max_length=32, device="cpu")
    queue, figures = JobQueue(QueueConfig(), cpus=2), []
    with tempfile.TemporaryDirectory() as root:
        for i in range(1, MARKS[-1] + 1):
            run = training.start_training(
                data, config, dataset_name="toy", models_root=root, model_name=f"m{i}",
                queue=queue, requester=Requester(OPERATOR),
            )  # fmt: skip
            assert run.job.wait(60).status == "done"
            if i in MARKS:
                figures.append(round(resident_mb(), 1))
        queue.shutdown()
    return figures


def _finish_keeping_work(finish):
    """Job._finish as before #22: the finished job keeps its task's work and inputs."""

    def keep(self, status, *, result=None, error=None):
        task = self.task
        finish(self, status, result=result, error=error)
        self.task = task

    return keep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES)
    parser.add_argument("--force", action="store_true", help="measure on a busy machine")
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode)))
        return 0
    from bench.machine import LoadGuard, command_line, machine, print_load, refuse_busy_start

    print(f"machine: {machine()}\ncommand: {command_line('bench.bench_task_memory')}")
    guard = LoadGuard.start(force=args.force, descendants=True)
    if refuse_busy_start(guard):
        return 1
    for mode in MODES:
        child = [sys.executable, "-m", "bench.bench_task_memory", "--mode", mode]
        out = subprocess.run(child, capture_output=True, text=True, check=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        marks = ", ".join(f"{mb} MB after {n}" for n, mb in zip(MARKS, figures, strict=True))
        print(f"{mode:>4}: {marks}; grew {figures[-1] - figures[0]:.1f} MB over the last 80")
    print_load(guard.finish())
    return 0


if __name__ == "__main__":
    sys.exit(main())
