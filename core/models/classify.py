"""Route many complaints at once with a saved model: the contract columns of `classify`.

The output keeps every input column and the row order and adds `predicted_label`, `confidence`,
`needs_review`, `bow_label`, `bow_confidence` and one `prob_<label>` column per class: the
decision of the model's blend (core.models.blend), with `decided_by` naming who made it and
`transformer_label`, `transformer_confidence` the transformer's own answer beside the bag of
words'.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.access import Permission
from core.jobs import BackgroundJob, JobQueue, Requester
from core.models.blend import BLEND
from core.models.classifier import Prediction, device_name
from core.models.registry import LoadedModel
from core.models.transformer.inference import DEFAULT_BATCH_SIZE

CHUNK = 256  # texts per progress report: small enough to cancel promptly, big enough to batch


@dataclass(frozen=True)
class ClassifyProgress:
    done: int
    total: int


def chunked_proba(
    model,
    texts: Sequence[str],
    *,
    on_progress: Callable[[ClassifyProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> np.ndarray | None:
    """`model.predict_proba` in chunks with progress; (n, k) in input order, or None when
    cancelled.

    The chunks are cut from all of `texts` sorted by length, so each of the model's batches
    holds texts of about one length and pads little: chunks of the input order would mix short
    and long texts in every batch.
    """
    order = np.argsort([len(t) for t in texts], kind="stable")
    pred_probs: np.ndarray | None = None
    for start in range(0, len(texts), CHUNK):
        if cancel is not None and cancel.is_set():
            return None
        rows = order[start : start + CHUNK]
        chunk = model.predict_proba([texts[i] for i in rows])
        if pred_probs is None:
            pred_probs = np.empty((len(texts), chunk.shape[1]), dtype=chunk.dtype)
        pred_probs[rows] = chunk
        if on_progress is not None:
            on_progress(ClassifyProgress(start + len(rows), len(texts)))
    return model.predict_proba([]) if pred_probs is None else pred_probs


def classification_columns(
    loaded: LoadedModel,
    texts: Sequence[str],
    *,
    review_threshold: float,
    on_progress: Callable[[ClassifyProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> pd.DataFrame | None:
    """The contract columns for `texts` (one row each, same order); None when cancelled.

    The decision is the model's blend of both models (`loaded.blend`; the transformer alone for
    models saved before blends). `needs_review` is set when the decision's top probability is
    below `review_threshold`, and always for an empty text, which is never routed blind.
    """
    _check_threshold(review_threshold)
    texts = ["" if t is None else str(t) for t in texts]
    transformer_probs = chunked_proba(
        loaded.transformer, texts, on_progress=on_progress, cancel=cancel
    )
    if transformer_probs is None:
        return None
    return _columns(loaded, texts, transformer_probs, loaded.baseline.predict_proba(texts),
                    review_threshold)  # fmt: skip


def _check_threshold(review_threshold: float) -> None:
    if not 0.0 <= review_threshold <= 1.0:
        raise ValueError(f"the review threshold must lie in 0..1, got {review_threshold}")


def _columns(
    loaded: LoadedModel,
    texts: list[str],
    transformer_probs: np.ndarray,
    bow_probs: np.ndarray,
    review_threshold: float,
) -> pd.DataFrame:
    pred_probs = loaded.blend.combine(transformer_probs, bow_probs)
    classes = [str(c) for c in loaded.transformer.classes_]
    confidence = pred_probs.max(axis=1)
    blank = np.array([not t.strip() for t in texts], dtype=bool)
    columns = {
        "predicted_label": _top_labels(classes, pred_probs),
        "confidence": confidence,
        "needs_review": (confidence < review_threshold) | blank,
        "decided_by": loaded.blend.decided_by,
        "transformer_label": _top_labels(classes, transformer_probs),
        "transformer_confidence": transformer_probs.max(axis=1),
        "bow_label": _top_labels(loaded.baseline.classes_, bow_probs),
        "bow_confidence": bow_probs.max(axis=1),
    }
    columns.update({f"prob_{label}": pred_probs[:, i] for i, label in enumerate(classes)})
    return pd.DataFrame(columns, index=range(len(texts)))


@dataclass(frozen=True)
class OneComplaint:
    """One typed complaint routed: its contract columns and every model's probabilities."""

    row: pd.Series  # the columns of `classification_columns`
    # model -> label -> probability: "transformer", "bag of words", and "decision" when the
    # decision mixes both (otherwise it is one of them, shown already)
    probabilities: dict[str, dict[str, float]]


