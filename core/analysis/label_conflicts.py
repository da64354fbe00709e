"""Label conflicts: rows whose text matches a row with another label, as identical text, the same
word sequence (punctuation differs) or the same bag of words in another order (the demo twins)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from core.data.dataset import Dataset
from core.text import bag_key, words

# Kinds of label issue (core.analysis.audit.LabelIssue.kinds) found here.
IDENTICAL = "identical_text"  # same text up to case and whitespace, other label
SAME_SEQUENCE = "same_word_sequence"  # same words in the same order (punctuation differs)
SAME_BAG = "same_bag"  # same words in another order: word order may decide (demo twins)

Reasons = dict[int, list[tuple[str, str]]]  # row index -> [(kind, reason)]


def _normalised_text(text: str) -> str:
    return " ".join(text.casefold().split())


def _word_sequence(text: str) -> tuple[str, ...]:
    return tuple(words(text))


# (kind, key, reason template), closest match first.
_CONFLICT_LEVELS: tuple[tuple[str, Callable[[str], object], str], ...] = (
    (IDENTICAL, _normalised_text, "identical text to row {row} labelled {label}{also}"),
    (
        SAME_SEQUENCE,
        _word_sequence,
        "same words in the same order as row {row} labelled {label}{also}"
        " (only punctuation differs)",
    ),
    (
        SAME_BAG,
        bag_key,
        "same words as row {row} labelled {label}{also}, in another order"
        " (word order may decide the desk)",
    ),
)


def conflict_reasons(dataset: Dataset) -> Reasons:
    """Rows whose text matches a row with another label: identical, same word order, same bag.

    Each row gets the closest match only: identical text (case and whitespace ignored), then the
    same word sequence (punctuation differs), then the same bag of words in another order. The
    last is how the demo twins are built: word order or negation scope decides their desk, so a
    bag-of-words model cannot tell them apart, and the reason says so.
    """
    reasons: Reasons = {}
    for kind, key, template in _CONFLICT_LEVELS:
        for i, j, more in _conflicting_pairs(dataset, key):
            if i not in reasons:
                also = f" (and {more} more)" if more else ""
                reason = template.format(row=dataset.rows[j], label=dataset.labels[j], also=also)
                reasons[i] = [(kind, reason)]
    return reasons


def _conflicting_pairs(
    dataset: Dataset, key: Callable[[str], object]
) -> list[tuple[int, int, int]]:
    """(row index, first other-labelled row index with the same key, how many more such rows)."""
    groups: dict[object, list[int]] = defaultdict(list)
    for i, text in enumerate(dataset.texts):
        groups[key(text)].append(i)
    pairs = []
    for members in groups.values():
        counts = Counter(dataset.labels[i] for i in members)
        if len(counts) < 2:
            continue
        first = members[0]
        first_other = next(j for j in members if dataset.labels[j] != dataset.labels[first])
        for i in members:
            j = first_other if dataset.labels[i] == dataset.labels[first] else first
            pairs.append((i, j, len(members) - counts[dataset.labels[i]] - 1))
    return pairs
