"""Small numpy functions several layers share: a stable softmax, the sinusoidal positional
encoding (the textbook transformer's, the tiny model's and the Attention lab's), and whether one
model gets clearly more validation rows right than another (the engine's choices)."""

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


# A choice between two models is only worth making when it shows on this many validation rows
# at least: one or two rows more of a few dozen is a coin's toss, not a pattern. (Added when the
# demo data at 10 rows a desk, 10 validation rows, kept a mix that fixed one of them and lost
# 2.7 points on the test rows: BENCHMARKS.md, "The right recipe for the data at hand".)
MIN_GAIN_ROWS = 3


def clearly_more_right(better: np.ndarray, other: np.ndarray) -> bool:
    """Whether `better` (per-row right or wrong, bool) gets clearly more of the same rows right
    than `other`: by at least MIN_GAIN_ROWS rows and by more than one standard error of the
    difference. Only the rows where exactly one is right tell them apart (McNemar): under "no
    difference" their count difference has a standard deviation of sqrt(such rows).

    Why: choices made on a few hundred validation rows (a head's strength, a blend's members)
    flip between retrainings when candidates differ by less than this, and each flip moves
    some routing decisions for nothing (#40, the closed loop's curve)."""
    better, other = np.asarray(better, dtype=bool), np.asarray(other, dtype=bool)
    gain = int(better.sum()) - int(other.sum())
    discordant = int((better != other).sum())
    return gain >= MIN_GAIN_ROWS and gain > np.sqrt(discordant)
