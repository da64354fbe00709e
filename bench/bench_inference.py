"""Batch classification throughput, like for like: the project's `python -m core classify` and its
`NeuralClassifier.predict_proba` against transformers' `pipeline("text-classification")` on
the same saved model and the same texts, warm in one process and as whole processes.

    .venv/bin/python -m bench.bench_inference --model models/NAME [--short 3000] [--long 2000]

Texts (never the CLI's demo training data, which is seed 7): demo complaints of seed 11 ("long",
about 55 word pieces) and short queries made from them ("short": each complaint's first clause,
at most 16 words, like a chat or app query of about 15 word pieces).

Warm, in this process: the pipeline is built and warmed on 16 texts before it is timed, exactly
as the project's classifier is; both classify the same texts in fp32. Rows:
- pipeline, one text per call (its default) and batch_size=64;
- predict_proba fp32 (sorted by length, batches of 64, fused attention);
- predict_proba on a dynamic-int8 copy (torch.ao quantize_dynamic of every nn.Linear), with its
  label agreement against fp32 on the long texts (held-out data for a model trained on seed 7).
Throughput is also given as useful GFLOP/s (2 x linear weights x real tokens, plus attention)
and as a share of this machine's fp32 matrix-multiply peak, measured in the same run.

Whole process (unless `--no-processes`): `python -m core classify` on the short queries against
bench/pipeline_script.py, which does what a newcomer would (import transformers, build the
pipeline, read the CSV, classify, write the CSV), each timed from start to exit, labels compared.
`--repeats N` runs each command N times, alternating, and reports the median; `--processes-only`
skips the warm rows (minutes of pipeline calls) for this comparison alone. Imports are a third of
a short run: profile them with `python -X importtime -m core classify ...`
(tests/test_classify_imports.py keeps scikit-learn, openpyxl and the UI libraries out of it).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from bench.machine import (
    LoadGuard,
    matmul_peak_gflops,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, generate_demo_data
from core.models.registry import load_model
from core.models.transformer.inference import NeuralClassifier, inference_view

ROOT = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a model saved by core train")
    parser.add_argument("--short", type=int, default=3000, help="short queries")
    parser.add_argument("--long", type=int, default=2000, help="demo complaints")
    parser.add_argument("--pipeline-n", type=int, default=1000, help="texts the warm pipeline gets")
    parser.add_argument("--no-processes", action="store_true", help="skip the whole-process runs")
    parser.add_argument(
        "--processes-only", action="store_true", help="only the whole-process comparison"
    )
    parser.add_argument("--repeats", type=int, default=1, help="whole-process runs of each; median")
    parser.add_argument(
        "--precision", choices=("fp32", "auto"), default="fp32",
        help="whole process: classify's precision (auto: the runtime rule, bf16 where fast)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be 1 or more")
    return args


def long_texts(n: int) -> list[str]:
    return generate_demo_data(DemoConfig(rows=n, seed=11))["text"].tolist()


def short_queries(texts: list[str]) -> list[str]:
    """Each text's first clause, at most 16 words."""
    return [" ".join(re.split(r"[.;!?]", t)[0].split()[:16]) for t in texts]


# ---------------------------------------------------------------------------- the baseline


def pipeline_for(folder: Path):
    from transformers import pipeline

    import core.models.transformer.head  # noqa: F401  (registers the mean-pooled model type)

    return pipeline("text-classification", model=str(folder), device="cpu", top_k=None)


def pipeline_proba(classify, texts: list[str], classes: list[str], **options) -> np.ndarray:
    """pred_probs (n, k) from a built pipeline, columns in `classes` order."""
    outputs = classify(texts, truncation=True, **options)
    return np.array([[{d["label"]: d["score"] for d in o}[c] for c in classes] for o in outputs])


# ---------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Timing:
    name: str
    texts: int
    seconds: float
    probs: np.ndarray | None = None


def timed(name: str, fn: Callable[[], np.ndarray], n: int) -> Timing:
    started = time.perf_counter()
    probs = fn()
    return Timing(name, n, time.perf_counter() - started, probs)


def int8_copy(classifier: NeuralClassifier) -> NeuralClassifier:
    """The classifier with every nn.Linear of its inference view dynamically quantised to int8."""
    quantised = torch.ao.quantization.quantize_dynamic(
        inference_view(classifier.model), {torch.nn.Linear}, dtype=torch.qint8
    )
    copy = NeuralClassifier(
        classifier.model, classifier.tokenizer, classifier.classes_, precision="fp32",
        max_length=classifier.max_length,
    )  # fmt: skip
    copy._predictor = quantised
    return copy


def useful_gflop(classifier: NeuralClassifier, texts: list[str]) -> float:
    """FLOPs the texts need without padding: 2 x linear weights per token, plus attention."""
    model = classifier.model
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    config = getattr(model.config, "encoder", model.config)
    hidden, layers = config.hidden_size, config.num_hidden_layers
    lengths = [
        len(ids)
        for ids in classifier.tokenizer(texts, truncation=True, max_length=classifier.max_length)[
            "input_ids"
        ]
    ]
    return sum(2 * linear * n + 4 * layers * n * n * hidden for n in lengths) / 1e9


def warm_rows(loaded, texts: list[str], label: str, pipeline_n: int) -> list[Timing]:
    ours = loaded.neural
    classes = [str(c) for c in ours.classes_]
    classify = pipeline_for(loaded.path)
    pipeline_proba(classify, texts[:16], classes)  # warm-up, as for ours below
    ours.predict_proba(texts[:64])
    head = texts[:pipeline_n]
    return [
        timed(f"{label}: pipeline, batch 1 (first {len(head)})",
              lambda: pipeline_proba(classify, head, classes), len(head)),
        timed(f"{label}: pipeline, batch_size=64 (first {len(head)})",
              lambda: pipeline_proba(classify, head, classes, batch_size=64), len(head)),
        timed(f"{label}: predict_proba fp32", lambda: ours.predict_proba(texts), len(texts)),
    ]  # fmt: skip


