"""Challenger against live: two saved models scored on the same rows, rows that neither trained on
(a data set's rows minus every row either card's split trained on, by text key, plus the
reviewers' gold rows), as each routes them (its blend's decision, as `classify` routes).

The report: accuracy and macro-F1 with paired bootstrap confidence intervals, per-desk figures,
the word-order-twin slice, expected calibration error, the review load, the complaints whose desk
changes, and McNemar's exact test on the rows where one model is right and the other wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom

from core.data.dataset import TWIN_SLICE, Dataset, slice_names, text_key
from core.errors import UserError
from core.metrics import evaluate_predictions
from core.models.classifier import DEFAULT_REVIEW_THRESHOLD
from core.models.classify import classification_columns
from core.models.registry import LoadedModel
from core.progress import Cancelled, Progress, ProgressCallback, check_cancel

COMPARE_PHASE = "classify"  # the Progress phase: texts routed, by both models (2 per row)
BOOTSTRAP_RESAMPLES = 1000  # enough for the 2.5th and 97.5th percentiles to settle to ~0.5 point
CONFIDENCE = 0.95  # of every interval
# Equal-width confidence bins of the calibration error: 15 is the usual choice (Guo et al. 2017)
# and keeps about 30 rows a bin on a few hundred rows.
ECE_BINS = 15
MIN_ROWS = 20  # fewer rows than this cannot tell two models apart; refuse rather than mislead
ALPHA = 0.05  # McNemar's p below this: one model is better, not noise
# Cells of one chunk of resamples (resamples × rows): bounds the bootstrap's memory at ~16 MB.
_CHUNK_CELLS = 2_000_000
DATASET_SOURCE = "data set"  # ChangedRow.source of a data set row (gold rows: "triage #id")


@dataclass(frozen=True)
class ModelScores:
    """One model's figures on the compared rows."""

    name: str
    accuracy: float
    accuracy_ci: tuple[float, float]
    macro_f1: float  # over the desks among the rows' true labels
    macro_f1_ci: tuple[float, float]
    per_class: dict[str, dict[str, float]]  # label -> {"recall", "precision", "f1", "support"}
    ece: float  # expected calibration error of the decision's confidence, ECE_BINS bins
    flagged: int  # rows it would send to people (the decision's confidence below the threshold)
    twin_accuracy: float | None  # on the word-order twins; None when the rows have none
    digest: str = ""  # its card digest (core.models.card.card_digest): which version was scored

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "digest": self.digest, "accuracy": self.accuracy,
            "accuracy_ci": list(self.accuracy_ci), "macro_f1": self.macro_f1,
            "macro_f1_ci": list(self.macro_f1_ci), "per_class": self.per_class, "ece": self.ece,
            "flagged": self.flagged, "twin_accuracy": self.twin_accuracy,
        }  # fmt: skip


@dataclass(frozen=True)
class ChangedRow:
    """A complaint the two models route to different desks."""

    row: int  # its spreadsheet row in the data set, or its number among the gold rows
    text: str
    a_label: str
    b_label: str
    reviewed_label: str | None  # the reviewers' desk (a gold row's verdict), when there is one
    source: str = DATASET_SOURCE  # "data set", or the gold row's "triage #id"

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row, "text": self.text, "a_label": self.a_label, "b_label": self.b_label,
            "reviewed_label": self.reviewed_label, "source": self.source,
        }  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """Model A (the one in use) against model B (the challenger) on the same `rows` rows."""

    rows: int
    a: ModelScores
    b: ModelScores
    changed: tuple[ChangedRow, ...]
    p_value: float  # McNemar's exact test, two-sided, on b_only_right against a_only_right
    b_only_right: int  # rows B routes right and A wrong
    a_only_right: int
    verdict: str  # one plain sentence (`verdict_text`)
    excluded_trained: int  # rows left out because one of the models trained on them
    gold_rows: int  # reviewers' verdicts among the rows
    warnings: tuple[str, ...]
    threshold: float = DEFAULT_REVIEW_THRESHOLD  # of the review load

    def to_json(self) -> dict[str, Any]:
        """The `compare --json` document (ARCHITECTURE.md): rows, a, b, changed, p_value, more."""
        return {
            "rows": self.rows, "a": self.a.to_json(), "b": self.b.to_json(),
            "changed": [row.to_json() for row in self.changed], "p_value": self.p_value,
            "b_only_right": self.b_only_right, "a_only_right": self.a_only_right,
            "verdict": self.verdict, "excluded_trained": self.excluded_trained,
            "gold_rows": self.gold_rows, "warnings": list(self.warnings),
            "threshold": self.threshold, "confidence": CONFIDENCE,
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "ece_bins": ECE_BINS,
        }  # fmt: skip


