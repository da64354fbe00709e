"""Perturbations of one complaint: argument swaps, negation moves, clause reorders and seeded word
shuffles (each keeps the bag of words), and a typo, "please" and punctuation, which should change
nothing. Each says whether it kept the bag of words (core.text.bag_key)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import regex as re

from core.checks import check_complaint, check_int_fields
from core.errors import UserError
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


@dataclass(frozen=True)
class ProbeConfig:
    """Which perturbations to make of one complaint."""

    n_shuffles: int = 2  # seeded random word shuffles (each keeps the bag of words)
    invariance: bool = True  # also a typo, "please" and punctuation, which should change nothing
    max_per_kind: int = 3  # at most this many perturbations of one kind (long texts offer many)
    seed: int = 0

    def __post_init__(self) -> None:
        check_int_fields(self, n_shuffles=0, max_per_kind=1, seed=0)
        if not isinstance(self.invariance, bool):
            raise UserError(f"invariance must be True or False, got {self.invariance!r}")


@dataclass(frozen=True)
class Perturbation:
    """One rewritten complaint: what kind of change, the text, and whether the bag is the same."""

    kind: str
    text: str
    bag_unchanged: bool
    note: str  # what was changed, in words


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
