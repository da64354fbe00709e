"""Label audit: out-of-fold predicted probabilities and confident-learning label issues (cleanlab),
merged with the label conflicts of core.analysis.label_conflicts and ranked most suspicious first.

The model is pluggable: any `fit(train) -> classifier` whose result has `classes_` and
`predict_proba(texts)` works; the bag of words is built in.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from cleanlab.filter import find_label_issues
from cleanlab.rank import get_label_quality_scores
from threadpoolctl import threadpool_limits

from core.analysis.label_conflicts import Reasons, conflict_reasons
from core.checks import check_choice, check_int
from core.data.dataset import Dataset
from core.errors import UserError
from core.models.bag_of_words import BagOfWordsClassifier, BagOfWordsConfig
from core.models.classifier import ProbabilisticClassifier
from core.progress import Progress, ProgressCallback

FILTER_METHODS = ("prune_by_noise_rate", "prune_by_class", "both", "confident_learning")
QUALITY_METHODS = ("self_confidence", "normalized_margin", "confidence_weighted_entropy")
BUILT_IN_MODELS = ("bow",)
# Why a row is listed; one issue can have several kinds (IDENTICAL, SAME_SEQUENCE and SAME_BAG
# come from core.analysis.label_conflicts).
MODEL = "confident_learning"  # cleanlab: the out-of-fold model confidently disagrees
ONLY_ROW = "only_row_of_label"  # the label occurs once: a typo, or too rare to check

FitModel = Callable[[Dataset], ProbabilisticClassifier]
FOLD_PHASE = "fold"  # the Progress phase: folds finished


@dataclass(frozen=True)
class AuditConfig:
    """How to audit a labelled data set."""

    folds: int = 5
    seed: int = 0  # shuffles rows into folds (and seeds the built-in model)
    # Names the model that `run_audit` fits per fold: "bow" is built in; for any other name pass
    # `fit=` to run_audit. The name is part of the cache key and of the JSON output.
    model: str = "bow"
    bow_config: BagOfWordsConfig = BagOfWordsConfig()
    # cleanlab's rule for which rows are issues. "both" (flagged by prune_by_class and by
    # prune_by_noise_rate) kept the recall of cleanlab's default prune_by_noise_rate on the demo
    # data with 5% planted flips and cut false flags by about a sixth (BENCHMARKS.md).
    filter_by: str = "both"
    quality_method: str = "self_confidence"  # cleanlab label quality score used for ranking
    max_quality: float = 1.0  # list only issues whose quality score is at most this
    max_issues: int | None = None  # keep only the most suspicious N (None: all)
    conflicts: bool = True  # also list identical / same-words texts that carry other labels

    def __post_init__(self) -> None:
        check_int("folds", self.folds, minimum=2)
        check_int("seed", self.seed, minimum=0)
        if not isinstance(self.model, str) or not self.model.strip():
            raise UserError(f"model must be a non-empty name such as 'bow', got {self.model!r}")
        if not isinstance(self.bow_config, BagOfWordsConfig):
            raise TypeError("bow_config must be a BagOfWordsConfig")
        check_choice("filter_by", self.filter_by, FILTER_METHODS)
        check_choice("quality_method", self.quality_method, QUALITY_METHODS)
        ok = isinstance(self.max_quality, int | float) and not isinstance(self.max_quality, bool)
        if not ok or not 0 <= self.max_quality <= 1:
            raise UserError(f"max_quality must be a number in [0, 1], got {self.max_quality!r}")
        if self.max_issues is not None:
            check_int("max_issues", self.max_issues, minimum=1)
        if not isinstance(self.conflicts, bool):
            raise UserError(f"conflicts must be True or False, got {self.conflicts!r}")


@dataclass(frozen=True)
class LabelIssue:
    """One row whose label looks wrong, and why."""

    row: int  # 1-based spreadsheet row (Dataset.rows)
    index: int  # position in the Dataset
    text: str
    given_label: str
    suggested_label: str  # the out-of-fold model's most probable label
    quality: float  # cleanlab label quality score in [0, 1]; low = suspicious
    reason: str
    kinds: tuple[str, ...] = field(default=())  # MODEL, IDENTICAL, SAME_SEQUENCE, ...

    def to_json(self) -> dict:
        """A JSON-ready dict; the ARCHITECTURE.md keys plus reason and kinds."""
        return {
            "row": self.row,
            "text": self.text,
            "given_label": self.given_label,
            "suggested_label": self.suggested_label,
            "quality": self.quality,
            "reason": self.reason,
            "kinds": list(self.kinds),
        }


@dataclass(frozen=True)
class AuditResult:
    """The ranked issues and the out-of-fold probabilities they came from."""

    issues: tuple[LabelIssue, ...]  # most suspicious first
    pred_probs: np.ndarray | None  # (n_rows, n_classes) out-of-fold; None when cancelled
    classes: tuple[str, ...]  # column order of pred_probs
    folds: int
    model: str
    fingerprint: str  # of the audited Dataset
    seconds: float
    cancelled: bool = False

    def to_json(self) -> dict:
        """A JSON-ready dict with the audit keys of ARCHITECTURE.md: issues, folds, model, more."""
        return {
            "issues": [issue.to_json() for issue in self.issues],
            "folds": self.folds,
            "model": self.model,
            "classes": list(self.classes),
            "fingerprint": self.fingerprint,
            "seconds": self.seconds,
            "cancelled": self.cancelled,
        }


def bow_fit(config: BagOfWordsConfig = BagOfWordsConfig()) -> FitModel:
    """A `fit(train)` that trains the bag of words on a fold's training rows.

    BLAS runs single-threaded during the fit: on a busy 2-core machine OpenBLAS's spinning
    worker threads made the five fits of a 3000-row audit take 64 s instead of 2.5 s
    (BENCHMARKS.md, "Label audit"); the fit's matrices are too small to gain from threads.
    """

    def fit(train: Dataset) -> BagOfWordsClassifier:
        with threadpool_limits(limits=1, user_api="blas"):
            return BagOfWordsClassifier(config).fit(list(train.texts), list(train.labels))

    return fit


def audit_cache_key(
    dataset: Dataset, config: AuditConfig, *, fit_settings: Mapping[str, Any] | None = None
) -> str:
    """A stable key for caching an audit: sha256 of the data fingerprint and every setting.

    `fit_settings` are the settings of a model passed as `fit=` (e.g. a TrainConfig as a dict),
    which `config` alone does not describe.
    """
    content: dict[str, Any] = {"fingerprint": dataset.fingerprint, "config": asdict(config)}
    if fit_settings is not None:
        content["fit"] = dict(fit_settings)
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def stratified_folds(labels: Sequence[str], *, folds: int, seed: int) -> np.ndarray:
    """A fold number in [0, folds) for each row, shape (n_rows,), stratified by label.

    Each label's rows are shuffled and dealt round-robin, continuing where the previous label
    stopped, so fold sizes differ by at most one and a label with fewer rows than folds is held
    out in some folds and kept in the training rows of all others. A label with at least two rows
    therefore appears in every fold's training rows.
    """
    labels = np.asarray(list(labels), dtype=str)
    rng = np.random.default_rng(seed)
    assignment = np.empty(len(labels), dtype=np.int64)
    offset = 0
    for label in sorted(set(labels.tolist())):
        members = rng.permutation(np.flatnonzero(labels == label))
        assignment[members] = (offset + np.arange(len(members))) % folds
        offset += len(members)
    return assignment


def out_of_fold_probs(
    dataset: Dataset,
    *,
    folds: int = 5,
    seed: int = 0,
    fit: FitModel,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> np.ndarray | None:
    """Each row's class probabilities from a model that never saw it, shape (n_rows, n_classes).

    Columns follow `sorted(set(dataset.labels))`. A label with a single row is missing from the
    training rows of the fold that holds it out, so its column is 0 for that row. Returns None
    when `cancel` is set (checked before and after each fold's fit).
    """
    classes = check_auditable(dataset, folds)
    assignment = stratified_folds(dataset.labels, folds=folds, seed=seed)
    pred_probs = np.zeros((len(dataset), len(classes)), dtype=np.float64)
    for fold in range(folds):
        if cancel is not None and cancel.is_set():
            return None
        test = np.flatnonzero(assignment == fold)
        train = np.flatnonzero(assignment != fold)
        model = fit(dataset.subset(train.tolist()))
        if cancel is not None and cancel.is_set():  # a fit may stop early, half-trained
            return None
        test_texts = [dataset.texts[i] for i in test]
        pred_probs[test] = _align_columns(model, test_texts, classes)
        if on_progress is not None:
            on_progress(Progress(fold + 1, folds, FOLD_PHASE))
    return pred_probs


def check_auditable(dataset: Dataset, folds: int) -> tuple[str, ...]:
    """The sorted classes; UserError unless `folds` and the label counts allow an audit."""
    check_int("folds", folds, minimum=2)
    if folds > len(dataset):
        raise UserError(f"folds={folds} is more than the {len(dataset)} rows; lower --folds")
    counts = Counter(dataset.labels)
    if sum(1 for c in counts.values() if c >= 2) < 2:
        raise UserError(
            f"the audit needs at least two labels with two or more rows each, got {dict(counts)};"
            " add rows or fix the labels"
        )
    return tuple(sorted(counts))


def _align_columns(
    model: ProbabilisticClassifier, texts: list[str], classes: tuple[str, ...]
) -> np.ndarray:
    """The model's probabilities (len(texts), len(classes)), 0 for classes it never saw."""
    model_probs = np.asarray(model.predict_proba(texts), dtype=np.float64)
    column = {c: i for i, c in enumerate(classes)}
    unknown = [str(c) for c in model.classes_ if str(c) not in column]
    if unknown or model_probs.shape != (len(texts), len(model.classes_)):
        raise RuntimeError(
            f"the fold model returned shape {model_probs.shape} over classes "
            f"{list(model.classes_)}; expected ({len(texts)}, k) over a subset of {list(classes)}"
        )
    aligned = np.zeros((len(texts), len(classes)), dtype=np.float64)
    aligned[:, [column[str(c)] for c in model.classes_]] = model_probs
    return aligned


def run_audit(
    dataset: Dataset,
    config: AuditConfig = AuditConfig(),
    *,
    fit: FitModel | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> AuditResult:
    """Audit `dataset`'s labels with out-of-fold probabilities from `config.model`.

    `fit` trains the model of one fold; leave it None for the built-in "bow" model. A set
    `cancel` event stops before the next fold and returns `cancelled=True` with no issues.
    """
    if not isinstance(config, AuditConfig):
        raise TypeError(f"config must be an AuditConfig, got {type(config).__name__}")
    fit = fit if fit is not None else _built_in_fit(config)
    started = time.perf_counter()
    pred_probs = out_of_fold_probs(
        dataset,
        folds=config.folds,
        seed=config.seed,
        fit=fit,
        on_progress=on_progress,
        cancel=cancel,
    )
    classes = tuple(sorted(set(dataset.labels)))
    issues = () if pred_probs is None else tuple(find_issues(dataset, pred_probs, config=config))
    return AuditResult(
        issues=issues,
        pred_probs=pred_probs,
        classes=classes,
        folds=config.folds,
        model=config.model,
        fingerprint=dataset.fingerprint,
        seconds=time.perf_counter() - started,
        cancelled=pred_probs is None,
    )


def _built_in_fit(config: AuditConfig) -> FitModel:
    if config.model not in BUILT_IN_MODELS:
        raise UserError(
            f"model {config.model!r} is not built in ({BUILT_IN_MODELS}); pass fit= to run_audit"
        )
    return bow_fit(config.bow_config)


def find_issues(
    dataset: Dataset, pred_probs: np.ndarray, *, config: AuditConfig = AuditConfig()
) -> list[LabelIssue]:
    """Label issues of `dataset` given out-of-fold `pred_probs` (n_rows, n_classes), ranked.

    Columns of `pred_probs` follow `sorted(set(dataset.labels))`. Rows are ranked by cleanlab's
    label quality score, lowest (most suspicious) first; ties keep spreadsheet order.
    """
    classes = tuple(sorted(set(dataset.labels)))
    _check_pred_probs(pred_probs, len(dataset), len(classes))
    label_ids = np.asarray([classes.index(y) for y in dataset.labels], dtype=np.int64)
    quality = get_label_quality_scores(label_ids, pred_probs, method=config.quality_method)
    reasons = _model_reasons(dataset, pred_probs, label_ids, classes, config)
    if config.conflicts:
        _merge(reasons, conflict_reasons(dataset))
    issues = [_issue(dataset, i, pred_probs, quality, classes, r) for i, r in reasons.items()]
    issues = [x for x in issues if x.quality <= config.max_quality]
    issues.sort(key=lambda x: (x.quality, x.index))
    return issues[: config.max_issues]


def _check_pred_probs(pred_probs: np.ndarray, n_rows: int, n_classes: int) -> None:
    if not isinstance(pred_probs, np.ndarray) or pred_probs.shape != (n_rows, n_classes):
        shape = getattr(pred_probs, "shape", None)
        raise UserError(f"pred_probs must have shape ({n_rows}, {n_classes}), got {shape}")
    if not np.isfinite(pred_probs).all() or (pred_probs < 0).any():
        raise UserError("pred_probs must hold finite non-negative probabilities")


def _model_reasons(
    dataset: Dataset,
    pred_probs: np.ndarray,
    label_ids: np.ndarray,
    classes: tuple[str, ...],
    config: AuditConfig,
) -> Reasons:
    """Confident-learning issues, plus the rows of labels that occur only once."""
    counts = np.bincount(label_ids, minlength=len(classes))
    reasons: Reasons = defaultdict(list)
    for i in np.flatnonzero(counts[label_ids] == 1):
        reasons[int(i)].append((ONLY_ROW, f"the only row labelled {dataset.labels[i]}"))
    for i in _confident_learning(pred_probs, label_ids, counts, config.filter_by):
        given, top = pred_probs[i, label_ids[i]], int(pred_probs[i].argmax())
        text = (
            f"the model, trained without this row, gives {classes[label_ids[i]]} {given:.0%}"
            f" and {classes[top]} {pred_probs[i, top]:.0%}"
        )
        reasons[int(i)].append((MODEL, text))
    return reasons


def _confident_learning(
    pred_probs: np.ndarray, label_ids: np.ndarray, counts: np.ndarray, filter_by: str
) -> np.ndarray:
    """Row indices cleanlab flags, over the labels with at least two rows.

    cleanlab cannot estimate a label's noise from a single row (it warns and skips it), so those
    rows and columns are left out; their rows are reported as ONLY_ROW instead.
    """
    kept_classes = np.flatnonzero(counts >= 2)
    rows = np.flatnonzero(counts[label_ids] >= 2)
    probs = pred_probs[np.ix_(rows, kept_classes)]
    probs = probs / np.clip(probs.sum(axis=1, keepdims=True), 1e-12, None)
    remap = np.full(len(counts), -1, dtype=np.int64)
    remap[kept_classes] = np.arange(len(kept_classes))
    mask = find_label_issues(remap[label_ids[rows]], probs, filter_by=filter_by, n_jobs=1)
    return rows[mask]


def _merge(into: Reasons, extra: Reasons) -> None:
    for i, items in extra.items():
        into.setdefault(i, []).extend(items)


def _issue(
    dataset: Dataset,
    i: int,
    pred_probs: np.ndarray,
    quality: np.ndarray,
    classes: tuple[str, ...],
    reasons: list[tuple[str, str]],
) -> LabelIssue:
    return LabelIssue(
        row=int(dataset.rows[i]),
        index=i,
        text=dataset.texts[i],
        given_label=dataset.labels[i],
        suggested_label=classes[int(pred_probs[i].argmax())],
        quality=float(quality[i]),
        reason="; ".join(text for _, text in reasons),
        kinds=tuple(kind for kind, _ in reasons),
    )


def plant_label_flips(
    labels: Sequence[str], *, share: float, seed: int
) -> tuple[tuple[str, ...], np.ndarray]:
    """Labels with a seeded `share` of rows moved to another label, and the flipped positions.

    For measuring an audit: the flipped positions (sorted) are the label errors it should find.
    """
    ok = isinstance(share, int | float) and not isinstance(share, bool)
    if not ok or not 0 < share < 1:
        raise UserError(f"share must be a number in (0, 1), got {share!r}")
    check_int("seed", seed, minimum=0)
    classes = sorted(set(labels))
    if len(classes) < 2:
        raise UserError("need at least two labels to flip between")
    rng = np.random.default_rng(seed)
    flipped = np.sort(rng.choice(len(labels), size=round(share * len(labels)), replace=False))
    noisy = list(labels)
    for i in flipped:
        noisy[i] = str(rng.choice([c for c in classes if c != labels[i]]))
    return tuple(noisy), flipped
