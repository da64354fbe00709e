"""One fine-tuning epoch: the project's loop (dynamic padding, length-grouped batches) against a
naive loop (every text padded to max_length, batch 8, random order), same model and optimiser.

    .venv/bin/python -m bench.bench_training [--n 600] [--max-length 128] [--force]

All three runs start from the bundled MiniLM with the same seed and new head, in fp32 on the
CPU, after one untimed naive step has warmed the process (kernels, allocator), so no run pays
the first-step cost alone. What each figure covers:
- naive: the whole epoch, tokenisation included; plain cross-entropy.
- project: `fit_classifier` called directly, so without what `fine_tune` adds around it
  (personal-data masking, dropout from the job's own generator: 2% a step, bench_seeding);
  class-weighted loss, as the CLI trains. Its progress reports time it: the mean of the first
  n-1 steps (counted from the call, so the optimiser's set-up is in) times n. The last report
  comes after the end-of-epoch validation (4 rows here), which is thus left out.
Prints seconds per epoch, rows/s and the ratio to the naive loop, then one JSON line. The load is
recorded around the run (bench.machine); a busy start is refused and a busy run's figures
withheld unless --force, which prints them marked busy.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup, set_seed

from bench.machine import (
    LoadGuard,
    MachineLoad,
    command_line,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.dataset import Dataset
from core.data.demo import DemoConfig, generate_demo_data
from core.models.device import configure_cpu_threads
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.loop import (
    GRAD_CLIP_NORM,
    FitInputs,
    fit_classifier,
    make_optimizer,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="training rows (demo data)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    args = parser.parse_args()
    if args.n < 17:
        parser.error("--n needs at least 17 rows: two steps of batch 16 (the timing needs two)")
    return args


def naive_epoch(model, tokenizer, data: Dataset, config: TrainConfig, classes) -> float:
    """Seconds for one epoch padded to max_length, batch 8, shuffled, no grouping."""
    label2id = {label: i for i, label in enumerate(classes)}
    optimizer = make_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
    steps = -(-len(data) // 8)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=int(steps * config.warmup_ratio), num_training_steps=steps
    )
    order = np.random.default_rng(config.seed).permutation(len(data))
    model.train()
    started = time.perf_counter()
    for start in range(0, len(order), 8):
        rows = order[start : start + 8]
        batch = tokenizer(
            [data.texts[i] for i in rows], padding="max_length", truncation=True,
            max_length=config.max_length, return_tensors="pt",
        )  # fmt: skip
        targets = torch.tensor([label2id[data.labels[i]] for i in rows])
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        loss = nn.functional.cross_entropy(logits, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP_NORM)
        optimizer.step()
        scheduler.step()
    return time.perf_counter() - started


def project_epoch(data: Dataset, val: Dataset, config: TrainConfig, classes) -> float:
    """Seconds for one epoch of `fit_classifier` (up to its last step, before validation)."""
    set_seed(config.seed)
    model, tokenizer = load_backbone(config, classes)
    marks: list[float] = []
    started = time.perf_counter()
    fit_classifier(
        FitInputs(model, tokenizer, data, val, config, classes, torch.device("cpu")),
        on_progress=lambda p: marks.append(time.perf_counter()),
    )
    # The last progress report comes after validation; the one before it closes step n-1.
    per_step = (marks[-2] - started) / (len(marks) - 1)
    return per_step * len(marks)


def main() -> int:
    args = parse_args()
    threads = configure_cpu_threads()
    print(f"command: {command_line('bench.bench_training')}")
    print(f"machine: {machine()}")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    frame = generate_demo_data(DemoConfig(rows=max(50, args.n + 4), seed=5))
    data = Dataset(
        texts=frame["text"].tolist()[: args.n + 4], labels=frame["desk"].tolist()[: args.n + 4]
    )
    train, val = data.subset(range(args.n)), data.subset(range(args.n, args.n + 4))
    classes = train.classes
    base = TrainConfig(epochs=1, max_length=args.max_length, device="cpu", patience=1)
    set_seed(base.seed)
    model, tokenizer = load_backbone(base, classes)
    naive_epoch(model, tokenizer, train.subset(range(8)), base, classes)  # warm-up, untimed
    set_seed(base.seed)
    model, tokenizer = load_backbone(base, classes)
    results = {
        "naive (pad to max_length, batch 8)": naive_epoch(model, tokenizer, train, base, classes)
    }
    for batch_size in (8, base.batch_size):
        config = TrainConfig(**{**base.__dict__, "batch_size": batch_size})
        results[f"project loop (batch {batch_size})"] = project_epoch(train, val, config, classes)
    load = guard.finish()
    if shows_figures(load):
        report(results, args.n, threads, args.max_length, load)
    print_load(load)
    return 0


def report(
    results: dict[str, float], n: int, threads: int, max_length: int, load: MachineLoad
) -> None:
    baseline = results["naive (pad to max_length, batch 8)"]
    print(f"one epoch on {n} demo rows, max_length {max_length}, {threads} torch threads")
    for name, seconds in results.items():
        print(
            f"  {name:38s} {seconds:7.1f} s  {n / seconds:6.1f} rows/s  {baseline / seconds:5.2f}x"
        )
    summary = {
        name: {"seconds": round(s, 1), "ratio": round(baseline / s, 2)}
        for name, s in results.items()
    }
    document = {
        "command": command_line("bench.bench_training"), "rows": n, "max_length": max_length,
        "threads": threads, "results": summary, "machine_load": load.to_json(),
    }  # fmt: skip
    print(json.dumps(document))


if __name__ == "__main__":
    sys.exit(main())
