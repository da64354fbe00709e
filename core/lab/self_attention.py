"""The hand-checkable self-attention worked example: softmax(QKᵀ/√d_k)V with every step kept.

Vectors are rows (Q = X·W_Q, the convention of the textbook's example and of PyTorch's Linear
layers); it is the convention that reproduces the textbook's printed numbers. Also here:
multi-head attention, sinusoidal positional encoding, and attention's cost vs a recurrent layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from core.checks import check_int_fields
from core.errors import UserError
from core.numeric import softmax
from core.progress import check_cancel

TEXTBOOK_TOKENS = ("UPI", "failed", "instantly")
TEXTBOOK_X = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
TEXTBOOK_W_Q = ((1.0, 0.0), (0.0, 1.0))
TEXTBOOK_W_K = ((0.0, 1.0), (1.0, 0.0))
TEXTBOOK_W_V = ((1.0, 1.0), (0.0, 1.0))
# The token the textbook appends to show that one more token re-weights all the others.
AGAIN_TOKEN = "again"
AGAIN_X = (-1.0, 1.0)
# A second head for the two-head illustration (not from the textbook): its queries read only the
# first input feature, so it matches tokens differently; keys and values are the inputs.
SECOND_HEAD_W_Q = ((1.0, 0.0), (0.0, 0.0))
SECOND_HEAD_W_K = ((1.0, 0.0), (0.0, 1.0))
SECOND_HEAD_W_V = ((1.0, 0.0), (0.0, 1.0))
# Output projection (heads·d_v = 4, d_out = 2) that averages the two heads' outputs.
AVERAGE_HEADS_W_O = ((0.5, 0.0), (0.0, 0.5), (0.5, 0.0), (0.0, 0.5))
TOKEN_COLUMN = "token"

STEP_NAMES = ("X", "W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "weights", "output")


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one scaled dot-product self-attention over n tokens.

    Shapes: X (n, d_model); W_Q, W_K (d_model, d_k); W_V (d_model, d_v); Q, K (n, d_k);
    V (n, d_v); scores = QKᵀ, scaled = scores/√d_k, weights = row-softmax(scaled): (n, n);
    output = weights·V (n, d_v). Row i of `weights` is how much token i attends to each token.
    """

    tokens: tuple[str, ...]
    X: np.ndarray
    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    d_k: int


@dataclass(frozen=True)
class MultiHeadSteps:
    """Multi-head self-attention: per-head steps, their concatenation and the output projection.

    Shapes: concat (n, heads·d_v); W_O (heads·d_v, d_out); output = concat·W_O (n, d_out).
    """

    tokens: tuple[str, ...]
    heads: tuple[AttentionSteps, ...]
    concat: np.ndarray
    W_O: np.ndarray
    output: np.ndarray


def _as_matrix(name: str, values: object) -> np.ndarray:
    try:
        matrix = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise UserError(f"{name} must be a matrix of numbers ({error})") from error
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise UserError(f"{name} must be a non-empty 2-D matrix; got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise UserError(
            f"{name} contains a missing or infinite value; enter a number in every cell"
        )
    return matrix


def _check_tokens(tokens: Sequence[str] | None, n: int) -> tuple[str, ...]:
    if tokens is None:
        return tuple(f"t{i + 1}" for i in range(n))
    tokens = tuple(str(t) for t in tokens)
    if len(tokens) != n:
        raise UserError(f"got {len(tokens)} tokens for {n} rows of X; give one token per row")
    return tokens


def _check_projection(name: str, W: np.ndarray, d_model: int) -> None:
    if W.shape[0] != d_model:
        raise UserError(
            f"{name} has {W.shape[0]} rows but X has {d_model} columns; "
            f"{name} must have one row per column of X (shape ({d_model}, d))"
        )


def self_attention(
    X: object,
    W_Q: object,
    W_K: object,
    W_V: object,
    *,
    tokens: Sequence[str] | None = None,
) -> AttentionSteps:
    """Scaled dot-product self-attention of the rows of X, keeping every step.

    Parameters
    ----------
    X : (n, d_model) token vectors, one row per token.
    W_Q, W_K : (d_model, d_k) query and key projections.
    W_V : (d_model, d_v) value projection.
    tokens : n labels for the rows (default t1..tn).

    Raises UserError when a matrix is not numeric, not 2-D, or its shape does not fit.
    """
    X, W_Q, W_K, W_V = (
        _as_matrix(n, m)
        for n, m in zip(("X", "W_Q", "W_K", "W_V"), (X, W_Q, W_K, W_V), strict=True)
    )
    tokens = _check_tokens(tokens, X.shape[0])
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        _check_projection(name, W, X.shape[1])
    if W_Q.shape[1] != W_K.shape[1]:
        raise UserError(
            f"W_Q has {W_Q.shape[1]} columns and W_K has {W_K.shape[1]}; queries and keys "
            "must have the same width d_k to be compared"
        )
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    d_k = W_K.shape[1]
    scores = Q @ K.T
    scaled = scores / np.sqrt(d_k)
    weights = softmax(scaled, axis=-1)
    return AttentionSteps(
        tokens, X, W_Q, W_K, W_V, Q, K, V, scores, scaled, weights, weights @ V, d_k
    )


