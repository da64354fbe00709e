"""Explain view latency and convergence: `core.analysis.explain.explain_text` (one eager pass for
every head's attention, Integrated Gradients for the predicted desk, bag-of-words contributions)
on demo complaints of 50-70 word pieces, with a saved fine-tuned model.

    .venv/bin/python -m bench.bench_explain --model models/NAME [--texts 50] [--repeats 3]

Each setting is timed warm (one untimed call first, then the median of `--repeats` calls) on
every complaint; the report gives the latency and the relative convergence delta
(|delta| / |logit gap|) over the complaints: median, 90th percentile and worst, and the share
within 2% and within 0.5 s. Settings: fixed step counts (one Gauss-Legendre pass, the old
default was 16), the adaptive default (`ExplainConfig()`), and adaptive variants. The named
baseline is the attention-only forward pass (what the view costs without attributions).
`--mask-baseline` also integrates from [MASK] instead of PAD and reports how much the word
ranking changes (Spearman correlation of the word scores, and whether the top word is the same).
Complaints come from demo data seed 11 (the CLI's demo training data is seed 7). A delta is
undefined when the logit gap is zero; such complaints are counted apart, never as converged.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bench.machine import LoadGuard, print_load, refuse_busy_start, shows_figures
from core.analysis.explain import (
    ExplainConfig,
    attention_maps,
    encode_text,
    explain_text,
    integrated_gradients,
    merge_to_words,
)
from core.analysis.probe_compare import DEMO_TEXT
from core.data.demo import DemoConfig, generate_demo_data
from core.data.privacy import mask_personal_data
from core.models.registry import load_model

SECONDS_GOAL, DELTA_GOAL = 0.5, 0.02


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a saved fine-tuned model")
    parser.add_argument("--texts", type=int, default=50, help="complaints of 50-70 word pieces")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per complaint")
    parser.add_argument("--fixed", type=int, nargs="*", default=[16, 32], help="one-pass steps")
    parser.add_argument(
        "--adaptive", nargs="*", default=["3:64", "4:32"],
        help="adaptive variants NODES:LIMIT (nodes per segment; ExplainConfig() always runs)",
    )  # fmt: skip
    parser.add_argument("--mask-baseline", action="store_true", help="also compare [MASK]")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def complaints(loaded, n: int) -> list[str]:
    """The first `n` demo complaints (seed 11) of 50-70 word pieces, as Explain masks them."""
    texts = generate_demo_data(DemoConfig(rows=max(20 * n, 1000), seed=11))["text"].tolist()
    chosen = []
    for text in texts:
        text = mask_personal_data(text)
        if 50 <= len(encode_text(loaded.neural, text).tokens) <= 70:
            chosen.append(text)
        if len(chosen) == n:
            return chosen
    raise SystemExit(f"only {len(chosen)} demo complaints have 50-70 word pieces")


def warm_median(fn, repeats: int) -> tuple[float, object]:
    result = fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


@dataclass(frozen=True)
class Row:
    name: str
    seconds: list[float]
    relative: list[float | None]
    steps: list[int]

    def summary(self) -> dict:
        defined = [r for r in self.relative if r is not None]
        pct = lambda xs, q: float(np.percentile(xs, q)) if xs else None  # noqa: E731
        return {
            "setting": self.name,
            "seconds_median": pct(self.seconds, 50), "seconds_p90": pct(self.seconds, 90),
            "seconds_max": max(self.seconds),
            "delta_median": pct(defined, 50), "delta_p90": pct(defined, 90),
            "delta_max": max(defined) if defined else None,
            "share_delta_ok": sum(r <= DELTA_GOAL for r in defined) / len(self.relative),
            "share_fast": sum(s <= SECONDS_GOAL for s in self.seconds) / len(self.seconds),
            "share_both": sum(
                r is not None and r <= DELTA_GOAL and s <= SECONDS_GOAL
                for r, s in zip(self.relative, self.seconds, strict=True)
            ) / len(self.seconds),
            "undefined_delta": len(self.relative) - len(defined),
            "steps_median": statistics.median(self.steps), "steps_max": max(self.steps),
        }  # fmt: skip


def run_settings(settings, loaded, texts: list[str], repeats: int) -> list[Row]:
    """Every setting on every complaint, interleaved (text by text, all settings in turn), so a
    slower minute of the machine weighs on every setting alike rather than on one."""
    model = loaded.neural.model
    calls = [
        ("attention maps only (one eager pass)",
         lambda t: attention_maps(model, encode_text(loaded.neural, t))),
        *[(name, lambda t, c=config: explain_text(loaded.neural, loaded.bow, t, c))
          for name, config in settings],
    ]  # fmt: skip
    found = {name: ([], [], []) for name, _ in calls}
    for text in texts:
        for name, call in calls:
            took, result = warm_median(lambda c=call, t=text: c(t), repeats)
            seconds, relative, steps = found[name]
            seconds.append(took)
            relative.append(getattr(result, "relative_delta", None))
            steps.append(result.tokens.n_steps if hasattr(result, "tokens") else 0)
    return [Row(name, *found[name]) for name, _ in calls]


def bow_comparison(loaded, texts) -> dict:
    """PAD against [MASK] as the IG baseline, adaptive default: delta and word-ranking change."""
    neural = loaded.neural
    mask_id = neural.tokenizer.mask_token_id
    pad_id = neural.tokenizer.pad_token_id
    config = ExplainConfig()
    rhos, same_top, deltas = [], [], {"pad": [], "mask": []}
    for text in texts:
        encoded = encode_text(neural, text)
        _, logits = attention_maps(neural.model, encoded)
        target = int(np.argmax(logits))
        words = {}
        for name, token in (("pad", pad_id), ("mask", mask_id)):
            tokens = integrated_gradients(
                neural.model, encoded, target, pad_token_id=token, n_steps=config.n_steps,
                max_relative_delta=config.max_relative_delta, max_steps=config.max_steps,
                logits=logits,
            )  # fmt: skip
            gap = abs(tokens.logit_gap)
            deltas[name].append(abs(tokens.delta) / gap if gap > 1e-12 else None)
            words[name] = merge_to_words(text, encoded.offsets, tokens.scores)[0]
        rhos.append(spearman(words["pad"], words["mask"]))
        same_top.append(int(np.argmax(words["pad"]) == np.argmax(words["mask"])))
    defined = {k: [d for d in v if d is not None] for k, v in deltas.items()}
    return {
        "spearman_median": statistics.median(rhos), "spearman_min": min(rhos),
        "same_top_word": sum(same_top) / len(same_top),
        "delta_median_pad": statistics.median(defined["pad"]),
        "delta_median_mask": statistics.median(defined["mask"]),
    }  # fmt: skip


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ranks = lambda x: np.argsort(np.argsort(x))  # noqa: E731
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def main() -> int:
    args = parse_args()
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    loaded = load_model(args.model, precision="fp32")
    texts = complaints(loaded, args.texts)
    pieces = [len(encode_text(loaded.neural, t).tokens) for t in texts]
    print(
        f"{len(texts)} complaints, {min(pieces)}-{max(pieces)} word pieces "
        f"(median {statistics.median(pieces)}), {torch.get_num_threads()} torch threads"
    )
    settings = [("adaptive default " + describe(ExplainConfig()), ExplainConfig())]
    for first_limit in args.adaptive:
        first, limit = (int(x) for x in first_limit.split(":"))
        config = ExplainConfig(n_steps=first, max_steps=limit)
        settings.append((f"adaptive {describe(config)}", config))
    settings += [
        (f"fixed {n} steps", ExplainConfig(n_steps=n, max_steps=n, max_relative_delta=None))
        for n in args.fixed
    ]
    rows = run_settings(settings, loaded, texts, args.repeats)
    example = run_settings([("page example", ExplainConfig())], loaded, [DEMO_TEXT], args.repeats)[
        1
    ]
    comparison = bow_comparison(loaded, texts) if args.mask_baseline else None
    load = guard.finish()
    if shows_figures(load):
        report(rows, example, comparison, load)
    print_load(load)
    return 0


def describe(config: ExplainConfig) -> str:
    return f"({config.n_steps} per segment, limit {config.max_steps}, {config.max_relative_delta})"


def report(rows: list[Row], example: Row, comparison: dict | None, load) -> None:
    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    print(f"{'setting':52s} {'s med':>6} {'s p90':>6} {'s max':>6} {'d med':>7} {'d p90':>7} "
          f"{'d max':>7} {'d<=2%':>6} {'<=.5s':>6} {'both':>6} {'steps':>9}")  # fmt: skip
    summaries = [row.summary() for row in rows]
    for s in summaries:
        print(
            f"{s['setting']:52s} {s['seconds_median']:6.3f} {s['seconds_p90']:6.3f} "
            f"{s['seconds_max']:6.3f} {fmt(s['delta_median'], '7.2%')} "
            f"{fmt(s['delta_p90'], '7.2%')} {fmt(s['delta_max'], '7.2%')} "
            f"{s['share_delta_ok']:6.0%} {s['share_fast']:6.0%} {s['share_both']:6.0%} "
            f"{s['steps_median']:>4}/{s['steps_max']:<4}"
        )
    page = example.summary()
    print(f"page example ({DEMO_TEXT!r}): {page['seconds_median']:.3f} s, delta "
          f"{fmt(page['delta_median'], '.2%')}, {page['steps_median']} steps")  # fmt: skip
    if comparison:
        print("PAD vs [MASK] baseline (adaptive default): " + json.dumps(comparison))
    print(json.dumps({"rows": summaries, "page_example": page, "pad_vs_mask": comparison,
                      "machine_load": load.to_json()}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
