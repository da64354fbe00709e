"""Label audit: out-of-fold predicted probabilities and confident-learning label issues (cleanlab),
merged with the label conflicts of core.analysis.label_conflicts and ranked most likely error first.

The model is pluggable: any `fit(train) -> classifier` whose result has `classes_` and
`predict_proba(texts)` works; the bag of words is built in, its strength C chosen among
`AuditConfig.bow_strengths` by out-of-fold log-loss. How many rows are flagged is cleanlab's own
estimate of the number of label issues (`cleanlab.count.num_label_issues`), and the result says
how many of them are expected to be real errors (core.analysis.audit_estimate).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from cleanlab.filter import find_label_issues
from cleanlab.rank import get_label_quality_scores
from threadpoolctl import threadpool_limits

from core.analysis.audit_estimate import ErrorEstimate, estimate_errors
from core.analysis.label_conflicts import SAME_BAG, Reasons, conflict_reasons
from core.checks import check_choice, check_int
from core.data.dataset import Dataset
from core.errors import UserError
from core.models.bag_of_words import BagOfWordsClassifier, BagOfWordsConfig
from core.models.classifier import ProbabilisticClassifier
from core.progress import Progress, ProgressCallback

# cleanlab's rules for which rows are issues. The "low_" rules flag the rows of lowest label
# quality, as many as cleanlab estimates there are label issues (num_label_issues, from the
# confident joint); the others flag by the confident joint's cells.
FILTER_METHODS = (
    "low_self_confidence",
    "low_normalized_margin",
    "prune_by_noise_rate",
    "prune_by_class",
    "both",
    "confident_learning",
)
# Inverse L2 strengths C the bag of words of an audit chooses from, by out-of-fold log-loss
# against the given labels (no row is scored by a model that saw it). A strong model memorises
# a flipped row's words from its other rows and no longer doubts it; a weak one doubts every
# ambiguous row. Planted-flip benchmark, 3000 demo rows (BENCHMARKS.md, "Label audit"): C=1, 3,
# 10, 30 gave log-loss 0.665, 0.602, 0.626, 0.713 and average precision 0.877, 0.873, 0.849,
# 0.820; the lowest log-loss (3) flagged 186 rows at precision 0.70 where the fixed C=10 flagged
# 282 at 0.48.
BOW_STRENGTHS = (1.0, 3.0, 10.0, 30.0)
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
    # Strengths C the built-in bag of words chooses from by out-of-fold log-loss; () keeps
    # bow_config.C. Part of the cache key.
    bow_strengths: tuple[float, ...] = BOW_STRENGTHS
    # cleanlab's rule for which rows are issues. "low_self_confidence" flags the rows least
    # likely to carry their label, as many as cleanlab estimates there are issues: the audit picks
    # its own count. On 5% planted flips in 3000 demo rows it flagged 179 rows (precision 0.73,
    # recall 0.87) where "both" flagged 210 (0.57, 0.80), same probabilities (BENCHMARKS.md).
    filter_by: str = "low_self_confidence"
    quality_method: str = "self_confidence"  # cleanlab label quality score used for ranking
    max_quality: float = 1.0  # list only issues whose quality score is at most this
    max_issues: int | None = None  # keep only the most suspicious N (None: all)
    # Also list identical texts (or the same words in the same order) that carry other labels.
    # Texts with the same words in another order (SAME_BAG, the demo's word-order twins) are
    # named in the reason of a row flagged anyway, never listed on their own: word order may
    # rightly decide their desk, and listing them made three in five flags false on the demo data.
    conflicts: bool = True

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
        if not isinstance(self.bow_strengths, tuple) or not all(
            isinstance(c, int | float) and not isinstance(c, bool) and c > 0
            for c in self.bow_strengths
        ):
            raise UserError(
                f"bow_strengths must be a tuple of positive numbers, got {self.bow_strengths!r}"
            )
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

    issues: tuple[LabelIssue, ...]  # most likely error first
    pred_probs: np.ndarray | None  # (n_rows, n_classes) out-of-fold; None when cancelled
    classes: tuple[str, ...]  # column order of pred_probs
    folds: int
    model: str
    fingerprint: str  # of the audited Dataset
    seconds: float
    cancelled: bool = False
    # How many of the model-flagged rows the audit expects to be real errors; None when cancelled.
    estimate: ErrorEstimate | None = None
    chosen: str = ""  # what was chosen by out-of-fold log-loss, e.g. "bag of words C=3"

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
            "estimate": None if self.estimate is None else self.estimate.to_json(),
            "chosen": self.chosen,
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


@dataclass(frozen=True)
class OutOfFold:
    """The out-of-fold probabilities of the candidate model with the lowest log-loss."""

    name: str  # the candidate's name, e.g. "bag of words C=3"
    pred_probs: np.ndarray  # (n_rows, n_classes), columns in sorted label order
    log_loss: float  # mean -log p(given label), out of fold


def out_of_fold_log_loss(dataset: Dataset, pred_probs: np.ndarray) -> float:
    """Mean -log of each row's out-of-fold probability of its given label."""
    classes = tuple(sorted(set(dataset.labels)))
    label_ids = np.asarray([classes.index(y) for y in dataset.labels], dtype=np.int64)
    given = pred_probs[np.arange(len(label_ids)), label_ids]
    return float(-np.mean(np.log(np.clip(given, 1e-12, 1.0))))