def textbook_example(*, append_again: bool = False) -> AttentionSteps:
    """The textbook's three-token example ("UPI failed instantly"), optionally plus "again"."""
    tokens, X = TEXTBOOK_TOKENS, TEXTBOOK_X
    if append_again:
        tokens, X = (*tokens, AGAIN_TOKEN), (*X, AGAIN_X)
    return self_attention(X, TEXTBOOK_W_Q, TEXTBOOK_W_K, TEXTBOOK_W_V, tokens=tokens)


def tokens_and_matrix(
    frame: pd.DataFrame, *, token_column: str = TOKEN_COLUMN
) -> tuple[tuple[str, ...], np.ndarray]:
    """Split an edited token table into token names and the matrix X.

    frame: one row per token; `token_column` holds the names, every other column is one
    dimension of the token vectors. Returns (tokens, X) with X of shape (n, d_model).
    Raises UserError when there are no rows, a name is blank, or a value is not a number.
    """
    if token_column not in frame.columns:
        raise UserError(f"the table needs a {token_column!r} column with one name per row")
    if frame.empty:
        raise UserError("X has no rows; add at least one token")
    names = frame[token_column].tolist()
    blank = [i + 1 for i, name in enumerate(names) if pd.isna(name) or not str(name).strip()]
    if blank:
        raise UserError(f"row {blank[0]} of X has no token name; type a name or delete the row")
    X = _as_matrix("X", frame.drop(columns=token_column).to_numpy(dtype=object))
    return tuple(str(name).strip() for name in names), X


def append_token(steps: AttentionSteps, token: str, x: Sequence[float]) -> AttentionSteps:
    """The same attention (same W_Q, W_K, W_V) with one more token appended at the end.

    x : (d_model,) the new token's vector, e.g. AGAIN_X for the textbook's "again".
    """
    row = _as_matrix(f"the vector of {token!r}", [x])  # (1, d)
    if row.shape[1] != steps.X.shape[1]:
        raise UserError(
            f"the vector of {token!r} has {row.shape[1]} values but the tokens have "
            f"{steps.X.shape[1]}; give one value per column of X"
        )
    return self_attention(
        np.vstack([steps.X, row]), steps.W_Q, steps.W_K, steps.W_V, tokens=(*steps.tokens, token)
    )


def multi_head_attention(
    X: object,
    W_Q: Sequence[object],
    W_K: Sequence[object],
    W_V: Sequence[object],
    W_O: object,
    *,
    tokens: Sequence[str] | None = None,
) -> MultiHeadSteps:
    """Multi-head self-attention: one projection triple per head, concatenated, then W_O.

    Parameters
    ----------
    X : (n, d_model) token vectors.
    W_Q, W_K, W_V : one (d_model, d_k) / (d_model, d_k) / (d_model, d_v) matrix per head.
    W_O : (heads·d_v, d_out) output projection applied to the concatenated head outputs.
    """
    if not len(W_Q) == len(W_K) == len(W_V) >= 1:
        raise UserError(
            f"got {len(W_Q)} W_Q, {len(W_K)} W_K and {len(W_V)} W_V matrices; "
            "give one of each per head (at least one head)"
        )
    heads = tuple(
        self_attention(X, q, k, v, tokens=tokens) for q, k, v in zip(W_Q, W_K, W_V, strict=True)
    )
    concat = np.concatenate([h.output for h in heads], axis=1)
    W_O = _as_matrix("W_O", W_O)
    if W_O.shape[0] != concat.shape[1]:
        raise UserError(
            f"W_O has {W_O.shape[0]} rows but the concatenated heads have {concat.shape[1]} "
            "columns; W_O needs one row per concatenated value dimension"
        )
    return MultiHeadSteps(heads[0].tokens, heads, concat, W_O, concat @ W_O)


def unique_labels(tokens: Sequence[str]) -> list[str]:
    """Tokens made unique for use as table labels: a repeated token gets "#2", "#3", ..."""
    seen: dict[str, int] = {}
    labels = []
    for token in tokens:
        seen[token] = seen.get(token, 0) + 1
        labels.append(token if seen[token] == 1 else f"{token}#{seen[token]}")
    return labels


