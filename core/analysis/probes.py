"""Word-order probes: perturb a complaint, run both models, and find where order decides the desk.

Each perturbation says whether it keeps the bag of words (core.text.bag_key): when it does, a
unigram bag-of-words model *cannot* change its answer, so any change is the transformer reading
order. The data set scan lists groups of rows with one bag of words and different desks (where
any bag-of-words model is capped), rows where exactly one model is right, and flip rates and
Jensen-Shannon divergences over perturbations. Models are seen only through the protocol
`classes_` / `predict_proba(texts) -> (n, n_classes)`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import regex as re

from core.checks import check_complaint, check_int
from core.jobs import BackgroundJob
from core.models.classifier import Prediction, shared_classes
from core.text import bag_key, word_spans

ARGUMENT_SWAP = "argument swap"
NEGATION_MOVE = "negation move"
CLAUSE_REORDER = "clause reorder"
SHUFFLE = "shuffle"
TYPO = "typo"
PLEASE = "please"
PUNCTUATION = "punctuation"
ORDER_KINDS = (ARGUMENT_SWAP, NEGATION_MOVE, CLAUSE_REORDER, SHUFFLE)
INVARIANCE_KINDS = (TYPO, PLEASE, PUNCTUATION)

# The "paid by card, not by UPI" demonstration: the desk follows the method named after "by",
# so a reader routes it to Card Fraud and the swapped text to UPI Dispute; the bags are equal.
DEMO_TEXT = "I paid ₹2,500 to Croma by card, not by UPI, and was charged twice."
DEMO_DESKS = {
    DEMO_TEXT: "Card Fraud",
    "I paid ₹2,500 to Croma by UPI, not by card, and was charged twice.": "UPI Dispute",
}

ProgressCallback = Callable[["ScanProgress"], None]


@dataclass(frozen=True)
class ProbeConfig:
    """Which perturbations to make of one complaint."""

    n_shuffles: int = 2  # seeded random word shuffles (each keeps the bag of words)
    invariance: bool = True  # also a typo, "please" and punctuation, which should change nothing
    max_per_kind: int = 3  # at most this many perturbations of one kind (long texts offer many)
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("n_shuffles", self.n_shuffles, minimum=0)
        check_int("max_per_kind", self.max_per_kind, minimum=1)
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.invariance, bool):
            raise ValueError(f"invariance must be True or False, got {self.invariance!r}")


@dataclass(frozen=True)
class Perturbation:
    """One rewritten complaint: what kind of change, the text, and whether the bag is the same."""

    kind: str
    text: str
    bag_unchanged: bool
    note: str  # what was changed, in words


# --------------------------------------------------------------------------- argument swaps

_STOP = (
    r"(?:and|but|or|not|no|nahi|never|to|from|by|for|of|on|in|at|with|via|through|instead|"
    r"rather|than|was|is|were|are|be|been|did|does|do|has|have|had|i|me|we|it|that|which|who|"
    r"please|kindly|also|too|again|now|immediately|urgently|asap|today|yesterday|since|as|so|"
    r"because|till|until|after|before|when|if|then)"
)
# One argument: one to three words, none of them a connective, preposition, auxiliary or filler.
_ARG = rf"\b(?!{_STOP}\b)\w+(?: (?!{_STOP}\b)\w+){{0,2}}\b"
_PREPOSITIONS = r"(?:by|for|via|with|through|to|from|on|in|at)"
SWAP_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("from X to Y", rf"\bfrom (?P<x>{_ARG}) to (?P<y>{_ARG})"),
        ("X instead of Y", rf"(?P<x>{_ARG}) instead of (?P<y>{_ARG})"),
        ("X rather than Y", rf"(?P<x>{_ARG}) rather than (?P<y>{_ARG})"),
        ("by X, not by Y", rf"\b(?P<p>{_PREPOSITIONS}) (?P<x>{_ARG}),? not (?P=p) (?P<y>{_ARG})"),
        ("the X but not the Y", rf"\bthe (?P<x>{_ARG}),? but not the (?P<y>{_ARG})"),
    )
)


def _swap_spans(text: str, x: tuple[int, int], y: tuple[int, int]) -> str:
    """`text` with the substrings at spans x and y (x before y) exchanged."""
    return text[: x[0]] + text[y[0] : y[1]] + text[x[1] : y[0]] + text[x[0] : x[1]] + text[y[1] :]


def argument_swaps(text: str) -> list[tuple[str, str]]:
    """(rewritten text, note) for every swap of two arguments around a connective."""
    found = []
    for name, pattern in SWAP_PATTERNS:
        for match in pattern.finditer(text):
            x, y = match.group("x"), match.group("y")
            if x.lower() == y.lower():
                continue
            swapped = _swap_spans(text, match.span("x"), match.span("y"))
            found.append((swapped, f"{name}: swapped '{x}' and '{y}'"))
    return found


# --------------------------------------------------------------------------- negation moves

# A comma between digits ("2,500") is part of a number, not a clause break.
_COMMA = r"(?:,(?!\d)|(?<!\d),)"
_CLAUSE_BREAK = re.compile(
    rf"{_COMMA}|[;:.!?]|\b(?:but|and|while|whereas|although|though|lekin|par|magar)\b",
    re.IGNORECASE,
)
_NEGATORS = {"not": "after", "never": "after", "nahi": "before", "nahin": "before"}
_EN_AUX = {"is", "was", "are", "were", "did", "does", "do", "has", "have", "had", "can"}
_EN_AUX |= {"could", "will", "would", "should", "am"}
_HI_VERBS = {"hua", "hui", "hai", "hain", "kiya", "ki", "tha", "thi", "ho", "aaya", "gaya", "mila"}


def _clauses(text: str) -> list[tuple[int, int]]:
    """Character spans of the clauses of `text` (between punctuation and conjunctions)."""
    cuts = [0] + [p for m in _CLAUSE_BREAK.finditer(text) for p in m.span()] + [len(text)]
    spans = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    return [(s, e) for s, e in spans if word_spans(text[s:e])]


def _words_in(text: str, span: tuple[int, int]):
    return [w for w in word_spans(text) if span[0] <= w.start and w.end <= span[1]]


def _remove_word(text: str, start: int, end: int) -> str:
    """Delete text[start:end] and one space next to it."""
    if end < len(text) and text[end] == " ":
        end += 1
    elif start > 0 and text[start - 1] == " ":
        start -= 1
    return text[:start] + text[end:]


def _insertion_point(text: str, clause: tuple[int, int], placement: str) -> int | None:
    """Where a negator goes in `clause`: after its first auxiliary ("not") or before its first
    Hindi verb ("nahi"); None when the clause has no such word or is already negated."""
    clause_words = _words_in(text, clause)
    if any(w.text.lower() in _NEGATORS for w in clause_words):
        return None
    verbs = _EN_AUX if placement == "after" else _HI_VERBS
    for word in clause_words:
        if word.text.lower() in verbs:
            return word.end if placement == "after" else word.start
    return None


def negation_moves(text: str) -> list[tuple[str, str]]:
    """(rewritten text, note) for each move of a negation into another clause."""
    clauses = _clauses(text)
    found = []
    for source in clauses:
        negator = next((w for w in _words_in(text, source) if w.text.lower() in _NEGATORS), None)
        if negator is None:
            continue
        placement = _NEGATORS[negator.text.lower()]
        for target in clauses:
            point = None if target == source else _insertion_point(text, target, placement)
            if point is None:
                continue
            moved = _insert_negator(text, negator, point, placement)
            found.append((moved, f"moved '{negator.text}' into '{text[slice(*target)].strip()}'"))
    return found


def _insert_negator(text: str, negator, point: int, placement: str) -> str:
    """Insert `negator` at `point` (computed on the original text), then remove the original."""
    insert = f" {negator.text}" if placement == "after" else f"{negator.text} "
    if point <= negator.start:  # inserting first shifts the negator to the right
        shifted = text[:point] + insert + text[point:]
        offset = len(insert)
        return _remove_word(shifted, negator.start + offset, negator.end + offset)
    removed = _remove_word(text, negator.start, negator.end)
    point -= len(text) - len(removed)
    return removed[:point] + insert + removed[point:]


# --------------------------------------------------------------------------- clause reorder

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def clause_reorders(text: str) -> list[tuple[str, str]]:
    """(rewritten text, note): sentences in reverse order; clauses of a sentence rotated."""
    found = []
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    if len(sentences) >= 2:
        found.append((" ".join(reversed(sentences)), "sentences in reverse order"))
    for i, sentence in enumerate(sentences):
        rotated = _rotate_clauses(sentence)
        if rotated is not None:
            rewritten = " ".join(sentences[:i] + [rotated] + sentences[i + 1 :])
            found.append((rewritten, f"clauses of sentence {i + 1} rotated"))
    return found


def _rotate_clauses(sentence: str) -> str | None:
    """The sentence with its first comma/semicolon clause moved to the end; None if just one."""
    end = re.search(r"[.!?]*$", sentence).group()
    body = sentence[: len(sentence) - len(end)]
    parts = [p.strip() for p in re.split(rf"\s*(?:{_COMMA}|;)\s*", body) if p.strip()]
    if len(parts) < 2:
        return None
    return ", ".join(parts[1:] + parts[:1]) + end


# --------------------------------------------------------------------------- shuffles, invariance


def word_shuffles(text: str, *, n: int, seed: int) -> list[tuple[str, str]]:
    """`n` seeded permutations of the words, punctuation and spacing left in place."""
    spans = word_spans(text)
    if len({s.text for s in spans}) < 2:
        return []
    found = []
    for i in range(n):
        order = np.random.default_rng([seed, i]).permutation(len(spans))
        if np.array_equal(order, np.arange(len(spans))):
            order = np.roll(order, 1)
        found.append((_rebuild(text, spans, order), f"random word order (seed {seed}, draw {i})"))
    return found


def _rebuild(text: str, spans, order: np.ndarray) -> str:
    """`text` with word i replaced by word order[i]; everything between words kept."""
    pieces, cursor = [], 0
    for span, source in zip(spans, order, strict=True):
        pieces += [text[cursor : span.start], spans[int(source)].text]
        cursor = span.end
    return "".join(pieces) + text[cursor:]


def invariance_perturbations(text: str, *, seed: int) -> list[tuple[str, str, str]]:
    """(kind, rewritten text, note): a typo, "please" added or removed, punctuation removed."""
    found = []
    typo = _typo(text, seed)
    if typo is not None:
        found.append((TYPO, *typo))
    spans = word_spans(text)
    please = next((s for s in spans if s.text.lower() == "please"), None)
    if please is None:
        found.append((PLEASE, f"Please, {_lower_first(text, spans)}", "added 'please'"))
    else:
        found.append((PLEASE, _remove_word(text, please.start, please.end), "removed 'please'"))
    stripped = " ".join(re.sub(r"[^\w\s]", " ", text).split())
    found.append((PUNCTUATION, stripped, "punctuation removed"))
    return found


def _lower_first(text: str, spans) -> str:
    """`text` with its first letter lower-cased, unless the first word is "I" or an acronym."""
    first = spans[0].text if spans else ""
    if first == "I" or first.isupper():
        return text
    return text[:1].lower() + text[1:]


def _typo(text: str, seed: int) -> tuple[str, str] | None:
    """Two neighbouring letters of one longer word swapped (seeded choice of word)."""
    candidates = [s for s in word_spans(text) if len(s.text) >= 5 and s.text.isalpha()]
    rng = np.random.default_rng(seed)
    for index in rng.permutation(len(candidates)):
        word = candidates[int(index)]
        i = word.start + 1 + int(rng.integers(len(word.text) - 3))
        if text[i] != text[i + 1]:
            typo = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
            return typo, f"typo in '{word.text}'"
    return None


# --------------------------------------------------------------------------- one complaint


def perturb(text: str, config: ProbeConfig = ProbeConfig()) -> list[Perturbation]:
    """Every perturbation of `text`, each marked with whether it keeps the bag of words.

    Duplicates and rewrites equal to the original are dropped; at most `config.max_per_kind` of
    each kind are kept.
    """
    check_complaint(text, purpose="perturb")
    candidates = [(ARGUMENT_SWAP, t, n) for t, n in argument_swaps(text)]
    candidates += [(NEGATION_MOVE, t, n) for t, n in negation_moves(text)]
    candidates += [(CLAUSE_REORDER, t, n) for t, n in clause_reorders(text)]
    shuffles = word_shuffles(text, n=config.n_shuffles, seed=config.seed)
    candidates += [(SHUFFLE, t, n) for t, n in shuffles]
    if config.invariance:
        candidates += invariance_perturbations(text, seed=config.seed)
    return _dedupe(text, candidates, config.max_per_kind)


def _dedupe(
    text: str, candidates: list[tuple[str, str, str]], max_per_kind: int
) -> list[Perturbation]:
    key = bag_key(text)
    seen, per_kind, kept = {text}, Counter(), []
    for kind, rewritten, note in candidates:
        if rewritten in seen or per_kind[kind] >= max_per_kind:
            continue
        seen.add(rewritten)
        per_kind[kind] += 1
        kept.append(Perturbation(kind, rewritten, bag_key(rewritten) == key, note))
    return kept


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits between rows of p and q, (n, k) each → (n,) in [0, 1]."""
    p, q = np.atleast_2d(p).astype(np.float64), np.atleast_2d(q).astype(np.float64)
    m = (p + q) / 2

    def kl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / np.where(b > 0, b, 1.0)), 0.0)
        return terms.sum(axis=1)

    return np.clip((kl(p, m) + kl(q, m)) / 2, 0.0, 1.0)


