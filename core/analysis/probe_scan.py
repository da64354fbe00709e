"""The data set scan for word order: groups of rows with one bag of words and different desks
(where any bag-of-words model is capped), rows where exactly one model is right, and flip rates and
Jensen-Shannon divergences per perturbation kind, with progress and cancel (core.tasks.probes
queues it).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.analysis.perturbations import (
    INVARIANCE_KINDS,
    ORDER_KINDS,
    Perturbation,
    ProbeConfig,
    perturb,
)
from core.analysis.probe_compare import js_divergence, probed_part
from core.checks import check_int_fields
from core.errors import UserError
from core.models.classifier import Prediction, predict_in_batches, shared_classes
from core.progress import Progress, ProgressCallback
from core.text import WORD_PATTERN, bag_key


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
        check_int_fields(self, max_rows=1, perturb_rows=0, batch_size=1, top_k=1, seed=0)
        if not isinstance(self.probe, ProbeConfig):
            raise TypeError(f"probe must be a ProbeConfig, got {type(self.probe).__name__}")


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
    neural: Prediction
    bow: Prediction

    @property
    def confidence(self) -> float:
        """The right model's probability for the given desk: the ranking key."""
        output = self.neural if self.right == "transformer" else self.bow
        return output.probabilities[self.label]


@dataclass(frozen=True)
class KindStats:
    """Flip rate and mean Jensen-Shannon divergence of both models over one kind."""

    kind: str
    count: int
    bag_unchanged_share: float
    neural_flip_rate: float
    bow_flip_rate: float
    neural_mean_jsd: float
    bow_mean_jsd: float


@dataclass(frozen=True)
class ScanResult:
    """What a data set scan found. Accuracies are on the scanned (sampled) rows."""

    n_rows: int
    twin_groups: tuple[TwinGroup, ...]  # over the whole data set
    bow_ceiling: float  # the best accuracy any bag-of-words model can reach on the data set
    scanned: tuple[int, ...]  # positions classified by both models
    neural_accuracy: float | None
    bow_accuracy: float | None
    neural_only: tuple[OneRightRow, ...]
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
        raise UserError(f"got {len(texts)} texts and {len(labels)} labels; give one per text")
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
        raise UserError("n_rows must be positive")
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


class ProgressCounter:
    """Counts texts classified across several predictions and reports them as one `Progress`."""

    def __init__(self, total: int, on_progress: ProgressCallback | None) -> None:
        self.total, self.done, self.on_progress = total, 0, on_progress

    def add(self, count: int, phase: str) -> None:
        self.done += count
        if self.on_progress is not None:
            self.on_progress(Progress(self.done, self.total, phase))

    def predict(
        self, model: Any, texts: list[str], phase: str, cancel: threading.Event | None, chunk: int
    ) -> np.ndarray | None:
        """`model.predict_proba(texts)` (n, k) through the one batched loop (`chunk` texts
        between cancel checks), counting its texts under `phase`; None when cancelled."""
        before = self.done

        def on_rows(done: int) -> None:
            self.add(before + done - self.done, phase)

        return predict_in_batches(model, texts, chunk=chunk, on_rows=on_rows, cancel=cancel)


