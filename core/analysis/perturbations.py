"""Perturbations of one complaint: argument swaps, negation moves, clause reorders and seeded word
shuffles (each keeps the bag of words), and a typo, "please" and punctuation, which should change
nothing. Each says whether it kept the bag of words (core.text.bag_key)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np
import regex as re

from core.checks import check_complaint, check_int_fields
from core.errors import UserError
from core.text import WordSpan, bag_key, word_spans

ARGUMENT_SWAP = "argument swap"
NEGATION_MOVE = "negation move"
CLAUSE_REORDER = "clause reorder"
SHUFFLE = "shuffle"
TYPO = "typo"
PLEASE = "please"
PUNCTUATION = "punctuation"
ORDER_KINDS = (ARGUMENT_SWAP, NEGATION_MOVE, CLAUSE_REORDER, SHUFFLE)
INVARIANCE_KINDS = (TYPO, PLEASE, PUNCTUATION)
# Upper bounds of ProbeConfig: each perturbation copies the text once, so these bound the work
# and memory of one probe at a few dozen copies of it.
MAX_SHUFFLES = 20
MAX_PER_KIND = 20
# Candidates looked at per perturbation kept: rewrites equal to one already kept are skipped, and
# a text with thousands of clauses offers millions of negation moves that must not all be built.
TRIES_PER_KEPT = 4


@dataclass(frozen=True)
class ProbeConfig:
    """Which perturbations to make of one complaint."""

    n_shuffles: int = 2  # seeded random word shuffles (each keeps the bag of words)
    invariance: bool = True  # also a typo, "please" and punctuation, which should change nothing
    max_per_kind: int = 3  # at most this many perturbations of one kind (long texts offer many)
    seed: int = 0

    def __post_init__(self) -> None:
        check_int_fields(self, n_shuffles=0, max_per_kind=1, seed=0)
        for name, most in (("n_shuffles", MAX_SHUFFLES), ("max_per_kind", MAX_PER_KIND)):
            if getattr(self, name) > most:
                raise UserError(f"{name} may be at most {most}, got {getattr(self, name)}")
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


def argument_swaps(text: str) -> Iterator[tuple[str, str]]:
    """(rewritten text, note) for each swap of two arguments around a connective, one at a time."""
    for name, pattern in SWAP_PATTERNS:
        for match in pattern.finditer(text):
            x, y = match.group("x"), match.group("y")
            if x.lower() != y.lower():
                swapped = _swap_spans(text, match.span("x"), match.span("y"))
                yield swapped, f"{name}: swapped '{x}' and '{y}'"


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


@dataclass(frozen=True)
class _Parsed:
    """A text split once into words and clauses, so every perturbation looks words up instead
    of splitting the text again (linear in the text, however many clauses it has)."""

    words: list[WordSpan]
    starts: list[int]  # each word's start offset, for bisect
    clauses: list[tuple[int, int]]  # character spans between punctuation and conjunctions

    def words_in(self, span: tuple[int, int]) -> list[WordSpan]:
        """The words inside the character span `span`."""
        return _words_between(self.words, self.starts, span)


def _words_between(words: list[WordSpan], starts: list[int], span: tuple[int, int]):
    first, last = bisect_left(starts, span[0]), bisect_left(starts, span[1])
    return [w for w in words[first:last] if w.end <= span[1]]


def _parse(text: str) -> _Parsed:
    """`text`'s words and its clauses (the spans between breaks that hold a word)."""
    words = word_spans(text)
    starts = [w.start for w in words]
    cuts = [0] + [p for m in _CLAUSE_BREAK.finditer(text) for p in m.span()] + [len(text)]
    spans = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    clauses = [span for span in spans if _words_between(words, starts, span)]
    return _Parsed(words, starts, clauses)


def _remove_word(text: str, start: int, end: int) -> str:
    """Delete text[start:end] and one space next to it."""
    if end < len(text) and text[end] == " ":
        end += 1
    elif start > 0 and text[start - 1] == " ":
        start -= 1
    return text[:start] + text[end:]


