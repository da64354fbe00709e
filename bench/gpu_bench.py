"""GPU bench: one fine-tuning epoch and inference throughput of the MiniLM architecture, bf16.

    python bench/gpu_bench.py                     # CUDA, bf16 autocast, 3,000 rows / 5,000 texts
    python bench/gpu_bench.py --device cpu --quick  # smoke run anywhere

Self-contained (torch + transformers only) so that it runs on a bare GPU machine: the model is
built from bench/minilm_config.json with random weights (speed does not depend on the weights)
and fed random token ids whose lengths follow the demo data (median ~45 word pieces, capped at
max_length). It mirrors core.models.transformer: mean pooling head, AdamW, length-grouped
batches with dynamic padding, gradient clipping, bf16 autocast; inference sorts by length under
torch.inference_mode.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import BertConfig, BertModel

CONFIG_PATH = Path(__file__).resolve().parent / "minilm_config.json"


class MeanPoolClassifier(nn.Module):
    """BertModel, mean over real tokens, linear head: the shape of the project's default."""

    def __init__(self, config: BertConfig, num_labels: int) -> None:
        super().__init__()
        self.encoder = BertModel(config, add_pooling_layer=False)
        self.classifier = nn.Linear(config.hidden_size, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
        return self.classifier((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    # Default: bf16 on CUDA, fp32 on CPU: on a CPU without AMX / AVX-512 BF16, bf16 is emulated
    # (the --quick run took 6x longer to infer and 9x longer to train on an AVX2 EPYC).
    parser.add_argument("--precision", choices=("bf16", "fp32"))
    parser.add_argument("--train-rows", type=int, default=3000)
    parser.add_argument("--infer-rows", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--infer-batch-size", type=int, default=256)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--attn", default="eager", choices=("eager", "sdpa"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    return parser.parse_args()


def fake_lengths(n: int, max_length: int, rng: np.random.Generator) -> np.ndarray:
    """Word-piece lengths shaped like the demo complaints (log-normal, median ~45)."""
    return np.clip(rng.lognormal(mean=np.log(45), sigma=0.5, size=n).astype(int), 8, max_length)


def make_batch(lengths: np.ndarray, vocab: int, rng: np.random.Generator, device: torch.device):
    """Random ids padded to the longest row: input_ids, attention_mask (batch, seq)."""
    width = int(lengths.max())
    ids = rng.integers(1000, vocab, size=(len(lengths), width))
    mask = np.arange(width)[None, :] < lengths[:, None]
    ids = np.where(mask, ids, 0)
    return torch.as_tensor(ids, device=device), torch.as_tensor(
        mask.astype(np.int64), device=device
    )


def grouped(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(len(lengths))
    window = 50 * batch_size
    batches = []
    for start in range(0, len(order), window):
        chunk = order[start : start + window]
        chunk = chunk[np.argsort(-lengths[chunk])]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_epoch(model, lengths, args, device, vocab) -> float:
    """Seconds for one epoch over `lengths` rows (5 classes, random labels)."""
    rng = np.random.default_rng(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    model.train()
    sync(device)
    started = time.perf_counter()
    for rows in grouped(lengths, args.batch_size, rng):
        input_ids, attention_mask = make_batch(lengths[rows], vocab, rng, device)
        labels = torch.as_tensor(rng.integers(0, 5, size=len(rows)), device=device)
        with torch.autocast(device.type, torch.bfloat16, enabled=args.precision == "bf16"):
            logits = model(input_ids, attention_mask)
        loss = nn.functional.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    sync(device)
    return time.perf_counter() - started


def infer(model, lengths, args, device, vocab) -> float:
    """Seconds to classify `lengths` rows sorted by length, in batches."""
    rng = np.random.default_rng(1)
    order = np.argsort(lengths)
    model.eval()
    sync(device)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(order), args.infer_batch_size):
            rows = order[start : start + args.infer_batch_size]
            input_ids, attention_mask = make_batch(lengths[rows], vocab, rng, device)
            with torch.autocast(device.type, torch.bfloat16, enabled=args.precision == "bf16"):
                torch.softmax(model(input_ids, attention_mask).float(), -1).cpu()
    sync(device)
    return time.perf_counter() - started


def main() -> None:
    args = parse_args()
    if args.quick:
        args.train_rows, args.infer_rows, args.max_length = 64, 128, 64
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "error: no CUDA GPU visible; run with --device cpu --quick for a smoke test"
        )
    device = torch.device(args.device)
    args.precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    config = BertConfig.from_dict(json.loads(CONFIG_PATH.read_text(encoding="utf-8")))
    config._attn_implementation = args.attn  # the app loads "eager" so attentions can be shown
    torch.manual_seed(0)
    model = MeanPoolClassifier(config, num_labels=5).to(device)
    rng = np.random.default_rng(2)
    train_lengths = fake_lengths(args.train_rows, args.max_length, rng)
    infer_lengths = fake_lengths(args.infer_rows, args.max_length, rng)
    infer(model, infer_lengths[: args.infer_batch_size], args, device, config.vocab_size)  # warm-up
    epoch_s = train_epoch(model, train_lengths, args, device, config.vocab_size)
    infer_s = infer(model, infer_lengths, args, device, config.vocab_size)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name}, {args.precision}, {args.attn} attention, max_length {args.max_length}")
    print(f"  train: one epoch of {args.train_rows} rows (batch {args.batch_size}) {epoch_s:.2f} s")
    print(f"         {args.train_rows / epoch_s:.0f} rows/s")
    rate = args.infer_rows / infer_s
    print(f"  infer: {args.infer_rows} texts in {infer_s:.2f} s = {rate:.0f} texts/s")
    summary = {
        "device": name, "precision": args.precision, "attn": args.attn,
        "max_length": args.max_length, "train_rows": args.train_rows, "epoch_s": round(epoch_s, 3),
        "infer_rows": args.infer_rows, "infer_texts_per_s": round(rate, 1),
    }  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
