"""The textbook's minimal transformer classifier in PyTorch, with switchable positional encoding.

Positional encoding can be switched off; then the model cannot see word order: permuting the
words permutes the token outputs and leaves the pooled vector and the prediction unchanged. The
model follows the Hugging Face calling conventions, so the shared training loop and registry
treat it like any other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.errors import UserError
from core.models.scratch import (
    ScratchClassifierOutput,
    ScratchConfig,
    ScratchModel,
    is_model_dir,
    label_fields,
    mean_pool,
    size_limits,
)
from core.models.seeding import reset_parameters
from core.models.tiny.tokenizer import PAD_ID, TinyTokenizer
from core.numeric import positional_encoding

MODEL_TYPE = "tiny-transformer"
POOLINGS = ("mean", "cls")
# The tiny model's own upper bounds (core.models.scratch.size_limits adds the shared ones), far
# above anything it is trained with (max_length <= 512): the positional table alone is
# max_length x d_model floats and holds no saved weight, so the weight file cannot bound it.
SIZE_LIMITS = size_limits(n_heads=64, d_ff=8192, n_layers=48, max_length=4096)


@dataclass(frozen=True)
class TinyConfig(ScratchConfig):
    """Shape and behaviour of the tiny classifier; saved as config.json."""

    model_type: ClassVar[str] = MODEL_TYPE
    class_name: ClassVar[str] = "TinyTransformerForSequenceClassification"

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 1
    max_length: int = 64  # positions the sinusoidal table covers; the tokenizer truncates to it
    positional_encoding: bool = True  # off: the model sees a bag of words (order-blind)
    pooling: str = "mean"  # "mean" over real tokens, or "cls": the output at position 0 ([CLS])
    dropout: float = 0.1
    num_labels: int = 2
    id2label: dict[int, str] = field(default_factory=dict)  # empty: LABEL_0, LABEL_1, ...
    label2id: dict[str, int] = field(default_factory=dict)  # empty: the inverse of id2label
    layer_norm_eps: float = 1e-5
    # Factor on the word embeddings before positions are added: it sets how loud the word is
    # against its position. 1.0 is what configs saved before this field existed mean;
    # `create_tiny_classifier` writes its own choice explicitly.
    embedding_scale: float = 1.0

    __hash__ = ScratchConfig.config_hash  # the generated field hash would fail on the dicts

    def check_fields(self) -> None:
        """Refuse sizes, choices and scales the tiny transformer cannot be built from."""
        self.check_size_limits(SIZE_LIMITS)
        if self.d_model % self.n_heads:
            raise UserError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        self.check_pooling(POOLINGS)
        self.check_dropout()
        scale = self.embedding_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1e3:
            raise UserError(f"embedding_scale must be a number in (0, 1000]; got {scale!r}")


def is_tiny_model_dir(directory: str | Path) -> bool:
    """Whether `directory` holds a saved tiny transformer (config.json with its model_type)."""
    return is_model_dir(directory, MODEL_TYPE)


class TinySelfAttention(nn.Module):
    """Multi-head self-attention with learned Q/K/V/O projections and a padding mask."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_model // config.n_heads
        self.query = nn.Linear(config.d_model, config.d_model)
        self.key = nn.Linear(config.d_model, config.d_model)
        self.value = nn.Linear(config.d_model, config.d_model)
        self.output = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.d_head).transpose(1, 2)  # (b, heads, n, d_head)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (b, n, d), attention_mask (b, n) → output (b, n, d), weights (b, heads, n, n)."""
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (b, heads, n, n)
        padding = attention_mask[:, None, None, :] == 0  # (b, 1, 1, n): keys nobody may attend to
        scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        context = self.dropout(weights) @ v  # (b, heads, n, d_head)
        context = context.transpose(1, 2).reshape(x.shape)  # (b, n, d)
        return self.output(context), weights