@dataclass(frozen=True)
class _Rows:
    """The scored rows: data set rows first, then the gold rows not already among them."""

    texts: list[str]
    labels: list[str]  # the truth: a gold row's verdict wins over the data set's label
    rows: list[int]
    sources: list[str]
    reviewed: list[str | None]
    twin: np.ndarray  # (n,) bool: the word-order twin slice
    excluded: int
    gold: int


def held_out_rows(dataset: Dataset, cards: Sequence[Mapping[str, Any]]) -> tuple[Dataset, int]:
    """The rows of `dataset` that no card's split trained on (by `text_key`, so the same complaint
    in another version or file counts too), and how many were dropped. A card without a "split"
    (saved before cards recorded one) drops nothing."""
    trained: set[str] = set()
    for card in cards:
        trained |= _train_keys(card)
    keep = [i for i, text in enumerate(dataset.texts) if text_key(text) not in trained]
    return dataset.subset(keep), len(dataset) - len(keep)


def _train_keys(card: Mapping[str, Any]) -> set[str]:
    split = card.get("split")
    if split is None:
        return set()
    keys = split.get("train_keys") if isinstance(split, Mapping) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise UserError("a model card's split is damaged (no list of train_keys); save it again")
    return set(keys)


def compare_models(
    a: LoadedModel,
    b: LoadedModel,
    dataset: Dataset,
    *,
    gold: Dataset | None = None,
    threshold: float = DEFAULT_REVIEW_THRESHOLD,
    seed: int = 0,
    cancel: threading.Event | None = None,
    on_progress: ProgressCallback | None = None,
) -> Comparison:
    """Score model `a` (the one in use) and model `b` (the challenger) on the rows of `dataset`
    and `gold` (reviewers' verdicts, core.review.gold) that neither trained on.

    Each model routes the rows as `classify` does (core.models.classify: its blend's decision),
    in batches, reporting texts routed as `Progress` (2 per row) and checking `cancel` between
    batches (raises core.progress.Cancelled). A gold row whose text is also a data set row is
    scored once, with the reviewer's desk as the truth. Rows whose true desk a model does not
    know count as its errors. The bootstrap draws from its own generator seeded with `seed`.

    Raises UserError when fewer than MIN_ROWS rows are left, or when the models share no desk.
    """
    names = (a.path.name, b.path.name)
    scored = _scoring_rows(dataset, gold, (a.card, b.card))
    warnings = [*_split_warnings(a, b), *_desk_warnings(a, b, scored.labels)]
    _check_enough(scored)
    a_cols = _route(a, scored.texts, threshold, on_progress, cancel, offset=0)
    b_cols = _route(b, scored.texts, threshold, on_progress, cancel, offset=len(scored.texts))
    check_cancel(cancel)
    truth = np.array(scored.labels, dtype=object)
    a_pred = a_cols["predicted_label"].to_numpy(dtype=object)
    b_pred = b_cols["predicted_label"].to_numpy(dtype=object)
    a_scores, b_scores = _paired_scores(truth, (a_cols, b_cols), names, scored.twin, seed)
    a_scores, b_scores = replace(a_scores, digest=a.digest), replace(b_scores, digest=b.digest)
    a_right, b_right = a_pred == truth, b_pred == truth
    b_only, a_only = int((b_right & ~a_right).sum()), int((a_right & ~b_right).sum())
    p_value = mcnemar_p(b_only, a_only)
    return Comparison(
        rows=len(truth), a=a_scores, b=b_scores, changed=_changed(scored, a_pred, b_pred),
        p_value=p_value, b_only_right=b_only, a_only_right=a_only,
        verdict=verdict_text(names, len(truth), b_only, a_only, p_value),
        excluded_trained=scored.excluded, gold_rows=scored.gold, warnings=tuple(warnings),
        threshold=threshold,
    )  # fmt: skip


