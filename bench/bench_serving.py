"""The serving runtime (issue #39): whole-process `classify` through the serving graph against the
transformers pipeline on the same texts, the labels' agreement, and one complaint routed as the
intake API routes it.

    .venv/bin/python -m bench.bench_serving --model models/NAME \\
        --texts bench/external/banking77/test.csv [--repeats 3] [--routings 300] [--force]

- Whole process, each command timed from start to exit, alternating, median of `--repeats`:
  bench/pipeline_script.py (import transformers, build `pipeline("text-classification")`, read
  the CSV, classify, write: the named baseline, fp32), and `python -m core classify` with
  `--precision auto` (what the serving rule picks here), `fp32`, `int8` (when the model ships
  it) and `bf16` (torch, the runtime before the serving graph).
- Labels: each run's `transformer_label` against the pipeline's label (the pipeline runs that
  model alone). Each differing row is listed with the fp32 torch model's top-two margin on it;
  a margin under 0.05 is a near-tie.
- Routing one complaint in process: `RoutingBatcher.columns` (what the intake API calls per
  request) on one text at a time, median and p90 in ms, graph against torch on the same texts.
- `--int8-variants TRAIN.csv`: instead of the above, the dynamic-int8 settings tried, each
  quantizing the model's fp32 graph and scored on the model's own validation rows (read from
  TRAIN.csv by the card's `split`, never the test rows): label agreement with the fp32 graph and
  the time of the test texts against the fp32 graph's.

The machine's load is recorded before and after (bench.machine); a busy start is refused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.machine import LoadGuard, machine, print_load, refuse_busy_start, shows_figures
from core.models.graph import INT8, NEAR_TIE, ServingEntry, top_two_margins

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = "pipeline script (fp32)"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a model saved by core train")
    parser.add_argument("--texts", type=Path, required=True, help="a CSV with a text column")
    parser.add_argument("--text-col", default="text")
    parser.add_argument("--repeats", type=int, default=3, help="whole-process runs of each")
    parser.add_argument("--routings", type=int, default=300, help="single complaints routed")
    parser.add_argument(
        "--int8-variants",
        type=Path,
        metavar="TRAIN_CSV",
        help="score the int8 settings tried on the model's validation rows",
    )
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def commands(model: Path, source: Path, scratch: Path, precisions: list[str]) -> dict:
    found = {PIPELINE: [sys.executable, "-m", "bench.pipeline_script", str(model), str(source),
                        str(scratch / "pipeline.csv")]}  # fmt: skip
    for precision in precisions:
        found[f"classify --precision {precision}"] = [
            sys.executable, "-m", "core", "classify", "--model", str(model), str(source),
            "--out", str(scratch / f"ours-{precision}.csv"), "--precision", precision,
            "--device", "cpu",
        ]  # fmt: skip
    return found


def whole_processes(args: argparse.Namespace, texts: list[str], precisions: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        source = scratch / "texts.csv"
        pd.DataFrame({"text": texts}).to_csv(source, index=False)
        runs = commands(args.model, source, scratch, precisions)
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeats):  # alternating: a change in load hits every command alike
            for name, command in runs.items():
                started = time.perf_counter()
                subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
                seconds[name].append(time.perf_counter() - started)
        theirs = pd.read_csv(scratch / "pipeline.csv")["predicted_label"].astype(str)
        labels = {
            p: pd.read_csv(scratch / f"ours-{p}.csv")["transformer_label"].astype(str)
            for p in precisions
        }
    return {"seconds": seconds, "pipeline": theirs, "labels": labels}


def fp32_margins(model: Path, texts: list[str]) -> np.ndarray:
    """The fp32 torch model's top-two margin on each text (masked, as classify reads it)."""
    from core.models.registry import load_model

    fp32 = load_model(model, device="cpu", precision="fp32").neural  # torch, on its fp32 runtime
    return top_two_margins(fp32.predict_proba(texts))


def routing_ms(model: Path, texts: list[str], precision: str) -> list[float]:
    """Milliseconds to route each text alone, as the intake API does (its batcher thread)."""
    from core.intake.batching import RoutingBatcher
    from core.models.registry import load_model

    loaded = load_model(model, device="cpu", precision=precision)
    batcher = RoutingBatcher()
    try:
        for text in texts[:20]:  # warm: first runs allocate
            batcher.columns(loaded, [text])
        times = []
        for text in texts:
            started = time.perf_counter()
            batcher.columns(loaded, [text])
            times.append((time.perf_counter() - started) * 1000)
    finally:
        batcher.close()
    return times


def main() -> int:
    args = parse_args()
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    texts = pd.read_csv(args.texts)[args.text_col].fillna("").astype(str).tolist()
    if args.int8_variants is not None:
        return int8_variants(args, texts, guard)
    card = json.loads((args.model / "card.json").read_text(encoding="utf-8"))
    entry = ServingEntry.from_card(card)
    shipped = () if entry is None else entry.shipped
    precisions = ["auto", "fp32", *([INT8] if INT8 in shipped else []), "bf16"]
    processes = whole_processes(args, texts, precisions)
    rng = np.random.default_rng(0)
    sample = [texts[i] for i in rng.choice(len(texts), size=args.routings, replace=False)]
    routing = {p: routing_ms(args.model, sample, p) for p in ("auto", "fp32", "bf16")}
    theirs = processes["pipeline"]
    differing = sorted({i for labels in processes["labels"].values()
                        for i in np.flatnonzero((labels != theirs).to_numpy())})  # fmt: skip
    margins = fp32_margins(args.model, [texts[i] for i in differing]) if differing else []
    load = guard.finish()
    if shows_figures(load):
        report(args, processes, routing, differing, margins, entry, texts)
    print_load(load)
    return 0


