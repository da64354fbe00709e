"""What a job's own random generator costs a training step: MiniLM fine-tuning steps with every
dropout drawing from the job's generator (core.models.seeding.seeded_dropout: SeededDropout and
the seeded eager attention) against torch's own nn.Dropout and eager attention (the baseline).

Same model, same batches, the two modes alternated step by step after a warm-up; the median
step of each. The load is recorded around the run (bench.machine); a busy start is refused and
a busy run's figures withheld unless --force, which prints them marked busy.

    python -m bench.bench_seeding [--steps 20] [--batch-size 16] [--max-length 128] [--force]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import torch
from torch import nn

from bench.machine import (
    LoadGuard,
    command_line,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, generate_demo_data
from core.models.device import configure_cpu_threads
from core.models.seeding import job_generator, seeded_dropout
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import encode_batch


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def step_seconds(model, batch, targets, optimizer) -> float:
    """One optimiser step (forward, loss, backward, update); its wall time."""
    started = time.perf_counter()
    logits = model(**batch).logits
    loss = nn.functional.cross_entropy(logits, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - started


def main() -> int:
    args = parse_args()
    threads = configure_cpu_threads()
    print(f"command: {command_line('bench.bench_seeding')}")
    print(f"machine: {machine()}; torch threads {threads}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    frame = generate_demo_data(DemoConfig(rows=max(50, args.batch_size * 4), seed=1))
    classes = sorted(set(frame["desk"]))
    config = TrainConfig(max_length=args.max_length, device="cpu")
    model, tokenizer = load_backbone(config, classes)
    model.train()
    texts = frame["text"].tolist()[: args.batch_size]
    batch = encode_batch(tokenizer, texts, args.max_length, torch.device("cpu"))
    targets = torch.tensor([classes.index(d) for d in frame["desk"][: args.batch_size]])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)  # tiny: the model barely moves
    generator = job_generator(0, torch.device("cpu"))
    modes = {"torch dropout (baseline)": contextlib.nullcontext,
             "job generator": lambda: seeded_dropout(model, generator)}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in modes}
    for i in range(args.steps + 3):
        for name, mode in modes.items():
            with mode():
                seconds = step_seconds(model, batch, targets, optimizer)
            if i >= 3:  # the first steps warm up allocators and kernels
                times[name].append(seconds)
    load = guard.finish()
    if shows_figures(load):
        report(times, args)
    print_load(load)
    return 0


def report(times: dict[str, list[float]], args: argparse.Namespace) -> None:
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["torch dropout (baseline)"]
    print(f"{args.steps} steps per mode, batch {args.batch_size} x {args.max_length} tokens")
    for name, median in medians.items():
        print(f"  {name:26s} median {median:6.3f} s/step  {median / base:5.2f}x the baseline")


if __name__ == "__main__":
    sys.exit(main())
