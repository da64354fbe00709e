"""Why each model routed one complaint: every head's attention, Integrated Gradients attributions
of the transformer and the bag-of-words contributions, both on the word grid of core.text.

Decision: Integrated Gradients runs on the *word* embedding layer (`get_input_embeddings()`, or
`.embeddings` of the tiny model), not on BERT's whole embedding block. That one layer exists in all
three architectures (BERT with [CLS] pooling, the mean-pooled encoder, the tiny transformer), and
it attributes the choice of each word: positions and token types are identical in the input and
the baseline, so they need no share. The attributed quantity is the target's centred logit
(logit minus the mean logit), the quantity the bag of words' word contributions add up to, so both
rows speak in log-odds against the average desk.

Decision: the integration adapts to each complaint. A fine-tuned model's logit along the straight
path from the PAD baseline to the text is nearly flat, then rises like a step over a tenth of the
path (bench/bench_explain.py): one even pass of Gauss-Legendre nodes misses the step (16 nodes:
median delta 7.8% of the logit gap on 50 demo complaints). So the path is first scanned with forward
passes only (`SCAN_POINTS` points, the price of about two integration steps), cut into
segments (each stretch where the logit moves, and the flat stretches between them, merged), and
each segment is integrated by Captum's IntegratedGradients on the word embeddings with
`n_steps` nodes, all segments in one batched call. Each segment's error is known exactly: its
attributions must add up to the change of the logit between its ends, which the scan measured.
While the summed errors exceed `max_relative_delta` of the logit gap, the worst segments are
halved, until `max_steps` is spent. The integration runs on a private SDPA view of the model (no
attention maps needed there); the attention maps come from one separate eager forward pass.

Decision: the probabilities and the desk an explanation reports are the classifier's own
`predict_proba` on its runtime (core.models.device.Runtime: device and precision, bf16 where the
hardware is fast), so Explain and Classify never disagree about one complaint. The attention maps
and the attributions come from fp32 passes (bf16 gradients are too coarse to integrate): they
explain the fp32 logit gap, which under bf16 can differ from the runtime's by rounding.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from captum.attr import IntegratedGradients
from torch import nn

from core.checks import check_complaint, check_int
from core.data.privacy import mask_personal_data
from core.errors import UserError
from core.models.classifier import Prediction, shared_classes
from core.models.transformer.inference import inference_view
from core.models.transformer.truncation import HEAD, head_tail_pieces, reads_head_and_tail
from core.progress import check_cancel
from core.text import WordSpan, cut_for_tokens, word_spans


@dataclass(frozen=True)
class ExplainConfig:
    """What to explain and how finely to integrate."""

    target: str | None = None  # the desk to explain; None: the transformer's predicted desk
    # Gauss-Legendre nodes per path segment (with max_relative_delta=None: of the one pass over
    # the whole path). Chosen with bench/bench_explain.py (BENCHMARKS.md, "Explanation latency").
    n_steps: int = 4
    # Halve segments until |delta| <= this share of the logit gap; None: one pass of n_steps.
    max_relative_delta: float | None = 0.02
    max_steps: int = 64  # integration steps spent at most on one complaint (each a fwd + bwd)
    # Interpolated inputs per forward pass; None sends all of a round at once, fastest for one
    # complaint on CPU. Set it (e.g. 8) to cap memory for long texts on a small GPU.
    internal_batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.target is not None and (not isinstance(self.target, str) or not self.target):
            raise UserError(f"target must be a desk name or None, got {self.target!r}")
        check_int("n_steps", self.n_steps, minimum=2)
        check_int("max_steps", self.max_steps, minimum=self.n_steps)
        if self.max_relative_delta is not None and not 0 < self.max_relative_delta < 1:
            raise UserError(
                f"max_relative_delta must lie in (0, 1) or be None, got {self.max_relative_delta!r}"
            )
        if self.internal_batch_size is not None:
            check_int("internal_batch_size", self.internal_batch_size, minimum=1)


@dataclass(frozen=True)
class EncodedText:
    """One text as the transformer reads it (truncated to its max_length, no padding)."""

    input_ids: torch.Tensor  # (1, seq)
    attention_mask: torch.Tensor  # (1, seq)
    tokens: tuple[str, ...]  # wordpieces (or tiny-model words), special tokens included
    offsets: tuple[tuple[int, int], ...]  # character span of each token in the text; (0, 0) special
    special: tuple[bool, ...]  # True for [CLS] / [SEP]


@dataclass(frozen=True)
class AttentionMaps:
    """Every layer's and head's attention over the real tokens of one text.

    weights (layers, heads, seq, seq), float32: row q is where token q looks; each row sums to 1.
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    has_cls: bool  # whether position 0 is a [CLS] token (the tiny mean-pooled model has none)

    @property
    def n_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1])

    def labels(self) -> list[str]:
        """Position-prefixed token labels ("3 card"), so repeated words stay apart on axes."""
        width = len(str(len(self.tokens) - 1))
        return [f"{i:0{width}d} {token}" for i, token in enumerate(self.tokens)]

    def cls_rows(self) -> np.ndarray:
        """Where position 0 ([CLS]) looks, per layer and head: (layers, heads, seq)."""
        return self.weights[:, :, 0, :]

    def rollout(self) -> np.ndarray:
        """Attention rollout (Abnar & Zuidema 2020) across all layers: (seq, seq), rows sum to 1."""
        return attention_rollout(self.weights)

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": self.n_layers,
            "heads": self.n_heads,
            "tokens": list(self.tokens),
            "rollout_cls": [float(x) for x in self.rollout()[0]] if self.has_cls else None,
        }