def choose_out_of_fold(
    dataset: Dataset,
    candidates: Mapping[str, FitModel],
    *,
    folds: int = 5,
    seed: int = 0,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> OutOfFold | None:
    """Out-of-fold probabilities of each candidate (same folds), keeping the lowest log-loss
    against the given labels; ties keep the first. None when `cancel` is set.

    Every row is scored by models that never saw it, so the choice is a held-out one; with 5%
    of labels wrong the given labels still reward the model that predicts the rest best.
    Progress counts folds of the whole choice: each candidate's folds are a share of one.
    """
    best: OutOfFold | None = None
    share = 1 / len(candidates)
    for done, (name, fit) in enumerate(candidates.items()):
        pred_probs = out_of_fold_probs(
            dataset, folds=folds, seed=seed, fit=fit, cancel=cancel,
            on_progress=share_progress(on_progress, done * share, share),
        )  # fmt: skip
        if pred_probs is None:
            return None
        loss = out_of_fold_log_loss(dataset, pred_probs)
        if best is None or loss < best.log_loss:
            best = OutOfFold(name, pred_probs, loss)
    return best


def share_progress(
    on_progress: ProgressCallback | None, start: float, share: float
) -> ProgressCallback | None:
    """`on_progress` for one part of a job that runs from `start` to `start + share` of it: each
    Progress (done of total) becomes the whole job's, in the same units (rounded, so that the
    last part ends on exactly `total`). None stays None."""
    if on_progress is None:
        return None

    def report(p: Progress) -> None:
        done = round(p.total * (start + share * p.done / p.total), 9)
        on_progress(Progress(done, p.total, p.phase, p.detail))

    return report


def run_audit(
    dataset: Dataset,
    config: AuditConfig = AuditConfig(),
    *,
    fit: FitModel | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> AuditResult:
    """Audit `dataset`'s labels with out-of-fold probabilities from `config.model`.

    `fit` trains the model of one fold; leave it None for the built-in "bow" model (its C
    chosen among `config.bow_strengths`). A set `cancel` event stops before the next fold and
    returns `cancelled=True` with no issues.
    """
    if not isinstance(config, AuditConfig):
        raise TypeError(f"config must be an AuditConfig, got {type(config).__name__}")
    candidates = {"": fit} if fit is not None else bow_candidates(config)
    started = time.perf_counter()
    chosen = choose_out_of_fold(
        dataset, candidates, folds=config.folds, seed=config.seed,
        on_progress=on_progress, cancel=cancel,
    )  # fmt: skip
    return audit_result(dataset, config, chosen, started=started)


def bow_candidates(config: AuditConfig) -> dict[str, FitModel]:
    """The built-in bag of words at each of `config.bow_strengths` (or its own C), by name."""
    if config.model not in BUILT_IN_MODELS:
        raise UserError(
            f"model {config.model!r} is not built in ({BUILT_IN_MODELS}); pass fit= to run_audit"
        )
    strengths = config.bow_strengths or (config.bow_config.C,)
    return {
        f"bag of words C={c:g}": bow_fit(replace(config.bow_config, C=float(c))) for c in strengths
    }


def audit_result(
    dataset: Dataset, config: AuditConfig, chosen: OutOfFold | None, *, started: float
) -> AuditResult:
    """The AuditResult of out-of-fold probabilities `chosen` (None: the audit was cancelled)."""
    if chosen is None:
        issues: tuple[LabelIssue, ...] = ()
        estimate = None
    else:
        issues, estimate = find_issues_and_estimate(dataset, chosen.pred_probs, config=config)
    return AuditResult(
        issues=issues,
        pred_probs=None if chosen is None else chosen.pred_probs,
        classes=tuple(sorted(set(dataset.labels))),
        folds=config.folds,
        model=config.model,
        fingerprint=dataset.fingerprint,
        seconds=time.perf_counter() - started,
        cancelled=chosen is None,
        estimate=estimate,
        chosen="" if chosen is None else chosen.name,
    )


def find_issues(
    dataset: Dataset, pred_probs: np.ndarray, *, config: AuditConfig = AuditConfig()
) -> list[LabelIssue]:
    """Label issues of `dataset` given out-of-fold `pred_probs` (n_rows, n_classes), ranked.

    Columns of `pred_probs` follow `sorted(set(dataset.labels))`. Rows are ranked by cleanlab's
    label quality score, lowest (most likely an error) first; ties keep spreadsheet order.
    """
    return list(find_issues_and_estimate(dataset, pred_probs, config=config)[0])


def find_issues_and_estimate(
    dataset: Dataset, pred_probs: np.ndarray, *, config: AuditConfig = AuditConfig()
) -> tuple[tuple[LabelIssue, ...], ErrorEstimate]:
    """`find_issues`, and how many of the rows the model flags are expected to be real errors."""
    classes = tuple(sorted(set(dataset.labels)))
    _check_pred_probs(pred_probs, len(dataset), len(classes))
    label_ids = np.asarray([classes.index(y) for y in dataset.labels], dtype=np.int64)
    quality = get_label_quality_scores(label_ids, pred_probs, method=config.quality_method)
    checked = _Checked.of(pred_probs, label_ids)
    flagged = checked.flagged(config.filter_by)
    reasons = _model_reasons(dataset, pred_probs, label_ids, classes, checked.rows[flagged])
    if config.conflicts:
        _merge_conflicts(reasons, conflict_reasons(dataset))
    issues = [_issue(dataset, i, pred_probs, quality, classes, r) for i, r in reasons.items()]
    issues = [x for x in issues if x.quality <= config.max_quality]
    issues.sort(key=lambda x: (x.quality, x.index))
    issues = issues[: config.max_issues]
    listed = {x.index for x in issues if MODEL in x.kinds}
    kept = np.asarray([k for k, i in enumerate(checked.rows[flagged]) if i in listed], dtype=int)
    return tuple(issues), estimate_errors(checked.label_ids, checked.pred_probs, flagged[kept])


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
    flagged: np.ndarray,
) -> Reasons:
    """Confident-learning issues (`flagged` row indices), plus the rows of labels that occur
    only once."""
    counts = np.bincount(label_ids, minlength=len(classes))
    reasons: Reasons = defaultdict(list)
    for i in np.flatnonzero(counts[label_ids] == 1):
        reasons[int(i)].append((ONLY_ROW, f"the only row labelled {dataset.labels[i]}"))
    for i in flagged:
        given, top = pred_probs[i, label_ids[i]], int(pred_probs[i].argmax())
        text = (
            f"the model, trained without this row, gives {classes[label_ids[i]]} {given:.0%}"
            f" and {classes[top]} {pred_probs[i, top]:.0%}"
        )
        reasons[int(i)].append((MODEL, text))
    return reasons


@dataclass(frozen=True)
class _Checked:
    """The rows and classes cleanlab can judge: labels with at least two rows.

    cleanlab cannot estimate a label's noise from a single row (it warns and skips it), so those
    rows and columns are left out, and the remaining probabilities renormalised; their rows are
    reported as ONLY_ROW instead.
    """

    rows: np.ndarray  # (m,) positions in the data set
    label_ids: np.ndarray  # (m,) ids among the kept classes
    pred_probs: np.ndarray  # (m, kept classes)

    @classmethod
    def of(cls, pred_probs: np.ndarray, label_ids: np.ndarray) -> _Checked:
        counts = np.bincount(label_ids, minlength=pred_probs.shape[1])
        kept_classes = np.flatnonzero(counts >= 2)
        rows = np.flatnonzero(counts[label_ids] >= 2)
        probs = pred_probs[np.ix_(rows, kept_classes)]
        probs = probs / np.clip(probs.sum(axis=1, keepdims=True), 1e-12, None)
        remap = np.full(len(counts), -1, dtype=np.int64)
        remap[kept_classes] = np.arange(len(kept_classes))
        return cls(rows, remap[label_ids[rows]], probs)

    def flagged(self, filter_by: str) -> np.ndarray:
        """Positions (into `rows`) that cleanlab's `filter_by` flags."""
        mask = find_label_issues(self.label_ids, self.pred_probs, filter_by=filter_by, n_jobs=1)
        return np.flatnonzero(mask)


def _merge_conflicts(into: Reasons, conflicts: Reasons) -> None:
    """Add conflicts to `into`; a same-words-other-order conflict only to a row listed anyway."""
    for i, items in conflicts.items():
        if i in into or any(kind != SAME_BAG for kind, _ in items):
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