def predict_both(
    models: tuple[Any, Any],
    texts: list[str],
    config: ScanConfig,
    progress: ProgressCounter,
    step: str,
    cancel: threading.Event | None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(neural, bow) predict_proba on `texts`, (n, k) each; None when cancelled.

    The transformer goes first; the phases read "<step> (transformer)", "<step> (bag of words)".
    """
    outputs = []
    for name, model in zip(("transformer", "bag of words"), models, strict=True):
        pred_probs = progress.predict(model, texts, f"{step} ({name})", cancel, config.batch_size)
        if pred_probs is None:
            return None
        outputs.append(pred_probs)
    return outputs[0], outputs[1]


def scan_dataset(
    neural: Any,
    bow: Any,
    dataset: Any,
    config: ScanConfig = ScanConfig(),
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ScanResult:
    """Scan a labelled data set (core.data.dataset.Dataset: texts, labels, rows) with both models.

    Twin groups cover the whole data set; both models classify a sample of `config.max_rows`
    rows; the perturbations of `config.perturb_rows` of those go through both models. A set
    `cancel` stops at the next batch and returns what was found so far (`cancelled=True`).
    """
    classes = shared_classes(neural, bow)
    texts, labels = list(dataset.texts), list(dataset.labels)
    if not texts:
        raise UserError("the data set is empty; load complaints first")
    groups = twin_groups(texts, labels, dataset.rows)
    scanned = sample_positions(len(texts), groups, config)
    probe_rows = _probe_positions(scanned, config)
    perturbations = _perturb_rows(neural, texts, probe_rows, config.probe, cancel)
    partial = _ScanParts(classes, texts, labels, list(dataset.rows), groups, scanned)
    if perturbations is None:
        return _finish(partial, config, (), cancelled=True)
    n_probe = sum(len(v) + 1 for v in perturbations.values())
    progress = ProgressCounter(2 * (len(scanned) + n_probe), on_progress)
    progress.add(0, "classify (transformer)")  # the total is known before the first batch
    return _run_scan(neural, bow, partial, perturbations, config, progress, cancel)


def _perturb_rows(
    neural: Any,
    texts: list[str],
    positions: list[int],
    config: ProbeConfig,
    cancel: threading.Event | None,
) -> dict[int, list[Perturbation]] | None:
    """Perturbations of each row at `positions`, each cut first to what the transformer reads
    (so a long row costs what a short one does); None when cancelled between rows.

    A row the transformer would read no word of (it starts with thousands of symbols) has no
    perturbations."""
    found = {}
    for position in positions:
        if cancel is not None and cancel.is_set():
            return None
        part = probed_part(neural, texts[position])
        found[position] = perturb(part, config) if WORD_PATTERN.search(part) else []
    return found


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


def _run_scan(neural, bow, parts, perturbations, config, progress, cancel):
    sample = [parts.texts[p] for p in parts.scanned]
    models = (neural, bow)
    parts.pred_probs = predict_both(models, sample, config, progress, "classify", cancel)
    if parts.pred_probs is None:
        return _finish(parts, config, (), cancelled=True)
    stats = _perturbation_stats(models, parts, perturbations, config, progress, cancel)
    return _finish(parts, config, stats or (), cancelled=stats is None)


def _perturbation_stats(models, parts, perturbations, config, progress, cancel):
    """KindStats per perturbation kind; None when cancelled."""
    # each variant against the part it was made of: the bag of words reads no further either
    originals = [probed_part(models[0], parts.texts[p]) for p in perturbations]
    variants = [v for vs in perturbations.values() for v in vs]
    texts = originals + [v.text for v in variants]
    owner = [i for i, vs in enumerate(perturbations.values()) for _ in vs]
    both = predict_both(models, texts, config, progress, "perturb", cancel)
    if both is None:
        return None
    # before: each variant's original, (n_variants, k); after: the variants themselves
    outputs = [
        (pred_probs[: len(originals)][owner], pred_probs[len(originals) :]) for pred_probs in both
    ]
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
        neural_accuracy=t_acc,
        bow_accuracy=b_acc,
        neural_only=t_only,
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
            neural=Prediction.of(parts.classes, t_probs[i]),
            bow=Prediction.of(parts.classes, b_probs[i]),
        )
        for i, p in enumerate(parts.scanned)
        if t_right[i] != b_right[i]
    ]
    rows.sort(key=lambda r: -r.confidence)
    t_only = tuple(r for r in rows if r.right == "transformer")[:top_k]
    b_only = tuple(r for r in rows if r.right != "transformer")[:top_k]
    return float(t_right.mean()), float(b_right.mean()), t_only, b_only