@dataclass(frozen=True)
class ProbeOutcome:
    """Both models on one perturbation, compared with their answer on the original."""

    perturbation: Perturbation
    transformer: Prediction
    bow: Prediction
    transformer_shift: float  # change in the probability of the original's predicted desk
    bow_shift: float
    transformer_jsd: float  # Jensen-Shannon divergence (bits) from the original's distribution
    bow_jsd: float
    transformer_flipped: bool  # the top desk differs from the original's
    bow_flipped: bool

    def to_json(self) -> dict[str, Any]:
        p = self.perturbation
        return {
            "kind": p.kind,
            "text": p.text,
            "bag_unchanged": p.bag_unchanged,
            "note": p.note,
            "transformer": self.transformer.to_json(),
            "bow": self.bow.to_json(),
            "transformer_flipped": self.transformer_flipped,
            "bow_flipped": self.bow_flipped,
            "transformer_shift": self.transformer_shift,
            "bow_shift": self.bow_shift,
        }


@dataclass(frozen=True)
class ProbeResult:
    """One complaint, both models' answers, and their answers on every perturbation."""

    text: str
    transformer: Prediction
    bow: Prediction
    outcomes: tuple[ProbeOutcome, ...]

    def to_json(self) -> dict[str, Any]:
        """The DESIGN.md `probe` document (and a few more keys per perturbation)."""
        return {
            "original": {
                "text": self.text,
                "transformer": self.transformer.to_json(),
                "bow": self.bow.to_json(),
            },
            "perturbations": [o.to_json() for o in self.outcomes],
        }