def process_rows(
    folder: Path, texts: list[str], scratch: Path, repeats: int = 1, precision: str = "fp32"
) -> dict:
    source = scratch / "short.csv"
    pd.DataFrame({"text": texts}).to_csv(source, index=False)
    commands = {
        "python -m core classify": [sys.executable, "-m", "core", "classify", "--model",
                                    str(folder), str(source), "--out", str(scratch / "ours.csv"),
                                    "--precision", precision],
        "pipeline script": [sys.executable, "-m", "bench.pipeline_script", str(folder),
                            str(source), str(scratch / "pipeline.csv")],
    }  # fmt: skip
    runs: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # alternating, so a change in the machine's load hits both alike
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
            runs[name].append(time.perf_counter() - started)
    seconds = {name: float(np.median(times)) for name, times in runs.items()}
    # The transformer's own label: the pipeline runs that model alone, while predicted_label is
    # the card's decision, which may blend in the bag of words.
    ours = pd.read_csv(scratch / "ours.csv")["transformer_label"]
    theirs = pd.read_csv(scratch / "pipeline.csv")["predicted_label"]
    return {
        "texts": len(texts),
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "repeats": repeats,
        "precision": precision,
        "ratio": round(seconds["pipeline script"] / seconds["python -m core classify"], 2),
        "labels_identical": float((ours == theirs).mean()),
    }


def main() -> int:
    args = parse_args()
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    long = long_texts(max(args.long, args.short))
    short = short_queries(long[: args.short])
    if args.processes_only:
        return processes_only(args, short, guard)
    peak = matmul_peak_gflops()
    loaded = load_model(args.model, precision="fp32")
    long = long[: args.long]
    rows = warm_rows(loaded, short, "short", args.pipeline_n)
    rows += warm_rows(loaded, long, "long", args.pipeline_n)
    quantised = int8_copy(loaded.neural)
    quantised.predict_proba(long[:64])
    rows += [
        timed("short: predict_proba int8", lambda: quantised.predict_proba(short), len(short)),
        timed("long: predict_proba int8", lambda: quantised.predict_proba(long), len(long)),
    ]
    processes = None if args.no_processes else whole_processes(args, short)
    flops = {
        "short": useful_gflop(loaded.neural, short) / len(short),
        "long": useful_gflop(loaded.neural, long) / len(long),
    }
    load = guard.finish()
    if shows_figures(load):
        report(rows, processes, flops, peak, load)
    print_load(load)
    return 0


def whole_processes(args: argparse.Namespace, short: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        return process_rows(args.model, short, Path(scratch), repeats=args.repeats,
                            precision=args.precision)  # fmt: skip


def processes_only(args: argparse.Namespace, short: list[str], guard: LoadGuard) -> int:
    """`--processes-only`: the whole-process comparison alone, under the same load guard."""
    processes = whole_processes(args, short)
    load = guard.finish()
    if shows_figures(load):
        print_processes(processes)
        print(json.dumps({"processes": processes, "machine_load": load.to_json()}))
    print_load(load)
    return 0


def print_processes(processes: dict) -> None:
    print(
        f"whole process, {processes['texts']} short queries (median of {processes['repeats']}, "
        f"classify --precision {processes['precision']}): "
        f"{processes['seconds']} -> {processes['ratio']:.2f}x, labels identical "
        f"{processes['labels_identical']:.4f}"
    )


def report(rows: list[Timing], processes, flops: dict, peak: float, load) -> None:
    print(f"fp32 matmul peak: {peak:.1f} GFLOP/s ({torch.get_num_threads()} threads)")
    by_name = {r.name: r for r in rows}
    summary = {"peak_gflops": round(peak, 1), "rows": [], "processes": processes}
    for row in rows:
        kind = row.name.split(":")[0]
        fp32 = by_name[f"{kind}: predict_proba fp32"]
        m = row.texts
        rate = m / row.seconds
        agree = float((row.probs.argmax(1) == fp32.probs[:m].argmax(1)).mean())
        share = rate * flops[kind] / peak
        print(f"  {row.name:44s} {rate:8.1f} texts/s  {share:6.1%} of peak  "
              f"labels = fp32 {agree:.4f}")  # fmt: skip
        summary["rows"].append({"name": row.name, "texts": m, "seconds": round(row.seconds, 3),
                                "texts_per_s": round(rate, 1), "share_of_peak": round(share, 4),
                                "label_agreement_with_fp32": agree})  # fmt: skip
    for kind in ("short", "long"):
        fp32 = (
            by_name[f"{kind}: predict_proba fp32"].texts
            / by_name[f"{kind}: predict_proba fp32"].seconds
        )
        pipe = [r for r in rows if r.name.startswith(f"{kind}: pipeline, batch 1")][0]
        int8 = by_name[f"{kind}: predict_proba int8"]
        print(f"{kind}: fp32 {fp32 / (pipe.texts / pipe.seconds):.2f}x the warm pipeline; "
              f"int8 {int8.texts / int8.seconds / fp32:.2f}x fp32; "
              f"{flops[kind]:.2f} GFLOP per text")  # fmt: skip
    if processes:
        print_processes(processes)
    summary["machine_load"] = load.to_json()
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
