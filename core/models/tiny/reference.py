"""A numpy reference forward pass of the tiny transformer, written from the textbook formulas, to
check the PyTorch model number by number."""

from __future__ import annotations

import numpy as np
from torch import nn

from core.errors import UserError
from core.models.tiny.model import TinyConfig
from core.numeric import positional_encoding, softmax


def numpy_params(model: nn.Module) -> dict[str, np.ndarray]:
    """The model's state_dict as float64 numpy arrays (the input of `reference_forward`)."""
    return {k: v.detach().cpu().double().numpy() for k, v in model.state_dict().items()}


def _np_layer_norm(
    params: dict[str, np.ndarray], name: str, x: np.ndarray, eps: float
) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)  # biased variance, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(var + eps) * params[f"{name}.weight"] + params[f"{name}.bias"]


def _np_linear(params: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def _np_attention(
    params: dict[str, np.ndarray], prefix: str, x: np.ndarray, mask: np.ndarray, heads: int
) -> np.ndarray:
    b, n, d = x.shape

    def split(name: str) -> np.ndarray:  # (b, n, d) → (b, heads, n, d_head)
        return (
            _np_linear(params, prefix + name, x)
            .reshape(b, n, heads, d // heads)
            .transpose(0, 2, 1, 3)
        )

    q, k, v = split("query"), split("key"), split("value")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads)  # (b, heads, n, n)
    scores = np.where(mask[:, None, None, :] == 0, np.finfo(scores.dtype).min, scores)
    context = (softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
    return _np_linear(params, prefix + "output", context)


def _np_encoder_layer(
    params: dict[str, np.ndarray], prefix: str, x: np.ndarray, mask: np.ndarray, config: TinyConfig
) -> np.ndarray:
    attended = _np_attention(params, prefix + "attention.", x, mask, config.n_heads)
    x = _np_layer_norm(params, prefix + "attention_norm", x + attended, config.layer_norm_eps)
    hidden = np.maximum(_np_linear(params, prefix + "ff_in", x), 0.0)  # ReLU, (b, n, d_ff)
    fed = _np_linear(params, prefix + "ff_out", hidden)
    return _np_layer_norm(params, prefix + "output_norm", x + fed, config.layer_norm_eps)


def reference_forward(
    params: dict[str, np.ndarray],
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    config: TinyConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The eval-mode forward pass in numpy alone, from `numpy_params(model)`.

    input_ids, attention_mask (b, n) → logits (b, num_labels), token_outputs (b, n, d_model),
    pooled (b, d_model).
    """
    input_ids, mask = np.asarray(input_ids), np.asarray(attention_mask)
    if input_ids.shape != mask.shape or input_ids.ndim != 2:
        raise UserError("input_ids and attention_mask must both be (batch, seq) arrays")
    x = params["embeddings.weight"][input_ids] * config.embedding_scale  # (b, n, d)
    if config.positional_encoding:
        x = x + positional_encoding(config.max_length, config.d_model)[: input_ids.shape[1]]
    for i in range(config.n_layers):
        x = _np_encoder_layer(params, f"layers.{i}.", x, mask, config)
    if config.pooling == "cls":
        pooled = x[:, 0]
    else:
        weights = mask[..., None].astype(x.dtype)
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
    return _np_linear(params, "classifier", pooled), x, pooled
