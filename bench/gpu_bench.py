"""GPU bench: the project's own fine-tuning and classification code, on the MiniLM architecture
with random weights, over short queries and whole demo complaints; bf16 autocast on CUDA.

    python -m bench.gpu_bench [--texts short|long|both] [--train-rows 10000] [--force]
    python -m bench.gpu_bench --device cpu --quick --threads 1   # smoke run anywhere (< 1 min)

What runs is the code of `python -m core train` and `classify`: `fine_tune` (load_backbone:
MeanPoolForSequenceClassification around a BertModel, eager attention; seeded dropout;
`fit_classifier`: AdamW, length-grouped batches, dynamic padding, bf16 autocast on CUDA, the
validation pass that ends each epoch) and `NeuralClassifier.predict_proba` with precision
"auto", called as `classify` calls it (`predict_in_batches`) and once over all texts. Only the
inputs are made here, because a bare GPU machine has neither the bundled weights nor a network:
- the backbone: bench/minilm_config.json with random weights (speed does not depend on their
  values), saved as safetensors to a temporary folder that `load_backbone` reads like any
  local backbone;
- the tokenizer: a WordPiece trained in-process on demo complaints, saved in that folder. Its
  vocabulary (1,500 pieces by default) splits demo texts as finely as MiniLM's own: median 44
  pieces per complaint with either (p95 116 against MiniLM's 125), 14 per short text (p95 20
  with either); the JSON reports the lengths measured.
Texts are demo complaints (core.data.demo): "long" whole complaints, "short" the first
--short-words words of each one's first sentence (the size of a typed query).

Goals on one H200: at least 20,000 complaints classified per second; under 20 s per epoch of
10,000 short training rows. Throughput is also read as a share of a matmul peak measured here
(the CPU's fp32 peak, and on CUDA the GPU's bf16 and fp32 peaks). Prints one JSON document on
stdout; the summary and the load line go to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import WordPieceTrainer
from torch import nn

try:  # core's own requirements (scikit-learn, openpyxl, ...) may be missing on a bare machine
    from transformers import set_seed

    from bench.machine import (
        LoadGuard,
        command_line,
        matmul_peak_gflops,
        print_load,
        refuse_busy_start,
        shows_figures,
    )
    from core.data.dataset import Dataset
    from core.data.demo import DemoConfig, generate_demo_data
    from core.data.privacy import mask_texts
    from core.models.classifier import predict_in_batches
    from core.models.device import configure_cpu_threads
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.inference import DEFAULT_BATCH_SIZE, NeuralClassifier
    from core.models.transformer.training import fine_tune
    from core.text import cut_for_tokens
except ModuleNotFoundError as exc:
    if exc.name in ("bench", "core"):
        raise SystemExit(
            "error: run it from the repository root: python -m bench.gpu_bench"
        ) from exc
    raise SystemExit(
        f"error: core needs the module {exc.name!r}, which is not installed here; "
        "install the project's requirements (pip install -r requirements.txt)"
    ) from exc

CONFIG_PATH = Path(__file__).resolve().parent / "minilm_config.json"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4; [PAD] = pad_token_id
FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--texts", default="both", choices=("short", "long", "both"))
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--val-rows", type=int, default=2_500, help="validated after the epoch")
    parser.add_argument("--infer-rows", type=int, default=50_000, help="texts classified")
    parser.add_argument("--batch-size", type=int, default=TrainConfig().batch_size)
    parser.add_argument("--max-length", type=int, default=TrainConfig().max_length)
    parser.add_argument(
        "--infer-batch-size", type=int, default=DEFAULT_BATCH_SIZE,
        help="batch of the one-call predict_proba figure (classify uses its own default)",
    )  # fmt: skip
    parser.add_argument("--short-words", type=int, default=9, help="words of a short text")
    parser.add_argument("--vocab-size", type=int, default=1500, help="WordPiece vocabulary")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: all allowed)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    parser.add_argument(
        "--wait-s", type=float, default=300, help="longest wait for a quiet machine first"
    )
    args = parser.parse_args()
    if args.quick:
        args.train_rows, args.val_rows, args.infer_rows = 32, 16, 64
    if min(args.train_rows, args.val_rows, args.infer_rows) < 16:
        parser.error("--train-rows, --val-rows and --infer-rows need at least 16 rows each")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU visible; run with --device cpu --quick for a smoke test")
    return args


# ------------------------------------------------------------------------------- the inputs


def short_text(text: str, words: int) -> str:
    """The first `words` words of the first sentence: the size of a typed query."""
    return " ".join(FIRST_SENTENCE.split(text, maxsplit=1)[0].split()[:words])


def build_tokenizer(texts: Sequence[str], vocab_size: int) -> transformers.PreTrainedTokenizerFast:
    """A lower-casing BERT-style WordPiece tokenizer trained on `texts`: [CLS] text [SEP]."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS))
    tokenizer.train_from_iterator(texts, trainer)
    ids = {token: tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]")}
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=list(ids.items())
    )
    tokenizer.decoder = decoders.WordPiece()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )  # fmt: skip