def run_probes(
    transformer: Any, baseline: Any, text: str, config: ProbeConfig = ProbeConfig()
) -> ProbeResult:
    """Perturb `text` and run both models (any `classes_` / `predict_proba`) on every version."""
    classes = shared_classes(transformer, baseline)
    perturbations = perturb(text, config)
    return _compare(classes, text, perturbations, transformer, baseline)


def _compare(
    classes: list[str], text: str, perturbations: list[Perturbation], transformer, baseline
) -> ProbeResult:
    texts = [text] + [p.text for p in perturbations]
    t_probs, b_probs = transformer.predict_proba(texts), baseline.predict_proba(texts)
    t0, b0 = Prediction.of(classes, t_probs[0]), Prediction.of(classes, b_probs[0])
    t_index, b_index = classes.index(t0.label), classes.index(b0.label)
    t_jsd, b_jsd = js_divergence(t_probs[1:], t_probs[:1]), js_divergence(b_probs[1:], b_probs[:1])
    outcomes = tuple(
        ProbeOutcome(
            perturbation=p,
            transformer=Prediction.of(classes, t_probs[i + 1]),
            bow=Prediction.of(classes, b_probs[i + 1]),
            transformer_shift=float(t_probs[i + 1, t_index] - t_probs[0, t_index]),
            bow_shift=float(b_probs[i + 1, b_index] - b_probs[0, b_index]),
            transformer_jsd=float(t_jsd[i]),
            bow_jsd=float(b_jsd[i]),
            transformer_flipped=int(t_probs[i + 1].argmax()) != t_index,
            bow_flipped=int(b_probs[i + 1].argmax()) != b_index,
        )
        for i, p in enumerate(perturbations)
    )
    return ProbeResult(text, t0, b0, outcomes)


