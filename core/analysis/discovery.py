"""Candidate desks: the complaints a model flagged as fitting no desk, grouped by density on the
model's own sentence embeddings into candidates a reviewer can name as a new desk.

Steps, each bounded by the number of complaints (at most `max_complaints` per run):
1. the embeddings (what the model's classification layer reads) are scaled to unit length, so
   euclidean distance ranks as cosine distance, and reduced by PCA to `REDUCED_DIMENSIONS`:
   density estimates need fewer dimensions than an encoder gives (topic-modelling libraries
   reduce with UMAP; PCA is deterministic and ships with scikit-learn);
2. HDBSCAN (scikit-learn) finds the dense groups of at least `min_size` complaints and leaves
   stragglers unclustered (a complaint unlike any other is not a desk; nor is one that joined
   a group only at its edge, with a membership strength under MIN_MEMBERSHIP);
3. each candidate's most distinctive words are its class-based TF-IDF (c-TF-IDF, as BERTopic
   defines it) against the known desks' complaints: a word frequent in the candidate and rare
   across all classes;
4. its examples are the members nearest its centre, and its nearest known desk is the desk whose
   mean training embedding (the unknown-desk detector's) is closest in cosine distance.

Texts are masked (core.data.privacy) before any word is counted or shown.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.checks import check_int
from core.data.privacy import mask_texts
from core.errors import UserError
from core.text import WORD_PATTERN

MAX_COMPLAINTS_ENV = "GRIEVANCE_LENS_DISCOVER_MAX"
DEFAULT_MAX_COMPLAINTS = 20_000
# BERTopic's default smallest topic, and the size at which a group of complaints is worth a
# reviewer's look as a desk (the "found" rule counts candidates of at least 10).
DEFAULT_MIN_SIZE = 10
REDUCED_DIMENSIONS = 20  # chosen on held-out intents of BANKING77's training file (bench)
MIN_MEMBERSHIP = 0.1  # HDBSCAN's membership strength below which a member is a straggler
WORDS_SHOWN = 8
EXAMPLES_SHOWN = 5
KNOWN_TEXTS_PER_DESK = 500  # enough for c-TF-IDF's word frequencies; keeps a run bounded
EXAMPLE_CHARS = 300


@dataclass(frozen=True)
class DiscoveryConfig:
    """How a run groups complaints: the smallest candidate and the most complaints it reads;
    then HDBSCAN's own settings (bench/bench_discovery.py chose them on held-out intents of a
    training file, never on test rows): `min_samples` (None: `min_size`) sets how dense a
    neighbourhood must be, `selection` is "eom" (the most persistent groups) or "leaf" (the
    finest: the defaults, as found and as clean as the tuning saw), `dimensions` the PCA
    components the density is measured in."""

    min_size: int = DEFAULT_MIN_SIZE
    max_complaints: int = DEFAULT_MAX_COMPLAINTS
    min_samples: int | None = 4
    selection: str = "leaf"
    dimensions: int = REDUCED_DIMENSIONS

    def __post_init__(self) -> None:
        check_int("min_size", self.min_size, minimum=2)
        check_int("max_complaints", self.max_complaints, minimum=1)
        check_int("dimensions", self.dimensions, minimum=2)
        if self.min_samples is not None:
            check_int("min_samples", self.min_samples, minimum=1)
        if self.selection not in ("eom", "leaf"):
            raise UserError(f"selection must be 'eom' or 'leaf', got {self.selection!r}")

    @classmethod
    def from_env(cls, *, min_size: int = DEFAULT_MIN_SIZE) -> DiscoveryConfig:
        """The configuration with $GRIEVANCE_LENS_DISCOVER_MAX as the cap when it is set."""
        raw = os.environ.get(MAX_COMPLAINTS_ENV, "").strip()
        if not raw:
            return cls(min_size=min_size)
        if not raw.isdigit() or int(raw) < 1:
            raise UserError(
                f"{MAX_COMPLAINTS_ENV} must be a whole number of complaints, got {raw!r}"
            )
        return cls(min_size=min_size, max_complaints=int(raw))


@dataclass(frozen=True)
class Candidate:
    """One candidate desk: its members (positions among the complaints clustered), its most
    distinctive words, its most central members and the known desk it is nearest to."""

    id: str  # "C1", "C2", ... largest first
    members: tuple[int, ...]
    words: tuple[str, ...]
    examples: tuple[int, ...]  # members, most central first
    nearest_desk: str | None
    nearest_distance: float | None  # cosine distance of the centres, 0 (same) to 2

    @property
    def size(self) -> int:
        return len(self.members)


@dataclass(frozen=True)
class Discovery:
    """The candidates among `considered` complaints, and the positions left unclustered."""

    candidates: tuple[Candidate, ...]
    unclustered: tuple[int, ...]
    considered: int
    masked_texts: tuple[str, ...] = field(default=(), repr=False)  # what examples show

    def candidate(self, candidate_id: str) -> Candidate:
        found = next((c for c in self.candidates if c.id == candidate_id), None)
        if found is None:
            raise UserError(f"no candidate {candidate_id!r} in this run; run discovery again")
        return found

    def labels(self) -> list[str]:
        """Each complaint's candidate id, "" where unclustered."""
        labels = [""] * self.considered
        for candidate in self.candidates:
            for member in candidate.members:
                labels[member] = candidate.id
        return labels

    def example_texts(self, candidate: Candidate) -> list[str]:
        """The candidate's examples, masked and cut to EXAMPLE_CHARS (escape before showing)."""
        return [_cut(self.masked_texts[i]) for i in candidate.examples]