def write_backbone(folder: Path, tokenizer: transformers.PreTrainedTokenizerFast) -> Path:
    """A MiniLM-shaped BertModel with random weights and `tokenizer`, saved as a local backbone
    folder (config.json, model.safetensors, tokenizer files) for `TrainConfig.backbone`."""
    config = transformers.BertConfig.from_dict(json.loads(CONFIG_PATH.read_text("utf-8")))
    transformers.BertModel(config).save_pretrained(folder)  # with the pooler, as MiniLM ships
    tokenizer.save_pretrained(folder)
    return folder


def demo_texts(rows: int, seed: int) -> tuple[list[str], list[str]]:
    """`rows` demo complaints and their desks."""
    frame = generate_demo_data(DemoConfig(rows=max(rows, 50), seed=seed)).head(rows)
    return frame["text"].tolist(), frame["desk"].tolist()


def token_lengths(tokenizer, texts: Sequence[str], max_length: int) -> np.ndarray:
    """Word pieces per text (n,) as the model sees it: masked, cut, truncated, [CLS]/[SEP]."""
    cut = mask_texts(cut_for_tokens(t, max_length) for t in texts)
    encoded = tokenizer(cut, truncation=True, max_length=max_length)["input_ids"]
    return np.asarray([len(ids) for ids in encoded])


# ---------------------------------------------------------------------- peaks and FLOPs


def cuda_matmul_peak_gflops(dtype: torch.dtype, *, size: int = 8192, calls: int = 50) -> float:
    """GFLOP/s of square matrix products on the current GPU, timed with CUDA events."""
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    torch.mm(a, b)  # warm-up: the first call picks the kernel
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        torch.mm(a, b)
    end.record()
    end.synchronize()
    return 2 * size**3 * calls / (start.elapsed_time(end) / 1e3) / 1e9


def matmul_peaks(device: torch.device) -> dict[str, float]:
    """The measured peaks throughput is read against, GFLOP/s."""
    peaks = {"cpu_fp32": round(matmul_peak_gflops(), 1)}
    if device.type == "cuda":
        peaks["cuda_bf16"] = round(cuda_matmul_peak_gflops(torch.bfloat16), 1)
        peaks["cuda_fp32"] = round(cuda_matmul_peak_gflops(torch.float32), 1)
    return peaks


def forward_gflop(model: nn.Module, lengths: np.ndarray) -> float:
    """Useful FLOPs of one forward pass over texts of `lengths` word pieces (n,), in GFLOP:
    2 per weight of the encoder layers' linear maps per real token, plus attention's two
    (n x n) products per layer (q kᵀ and weights v). Padding and the head are not counted."""
    layers = model.encoder.encoder  # BertEncoder: the stack the tokens go through
    linear = sum(m.weight.numel() for m in layers.modules() if isinstance(m, nn.Linear))
    config = model.config.encoder
    attention = 4 * config.num_hidden_layers * config.hidden_size
    n = lengths.astype(np.float64)
    return float((2 * linear * n + attention * n**2).sum()) / 1e9


# ------------------------------------------------------------------------ the measurements


def timed_epoch(train: Dataset, val: Dataset, config: TrainConfig):
    """One epoch of `fine_tune` after a 3-step warm-up run on a fresh model (kernels chosen,
    allocator grown); the classifier and the epoch's seconds from the call to the last progress
    report (building the model from its config, its steps and the validation pass that ends
    the epoch: the queue, not the loop, keeps time now)."""
    warm_train = train.subset(range(min(len(train), 64)))
    fine_tune(warm_train, val.subset(range(min(len(val), 32))), replace(config, max_steps=3))
    started, last = time.perf_counter(), [0.0]
    neural, outcome = fine_tune(
        train, val, config, on_progress=lambda _: last.__setitem__(0, time.perf_counter())
    )
    return neural, last[0] - started, outcome.steps


def seconds_of(fn, *args, **kwargs) -> float:
    """Wall seconds of `fn(*args, **kwargs)`; its results come back to the CPU, so the GPU is
    done when it returns."""
    started = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - started


def run_workload(kind: str, data, tokenizer, folder: Path, args, peak: float) -> dict:
    """Train one epoch and classify, on `kind` ("short" or "long") texts; the figures."""
    (texts, labels), (infer, _) = data
    if kind == "short":
        texts = [short_text(t, args.short_words) for t in texts]
        infer = [short_text(t, args.short_words) for t in infer]
    n = args.train_rows
    train = Dataset(texts=texts[:n], labels=labels[:n])
    val = Dataset(texts=texts[n:], labels=labels[n:])
    config = TrainConfig(
        backbone=str(folder), epochs=1, batch_size=args.batch_size,
        max_length=args.max_length, device=args.device, seed=0,
    )  # fmt: skip
    neural, epoch_s, steps = timed_epoch(train, val, config)
    val_s = seconds_of(neural.predict, list(val.texts))  # the epoch's validation pass
    neural.predict_proba(infer[:256])  # warm-up at inference batch shapes
    classify_s = seconds_of(predict_in_batches, neural, infer)
    one_call_s = seconds_of(neural.predict_proba, infer, batch_size=args.infer_batch_size)
    return figures(kind, neural, tokenizer, (train, val, infer), args, peak,
                   {"epoch": epoch_s, "val": val_s, "classify": classify_s,
                    "one_call": one_call_s, "steps": steps})  # fmt: skip