def probe_table(result: ProbeResult) -> pd.DataFrame:
    """One row per perturbation: kind, bag kept, text, each model's desk, shift and flip."""
    rows = [
        {
            "kind": o.perturbation.kind,
            "same bag of words": o.perturbation.bag_unchanged,
            "text": o.perturbation.text,
            "transformer": o.transformer.label,
            "transformer shift": o.transformer_shift,
            "transformer flipped": o.transformer_flipped,
            "bag of words": o.bow.label,
            "bag-of-words shift": o.bow_shift,
            "bag of words flipped": o.bow_flipped,
            "change": o.perturbation.note,
        }
        for o in result.outcomes
    ]
    return pd.DataFrame(rows)


def order_demo(transformer: Any, baseline: Any) -> ProbeResult:
    """The "paid by card, not by UPI" pair through both models (argument swaps only)."""
    classes = shared_classes(transformer, baseline)
    swaps = [p for p in perturb(DEMO_TEXT, ProbeConfig(n_shuffles=0, invariance=False))]
    swaps = [p for p in swaps if p.kind == ARGUMENT_SWAP]
    return _compare(classes, DEMO_TEXT, swaps, transformer, baseline)


def bow_is_order_blind(baseline: Any) -> bool:
    """Whether the baseline sees unigrams only (then equal bags give equal answers, always).

    A core.baseline model with `ngram_max` > 1 also sees adjacent word pairs, so reordering can
    move it; unknown models are assumed to see order.
    """
    config = getattr(baseline, "config", None)
    return getattr(config, "ngram_max", None) == 1


# --------------------------------------------------------------------------- data set scan


@dataclass(frozen=True)
class ScanConfig:
    """How much of a data set to run both models on."""

    max_rows: int = 400  # rows classified by both models; larger data sets are sampled (seeded)
    perturb_rows: int = 40  # of those, rows whose perturbations are run through both models
    batch_size: int = 32
    top_k: int = 50  # rows kept in each "only one model is right" list
    seed: int = 0
    probe: ProbeConfig = ProbeConfig(n_shuffles=1)

    def __post_init__(self) -> None:
        check_int("max_rows", self.max_rows, minimum=1)
        check_int("perturb_rows", self.perturb_rows, minimum=0)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("top_k", self.top_k, minimum=1)
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.probe, ProbeConfig):
            raise ValueError(f"probe must be a ProbeConfig, got {type(self.probe).__name__}")