def _scoring_rows(
    dataset: Dataset, gold: Dataset | None, cards: Sequence[Mapping[str, Any]]
) -> _Rows:
    """The held-out data set rows, then the held-out gold rows whose text is not among them; a
    gold verdict on a data set row's text becomes that row's truth and reviewed label."""
    held, excluded = held_out_rows(dataset, cards)
    verdicts: dict[str, tuple[int, str, str, str]] = {}  # key -> (row, text, label, source)
    if gold is not None and len(gold):
        gold_held, gold_excluded = held_out_rows(gold, cards)
        excluded += gold_excluded
        sources = _sources(gold_held)
        for i, (text, label) in enumerate(zip(gold_held.texts, gold_held.labels, strict=True)):
            verdicts[text_key(text)] = (gold_held.rows[i], text, label, sources[i])  # latest wins
    held_keys = [text_key(t) for t in held.texts]
    reviewed = [verdicts[k][2] if k in verdicts else None for k in held_keys]
    labels = [r if r is not None else label for r, label in zip(reviewed, held.labels, strict=True)]
    in_data = set(held_keys)
    extra = [v for k, v in verdicts.items() if k not in in_data]  # no data set row has its text
    twin = [s == TWIN_SLICE for s in slice_names(held)] + [False] * len(extra)
    return _Rows(
        texts=[*held.texts, *(v[1] for v in extra)], labels=[*labels, *(v[2] for v in extra)],
        rows=[*held.rows, *(v[0] for v in extra)],
        sources=[DATASET_SOURCE] * len(held) + [v[3] for v in extra],
        reviewed=[*reviewed, *(v[2] for v in extra)], twin=np.array(twin, dtype=bool),
        excluded=excluded, gold=sum(r is not None for r in reviewed) + len(extra),
    )  # fmt: skip


def _sources(gold: Dataset) -> list[str]:
    if "source" in gold.extra.columns:
        return gold.extra["source"].fillna("").astype(str).tolist()
    return [f"gold row {r}" for r in gold.rows]


def _split_warnings(a: LoadedModel, b: LoadedModel) -> list[str]:
    return [
        f"{model.path.name}'s card does not record its training rows; rows it trained on may be "
        "scored"
        for model in (a, b)
        if model.card.get("split") is None
    ]


def _desk_warnings(a: LoadedModel, b: LoadedModel, labels: Sequence[str]) -> list[str]:
    """What to know about the desks; UserError when the models share none, or when no row's desk
    is known to either (nothing comparable)."""
    a_desks, b_desks = _desks(a), _desks(b)
    a_name, b_name = a.path.name, b.path.name
    if not a_desks & b_desks:
        raise UserError(
            f"{a_name} routes to {sorted(a_desks)} and {b_name} to {sorted(b_desks)}: no desk in "
            "common, so there is nothing to compare; compare models trained on the same desks"
        )
    unknown = sorted(set(labels) - (a_desks | b_desks))
    if labels and set(labels) <= set(unknown):
        raise UserError(
            f"no row's desk ({', '.join(unknown[:5])}) is known to either model; compare on "
            "the data set they were trained on"
        )
    warnings = []
    if a_desks != b_desks:
        warnings.append(
            f"the models know different desks (only {a_name}: {sorted(a_desks - b_desks)}; only "
            f"{b_name}: {sorted(b_desks - a_desks)}); rows of a desk a model does not know count "
            "as its errors"
        )
    if unknown:
        count = sum(label in unknown for label in labels)
        warnings.append(
            f"{count} rows have desks neither model knows ({', '.join(unknown[:5])}); they "
            "count as both models' errors"
        )
    return warnings


def _desks(model: LoadedModel) -> set[str]:
    return set(model.classes)


def _check_enough(scored: _Rows) -> None:
    if len(scored.texts) < MIN_ROWS:
        raise UserError(
            f"only {len(scored.texts)} rows are left that neither model trained on "
            f"({scored.excluded} were left out); a comparison needs at least {MIN_ROWS}: add "
            "held-out rows or reviewers' verdicts"
        )


def _route(
    model: LoadedModel,
    texts: list[str],
    threshold: float,
    on_progress: ProgressCallback | None,
    cancel: threading.Event | None,
    *,
    offset: int,
) -> pd.DataFrame:
    """The contract columns of `classify` for `texts`; progress counts both models' texts."""
    total = 2 * len(texts)

    def report(value: Progress) -> None:
        if on_progress is not None:
            on_progress(Progress(offset + value.done, total, COMPARE_PHASE))

    columns = classification_columns(
        model, texts, review_threshold=threshold, on_progress=report, cancel=cancel
    )
    if columns is None:
        raise Cancelled
    return columns


