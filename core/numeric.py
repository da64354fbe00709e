"""Small numpy functions several layers share: a stable softmax and the sinusoidal positional
encoding (the textbook transformer's, the tiny model's and the Attention lab's)."""

from __future__ import annotations

import numpy as np

from core.errors import UserError


def softmax(values: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis` (the max is subtracted first)."""
    shifted = values - values.max(axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def positional_encoding(n_positions: int, d_model: int) -> np.ndarray:
    """Sinusoidal positional encoding, (n_positions, d_model).

    PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    """
    if n_positions < 1 or d_model < 1:
        raise UserError(
            f"need at least one position and one dimension; got {n_positions}, {d_model}"
        )
    positions = np.arange(n_positions, dtype=float)[:, None]
    even_dims = np.arange(0, d_model, 2, dtype=float)
    angles = positions / np.power(10000.0, even_dims / d_model)  # (n, ceil(d/2))
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return pe