@dataclass(frozen=True)
class TwinGroup:
    """Rows with exactly the same bag of words but more than one desk."""

    positions: tuple[int, ...]  # positions in the data set
    rows: tuple[int, ...]  # spreadsheet rows
    texts: tuple[str, ...]
    labels: tuple[str, ...]

    @property
    def reachable(self) -> int:
        """The most rows any bag-of-words model can get right here: the largest desk's count."""
        return max(Counter(self.labels).values())


@dataclass(frozen=True)
class OneRightRow:
    """A row where exactly one of the two models predicts the given desk."""

    position: int
    row: int
    text: str
    label: str
    right: str  # "transformer" or "bag of words"
    transformer: Prediction
    bow: Prediction

    @property
    def confidence(self) -> float:
        """The right model's probability for the given desk: the ranking key."""
        output = self.transformer if self.right == "transformer" else self.bow
        return output.probabilities[self.label]


@dataclass(frozen=True)
class KindStats:
    """Flip rate and mean Jensen-Shannon divergence of both models over one kind."""

    kind: str
    count: int
    bag_unchanged_share: float
    transformer_flip_rate: float
    bow_flip_rate: float
    transformer_mean_jsd: float
    bow_mean_jsd: float


@dataclass(frozen=True)
class ScanProgress:
    """How far a scan is: texts classified out of the total, by phase."""

    done: int
    total: int
    phase: str
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True)
class ScanResult:
    """What a data set scan found. Accuracies are on the scanned (sampled) rows."""

    n_rows: int
    twin_groups: tuple[TwinGroup, ...]  # over the whole data set
    bow_ceiling: float  # the best accuracy any bag-of-words model can reach on the data set
    scanned: tuple[int, ...]  # positions classified by both models
    transformer_accuracy: float | None
    bow_accuracy: float | None
    transformer_only: tuple[OneRightRow, ...]
    bow_only: tuple[OneRightRow, ...]
    kind_stats: tuple[KindStats, ...]
    cancelled: bool

    @property
    def capped_rows(self) -> int:
        """Rows in twin groups that no bag-of-words model can get right."""
        return sum(len(g.labels) - g.reachable for g in self.twin_groups)


def twin_groups(texts: Sequence[str], labels: Sequence[str], rows: Sequence[int] | None = None):
    """Groups of rows with one bag of words and two or more desks, largest first.

    texts, labels (n,); rows (n,) the spreadsheet rows (default 2..n+1).
    """
    if len(texts) != len(labels):
        raise ValueError(f"got {len(texts)} texts and {len(labels)} labels; give one per text")
    rows = list(rows) if rows is not None else list(range(2, len(texts) + 2))
    by_bag: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, text in enumerate(texts):
        by_bag[bag_key(text)].append(i)
    groups = [
        TwinGroup(
            tuple(members),
            tuple(rows[i] for i in members),
            tuple(texts[i] for i in members),
            tuple(labels[i] for i in members),
        )
        for members in by_bag.values()
        if len({labels[i] for i in members}) > 1
    ]
    return tuple(sorted(groups, key=lambda g: (-len(g.positions), g.positions)))


def bow_ceiling(groups: Sequence[TwinGroup], n_rows: int) -> float:
    """The highest accuracy any (unigram) bag-of-words model can reach on `n_rows` rows."""
    if n_rows <= 0:
        raise ValueError("n_rows must be positive")
    return 1.0 - sum(len(g.labels) - g.reachable for g in groups) / n_rows