@dataclass(frozen=True)
class TokenAttribution:
    """Integrated Gradients per token, before the merge into words.

    scores (seq,) sum to `logit_gap - delta`: the centred target logit of the text minus that of
    the baseline (PAD tokens in every word position, [CLS] and [SEP] kept).
    """

    tokens: tuple[str, ...]
    scores: np.ndarray
    logit_gap: float
    delta: float  # convergence delta: sum(scores) - logit_gap
    n_steps: int


@dataclass(frozen=True)
class Explanation:
    """Both models' reasoning for one complaint, word by word, for one target desk.

    `transformer_scores[i]` and `bow_scores[i]` belong to `words[i]` (the words of
    core.text.word_spans, original casing). Words cut off by the transformer's truncation have
    `transformer_seen[i] = False` and a transformer score of 0.
    `token_offsets[t]` is the character span in `text` of token t of `tokens` and `attention`
    ((0, 0) for [CLS] and [SEP]): the model's own reading, kept so no consumer re-encodes.
    """

    text: str
    words: tuple[WordSpan, ...]
    neural_scores: tuple[float, ...]
    bow_scores: tuple[float, ...]
    neural_seen: tuple[bool, ...]
    neural: Prediction
    bow: Prediction
    target: str
    unassigned: float  # attribution of tokens inside no word: punctuation, symbols, emoji
    bow_intercept: float  # the bag of words' centred intercept for the target (not in any word)
    tokens: TokenAttribution
    token_offsets: tuple[tuple[int, int], ...]
    attention: AttentionMaps

    @property
    def delta(self) -> float:
        return self.tokens.delta

    @property
    def logit_gap(self) -> float:
        return self.tokens.logit_gap

    @property
    def relative_delta(self) -> float | None:
        """|delta| / |logit gap|; None when the gap is 0 (nothing to attribute)."""
        gap = abs(self.tokens.logit_gap)
        return abs(self.tokens.delta) / gap if gap > 1e-12 else None

    def to_json(self) -> dict[str, Any]:
        """The ARCHITECTURE.md `explain` document (and a few more keys)."""
        return {
            "text": self.text,
            "words": [w.text for w in self.words],
            "transformer_scores": list(self.neural_scores),
            "bow_scores": list(self.bow_scores),
            "transformer_seen": list(self.neural_seen),
            "transformer": self.neural.to_json(),
            "bow": self.bow.to_json(),
            "target": self.target,
            "delta": self.delta,
            "relative_delta": self.relative_delta,
            "logit_gap": self.logit_gap,
            "n_steps": self.tokens.n_steps,
            "unassigned": self.unassigned,
            "bow_intercept": self.bow_intercept,
            "attention": self.attention.to_json(),
        }


# --------------------------------------------------------------------------- encoding