def _dims(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{j + 1}" for j in range(count)]


def step_table(steps: AttentionSteps, name: str) -> pd.DataFrame:
    """One step of `steps` as a labelled matrix: rows are tokens (or input dims for W_*).

    Token-by-token steps (scores, scaled, weights) have one column per key token; vector steps
    have columns x1.. (X), q1.. (Q), k1.., v1.., z1.. (output); projections W_* have rows x1..
    """
    if name not in STEP_NAMES:
        raise UserError(f"unknown step {name!r}; choose one of {', '.join(STEP_NAMES)}")
    labels = unique_labels(steps.tokens)
    matrix = getattr(steps, name)
    d_model = steps.X.shape[1]
    layout = {
        "X": (labels, _dims("x", d_model)),
        "W_Q": (_dims("x", d_model), _dims("q", matrix.shape[1])),
        "W_K": (_dims("x", d_model), _dims("k", matrix.shape[1])),
        "W_V": (_dims("x", d_model), _dims("v", matrix.shape[1])),
        "Q": (labels, _dims("q", matrix.shape[1])),
        "K": (labels, _dims("k", matrix.shape[1])),
        "V": (labels, _dims("v", matrix.shape[1])),
        "output": (labels, _dims("z", matrix.shape[1])),
    }
    rows, columns = layout.get(name, (labels, labels))
    frame = pd.DataFrame(matrix, index=pd.Index(rows, name="row"), columns=columns)
    frame.columns.name = "column"
    return frame


def step_tables(steps: AttentionSteps) -> dict[str, pd.DataFrame]:
    """Every step of `steps` as a labelled matrix, in the order of the computation."""
    return {name: step_table(steps, name) for name in STEP_NAMES}


def weight_changes(before: AttentionSteps, after: AttentionSteps) -> pd.DataFrame:
    """Tidy comparison of two attention weight matrices (e.g. without and with "again").

    One row per (query, key) of `after`; `before` is NaN where the query or key is new.
    Columns: query, key, before, after, change.
    """
    old = step_table(before, "weights").stack().rename("before")
    new = step_table(after, "weights").stack().rename("after")
    frame = pd.concat([new, old], axis=1).reindex(new.index)
    frame["change"] = frame["after"] - frame["before"]
    frame.index.names = ["query", "key"]
    return frame.reset_index()[["query", "key", "before", "after", "change"]]


def _vector(values: np.ndarray, decimals: int) -> str:
    return "[" + ", ".join(f"{v:.{decimals}f}" for v in values) + "]"


def softmax_formula(steps: AttentionSteps, row: int = 0, *, decimals: int = 4) -> str:
    """Row `row` of the softmax written out for a hand check: e^s, their sum, the weights.

    Scaled scores above 50 are shifted by the row maximum first (as `softmax` does) so the
    exponentials stay printable; the weights are the same either way.
    """
    scaled = steps.scaled[row]
    shift = float(scaled.max()) if scaled.max() > 50 else 0.0
    exps = np.exp(scaled - shift)
    label = "e^s" if shift == 0.0 else "e^(s − max s)"
    return (
        f"{label} = {_vector(exps, decimals)}, sum = {exps.sum():.{decimals}f}; "
        f"weights = {label} / sum = {_vector(steps.weights[row], decimals)}"
    )


def output_formula(
    steps: AttentionSteps, row: int = 0, *, decimals: int = 3, weight_decimals: int = 4
) -> str:
    """Output row `row` written out for a hand check: z = Σ_j w_j × v_j = result."""
    terms = " + ".join(
        f"{w:.{weight_decimals}f} × {_vector(v, decimals)}"
        for w, v in zip(steps.weights[row], steps.V, strict=True)
    )
    return f"z = {terms} = {_vector(steps.output[row], decimals)}"


def attention_ops(n: int, d: int) -> int:
    """Multiply-adds of the n×n attention scores over d dimensions: n²·d."""
    return n * n * d


def recurrent_ops(n: int, d: int) -> int:
    """Multiply-adds of a recurrent layer: n sequential steps of a d×d matrix product, n·d².

    The textbook's count; a real LSTM does eight such products per step (four gates, each on the
    input and on the hidden state), and attention's Q/K/V/O projections add 4·n·d².
    """
    return n * d * d


def cost_table(ns: Sequence[int], *, d: int = 768) -> pd.DataFrame:
    """Operation counts of self-attention and a recurrent layer per n: columns n, layer, ops."""
    rows = [
        row
        for n in ns
        for row in (
            {"n": n, "layer": "self-attention (n²·d)", "ops": attention_ops(n, d)},
            {"n": n, "layer": "recurrent (n·d²)", "ops": recurrent_ops(n, d)},
        )
    ]
    return pd.DataFrame(rows, columns=["n", "layer", "ops"])


_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def scientific(value: float, *, digits: int = 3) -> str:
    """`value` in scientific notation with `digits` significant digits: 192000000 → "1.92×10⁸"."""
    if digits < 1:
        raise UserError(f"digits must be at least 1; got {digits}")
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    power = int(exponent)
    return mantissa if power == 0 else f"{mantissa}×10{str(power).translate(_SUPERSCRIPTS)}"


def _median_seconds(layer_call, repeats: int) -> float:
    layer_call()  # warm-up: the first call pays for allocation and kernel selection
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        layer_call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def time_attention_vs_lstm(
    ns: Sequence[int],
    *,
    d: int = 768,
    heads: int = 12,
    repeats: int = 3,
    seed: int = 0,
    cancel: threading.Event | None = None,
) -> pd.DataFrame:
    """Measured seconds per forward pass of one attention layer and one LSTM layer on this CPU.

    The attention layer is torch.nn.MultiheadAttention(d, heads), projections included; the
    recurrent layer is torch.nn.LSTM(d, d). Batch of one sequence of n random vectors; the median
    of `repeats` timed calls after one warm-up. Columns: n, layer, seconds. A set `cancel`
    stops it between two measurements (core.progress.Cancelled).
    """
    import torch  # imported here: the worked example itself needs numpy only

    if d % heads:
        raise UserError(f"d = {d} must be divisible by heads = {heads}")
    if repeats < 1 or not ns or min(ns) < 1:
        raise UserError("give at least one sequence length n ≥ 1 and repeats ≥ 1")
    generator = torch.Generator().manual_seed(seed)  # its own: a page must not seed torch
    layers = {
        "self-attention": _attention_call(torch.nn.MultiheadAttention(d, heads, batch_first=True)),
        "LSTM": torch.nn.LSTM(d, d, batch_first=True).eval(),
    }
    rows = []
    with torch.inference_mode():
        for n in ns:
            x = torch.randn(1, n, d, generator=generator)  # (batch 1, n, d)
            for name, layer in layers.items():
                check_cancel(cancel)
                seconds = _median_seconds(lambda layer=layer, x=x: layer(x), repeats)
                rows.append({"n": n, "layer": name, "seconds": seconds})
    return pd.DataFrame(rows, columns=["n", "layer", "seconds"])


def _attention_call(attention):
    """Self-attention as a one-argument callable: queries, keys and values all come from x."""
    attention.eval()
    return lambda x: attention(x, x, x, need_weights=False)


# The largest timing a visitor may ask for (the Attention lab's choices): it runs on the short
# lane, where it must finish well within the lane's time limit on two cores.
TIMING_LIMITS = {"max_n": 1024, "d": 768, "heads": 64, "repeats": 5}


@dataclass(frozen=True)
class TimingConfig:
    """What to time: one attention layer against one LSTM layer over doubling lengths n."""

    min_n: int = 16
    max_n: int = 512  # n = 16, 32, ..., 512: a few seconds on two idle CPU cores
    d: int = 256  # below the textbook's 768 so that the default run stays short
    heads: int = 8
    repeats: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        check_int_fields(self, min_n=1, max_n=1, d=1, heads=1, repeats=1, seed=0)
        for name, most in TIMING_LIMITS.items():
            if getattr(self, name) > most:
                raise UserError(f"{name} may be at most {most:,} here, got {getattr(self, name):,}")

    @property
    def ns(self) -> tuple[int, ...]:
        """The sequence lengths timed: min_n, 2·min_n, ... up to max_n."""
        lengths, n = [], self.min_n
        while n <= self.max_n:
            lengths.append(n)
            n *= 2
        return tuple(lengths)


@dataclass(frozen=True)
class TimingResult:
    """A timing run: table (columns n, layer, seconds), how and when it was measured."""

    config: TimingConfig
    table: pd.DataFrame
    threads: int  # torch's intra-op CPU threads during the run
    measured_at: str  # local time, ISO 8601 to the second
    total_seconds: float


def measure_attention_vs_lstm(
    config: TimingConfig, *, cancel: threading.Event | None = None
) -> TimingResult:
    """Run `time_attention_vs_lstm` for `config` and record the threads, time and duration; a
    set `cancel` stops it between two measurements."""
    import torch

    if config.min_n < 1 or config.max_n < config.min_n:
        raise UserError(
            f"need 1 ≤ min_n ≤ max_n; got min_n = {config.min_n}, max_n = {config.max_n}"
        )
    start = time.perf_counter()
    table = time_attention_vs_lstm(
        config.ns, d=config.d, heads=config.heads, repeats=config.repeats, seed=config.seed,
        cancel=cancel,
    )  # fmt: skip
    return TimingResult(
        config=config,
        table=table,
        threads=torch.get_num_threads(),
        measured_at=datetime.now().isoformat(sep=" ", timespec="seconds"),
        total_seconds=time.perf_counter() - start,
    )
