"""The project's single definition of a word and of a bag of words.

"The same bag of words" means the same multiset of lower-cased `\\w+` tokens, everywhere:
the bag of words, the demo twins, the probes and the data set scans all call these functions.
"""

# `regex` rather than `re`: its \w follows Unicode TR18 and includes combining marks, so a
# Devanagari word such as "मेरा" stays one word instead of breaking at every vowel sign.
from collections import Counter
from dataclasses import dataclass

import regex as re

WORD_PATTERN = re.compile(r"\w+")

# Characters kept per token when a text is cut before tokenising. Generous on purpose: a word
# piece and the space before it average under 8 characters, so the first max_length tokens of
# any ordinary text are unchanged, while a 10 MB complaint is no longer tokenised whole.
CHARS_PER_TOKEN = 32


def token_char_cap(max_length: int) -> int:
    """Characters of a text that a tokenizer keeping `max_length` tokens is given."""
    return CHARS_PER_TOKEN * max_length


def cut_for_tokens(text: str, max_length: int) -> str:
    """The beginning of `text` that a tokenizer truncating at `max_length` tokens can use."""
    cap = token_char_cap(max_length)
    return text if len(text) <= cap else text[:cap]


@dataclass(frozen=True)
class WordSpan:
    """One word of a text: its original spelling and its character offsets."""

    text: str
    start: int
    end: int


def word_spans(text: str) -> list[WordSpan]:
    """Every `\\w+` word of `text` with its offsets, in order, original casing kept."""
    return [WordSpan(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]


def words(text: str) -> list[str]:
    """The lower-cased `\\w+` tokens of `text`, in order."""
    return [w.lower() for w in WORD_PATTERN.findall(text)]


def bag_of_words(text: str) -> Counter[str]:
    """The multiset of lower-cased `\\w+` tokens: what a bag-of-words model sees."""
    return Counter(words(text))


def bag_key(text: str) -> tuple[str, ...]:
    """A hashable key equal for two texts exactly when their bags of words are equal."""
    return tuple(sorted(words(text)))