def _graph_logits(session, tokenizer, texts: list[str]) -> tuple[np.ndarray, float]:
    """Logits of `texts` (sorted by length, batches of 64) and the seconds the runs took."""
    from core.models.graph import padded

    ordered = sorted(texts, key=len)
    batches = [padded(tokenizer.head_ids(ordered[i : i + 64]), tokenizer.pad_token_id)
               for i in range(0, len(ordered), 64)]  # fmt: skip
    started = time.perf_counter()
    logits = np.concatenate([session.run(ids, mask)[0] for ids, mask in batches])
    return logits, time.perf_counter() - started


def _none(_name: str) -> bool:
    return False


INT8_VARIANTS = {  # name -> (quantize_dynamic options, which MatMul nodes stay fp32)
    "every MatMul, weights per channel": ({"per_channel": True}, _none),
    "weights per tensor": ({"per_channel": False}, _none),
    "7-bit weights per channel (reduce_range: the shipped setting)": (
        {"per_channel": True, "reduce_range": True},
        _none,
    ),
    "first layer kept fp32": ({"per_channel": True}, lambda n: "layer.0/" in n),
    "last layer kept fp32": ({"per_channel": True}, lambda n: "layer.5/" in n),
    "feed-forward output kept fp32": (
        {"per_channel": True},
        lambda n: "/output/dense" in n and "attention" not in n,
    ),
}


def int8_variants(args: argparse.Namespace, texts: list[str], guard: LoadGuard) -> int:
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from core.data.privacy import mask_texts
    from core.models.graph import GRAPH_FILES, GraphSession
    from core.models.serving import PieceTokenizer

    card = json.loads((args.model / "card.json").read_text(encoding="utf-8"))
    source = pd.read_csv(args.int8_variants)[args.text_col].fillna("").astype(str).tolist()
    validation = mask_texts([source[row - 2] for row in card["split"]["validation_rows"]])
    tokenizer = PieceTokenizer(args.model, int(card["max_length"]))
    fp32_path = args.model / GRAPH_FILES["fp32"]
    fp32 = GraphSession.read(fp32_path)
    reference, _ = _graph_logits(fp32, tokenizer, validation)
    _, fp32_seconds = _graph_logits(fp32, tokenizer, texts)
    nodes = [n.name for n in onnx.load(str(fp32_path)).graph.node if n.op_type == "MatMul"]
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice, once per variant
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, (options, kept) in INT8_VARIANTS.items():
            out = Path(scratch) / "int8.onnx"
            excluded = [n for n in nodes if kept(n)]
            quantize_dynamic(str(fp32_path), str(out), weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"], nodes_to_exclude=excluded,
                             **options)  # fmt: skip
            session = GraphSession.read(out)
            logits, _ = _graph_logits(session, tokenizer, validation)
            _, seconds = _graph_logits(session, tokenizer, texts)
            agreement = float((logits.argmax(1) == reference.argmax(1)).mean())
            rows.append((name, agreement, seconds))
    load = guard.finish()
    if shows_figures(load):
        print(f"machine: {json.dumps(machine())}")
        print(f"{len(validation)} validation rows; {len(texts)} texts timed; fp32 graph "
              f"{fp32_seconds:.2f} s")  # fmt: skip
        print("| int8 setting | same desk as fp32 (validation) | s | × fp32 graph |")
        print("|---|---:|---:|---:|")
        for name, agreement, seconds in rows:
            print(f"| {name} | {agreement:.4f} | {seconds:.2f} | {fp32_seconds / seconds:.2f}× |")
    print_load(load)
    return 0


def report(args, processes, routing, differing, margins, entry, texts) -> None:
    seconds = {k: statistics.median(v) for k, v in processes["seconds"].items()}
    base = seconds[PIPELINE]
    theirs = processes["pipeline"]
    margin_of = dict(zip(differing, margins, strict=True))
    print(f"machine: {json.dumps(machine())}")
    print(f"{len(texts)} texts, median of {args.repeats} whole processes")
    print(f"| command | s | × pipeline | labels identical | differing (near-ties < {NEAR_TIE}) |")
    print("|---|---:|---:|---:|---|")
    print(f"| {PIPELINE} | {base:.2f} | 1.00× | | |")
    for precision, labels in processes["labels"].items():
        name = f"classify --precision {precision}"
        rows = np.flatnonzero((labels != theirs).to_numpy())
        listed = ", ".join(f"{i} ({margin_of[i]:.3f})" for i in rows[:12])
        ties = sum(margin_of[i] < NEAR_TIE for i in rows)
        print(f"| {name} | {seconds[name]:.2f} | {base / seconds[name]:.2f}× | "
              f"{float((labels == theirs).mean()):.4f} | {len(rows)} ({ties} near-ties): "
              f"{listed} |")  # fmt: skip
    print("\nrouting one complaint in process (RoutingBatcher.columns), ms")
    for precision, times in routing.items():
        print(f"  --precision {precision}: median {statistics.median(times):.2f}, "
              f"p90 {np.percentile(times, 90):.2f} ({len(times)} complaints)")  # fmt: skip
    if entry is not None:
        print("\nthe card's checks on the validation rows:")
        for precision, check in entry.checks.items():
            print(f"  {precision}: {json.dumps(check.to_json())}")
    print(json.dumps({"seconds": seconds, "routing_median_ms": {
        p: statistics.median(t) for p, t in routing.items()}}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