def encode_text(neural: Any, text: str) -> EncodedText:
    """Tokenise `text` like `transformer.predict_proba` does, with character offsets.

    `transformer` is a core.models.transformer.inference.NeuralClassifier (a fast Hugging Face
    tokenizer or core.models.tiny.tokenizer.TinyTokenizer).
    """
    tokenizer = neural.tokenizer
    if hasattr(tokenizer, "word_offsets"):  # the tiny model's word-level tokenizer
        return _encode_tiny(tokenizer, text, neural.max_length)
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("explanations need a fast tokenizer (tokenizer.json); save the model again")
    if reads_head_and_tail(tokenizer, getattr(neural, "truncation", HEAD)):
        (read,) = head_tail_pieces(tokenizer, [text], neural.max_length)
        return EncodedText(
            input_ids=torch.tensor([read.ids]), attention_mask=torch.ones(1, len(read.ids),
                                                                         dtype=torch.long),
            tokens=tuple(tokenizer.convert_ids_to_tokens(list(read.ids))),
            offsets=read.offsets, special=read.special,
        )  # fmt: skip
    batch = tokenizer(
        cut_for_tokens(text, neural.max_length),  # a prefix: offsets still index `text`
        truncation=True,
        max_length=neural.max_length,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    ids = batch["input_ids"]
    return EncodedText(
        input_ids=ids,
        attention_mask=batch["attention_mask"],
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids[0].tolist())),
        offsets=tuple((int(s), int(e)) for s, e in batch["offset_mapping"][0].tolist()),
        special=tuple(bool(m) for m in batch["special_tokens_mask"][0].tolist()),
    )


def _encode_tiny(tokenizer: Any, text: str, max_length: int) -> EncodedText:
    ids = tokenizer.encode(text, truncation=True, max_length=max_length)
    offsets = tokenizer.word_offsets(text, truncation=True, max_length=max_length)
    cls_id = tokenizer.cls_token_id
    return EncodedText(
        input_ids=torch.tensor([ids], dtype=torch.long),
        attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
        offsets=tuple((int(s), int(e)) for s, e in offsets),
        special=tuple(cls_id is not None and i == cls_id for i in ids),
    )


# --------------------------------------------------------------------------- attention


def attention_rollout(weights: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): how much each token draws on each input token.

    weights (layers, heads, seq, seq) → (seq, seq). Per layer the heads are averaged, the
    identity is added for the residual connection and rows are renormalised; the layers are then
    multiplied from the first up: R = A_L · ... · A_1. Rows of R sum to 1.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 4 or weights.shape[2] != weights.shape[3]:
        raise UserError(f"expected (layers, heads, seq, seq) weights, got shape {weights.shape}")
    seq = weights.shape[-1]
    rollout = np.eye(seq)
    for layer in weights:
        mixed = layer.mean(axis=0) + np.eye(seq)  # (seq, seq)
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout
    return rollout


def _forward(model: nn.Module, encoded: EncodedText, *, output_attentions: bool) -> Any:
    device = _device(model)
    with torch.inference_mode():
        return model(
            input_ids=encoded.input_ids.to(device),
            attention_mask=encoded.attention_mask.to(device),
            output_attentions=output_attentions,
        )


def attention_maps(model: nn.Module, encoded: EncodedText) -> tuple[AttentionMaps, np.ndarray]:
    """Attention of every layer and head over the real tokens, and the logits (n_classes,).

    The model must run eager attention (attention probabilities are materialised);
    core.models.transformer loads every model that way.
    """
    out = _forward(model, encoded, output_attentions=True)
    if not out.attentions:
        raise RuntimeError(
            "the model returned no attention maps; load it with attn_implementation='eager'"
        )
    stacked = torch.stack([a[0] for a in out.attentions])  # (layers, heads, seq, seq)
    maps = AttentionMaps(
        tokens=encoded.tokens,
        # float32, as the model computed them: half the memory of float64 in every cache that
        # keeps an explanation, and the rollout works in float64 from them anyway
        weights=stacked.float().cpu().numpy(),
        has_cls=bool(encoded.special and encoded.special[0]),
    )
    return maps, out.logits[0].float().cpu().numpy()


# --------------------------------------------------------------------------- attributions


def embedding_layer(model: nn.Module) -> nn.Embedding:
    """The word-embedding table Integrated Gradients attributes to (see the module docstring)."""
    getter = getattr(model, "get_input_embeddings", None)
    layer = getter() if callable(getter) else getattr(model, "embeddings", None)
    if not isinstance(layer, nn.Embedding):
        raise TypeError(
            f"{type(model).__name__} has no word-embedding table to attribute to; expected a "
            "Hugging Face model or core.models.tiny's model"
        )
    return layer