def sample_positions(n: int, groups: Sequence[TwinGroup], config: ScanConfig) -> list[int]:
    """Up to max_rows positions: twin-group rows first (at most half), the rest drawn at random."""
    if n <= config.max_rows:
        return list(range(n))
    rng = np.random.default_rng(config.seed)
    twins = sorted({p for g in groups for p in g.positions})
    twins = sorted(rng.permutation(twins)[: config.max_rows // 2].tolist()) if twins else []
    rest = np.setdiff1d(np.arange(n), twins)
    drawn = rng.choice(rest, size=config.max_rows - len(twins), replace=False)
    return sorted(twins + drawn.tolist())


class _Progress:
    """Counts classified texts and reports them through the callback."""

    def __init__(self, total: int, on_progress: ProgressCallback | None) -> None:
        self.total, self.done, self.on_progress = total, 0, on_progress
        self.started = time.perf_counter()

    def add(self, count: int, phase: str) -> None:
        self.done += count
        if self.on_progress is None:
            return
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        self.on_progress(ScanProgress(self.done, self.total, phase, elapsed, eta))


def _predict_batched(
    model: Any,
    texts: list[str],
    config: ScanConfig,
    progress: _Progress,
    phase: str,
    cancel: threading.Event | None,
) -> np.ndarray | None:
    """predict_proba in batches (n, k), reporting progress; None when cancelled."""
    parts = []
    for start in range(0, len(texts), config.batch_size):
        if cancel is not None and cancel.is_set():
            return None
        batch = texts[start : start + config.batch_size]
        parts.append(np.asarray(model.predict_proba(batch), dtype=np.float64))
        progress.add(len(batch), phase)
    return np.concatenate(parts) if parts else np.zeros((0, len(model.classes_)))


def scan_dataset(
    transformer: Any,
    baseline: Any,
    dataset: Any,
    config: ScanConfig = ScanConfig(),
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ScanResult:
    """Scan a labelled data set (core.data.Dataset: texts, labels, rows) with both models.

    Twin groups cover the whole data set; both models classify a sample of `config.max_rows`
    rows; the perturbations of `config.perturb_rows` of those go through both models. A set
    `cancel` stops at the next batch and returns what was found so far (`cancelled=True`).
    """
    classes = shared_classes(transformer, baseline)
    texts, labels = list(dataset.texts), list(dataset.labels)
    if not texts:
        raise ValueError("the data set is empty; load complaints first")
    groups = twin_groups(texts, labels, dataset.rows)
    scanned = sample_positions(len(texts), groups, config)
    probe_rows = _probe_positions(scanned, config)
    perturbations = {p: perturb(texts[p], config.probe) for p in probe_rows}
    n_probe = sum(len(v) + 1 for v in perturbations.values())
    progress = _Progress(2 * (len(scanned) + n_probe), on_progress)
    progress.add(0, "classify (transformer)")  # the total is known before the first batch
    partial = _ScanParts(classes, texts, labels, list(dataset.rows), groups, scanned)
    return _run_scan(transformer, baseline, partial, perturbations, config, progress, cancel)


@dataclass
class _ScanParts:
    """What the scan works on and has found so far."""

    classes: list[str]
    texts: list[str]
    labels: list[str]
    rows: list[int]
    groups: tuple[TwinGroup, ...]
    scanned: list[int]
    pred_probs: tuple[np.ndarray, np.ndarray] | None = None


def _probe_positions(scanned: list[int], config: ScanConfig) -> list[int]:
    rng = np.random.default_rng([config.seed, 1])
    count = min(config.perturb_rows, len(scanned))
    return sorted(rng.choice(scanned, size=count, replace=False).tolist()) if count else []


def _run_scan(transformer, baseline, parts, perturbations, config, progress, cancel):
    sample = [parts.texts[p] for p in parts.scanned]
    probs = []
    for name, model in (("transformer", transformer), ("bag of words", baseline)):
        pred_probs = _predict_batched(model, sample, config, progress, f"classify ({name})", cancel)
        if pred_probs is None:
            return _finish(parts, config, (), cancelled=True)
        probs.append(pred_probs)
    parts.pred_probs = (probs[0], probs[1])
    models = (transformer, baseline)
    stats = _perturbation_stats(models, parts, perturbations, config, progress, cancel)
    return _finish(parts, config, stats or (), cancelled=stats is None)


def _perturbation_stats(models, parts, perturbations, config, progress, cancel):
    """KindStats per perturbation kind; None when cancelled."""
    originals = [parts.texts[p] for p in perturbations]
    variants = [v for vs in perturbations.values() for v in vs]
    texts = originals + [v.text for v in variants]
    owner = [i for i, vs in enumerate(perturbations.values()) for _ in vs]
    outputs = []
    for name, model in zip(("transformer", "bag of words"), models, strict=True):
        pred_probs = _predict_batched(model, texts, config, progress, f"perturb ({name})", cancel)
        if pred_probs is None:
            return None
        before = pred_probs[: len(originals)][owner]  # (n_variants, k)
        outputs.append((before, pred_probs[len(originals) :]))
    return _kind_stats(variants, outputs)


def _kind_stats(variants: list[Perturbation], outputs) -> tuple[KindStats, ...]:
    (t_before, t_after), (b_before, b_after) = outputs
    t_flip = t_before.argmax(1) != t_after.argmax(1)
    b_flip = b_before.argmax(1) != b_after.argmax(1)
    t_jsd, b_jsd = js_divergence(t_after, t_before), js_divergence(b_after, b_before)
    stats = []
    for kind in ORDER_KINDS + INVARIANCE_KINDS:
        mask = np.array([v.kind == kind for v in variants], dtype=bool)
        if not mask.any():
            continue
        unchanged = np.array([v.bag_unchanged for v in variants])[mask]
        stats.append(
            KindStats(
                kind,
                int(mask.sum()),
                float(unchanged.mean()),
                float(t_flip[mask].mean()),
                float(b_flip[mask].mean()),
                float(t_jsd[mask].mean()),
                float(b_jsd[mask].mean()),
            )  # fmt: skip
        )
    return tuple(stats)


def _finish(parts: _ScanParts, config: ScanConfig, stats, *, cancelled: bool) -> ScanResult:
    t_acc = b_acc = None
    t_only: tuple[OneRightRow, ...] = ()
    b_only: tuple[OneRightRow, ...] = ()
    if parts.pred_probs is not None:
        t_acc, b_acc, t_only, b_only = _one_right(parts, config.top_k)
    return ScanResult(
        n_rows=len(parts.texts),
        twin_groups=parts.groups,
        bow_ceiling=bow_ceiling(parts.groups, len(parts.texts)),
        scanned=tuple(parts.scanned),
        transformer_accuracy=t_acc,
        bow_accuracy=b_acc,
        transformer_only=t_only,
        bow_only=b_only,
        kind_stats=tuple(stats),
        cancelled=cancelled,
    )


def _one_right(parts: _ScanParts, top_k: int):
    """Accuracies of both models on the sample and the rows exactly one of them gets right."""
    t_probs, b_probs = parts.pred_probs
    classes = np.asarray(parts.classes)
    truth = np.asarray([parts.labels[p] for p in parts.scanned])
    t_right, b_right = classes[t_probs.argmax(1)] == truth, classes[b_probs.argmax(1)] == truth
    rows = [
        OneRightRow(
            position=p,
            row=parts.rows[p],
            text=parts.texts[p],
            label=parts.labels[p],
            right="transformer" if t_right[i] else "bag of words",
            transformer=Prediction.of(parts.classes, t_probs[i]),
            bow=Prediction.of(parts.classes, b_probs[i]),
        )
        for i, p in enumerate(parts.scanned)
        if t_right[i] != b_right[i]
    ]
    rows.sort(key=lambda r: -r.confidence)
    t_only = tuple(r for r in rows if r.right == "transformer")[:top_k]
    b_only = tuple(r for r in rows if r.right != "transformer")[:top_k]
    return float(t_right.mean()), float(b_right.mean()), t_only, b_only


_WRONG_ORDER = {"both": 0, "transformer": 1, "bag of words": 2, "": 3}


def review_rows(
    transformer: Any,
    baseline: Any,
    dataset: Any,
    *,
    max_rows: int = 60,
    seed: int = 0,
    include: Sequence[int] = (),
    batch_size: int = 16,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> pd.DataFrame | None:
    """A sample of labelled rows with both models' answers, misclassified rows first.

    Twin-group rows are sampled first (as in the scan); positions in `include` are always kept.
    Columns: position, row, desk, transformer, transformer confidence, bag of words,
    bag-of-words confidence, wrong ("both", "transformer", "bag of words" or ""), text.
    Returns None when `cancel` is set before the end.
    """
    classes = shared_classes(transformer, baseline)
    texts, labels = list(dataset.texts), list(dataset.labels)
    config = ScanConfig(max_rows=max_rows, seed=seed, batch_size=batch_size)
    groups = twin_groups(texts, labels, dataset.rows)
    positions = sorted(set(sample_positions(len(texts), groups, config)) | set(include))
    sample = [texts[p] for p in positions]
    progress = _Progress(2 * len(sample), on_progress)
    progress.add(0, "classify (transformer)")
    outputs = []
    for name, model in (("transformer", transformer), ("bag of words", baseline)):
        pred_probs = _predict_batched(model, sample, config, progress, f"classify ({name})", cancel)
        if pred_probs is None:
            return None
        outputs.append(pred_probs)
    records = [
        _review_record(p, dataset.rows[p], labels[p], texts[p], classes, t, b)
        for p, t, b in zip(positions, *outputs, strict=True)
    ]
    return _misclassified_first(pd.DataFrame(records, columns=list(_REVIEW_COLUMNS)))


def _misclassified_first(frame: pd.DataFrame) -> pd.DataFrame:
    order = frame["wrong"].map(_WRONG_ORDER)
    return (
        frame.assign(_order=order)
        .sort_values(["_order", "transformer confidence"], ascending=[True, False], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )


_REVIEW_COLUMNS = (
    "position", "row", "desk", "transformer", "transformer confidence", "bag of words",
    "bag-of-words confidence", "wrong", "text",
)  # fmt: skip


def _review_record(position, row, label, text, classes, t_probs, b_probs) -> dict[str, Any]:
    t, b = Prediction.of(classes, t_probs), Prediction.of(classes, b_probs)
    wrong = {(False, False): "both", (False, True): "transformer", (True, False): "bag of words"}
    return dict(
        zip(
            _REVIEW_COLUMNS,
            (position, row, label, t.label, t.confidence, b.label, b.confidence,
             wrong.get((t.label == label, b.label == label), ""), text),
            strict=True,
        )
    )  # fmt: skip


def twin_table(groups: Sequence[TwinGroup]) -> pd.DataFrame:
    """One row per member of each twin group: group, spreadsheet row, desk, text."""
    rows = [
        {"group": g_index + 1, "row": row, "desk": label, "text": text}
        for g_index, g in enumerate(groups)
        for row, label, text in zip(g.rows, g.labels, g.texts, strict=True)
    ]
    return pd.DataFrame(rows, columns=["group", "row", "desk", "text"])


def one_right_table(rows: Sequence[OneRightRow]) -> pd.DataFrame:
    """Rows where one model is right: row, desk, both predictions and confidences, text."""
    records = [
        {
            "row": r.row,
            "desk": r.label,
            "transformer": r.transformer.label,
            "transformer confidence": r.transformer.confidence,
            "bag of words": r.bow.label,
            "bag-of-words confidence": r.bow.confidence,
            "text": r.text,
        }
        for r in rows
    ]
    columns = ["row", "desk", "transformer", "transformer confidence", "bag of words"]
    return pd.DataFrame(records, columns=columns + ["bag-of-words confidence", "text"])


def kind_stats_table(stats: Sequence[KindStats]) -> pd.DataFrame:
    """Flip rates and mean JS divergences per perturbation kind."""
    return pd.DataFrame(
        [
            {
                "kind": s.kind,
                "perturbations": s.count,
                "same bag of words": s.bag_unchanged_share,
                "transformer flip rate": s.transformer_flip_rate,
                "bag-of-words flip rate": s.bow_flip_rate,
                "transformer mean JSD": s.transformer_mean_jsd,
                "bag-of-words mean JSD": s.bow_mean_jsd,
            }
            for s in stats
        ]
    )


def capped_frame(groups: Sequence[TwinGroup]) -> pd.DataFrame:
    """Per desk: twin-group rows a bag of words can at best get right, and those it cannot.

    In each group the largest desk (first in sorted order on ties) is the best a bag-of-words
    model can do; every other member is out of its reach.
    """
    records = []
    for group in groups:
        counts = Counter(group.labels)
        best = min(counts, key=lambda d: (-counts[d], d))
        for desk, count in counts.items():
            status = "reachable at best" if desk == best else "out of reach for a bag of words"
            records.append({"desk": desk, "status": status, "rows": count})
    frame = pd.DataFrame(records, columns=["desk", "status", "rows"])
    return frame.groupby(["desk", "status"], as_index=False)["rows"].sum()


# --------------------------------------------------------------------------- background job


@dataclass(frozen=True)
class ScanRun:
    """A background data set scan and what it was started on (to tell a stale one apart)."""

    job: BackgroundJob[ScanProgress, ScanResult]
    config: ScanConfig
    model_path: str
    dataset_fingerprint: str


def start_scan(
    transformer: Any,
    baseline: Any,
    dataset: Any,
    config: ScanConfig,
    *,
    model_path: str,
    dataset_fingerprint: str,
) -> ScanRun:
    """Run `scan_dataset` in a worker thread; poll `run.job.snapshot()`, stop with `cancel()`."""

    def work(*, on_progress, cancel) -> ScanResult:
        return scan_dataset(
            transformer, baseline, dataset, config, on_progress=on_progress, cancel=cancel
        )

    job: BackgroundJob[ScanProgress, ScanResult] = BackgroundJob(work, name="probe-scan")
    return ScanRun(job.start(), config, model_path, dataset_fingerprint)


@dataclass(frozen=True)
class ReviewRun:
    """A background `review_rows` job and what it was started on."""

    job: BackgroundJob[ScanProgress, pd.DataFrame | None]
    model_path: str
    dataset_fingerprint: str
    max_rows: int
    include: tuple[int, ...]


def start_review(
    transformer: Any,
    baseline: Any,
    dataset: Any,
    *,
    max_rows: int,
    include: Sequence[int] = (),
    model_path: str,
    dataset_fingerprint: str,
) -> ReviewRun:
    """Run `review_rows` in a worker thread; poll `run.job.snapshot()`, stop with `cancel()`."""
    include = tuple(include)

    def work(*, on_progress, cancel) -> pd.DataFrame | None:
        return review_rows(
            transformer, baseline, dataset,
            max_rows=max_rows, include=include, on_progress=on_progress, cancel=cancel,
        )  # fmt: skip

    job: BackgroundJob[ScanProgress, pd.DataFrame | None] = BackgroundJob(work, name="review")
    return ReviewRun(job.start(), model_path, dataset_fingerprint, max_rows, include)