def _paired_scores(
    truth: np.ndarray,
    columns: tuple[pd.DataFrame, pd.DataFrame],
    names: tuple[str, str],
    twin: np.ndarray,
    seed: int,
) -> tuple[ModelScores, ModelScores]:
    """Both models' scores; their intervals come from the same resamples (a paired bootstrap)."""
    predictions = [c["predicted_label"].to_numpy(dtype=object) for c in columns]
    classes = sorted({*truth, *predictions[0], *predictions[1]})
    index = {label: i for i, label in enumerate(classes)}
    truth_ids = np.array([index[t] for t in truth])
    pred_ids = [np.array([index[p] for p in pred]) for pred in predictions]
    intervals = bootstrap_intervals(truth_ids, pred_ids, len(classes), seed=seed)
    desks = sorted({*classes, *_prob_desks(columns[0]), *_prob_desks(columns[1])})
    return tuple(
        _scores(name, truth, pred, ids, truth_ids, cols, twin, desks, ci, len(classes))
        for name, pred, ids, cols, ci in zip(names, predictions, pred_ids, columns, intervals,
                                             strict=True)
    )  # type: ignore[return-value]  # fmt: skip


def _prob_desks(columns: pd.DataFrame) -> list[str]:
    return [str(c)[len("prob_") :] for c in columns.columns if str(c).startswith("prob_")]


def _scores(
    name: str,
    truth: np.ndarray,
    pred: np.ndarray,
    pred_ids: np.ndarray,
    truth_ids: np.ndarray,
    columns: pd.DataFrame,
    twin: np.ndarray,
    desks: list[str],
    intervals: tuple[tuple[float, float], tuple[float, float]],
    n_classes: int,
) -> ModelScores:
    correct = pred == truth
    report = evaluate_predictions(list(truth), list(pred), labels=desks)
    per_class = {
        label: {"recall": m.recall, "precision": m.precision, "f1": m.f1, "support": m.support}
        for label, m in report.per_class.items()
    }
    accuracy, macro_f1 = _accuracy_and_macro_f1(
        _confusions(truth_ids, pred_ids, np.arange(len(truth))[None, :], n_classes)
    )
    return ModelScores(
        name=name, accuracy=float(accuracy[0]), accuracy_ci=intervals[0],
        macro_f1=float(macro_f1[0]), macro_f1_ci=intervals[1], per_class=per_class,
        ece=expected_calibration_error(columns["confidence"].to_numpy(float), correct),
        flagged=int(columns["needs_review"].sum()),
        twin_accuracy=float(correct[twin].mean()) if twin.any() else None,
    )  # fmt: skip


def bootstrap_intervals(
    truth_ids: np.ndarray,
    pred_ids: Sequence[np.ndarray],
    n_classes: int,
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Percentile intervals (CONFIDENCE) of accuracy and macro-F1 for each model's `pred_ids`,
    (n,) class ids like `truth_ids` (n,): every model is scored on the same `resamples` draws of
    n rows with replacement (paired), from a generator of its own seeded with `seed`.

    Returns one ((accuracy low, high), (macro-F1 low, high)) per model."""
    n = len(truth_ids)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_CELLS // max(n, 1))
    draws: list[list[np.ndarray]] = [[] for _ in pred_ids]  # per model: (chunk, 2) arrays
    for start in range(0, resamples, chunk):
        picks = rng.integers(0, n, size=(min(chunk, resamples - start), n))  # (chunk, n)
        for model, ids in enumerate(pred_ids):
            confusion = _confusions(truth_ids, ids, picks, n_classes)
            draws[model].append(np.stack(_accuracy_and_macro_f1(confusion), axis=1))
    tail = 100 * (1 - CONFIDENCE) / 2
    intervals = []
    for model_draws in draws:
        low, high = np.percentile(np.concatenate(model_draws), [tail, 100 - tail], axis=0)
        intervals.append(((float(low[0]), float(high[0])), (float(low[1]), float(high[1]))))
    return intervals


def _confusions(
    truth_ids: np.ndarray, pred_ids: np.ndarray, picks: np.ndarray, k: int
) -> np.ndarray:
    """Confusion matrices (r, k, k), true × predicted, of the r resamples `picks` (r, n)."""
    r = picks.shape[0]
    cells = truth_ids[picks] * k + pred_ids[picks] + (np.arange(r) * k * k)[:, None]  # (r, n)
    return np.bincount(cells.ravel(), minlength=r * k * k).reshape(r, k, k)


def _accuracy_and_macro_f1(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r,) accuracies and (r,) macro-F1s of confusion matrices (r, k, k); the macro-F1 averages
    the desks each resample has true rows of (F1 = 2 TP / (true + predicted))."""
    tp = np.diagonal(confusion, axis1=1, axis2=2).astype(float)  # (r, k)
    support, predicted = confusion.sum(axis=2), confusion.sum(axis=1)  # (r, k) each
    accuracy = tp.sum(axis=1) / support.sum(axis=1)
    present = support > 0
    f1 = np.divide(2 * tp, support + predicted, out=np.zeros_like(tp), where=present)
    return accuracy, (f1 * present).sum(axis=1) / present.sum(axis=1)


def expected_calibration_error(
    confidence: np.ndarray, correct: np.ndarray, *, bins: int = ECE_BINS
) -> float:
    """Σ_b (n_b / n) |accuracy_b − mean confidence_b| over `bins` equal-width bins of the top
    probability, (i/bins, (i+1)/bins] (a confidence of 0 falls in the first): how far the
    model's stated sureness is from how often it is right. `confidence`, `correct`: (n,)."""
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=float)
    if len(confidence) == 0:
        return 0.0
    inner_edges = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    bin_of = np.searchsorted(inner_edges, confidence, side="left")  # (n,) in 0..bins-1
    stated = np.bincount(bin_of, weights=confidence, minlength=bins)
    right = np.bincount(bin_of, weights=correct, minlength=bins)
    return float(np.abs(right - stated).sum() / len(confidence))


