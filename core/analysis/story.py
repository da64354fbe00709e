"""The presenter's story of one complaint, in order: the bag of words' blindness (a reordered
complaint it scores identically while the transformer moves), the transformer's answer, and the
attention heads that looked hardest at the words whose positions the reordering changed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.analysis.explain import AttentionMaps, Explanation
from core.analysis.perturbations import ORDER_KINDS
from core.analysis.probe_compare import ProbeOutcome, ProbeResult
from core.models.classifier import Prediction
from core.text import WordSpan, word_spans

TOP_HEADS = 3
# The transformer "moves" when some desk's probability changes by at least this much: the tiny
# demo models move by a few thousandths, float noise by under a millionth.
MIN_MOVE = 1e-4
# The bag of words scores two texts "identically" when no probability differs by more than
# this (float rounding of the same sums in another order).
SAME_SCORE = 1e-9


@dataclass(frozen=True)
class BlindSpot:
    """Step 1: a reordering with the same bag of words, both models on it.

    moved: indices into the explanation's words whose word changed position (the order words)."""

    outcome: ProbeOutcome
    moved: tuple[int, ...]

    @property
    def text(self) -> str:
        return self.outcome.perturbation.text


@dataclass(frozen=True)
class HeadFocus:
    """Step 3: one head and the attention it gives the order words.

    layer, head: 0-based; mass: the attention all tokens give the order words in this head,
    averaged over tokens (each token's row sums to 1, so mass is in [0, 1])."""

    layer: int
    head: int
    mass: float


@dataclass(frozen=True)
class Story:
    """One complaint told in three steps (see the module docstring).

    blind_spot is None when no order rewrite left the bag of words unmoved while moving the
    transformer (`note` says why); heads is then empty too."""

    text: str
    neural: Prediction
    bow: Prediction
    target: str
    blind_spot: BlindSpot | None
    order_words: tuple[str, ...]
    order_tokens: tuple[int, ...]  # positions in the explanation's attention maps
    heads: tuple[HeadFocus, ...]
    note: str


def _largest_change(a: Prediction, b: Prediction) -> float:
    return max(abs(a.probabilities[d] - b.probabilities[d]) for d in a.probabilities)


def _blind(probe: ProbeResult, outcome: ProbeOutcome) -> bool:
    """Same bag, an order rewrite, the bag of words unmoved and the transformer moved."""
    p = outcome.perturbation
    return (
        p.kind in ORDER_KINDS
        and p.bag_unchanged
        and _largest_change(probe.bow, outcome.bow) <= SAME_SCORE
        and _largest_change(probe.neural, outcome.neural) >= MIN_MOVE
    )


def pick_blind_spot(probe: ProbeResult) -> ProbeOutcome | None:
    """The order rewrite that tells the story best: one that flips the transformer first, then
    the most targeted kind (an argument swap moves two words, a negation move one, a clause
    reorder a clause, a shuffle all of them: ORDER_KINDS' order), then the largest move
    (Jensen-Shannon divergence); None when there is none."""
    candidates = [o for o in probe.outcomes if _blind(probe, o)]
    if not candidates:
        return None
    return max(
        candidates,
        key=lambda o: (
            o.neural_flipped,
            -ORDER_KINDS.index(o.perturbation.kind),
            o.neural_jsd,
        ),
    )


def moved_words(original: str, reordered: str) -> tuple[int, ...]:
    """Indices of the words of `original` (core.text.word_spans) whose word, compared without
    case, differs at the same place in `reordered`: the words the reordering moved."""
    before = [w.text.lower() for w in word_spans(original)]
    after = [w.text.lower() for w in word_spans(reordered)]
    return tuple(i for i, word in enumerate(before) if i >= len(after) or after[i] != word)


def token_positions(
    offsets: Sequence[tuple[int, int]], words: Sequence[WordSpan], indices: Sequence[int]
) -> tuple[int, ...]:
    """Positions of the tokens (character `offsets` in the text; (0, 0) for special tokens)
    that overlap any of `words[i]` for i in `indices`."""
    spans = [(words[i].start, words[i].end) for i in indices]
    return tuple(
        t
        for t, (start, end) in enumerate(offsets)
        if end > start and any(start < w_end and end > w_start for w_start, w_end in spans)
    )


def rank_heads(
    maps: AttentionMaps, positions: Sequence[int], *, top: int = TOP_HEADS
) -> tuple[HeadFocus, ...]:
    """The `top` heads by attention mass onto `positions`, largest first (ties: lower layer,
    then lower head).

    mass[l, h] = mean over query tokens q of sum over k in positions of weights[l, h, q, k];
    weights (layers, heads, seq, seq)."""
    if not positions:
        return ()
    columns = np.asarray(sorted(set(positions)))
    mass = maps.weights[:, :, :, columns].sum(axis=-1).mean(axis=-1)  # (layers, heads)
    order = sorted(np.ndindex(mass.shape), key=lambda ab: (-mass[ab], ab))
    return tuple(HeadFocus(int(a), int(b), float(mass[a, b])) for a, b in order[:top])


def _aligned(expl: Explanation, probe: ProbeResult, moved: tuple[int, ...]) -> tuple[int, ...]:
    """`moved` (word indices of the probed text) kept where the explanation has the same word
    at the same index: both are the masked complaint, the probe's cut to what the model reads."""
    probed = word_spans(probe.text)
    return tuple(i for i in moved if i < len(expl.words) and expl.words[i].text == probed[i].text)


def build_story(expl: Explanation, probe: ProbeResult, *, top: int = TOP_HEADS) -> Story:
    """The story of the complaint `expl` explains, from an order probe of the same complaint
    (core.analysis.probe_compare.run_probes); the order words are found among the tokens of its
    attention maps by the explanation's own `token_offsets`."""
    outcome = pick_blind_spot(probe)
    common = {"text": expl.text, "neural": expl.neural, "bow": expl.bow,
              "target": expl.target}  # fmt: skip
    if outcome is None:
        note = (
            "No reordering of this complaint moved the transformer while leaving the bag of "
            "words unmoved; try a complaint where word order decides the desk."
        )
        return Story(**common, blind_spot=None, order_words=(), order_tokens=(), heads=(),
                     note=note)  # fmt: skip
    moved = _aligned(expl, probe, moved_words(probe.text, outcome.perturbation.text))
    tokens = token_positions(expl.token_offsets, expl.words, moved)
    return Story(
        **common,
        blind_spot=BlindSpot(outcome, moved),
        order_words=tuple(expl.words[i].text for i in moved),
        order_tokens=tokens,
        heads=rank_heads(expl.attention, tokens, top=top),
        note="",
    )
