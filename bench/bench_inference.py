"""Batch classification throughput: `TransformerClassifier.predict_proba` against transformers'
`pipeline("text-classification")` over the same saved model and the same demo texts.

    .venv/bin/python -m bench.bench_inference [--n 5000] [--model models/NAME]

Without --model, the bundled MiniLM with a fresh (untrained) 5-desk head is saved to a temporary
folder: throughput and label agreement do not depend on training. Prints texts/s, the ratio
against the pipeline baseline, and how often the two agree on the top label.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

from core.data.demo import DemoConfig, generate_demo_data
from core.models.device import configure_cpu_threads
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import TransformerClassifier

DESKS = ("Card Fraud", "KYC Update", "Loan Query", "Other", "UPI Dispute")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="demo texts to classify")
    parser.add_argument("--model", type=Path, help="a saved model folder (default: fresh MiniLM)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--pooling", choices=("mean", "cls"), default=TrainConfig().pooling)
    parser.add_argument(
        "--bf16-n", type=int, default=256,
        help="texts for the bf16 autocast timing (0 = skip; bf16 is emulated on CPUs without "
        "AMX / AVX-512 BF16 and then several times slower than fp32)",
    )  # fmt: skip
    return parser.parse_args()


def save_fresh_minilm(folder: Path, *, pooling: str, max_length: int) -> Path:
    """The bundled MiniLM with an untrained head, saved like a trained model would be."""
    torch.manual_seed(0)
    model, tokenizer = load_backbone(TrainConfig(pooling=pooling), DESKS)
    tokenizer.model_max_length = max_length
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def load_ours(folder: Path, *, max_length: int, precision: str) -> TransformerClassifier:
    model = AutoModelForSequenceClassification.from_pretrained(
        folder, use_safetensors=True, attn_implementation="eager"
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    return TransformerClassifier(
        model, tokenizer, labels, max_length=max_length, device="cpu", precision=precision
    )


def pipeline_proba(folder: Path, texts: list[str], classes: list[str], **options) -> np.ndarray:
    """pred_probs (n, k) from transformers' pipeline, columns in `classes` order."""
    classify = pipeline("text-classification", model=str(folder), device="cpu", top_k=None)
    outputs = classify(texts, truncation=True, **options)
    return np.array(
        [[{d["label"]: d["score"] for d in out}[c] for c in classes] for out in outputs]
    )


def timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def main() -> None:
    args = parse_args()
    threads = configure_cpu_threads()
    texts = generate_demo_data(DemoConfig(rows=args.n, seed=11))["text"].tolist()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.model or save_fresh_minilm(
            Path(scratch), pooling=args.pooling, max_length=args.max_length
        )
        ours = load_ours(folder, max_length=args.max_length, precision="fp32")
        classes = ours.classes_.tolist()
        ours.predict_proba(texts[:64])  # warm-up: first calls allocate
        rows = {}
        rows["pipeline (batch 1, default)"] = timed(lambda: pipeline_proba(folder, texts, classes))
        rows["pipeline (batch_size=64)"] = timed(
            lambda: pipeline_proba(folder, texts, classes, batch_size=args.batch_size)
        )
        rows["predict_proba fp32"] = timed(
            lambda: ours.predict_proba(texts, batch_size=args.batch_size)
        )
        if args.bf16_n:
            subset = texts[: args.bf16_n]
            bf16 = load_ours(folder, max_length=args.max_length, precision="bf16")
            rows[f"predict_proba fp32 (first {len(subset)})"] = timed(
                lambda: ours.predict_proba(subset, batch_size=args.batch_size)
            )
            rows[f"predict_proba bf16 (first {len(subset)})"] = timed(
                lambda: bf16.predict_proba(subset, batch_size=args.batch_size)
            )
    report(rows, len(texts), threads)


def report(rows: dict[str, tuple[np.ndarray, float]], n: int, threads: int) -> None:
    base_probs, base_seconds = rows["pipeline (batch 1, default)"]
    summary = {"texts": n, "torch_threads": threads, "results": {}}
    print(f"{n} demo texts, {threads} torch threads; baseline = pipeline (batch 1, default)")
    base_rate = n / base_seconds
    for name, (probs, seconds) in rows.items():
        m = len(probs)  # the bf16 rows cover only the first texts
        agree = float((probs.argmax(1) == base_probs[:m].argmax(1)).mean())
        diff = float(np.abs(probs - base_probs[:m]).max())
        ratio = m / seconds / base_rate
        print(
            f"  {name:36s} {m / seconds:8.1f} texts/s  {ratio:5.2f}x  "
            f"label agreement {agree:.4f}  max |dp| {diff:.2e}"
        )
        summary["results"][name] = {
            "texts": m,
            "seconds": round(seconds, 2),
            "texts_per_s": round(m / seconds, 1),
            "ratio_vs_pipeline": round(ratio, 2),
            "label_agreement": agree,
            "max_abs_prob_diff": diff,
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