def pad_baseline(encoded: EncodedText, pad_token_id: int) -> torch.Tensor:
    """input_ids (1, seq) with every non-special token replaced by PAD ([CLS], [SEP] kept)."""
    special = torch.tensor([encoded.special], dtype=torch.bool)
    return torch.where(special, encoded.input_ids, torch.full_like(encoded.input_ids, pad_token_id))


@dataclass(frozen=True, eq=False)  # compared by identity
class _Segment:
    """One piece [start, end] of the path from the baseline (0) to the text (1), integrated."""

    start: float
    end: float
    scores: np.ndarray  # (seq,) attributions of this piece
    error: float  # sum(scores) - (F(end) - F(start)): exact, both ends are measured


class _PathFunction:
    """The target's centred logit at points of the straight path between the baseline's and
    the text's word embeddings, with those embeddings swapped in by a hook on a private view.

    The view (core.models.transformer.inference.inference_view) shares the weights but not the
    modules, so the hook never touches the shared model another session may be running.
    """

    def __init__(self, model: nn.Module, encoded: EncodedText, target: int, pad_id: int) -> None:
        self.view = inference_view(model)
        self.layer = embedding_layer(self.view)
        device = _device(model)
        self.input_ids = encoded.input_ids.to(device)
        self.attention_mask = encoded.attention_mask.to(device)
        self.target = target
        with torch.no_grad():
            self.text = self.layer(self.input_ids).float()  # (1, seq, hidden)
            self.base = self.layer(pad_baseline(encoded, pad_id).to(device)).float()
        self._swap: torch.Tensor | None = None

    def point(self, alphas: Sequence[float]) -> torch.Tensor:
        """Word embeddings at path positions `alphas`: (len(alphas), seq, hidden)."""
        alpha = torch.tensor(list(alphas), dtype=self.text.dtype, device=self.text.device)
        return self.base + alpha.view(-1, 1, 1) * (self.text - self.base)

    def __call__(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Centred target logits (batch,) of word embeddings (batch, seq, hidden)."""
        batch = embeddings.shape[0]
        self._swap = embeddings
        handle = self.layer.register_forward_hook(lambda _m, _i, _o: self._swap)
        try:
            logits = self.view(
                input_ids=self.input_ids.expand(batch, -1),
                attention_mask=self.attention_mask.expand(batch, -1),
            ).logits.float()  # (batch, n_classes)
        finally:
            handle.remove()
            self._swap = None
        return logits[:, self.target] - logits.mean(dim=1)

    def values(self, alphas: Sequence[float]) -> list[float]:
        with torch.no_grad():
            return self(self.point(alphas)).double().tolist()


def _integrate(
    path: _PathFunction,
    pieces: list[tuple[float, float]],
    value: dict[float, float],
    n_steps: int,
    internal_batch_size: int | None,
) -> list[_Segment]:
    """Integrated Gradients over each piece (one batched Captum call), with its exact error."""
    starts, ends = zip(*pieces, strict=True)
    attributions = IntegratedGradients(path).attribute(
        path.point(ends), baselines=path.point(starts), n_steps=n_steps,
        method="gausslegendre", internal_batch_size=internal_batch_size,
    )  # fmt: skip
    scores = attributions.sum(dim=-1).detach().double().cpu().numpy()  # (pieces, seq)
    return [
        _Segment(a, b, row, float(row.sum()) - (value[b] - value[a]))
        for (a, b), row in zip(pieces, scores, strict=True)
    ]


SCAN_POINTS = 6  # forward passes that locate where the logit moves along the path
MOVING_SHARE = 0.05  # a scan interval holding this share of the logit's movement is a segment
MIN_TOLERANCE = 1e-4  # logit units: a text whose gap is ~0 is not refined to the step limit


def _pieces_by_change(value: dict[float, float]) -> list[tuple[float, float]]:
    """Path segments from the scanned logits: every interval where the logit moves by at least
    MOVING_SHARE of its total movement on its own, the flat stretches between them merged."""
    points = sorted(value)
    intervals = list(itertools.pairwise(points))
    moves = [abs(value[b] - value[a]) for a, b in intervals]
    total = sum(moves) or 1.0
    pieces, flat_from = [], 0.0
    for (a, b), move in zip(intervals, moves, strict=True):
        if move >= MOVING_SHARE * total:
            if flat_from < a:
                pieces.append((flat_from, a))
            pieces.append((a, b))
            flat_from = b
    if flat_from < 1.0:
        pieces.append((flat_from, 1.0))
    return pieces


def _to_refine(segments: list[_Segment], tolerance: float, affordable: int) -> list[_Segment]:
    """The segments to halve next: those whose error exceeds an even share of the tolerance,
    largest first, as many as the step budget affords; none once the summed errors fit."""
    if sum(abs(s.error) for s in segments) <= tolerance:
        return []
    share = tolerance / len(segments)  # one is over it whenever the sum is over the tolerance
    worst = sorted((s for s in segments if abs(s.error) > share), key=lambda s: -abs(s.error))
    return worst[:affordable]


def integrated_gradients(
    model: nn.Module,
    encoded: EncodedText,
    target_index: int,
    *,
    pad_token_id: int,
    n_steps: int = ExplainConfig.n_steps,
    max_relative_delta: float | None = ExplainConfig.max_relative_delta,
    max_steps: int = ExplainConfig.max_steps,
    internal_batch_size: int | None = None,
    logits: np.ndarray | None = None,
    cancel: threading.Event | None = None,
) -> TokenAttribution:
    """Integrated Gradients of the target's centred logit on the word embeddings, adaptive.

    With `max_relative_delta` None: one pass of `n_steps` Gauss-Legendre nodes over the whole
    path. Otherwise the path is scanned, cut into segments of `n_steps` nodes each, and the
    worst segments halved while the summed segment errors exceed `max_relative_delta` of the
    logit gap and `max_steps` allows (see the module docstring). Returns one score per token
    (seq,), the logit gap F(text) - F(baseline) and the convergence delta sum(scores) - gap.
    `logits` (n_classes,), the text's logits when the caller already has them, saves one
    forward pass. A set `cancel` stops it between refinements (core.progress.Cancelled).
    """
    path = _PathFunction(model, encoded, target_index, pad_token_id)
    adaptive = max_relative_delta is not None
    scanned = [i / SCAN_POINTS for i in range(SCAN_POINTS)] if adaptive else [0.0]
    scanned += [] if logits is not None else [1.0]
    value = dict(zip(scanned, path.values(scanned), strict=True))
    if logits is not None:
        value[1.0] = _centred(logits, target_index)
    gap = value[1.0] - value[0.0]
    pieces = _pieces_by_change(value) if adaptive else [(0.0, 1.0)]
    if len(pieces) * n_steps > max_steps:
        pieces = [(0.0, 1.0)]
    segments = _integrate(path, pieces, value, n_steps, internal_batch_size)
    steps = len(pieces) * n_steps
    while adaptive:
        check_cancel(cancel)
        affordable = (max_steps - steps) // (2 * n_steps)
        tolerance = max(max_relative_delta * abs(gap), MIN_TOLERANCE)
        chosen = _to_refine(segments, tolerance, affordable)
        if not chosen:
            break
        middles = [(s.start + s.end) / 2 for s in chosen]
        value.update(zip(middles, path.values(middles), strict=True))
        halves = [
            p for s, m in zip(chosen, middles, strict=True) for p in ((s.start, m), (m, s.end))
        ]
        segments = [s for s in segments if s not in chosen]
        segments += _integrate(path, halves, value, n_steps, internal_batch_size)
        steps += len(halves) * n_steps
    scores = np.sum([s.scores for s in segments], axis=0)
    return TokenAttribution(encoded.tokens, scores, gap, float(scores.sum()) - gap, steps)


def _centred(logits: np.ndarray, index: int) -> float:
    return float(logits[index] - logits.mean())


# --------------------------------------------------------------------------- words


def merge_to_words(
    text: str, offsets: Sequence[tuple[int, int]], scores: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Sum token scores into the words of `core.text.word_spans(text)`.

    offsets (seq,) character spans of the tokens, (0, 0) for special tokens; scores (seq,).
    A token's score is shared among the words it overlaps in proportion to the characters it
    covers in each (wordpieces lie inside one word; an [UNK] can span "x😀y"). Returns word
    scores (n_words,), whether each word was seen at all (n_words,), and the summed score of
    tokens that overlap no word (punctuation, "₹", emoji).
    """
    spans = word_spans(text)
    starts = [s.start for s in spans]
    word_scores = np.zeros(len(spans), dtype=np.float64)
    seen = np.zeros(len(spans), dtype=bool)
    unassigned = 0.0
    for (start, end), score in zip(offsets, scores, strict=True):
        if end <= start:
            continue  # a special token
        shares = _overlaps(spans, starts, start, end)
        if not shares:
            unassigned += float(score)
        covered = sum(n for _, n in shares)
        for index, n in shares:
            word_scores[index] += float(score) * n / covered
            seen[index] = True
    return word_scores, seen, unassigned


def _overlaps(
    spans: list[WordSpan], starts: list[int], start: int, end: int
) -> list[tuple[int, int]]:
    """(word index, characters shared) for every word overlapping [start, end)."""
    found = []
    index = max(bisect.bisect_right(starts, start) - 1, 0)
    while index < len(spans) and spans[index].start < end:
        shared = min(end, spans[index].end) - max(start, spans[index].start)
        if shared > 0:
            found.append((index, shared))
        index += 1
    return found


# --------------------------------------------------------------------------- the whole story


def _target_index(classes: list[str], target: str | None, pred_probs: np.ndarray) -> int:
    if target is None:
        return int(np.argmax(pred_probs))
    if target not in classes:
        raise UserError(f"unknown target desk {target!r}; use one of {classes}")
    return classes.index(target)


def explain_text(
    neural: Any,
    bow: Any,
    text: str,
    config: ExplainConfig = ExplainConfig(),
    *,
    cancel: threading.Event | None = None,
    decider: Any | None = None,
) -> Explanation:
    """Explain one complaint with both models, for `config.target` (default: the prediction).

    Parameters
    ----------
    transformer : core.models.transformer.inference.NeuralClassifier
        `.model` (eval mode, eager attention), `.tokenizer`, `.classes_`, `.max_length`, and
        `.predict_proba`, whose answer (on the model's runtime) the explanation reports.
    bow : core.models.bag_of_words.BagOfWordsClassifier
        Fitted on the same desks; its `word_contributions` give the bag-of-words row.
    text : str
        The complaint; it needs at least one word. It is explained as both models read it, with
        personal data masked (core.data.privacy), so `Explanation.text` is the masked text.
    config : ExplainConfig
        Target desk and integration settings.
    cancel : threading.Event, optional
        Checked between the steps of the integration (core.progress.Cancelled once set).
    decider : classifier, optional
        What routes the model's complaints (`LoadedModel.scorer`: its serving graph, or
        `neural` itself, the default); its probabilities are the answer reported, so Explain
        shows the decision Classify gives.
    """
    text = check_complaint(text, purpose="explain")
    classes = shared_classes(neural, bow)
    # The answer Classify gives for this text, from what routes it (the serving graph or torch on
    # its runtime); the eager fp32 pass below serves the attention maps and the attributions.
    pred_probs = (neural if decider is None else decider).predict_proba([text])[0]
    text = mask_personal_data(text)
    model = neural.model
    encoded = encode_text(neural, text)
    attention, logits = attention_maps(model, encoded)
    target_index = _target_index(classes, config.target, pred_probs)
    tokens = integrated_gradients(
        model, encoded, target_index,
        pad_token_id=_pad_token_id(neural.tokenizer), n_steps=config.n_steps,
        max_relative_delta=config.max_relative_delta, max_steps=config.max_steps,
        internal_batch_size=config.internal_batch_size, logits=logits, cancel=cancel,
    )  # fmt: skip
    word_scores, seen, unassigned = merge_to_words(text, encoded.offsets, tokens.scores)
    bow = bow.word_contributions(text, target=classes[target_index])
    return Explanation(
        text=text, words=tuple(bow.words),
        neural_scores=tuple(float(s) for s in word_scores),
        bow_scores=tuple(float(s) for s in bow.scores),
        neural_seen=tuple(bool(s) for s in seen),
        neural=Prediction.of(classes, pred_probs),
        bow=Prediction.of(classes, np.array([bow.probabilities[c] for c in classes])),
        target=classes[target_index], unassigned=unassigned, bow_intercept=bow.intercept,
        tokens=tokens, token_offsets=encoded.offsets, attention=attention,
    )  # fmt: skip


def _pad_token_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        raise UserError("the tokenizer has no PAD token to build the attribution baseline from")
    return int(pad)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device