def _insertion_point(clause_words: list[WordSpan], placement: str) -> int | None:
    """Where a negator goes in a clause: after its first auxiliary ("not") or before its first
    Hindi verb ("nahi"); None when the clause has no such word or is already negated."""
    if any(w.text.lower() in _NEGATORS for w in clause_words):
        return None
    verbs = _EN_AUX if placement == "after" else _HI_VERBS
    for word in clause_words:
        if word.text.lower() in verbs:
            return word.end if placement == "after" else word.start
    return None


def negation_moves(text: str) -> Iterator[tuple[str, str]]:
    """(rewritten text, note) for each move of a negation into another clause, built one at a
    time: the caller takes as many as it keeps."""
    parsed = _parse(text)
    words = [parsed.words_in(clause) for clause in parsed.clauses]
    targets = {
        placement: [
            (clause, point)
            for clause, clause_words in zip(parsed.clauses, words, strict=True)
            if (point := _insertion_point(clause_words, placement)) is not None
        ]
        for placement in ("after", "before")
    }
    for clause_words in words:
        negator = next((w for w in clause_words if w.text.lower() in _NEGATORS), None)
        if negator is None:
            continue
        placement = _NEGATORS[negator.text.lower()]
        for target, point in targets[placement]:  # never the source: targets hold no negator
            moved = _insert_negator(text, negator, point, placement)
            yield moved, f"moved '{negator.text}' into '{text[slice(*target)].strip()}'"


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


def clause_reorders(text: str) -> Iterator[tuple[str, str]]:
    """(rewritten text, note): sentences in reverse order; clauses of a sentence rotated."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    if len(sentences) >= 2:
        yield " ".join(reversed(sentences)), "sentences in reverse order"
    for i, sentence in enumerate(sentences):
        rotated = _rotate_clauses(sentence)
        if rotated is not None:
            rewritten = " ".join(sentences[:i] + [rotated] + sentences[i + 1 :])
            yield rewritten, f"clauses of sentence {i + 1} rotated"


_CLAUSE_COMMA = re.compile(rf"{_COMMA}|;")


def _rotate_clauses(sentence: str) -> str | None:
    """The sentence with its first comma/semicolon clause moved to the end; None if just one."""
    body = sentence.rstrip(".!?")  # not a `[.!?]*$` search: that is quadratic in a run of "!"
    parts = [p.strip() for p in _CLAUSE_COMMA.split(body) if p.strip()]
    if len(parts) < 2:
        return None
    return ", ".join(parts[1:] + parts[:1]) + sentence[len(body) :]


def word_shuffles(text: str, *, n: int, seed: int) -> Iterator[tuple[str, str]]:
    """`n` seeded permutations of the words, punctuation and spacing left in place."""
    spans = word_spans(text)
    if len({s.text for s in spans}) < 2:
        return
    for i in range(n):
        order = np.random.default_rng([seed, i]).permutation(len(spans))
        if np.array_equal(order, np.arange(len(spans))):
            order = np.roll(order, 1)
        yield _rebuild(text, spans, order), f"random word order (seed {seed}, draw {i})"


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
    """Perturbations of `text`, each marked with whether it keeps the bag of words.

    Duplicates and rewrites equal to the original are dropped; at most `config.max_per_kind` of
    each kind are kept, from at most TRIES_PER_KEPT times as many candidates. Each candidate is
    built only when it is looked at, so the work is linear in the text (at most
    MAX_COMPLAINT_CHARS characters, core.checks) times the perturbations kept.
    """
    check_complaint(text, purpose="perturb")
    tries = TRIES_PER_KEPT * config.max_per_kind
    kinds = [
        (ARGUMENT_SWAP, argument_swaps(text)),
        (NEGATION_MOVE, negation_moves(text)),
        (CLAUSE_REORDER, clause_reorders(text)),
        (SHUFFLE, word_shuffles(text, n=config.n_shuffles, seed=config.seed)),
    ]
    candidates = chain.from_iterable(
        ((kind, t, n) for t, n in islice(found, tries)) for kind, found in kinds
    )
    if config.invariance:
        candidates = chain(candidates, invariance_perturbations(text, seed=config.seed))
    return _dedupe(text, candidates, config.max_per_kind)


def _dedupe(
    text: str, candidates: Iterable[tuple[str, str, str]], max_per_kind: int
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