class TinyEncoderLayer(nn.Module):
    """Self-attention and a position-wise feed-forward, each wrapped in residual + LayerNorm."""

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.attention = TinySelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ff_in = nn.Linear(config.d_model, config.d_ff)
        self.ff_out = nn.Linear(config.d_ff, config.d_model)
        self.output_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (b, n, d) → (b, n, d) and the attention weights (b, heads, n, n)."""
        attended, weights = self.attention(x, attention_mask)
        x = self.attention_norm(x + self.dropout(attended))
        fed = self.ff_out(F.relu(self.ff_in(x)))  # (b, n, d_ff) → (b, n, d)
        return self.output_norm(x + self.dropout(fed)), weights


class TinyTransformerForSequenceClassification(ScratchModel):
    """Embeddings (+ sinusoidal positions) → encoder layers → mean or [CLS] pooling → linear."""

    config_class = TinyConfig

    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model, padding_idx=PAD_ID)
        table = torch.tensor(
            positional_encoding(config.max_length, config.d_model), dtype=torch.float32
        )
        # Not persistent: the table is a formula, not a weight, so it is not saved.
        self.register_buffer("positional", table, persistent=False)
        self.layers = nn.ModuleList(TinyEncoderLayer(config) for _ in range(config.n_layers))
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.num_labels)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(b, n) ids → (b, n, d) scaled word embeddings plus positional encoding when on."""
        if input_ids.shape[1] > self.config.max_length:
            raise UserError(
                f"sequence of {input_ids.shape[1]} tokens exceeds max_length "
                f"{self.config.max_length}; tokenize with truncation=True"
            )
        x = self.embeddings(input_ids) * self.config.embedding_scale  # (b, n, d)
        if self.config.positional_encoding:
            x = x + self.positional[: input_ids.shape[1]]
        return self.dropout(x)

    def pool(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(b, n, d) → (b, d): mean over real tokens, or the [CLS] position."""
        if self.config.pooling == "cls":
            return x[:, 0]
        return mean_pool(x, attention_mask)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> ScratchClassifierOutput:
        """input_ids, attention_mask (b, n); labels (b,) → logits (b, num_labels) and more."""
        if attention_mask is None:
            attention_mask = (input_ids != PAD_ID).long()
        x = self.embed(input_ids)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, attention_mask)
            attentions.append(weights)
        pooled = self.pool(x, attention_mask)
        logits = self.classifier(self.dropout(pooled))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        # token_outputs: the last layer's (b, n, d_model); pooled (b, d_model)
        return ScratchClassifierOutput(
            logits, loss, tuple(attentions) if output_attentions else None, x, pooled
        )


def create_tiny_classifier(
    texts: Sequence[str],
    labels: Iterable[str],
    *,
    positional_encoding: bool = True,
    pooling: str = "mean",
    n_layers: int = 2,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 128,
    embedding_scale: float = 0.5,
    max_length: int = 64,
    dropout: float = 0.0,
    min_freq: int = 1,
    max_size: int = 20000,
    seed: int = 0,
    generator: torch.Generator | None = None,
) -> tuple[TinyTransformerForSequenceClassification, TinyTokenizer]:
    """A freshly initialised (seeded) tiny classifier and its tokenizer built from `texts`.

    The weights come from `generator` (default: one seeded with `seed`), never from torch's
    global generator, so concurrent jobs cannot change each other's models.

    `labels` are the training labels (or just the label set); they are sorted before ids are
    assigned. [CLS] is added to the vocabulary exactly when pooling is "cls".

    The architecture defaults are the setting that learned word order best on held-out demo
    twin groups (bench/bench_tiny_order.py, BENCHMARKS.md): two layers (one saw order less
    well), word embeddings at half scale (N(0, 1) embeddings otherwise drown the sinusoidal
    positions, whose entries lie in [-1, 1]) and no dropout (early stopping guards
    overfitting).
    """
    tokenizer = TinyTokenizer.build(
        texts, min_freq=min_freq, max_size=max_size, add_cls=pooling == "cls", max_length=max_length
    )
    config = TinyConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        n_layers=n_layers,
        embedding_scale=embedding_scale,
        max_length=max_length,
        positional_encoding=positional_encoding,
        pooling=pooling,
        dropout=dropout,
        **label_fields(labels),
    )
    model = TinyTransformerForSequenceClassification(config)
    reset_parameters(model, generator or torch.Generator().manual_seed(seed))
    return model, tokenizer


def predict_proba(
    model: TinyTransformerForSequenceClassification,
    tokenizer: TinyTokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
) -> np.ndarray:
    """Softmax probabilities (n_texts, num_labels), batched; columns follow id2label."""
    if model.training:
        raise RuntimeError("call model.eval() before predicting (dropout is active in train mode)")
    rows = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(list(texts[start : start + batch_size])).to(model.device)
            rows.append(model(**batch).logits.float().softmax(dim=-1).cpu().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, model.config.num_labels))