def find_candidates(
    embeddings: np.ndarray,
    texts: Sequence[str],
    *,
    desk_means: np.ndarray | None,
    desks: Sequence[str],
    known_texts: Mapping[str, Sequence[str]],
    config: DiscoveryConfig,
    cancel: threading.Event | None = None,
) -> Discovery | None:
    """Group the complaints `texts` (with their embeddings (n, d), one row each) into candidate
    desks; None when cancelled. `desk_means` (k, d) are the known `desks`' mean training
    embeddings (None: no nearest desk is named); `known_texts` each known desk's complaints,
    against which a candidate's words are distinctive."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    if embeddings.ndim != 2 or len(embeddings) != len(texts):
        raise ValueError(f"{len(texts)} texts need {len(texts)} embeddings, got {embeddings.shape}")
    if len(texts) > config.max_complaints:
        raise UserError(
            f"{len(texts):,} complaints to group; a run reads at most {config.max_complaints:,} "
            f"({MAX_COMPLAINTS_ENV}): choose a shorter period or a smaller file"
        )
    masked = mask_texts(texts)
    unit = _unit(embeddings)
    labels = _clusters(unit, config)
    if cancel is not None and cancel.is_set():
        return None
    groups = _groups(labels)
    words = _distinctive_words(masked, groups, known_texts)
    candidates = tuple(
        _candidate(f"C{i + 1}", members, unit, words[i], desk_means, desks)
        for i, members in enumerate(groups)
    )
    unclustered = tuple(int(i) for i in np.flatnonzero(labels < 0))
    return Discovery(candidates, unclustered, len(texts), tuple(masked))


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _clusters(unit: np.ndarray, config: DiscoveryConfig) -> np.ndarray:
    """HDBSCAN's label of each row (-1: unclustered) on the PCA-reduced unit embeddings."""
    n, min_size = len(unit), config.min_size
    if n < max(min_size, 3):
        return np.full(n, -1)
    from sklearn.cluster import HDBSCAN
    from sklearn.decomposition import PCA

    dimensions = min(config.dimensions, n - 1, unit.shape[1])
    reduced = PCA(n_components=dimensions, svd_solver="full").fit_transform(unit)
    found = HDBSCAN(
        min_cluster_size=min_size, min_samples=config.min_samples,
        cluster_selection_method=config.selection, copy=True,
    ).fit(reduced)  # fmt: skip
    # A straggler closer to one group than the groups are to each other joins it at the group's
    # lowest density: its membership strength is near 0 where a real member's is near 1.
    labels = np.where(found.probabilities_ < MIN_MEMBERSHIP, -1, found.labels_)
    for label in np.unique(labels[labels >= 0]):  # what stays must still be a group
        if np.count_nonzero(labels == label) < min_size:
            labels[labels == label] = -1
    return labels


def _groups(labels: np.ndarray) -> list[tuple[int, ...]]:
    """The members of each cluster, largest first (ties by first member: deterministic)."""
    groups = [
        tuple(int(i) for i in np.flatnonzero(labels == label))
        for label in np.unique(labels)
        if label >= 0
    ]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def _candidate(
    candidate_id: str,
    members: tuple[int, ...],
    unit: np.ndarray,
    words: tuple[str, ...],
    desk_means: np.ndarray | None,
    desks: Sequence[str],
) -> Candidate:
    centre = _unit(unit[list(members)].mean(axis=0, keepdims=True))[0]
    closeness = unit[list(members)] @ centre
    examples = tuple(members[i] for i in np.argsort(-closeness, kind="stable")[:EXAMPLES_SHOWN])
    nearest, distance = None, None
    if desk_means is not None and len(desk_means) == len(desks) and len(desks):
        distances = 1.0 - _unit(np.asarray(desk_means, dtype=np.float64)) @ centre
        best = int(np.argmin(distances))
        nearest, distance = str(desks[best]), round(float(distances[best]), 4)
    return Candidate(candidate_id, members, words, examples, nearest, distance)


def _distinctive_words(
    masked: Sequence[str], groups: list[tuple[int, ...]], known: Mapping[str, Sequence[str]]
) -> list[tuple[str, ...]]:
    """Each group's WORDS_SHOWN highest c-TF-IDF words, against the known desks' complaints."""
    if not groups:
        return []
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    classes = [[masked[i] for i in group] for group in groups]
    classes += [mask_texts(list(texts)[:KNOWN_TEXTS_PER_DESK]) for texts in known.values()]
    counts = [_word_counts(texts, ENGLISH_STOP_WORDS) for texts in classes]
    frequency: dict[str, int] = {}
    for class_counts in counts:
        for word, n in class_counts.items():
            frequency[word] = frequency.get(word, 0) + n
    average = sum(frequency.values()) / len(counts)
    return [_top_words(counts[i], frequency, average) for i in range(len(groups))]


def _word_counts(texts: Sequence[str], stop_words: frozenset[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in texts:
        for word in WORD_PATTERN.findall(text.lower()):
            if word not in stop_words and not word.isdigit() and len(word) > 1:
                counts[word] = counts.get(word, 0) + 1
    return counts


def _top_words(counts: dict[str, int], frequency: dict[str, int], average: float) -> tuple:
    """c-TF-IDF: the word's share of the class, times log(1 + average class size / the word's
    count over all classes)."""
    total = sum(counts.values()) or 1
    scores = {w: n / total * math.log(1 + average / frequency[w]) for w, n in counts.items()}
    ranked = sorted(scores, key=lambda w: (-scores[w], w))
    return tuple(ranked[:WORDS_SHOWN])


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"