def classify_one(loaded: LoadedModel, text: str, *, review_threshold: float) -> OneComplaint:
    """Route one complaint, each model predicting once (the Classify page's single text)."""
    _check_threshold(review_threshold)
    transformer_probs = loaded.transformer.predict_proba([text])
    bow_probs = loaded.baseline.predict_proba([text])
    row = _columns(loaded, [text], transformer_probs, bow_probs, review_threshold).iloc[0]
    classes = [str(c) for c in loaded.transformer.classes_]
    shown = {
        "transformer": dict(zip(classes, map(float, transformer_probs[0]), strict=True)),
        "bag of words": dict(zip(classes, map(float, bow_probs[0]), strict=True)),
    }
    if loaded.blend.decided_by == BLEND:
        shown["decision"] = {c: float(row[f"prob_{c}"]) for c in classes}
    return OneComplaint(row, shown)


def _top_labels(classes: Sequence[str], pred_probs: np.ndarray) -> list[str]:
    return [str(classes[i]) for i in pred_probs.argmax(axis=1)]


def classify_table(
    loaded: LoadedModel,
    table: pd.DataFrame,
    *,
    text_col: str,
    review_threshold: float,
    on_progress: Callable[[ClassifyProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> pd.DataFrame | None:
    """`table` with the contract columns appended; None when cancelled."""
    if text_col not in table.columns:
        raise ValueError(f"no column '{text_col}' in the input; it has {list(table.columns)}")
    texts = table[text_col].fillna("").astype(str).tolist()
    result = classification_columns(
        loaded, texts, review_threshold=review_threshold, on_progress=on_progress, cancel=cancel
    )
    if result is None:
        return None
    clash = sorted(set(result.columns) & set(map(str, table.columns)))
    if clash:
        raise ValueError(f"the input already has columns {clash}; rename them and run again")
    return table.reset_index(drop=True).join(result)


def classify_in_background(
    loaded: LoadedModel,
    table: pd.DataFrame,
    *,
    text_col: str,
    review_threshold: float,
    queue: JobQueue,
    requester: Requester,
) -> BackgroundJob[ClassifyProgress, pd.DataFrame | None]:
    """`classify_table` as a job of `queue` (progress, cancel; see core.jobs); reviewers and
    admins only: a whole file takes the shared CPUs."""
    transformer = loaded.transformer
    return queue.start(
        classify_table, loaded, table, text_col=text_col, review_threshold=review_threshold,
        requester=requester, title=f"Classify {len(table):,} rows with {loaded.path.name}",
        kind="classify", permission=Permission.RUN_JOBS,
        lane=queue.heavy_lane(device_name(transformer)),
        tokens_per_batch=DEFAULT_BATCH_SIZE * transformer.max_length,
    )  # fmt: skip


def routed_predictions(result: pd.DataFrame) -> list[Prediction]:
    """One `Prediction` per row of a `classify_table` result (for the triage queue)."""
    prob_columns = [c for c in result.columns if str(c).startswith("prob_")]
    return [
        Prediction(
            label=str(row["predicted_label"]),
            needs_review=bool(row["needs_review"]),
            probabilities={str(c)[len("prob_") :]: float(row[c]) for c in prob_columns},
        )
        for _, row in result.iterrows()
    ]