def mcnemar_p(b_only_right: int, a_only_right: int) -> float:
    """McNemar's exact test: the two-sided binomial p of the discordant pairs, min(1, 2 P(X <=
    min(b, c))) for X ~ Binomial(b + c, 1/2); 1 when no row is discordant."""
    n = b_only_right + a_only_right
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * binom.cdf(min(b_only_right, a_only_right), n, 0.5)))


def verdict_text(names: tuple[str, str], rows: int, b_only: int, a_only: int, p: float) -> str:
    """One plain sentence: which model is better on these rows, or that the difference is noise."""
    a_name, b_name = names
    if p < ALPHA and b_only != a_only:
        better, worse = (b_name, a_name) if b_only > a_only else (a_name, b_name)
        return f"{better} is better than {worse} on these {rows:,} rows ({p_text(p)})."
    return (
        f"The difference is within noise ({p_text(p)}): {b_only + a_only:,} rows have one model "
        f"right and the other wrong, {b_name} right on {b_only:,}, {a_name} right on {a_only:,}."
    )


def p_text(p: float) -> str:
    """ "p = 0.0215", or "p < 0.0001" for smaller values."""
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.3g}"


def _changed(scored: _Rows, a_pred: np.ndarray, b_pred: np.ndarray) -> tuple[ChangedRow, ...]:
    return tuple(
        _changed_row(scored, int(i), a_pred, b_pred) for i in np.flatnonzero(a_pred != b_pred)
    )


def _changed_row(scored: _Rows, i: int, a_pred: np.ndarray, b_pred: np.ndarray) -> ChangedRow:
    return ChangedRow(
        row=scored.rows[i], text=scored.texts[i], a_label=str(a_pred[i]), b_label=str(b_pred[i]),
        reviewed_label=scored.reviewed[i], source=scored.sources[i],
    )  # fmt: skip


def changed_frame(comparison: Comparison) -> pd.DataFrame:
    """The complaints whose desk changes, as a table: row, source, both desks, the reviewers'
    desk (empty where none), text."""
    a, b = comparison.a.name, comparison.b.name
    return pd.DataFrame(
        {
            "row": [c.row for c in comparison.changed],
            "source": [c.source for c in comparison.changed],
            f"A: {a}": [c.a_label for c in comparison.changed],
            f"B: {b}": [c.b_label for c in comparison.changed],
            "reviewers' desk": [c.reviewed_label or "" for c in comparison.changed],
            "text": [c.text for c in comparison.changed],
        }
    )


def render_text(comparison: Comparison) -> str:
    """The plain-text report of `compare` without --json."""
    lines = [f"{comparison.rows:,} rows scored ({comparison.excluded_trained:,} left out: a "
             f"model trained on them; {comparison.gold_rows:,} reviewers' verdicts)"]  # fmt: skip
    for tag, scores in (("A", comparison.a), ("B", comparison.b)):
        twin = "" if scores.twin_accuracy is None else f", twins {scores.twin_accuracy:.3f}"
        lines.append(
            f"{tag} {scores.name}: accuracy {scores.accuracy:.3f} {_ci(scores.accuracy_ci)}, "
            f"macro-F1 {scores.macro_f1:.3f} {_ci(scores.macro_f1_ci)}, ECE {scores.ece:.3f}, "
            f"review load {scores.flagged:,}{twin}"
        )
    lines.append(f"{len(comparison.changed):,} rows change desk")
    lines += [f"warning: {w}" for w in comparison.warnings]
    lines.append(comparison.verdict)
    return "\n".join(lines)


def _ci(interval: tuple[float, float]) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"
