"""Archive scoring throughput: `core.scale.score_archive` with `--engine ray` (1 and 2 workers of
one CPU each) against `--engine local` (the named baseline, one and all threads) on the same demo
texts in parts, in one process. Ray's fixed cost (actors starting, each loading the model) is
measured on a 64-row archive and reported apart from the per-text rate; `ray.init` apart again.

    .venv/bin/python -m bench.bench_scale [--texts 20000] [--parts 8] [--model models/NAME]
        [--backbone minilm|tiny] [--json] [--force]

Without --model, a model is trained for one step on 200 demo rows (the rate does not depend on
the weights) and saved to a temporary folder.

The load is recorded around the run (bench.machine). Ray's daemons and workers are processes
this bench starts (children of this process, workers children of the raylet), so their CPU
time counts as the bench's own, not as other processes'; a Ray process orphaned to init would
count as someone else's (never the other way round). A busy start is refused and a busy run's
figures withheld unless --force, which prints them marked busy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.machine import (
    LoadGuard,
    MachineLoad,
    command_line,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.access import OPERATOR
from core.data.dataset import Dataset, split_dataset
from core.data.demo import DemoConfig, generate_demo_data
from core.models.registry import save_model
from core.models.transformer.config import TrainConfig
from core.models.transformer.training import train_models
from core.scale import ScaleConfig, score_archive, start_local_ray


@dataclass(frozen=True)
class Run:
    name: str
    texts: int
    seconds: float
    fixed_seconds: float  # the same run on a 64-row archive

    @property
    def per_text_rate(self) -> float:
        return self.texts / max(self.seconds - self.fixed_seconds, 1e-9)


def write_archive(folder: Path, texts: int, parts: int, seed: int) -> Path:
    demo = generate_demo_data(DemoConfig(rows=texts, seed=seed))
    folder.mkdir()
    for i in range(parts):
        demo.iloc[i * texts // parts : (i + 1) * texts // parts].to_parquet(
            folder / f"part-{i:03d}.parquet", index=False
        )
    return folder


def quick_model(root: Path, backbone: str) -> Path:
    demo = generate_demo_data(DemoConfig(rows=200, seed=3))
    train, val = split_dataset(Dataset(demo["text"].tolist(), demo["desk"].tolist()), seed=0)
    config = TrainConfig(backbone=backbone, epochs=1, max_steps=1, batch_size=8)
    return save_model(train_models(train, val, config), root, f"bench-{backbone}", actor=OPERATOR)


def timed(config: ScaleConfig) -> float:
    started = time.perf_counter()
    score_archive(config)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--backbone", choices=("minilm", "tiny"), default="minilm")
    parser.add_argument("--precision", choices=("fp32", "bf16", "auto"), default="fp32")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    guard = LoadGuard.start(force=args.force, descendants=True)  # Ray's processes are ours
    if refuse_busy_start(guard):
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = args.model or quick_model(root / "models", args.backbone)
        big = write_archive(root / "big", args.texts, args.parts, seed=11)
        small = write_archive(root / "small", 64, 1, seed=12)

        def config(source: Path, out: str, **options) -> ScaleConfig:
            return ScaleConfig(model, source, root / out, precision=args.precision, **options)

        runs = []
        threads = torch.get_num_threads()
        for local_threads in sorted({1, threads}):
            torch.set_num_threads(local_threads)
            name = f"local, {local_threads} thread(s)"
            fixed = timed(config(small, f"s-local{local_threads}.csv"))
            runs.append(
                Run(name, args.texts, timed(config(big, f"local{local_threads}.csv")), fixed)
            )
        torch.set_num_threads(threads)
        started = time.perf_counter()
        start_local_ray(num_cpus=cores)
        ray_init = time.perf_counter() - started
        for workers in (1, 2):
            options = {"engine": "ray", "workers": workers, "cpus_per_worker": 1}
            fixed = timed(config(small, f"s-ray{workers}.csv", **options))
            seconds = timed(config(big, f"ray{workers}.csv", **options))
            runs.append(Run(f"ray, {workers} worker(s) x 1 CPU", args.texts, seconds, fixed))
    load = guard.finish()
    if shows_figures(load):
        report(runs, args, load, ray_init, model)
    elif args.json:
        print(json.dumps({"command": command_line("bench.bench_scale"),
                          "machine_load": load.to_json()}, indent=2))  # fmt: skip
    print_load(load, file=sys.stderr if args.json else None)
    return 0


def report(runs, args, load: MachineLoad, ray_init, model) -> None:
    by_name = {r.name: r for r in runs}
    one = by_name["ray, 1 worker(s) x 1 CPU"].per_text_rate
    two = by_name["ray, 2 worker(s) x 1 CPU"].per_text_rate
    local_one = by_name["local, 1 thread(s)"].per_text_rate
    summary = {
        "texts": args.texts, "parts": args.parts, "backbone": args.backbone,
        "precision": args.precision, "model": str(args.model or "one-step " + args.backbone),
        "command": command_line("bench.bench_scale"), "machine_load": load.to_json(),
        "ray_init_seconds": round(ray_init, 2),
        "runs": [
            {"name": r.name, "seconds": round(r.seconds, 2),
             "fixed_seconds": round(r.fixed_seconds, 2),
             "texts_per_second": round(r.per_text_rate, 1)}
            for r in runs
        ],
        "two_workers_vs_one": round(two / one, 2),
        "one_worker_vs_local_one_thread": round(one / local_one, 2),
    }  # fmt: skip
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"command: {summary['command']}")
    print(f"{args.texts:,} demo texts in {args.parts} Parquet parts, {summary['model']}, "
          f"{args.precision}; ray.init {ray_init:.1f} s")  # fmt: skip
    print(f"{'run':<28} {'total':>8} {'fixed':>8} {'texts/s':>9}")
    for r in runs:
        print(f"{r.name:<28} {r.seconds:>7.1f}s {r.fixed_seconds:>7.1f}s {r.per_text_rate:>9.1f}")
    print(
        f"2 workers / 1 worker: {two / one:.2f}x; 1 worker / local 1 thread: {one / local_one:.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
