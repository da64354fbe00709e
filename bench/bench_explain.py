"""Explanation latency and convergence: `core.analysis.explain.explain_text` (attention maps +
Integrated Gradients + bag-of-words contributions) on 40-word demo complaints with the bundled
MiniLM.

    .venv/bin/python -m bench.bench_explain [--steps 8 16 32] [--threads 1 2] [--fit-head 300]

The classifier is the bundled all-MiniLM-L6-v2 encoder with a 5-desk head (load_backbone +
TransformerClassifier). An untrained head gives tiny logit gaps, which make the *relative*
convergence delta meaningless, so by default the head is fitted (logistic regression on the
frozen mean-pooled features of `--fit-head` demo complaints): time does not depend on the head,
the delta does. Prints, per thread count and step count, the median wall time of one explanation
(and of its attention-only part, the named baseline: one forward pass) and the convergence delta
relative to the logit gap (median and worst over the complaints)."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from core.analysis.explain import ExplainConfig, attention_maps, encode_text, explain_text
from core.data.demo import DemoConfig, generate_demo_data
from core.models.baseline import BagOfWordsClassifier
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import TransformerClassifier
from core.text import words

WORDS = 40  # the "40-word complaint"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--texts", type=int, default=5, help="40-word complaints to explain")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per complaint")
    parser.add_argument("--fit-head", type=int, default=300, help="rows to fit the head on; 0: no")
    return parser.parse_args()


def complaints_of_length(texts: list[str], n: int, *, words_per_text: int = WORDS) -> list[str]:
    """The first `n` texts with words_per_text ± 2 words."""
    chosen = [t for t in texts if abs(len(words(t)) - words_per_text) <= 2]
    if len(chosen) < n:
        raise SystemExit(f"only {len(chosen)} demo complaints have about {words_per_text} words")
    return chosen[:n]


def pooled_features(classifier: TransformerClassifier, texts: list[str]) -> np.ndarray:
    """Mean-pooled encoder states (n, hidden) of the mean-pooling model, in batches of 32."""
    encoder, tokenizer = classifier.model.encoder, classifier.tokenizer
    rows = []
    with torch.inference_mode():
        for start in range(0, len(texts), 32):
            batch = tokenizer(texts[start : start + 32], padding=True, truncation=True,
                              max_length=classifier.max_length, return_tensors="pt")  # fmt: skip
            states = encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            rows.append(((states * mask).sum(1) / mask.sum(1)).numpy())
    return np.concatenate(rows)


def fit_head(classifier: TransformerClassifier, texts: list[str], labels: list[str]) -> float:
    """Fit the linear head on frozen features; returns its training accuracy."""
    features = pooled_features(classifier, texts)
    logreg = LogisticRegression(C=10.0, max_iter=2000).fit(features, labels)
    order = [list(logreg.classes_).index(c) for c in classifier.classes_]
    head = classifier.model.classifier
    with torch.no_grad():
        head.weight.copy_(torch.tensor(logreg.coef_[order], dtype=torch.float32))
        head.bias.copy_(torch.tensor(logreg.intercept_[order], dtype=torch.float32))
    return float(logreg.score(features, labels))


def timed(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `repeats` calls (after one warm-up call).

    On a shared machine the wall time includes waiting for a core; with one thread the CPU
    time is close to what an idle core would take.
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def median_times(fn, texts: list[str], repeats: int) -> tuple[float, float]:
    """Median over `texts` of the median wall and CPU seconds of fn(text)."""
    times = [timed(lambda t=t: fn(t), repeats) for t in texts]
    return statistics.median(w for w, _ in times), statistics.median(c for _, c in times)


def main() -> None:
    args = parse_args()
    demo = generate_demo_data(DemoConfig(rows=3000))
    texts, labels = demo["text"].tolist(), demo["desk"].tolist()
    classes = sorted(set(labels))
    baseline = BagOfWordsClassifier().fit(texts[:2000], labels[:2000])
    torch.manual_seed(0)
    model, tokenizer = load_backbone(TrainConfig(pooling="mean"), classes)
    classifier = TransformerClassifier(model, tokenizer, classes, max_length=128)
    if args.fit_head:
        accuracy = fit_head(classifier, texts[: args.fit_head], labels[: args.fit_head])
        print(f"head fitted on {args.fit_head} complaints (training accuracy {accuracy:.2f})")
    complaints = complaints_of_length(texts[2000:], args.texts)
    pieces = [len(encode_text(classifier, t).tokens) for t in complaints]
    print(f"{len(complaints)} complaints of ~{WORDS} words: {pieces} word pieces with [CLS]/[SEP]")
    print("threads  steps  explain wall / cpu (s)  attention only wall / cpu (s)  "
          "|delta|/gap median  worst")  # fmt: skip
    for threads in args.threads:
        torch.set_num_threads(threads)
        forward = median_times(
            lambda t: attention_maps(model, encode_text(classifier, t)), complaints, args.repeats
        )
        for steps in args.steps:
            config = ExplainConfig(n_steps=steps)
            seconds = median_times(
                lambda t, c=config: explain_text(classifier, baseline, t, c),
                complaints,
                args.repeats,
            )
            relative = [explain_text(classifier, baseline, t, config).relative_delta or 0.0
                        for t in complaints]  # fmt: skip
            print(
                f"{threads:>7}  {steps:>5}  {seconds[0]:>10.3f} / {seconds[1]:<9.3f}  "
                f"{forward[0]:>17.3f} / {forward[1]:<10.3f}  "
                f"{statistics.median(relative):>18.2%}  {max(relative):>5.2%}"
            )


if __name__ == "__main__":
    main()