def figures(kind, neural: NeuralClassifier, tokenizer, data, args, peak, t) -> dict:
    """Rates, word-piece lengths and achieved GFLOP/s (and their share of `peak`) of a workload."""
    train, val, infer = data
    named = {"train": train.texts, "val": val.texts, "infer": infer}
    lengths = {name: token_lengths(tokenizer, x, args.max_length) for name, x in named.items()}
    fwd = {name: forward_gflop(neural.model, x) for name, x in lengths.items()}
    train_gflop = 3 * fwd["train"] + fwd["val"]  # backward ~ 2 forwards
    train_rate, infer_rate = train_gflop / t["epoch"], fwd["infer"] / t["classify"]
    return {
        "texts": kind,
        "word_pieces": {name: {"median": float(np.median(x)), "p95": float(np.percentile(x, 95))}
                        for name, x in lengths.items()},
        "train": {
            "rows": len(train), "val_rows": len(val), "batch_size": args.batch_size,
            "steps": t["steps"], "epoch_s": round(t["epoch"], 3),
            "val_pass_s": round(t["val"], 3),
            "rows_per_s": round(len(train) / t["epoch"], 1),
            "gflop_per_s": round(train_rate, 1), "share_of_peak": round(train_rate / peak, 4),
        },
        "classify": {
            "texts": len(infer), "precision": neural.precision,
            "seconds": round(t["classify"], 3),
            "per_s": round(len(infer) / t["classify"], 1),
            "gflop_per_s": round(infer_rate, 1), "share_of_peak": round(infer_rate / peak, 4),
            "one_call_batch_size": args.infer_batch_size,
            "one_call_per_s": round(len(infer) / t["one_call"], 1),
        },
    }  # fmt: skip


# ------------------------------------------------------------------------------------ main


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = configure_cpu_threads()
    guard = LoadGuard.start(force=args.force, max_wait_s=args.wait_s)
    if refuse_busy_start(guard):
        return 1
    device = torch.device(args.device)
    other_gpu_gib = gpu_memory_in_use_gib(device)
    peaks = matmul_peaks(device)
    set_seed(0)  # the random backbone's weights; everything else has its own seeded generator
    train_data = demo_texts(args.train_rows + args.val_rows, seed=7)
    data = (train_data, demo_texts(args.infer_rows, seed=8))
    tokenizer = build_tokenizer(demo_texts(3000, seed=1)[0], args.vocab_size)
    kinds = ("short", "long") if args.texts == "both" else (args.texts,)
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        folder = write_backbone(Path(tmp), tokenizer)
        peak_name = "cuda_bf16" if device.type == "cuda" else "cpu_fp32"
        workloads = [
            run_workload(kind, data, tokenizer, folder, args, peaks[peak_name]) for kind in kinds
        ]
    load = guard.finish()
    document = {
        "command": command_line("bench.gpu_bench"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        # fit_classifier's rule: bf16 autocast on CUDA, fp32 on CPU; classify's is per workload
        "train_precision": "bf16" if device.type == "cuda" else "fp32",
        "attention": "eager", "max_length": args.max_length, "torch_threads": threads,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "gpu_memory_in_use_before_gib": other_gpu_gib,
        "matmul_peak_gflops": peaks, "share_of_peak_is_of": peak_name,
        "machine_load": load.to_json(),
    }  # fmt: skip
    if shows_figures(load):
        document["workloads"] = workloads
        print_summary(document)
    print(json.dumps(document, indent=2))
    print_load(load, file=sys.stderr)
    return 0


def gpu_memory_in_use_gib(device: torch.device) -> float | None:
    """GPU memory in use before the bench allocates anything: another job's, if not 0."""
    if device.type != "cuda":
        return None
    free, total = torch.cuda.mem_get_info(device)
    return round((total - free) / 2**30, 2)


def print_summary(document: dict) -> None:
    """A few readable lines on stderr (stdout holds the JSON document)."""
    print(f"{document['device']}, training in {document['train_precision']}, peaks "
          f"{document['matmul_peak_gflops']} GFLOP/s", file=sys.stderr)  # fmt: skip
    for w in document["workloads"]:
        t, c, pieces = w["train"], w["classify"], w["word_pieces"]["infer"]["median"]
        print(f"  {w['texts']:>5} (median {pieces:.0f} pieces): epoch of {t['rows']:,} rows "
              f"{t['epoch_s']:.2f} s ({t['share_of_peak']:.1%} of peak); classify "
              f"({c['precision']}) {c['per_s']:,.0f}/s ({c['share_of_peak']:.1%}), one call "
              f"{c['one_call_per_s']:,.0f}/s", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
