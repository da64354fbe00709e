"""Route many complaints at once with a saved model: the contract columns of `classify`.

The output keeps every input column and the row order and adds `predicted_label`, `confidence`,
`needs_review`, `bow_label`, `bow_confidence` and one `prob_<label>` column per class: the
decision of the model's blend (core.models.blend), with `decided_by` naming who made it and
`transformer_label`, `transformer_confidence` the transformer's own answer beside the bag of
words'. `review_reason` says why a row needs review ("unsure", "unknown desk", "blank") and
`unknown_desk_score` how unlike every desk the model knows it is (core.models.flagging).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.checks import check_complaint
from core.errors import UserError
from core.models.blend import BLEND, FROZEN
from core.models.classifier import (
    Prediction,
    predict_in_batches,
    predict_with_features_in_batches,
)
from core.models.flagging import ReviewPolicy
from core.models.registry import LoadedModel
from core.progress import Progress, ProgressCallback

CLASSIFY_PHASE = "classify"  # the Progress phase: texts classified


def classification_columns(
    loaded: LoadedModel,
    texts: Sequence[str],
    *,
    review_threshold: float | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame | None:
    """The contract columns for `texts` (one row each, same order), reporting texts classified
    as `Progress` (phase "classify"); None when cancelled. `batch_size`: texts per forward pass
    of the neural model (None: its default, right for a file, whose texts are sorted by length
    first); a caller routing a few dozen texts as they arrive passes a small one, so that one
    long complaint does not pad every other of its batch (core.intake.batching.BATCH_SIZE).

    The decision is the model's blend of its members (`loaded.blend`; the transformer alone for
    models saved before blends). `needs_review` follows the model's review policy
    (`loaded.review`, chosen on its validation rows), with `review_threshold` in place of its
    confidence threshold when given; an empty text is always flagged, never routed blind.
    """
    found = _classified(loaded, texts, review_threshold, on_progress, cancel, batch_size)
    return None if found is None else found[0]


def classification_with_embeddings(
    loaded: LoadedModel,
    texts: Sequence[str],
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """`classification_columns` and, from the same forward passes, each text's embedding (what
    the model's classification layer reads: core.analysis.discovery groups them); None when
    cancelled. Needs a model with the unknown-desk score (saved since it), which flags the
    complaints that fit no desk."""
    if loaded.detector is None:
        raise UserError(
            f"model {loaded.path.name!r} was saved before the unknown-desk score, so it flags no "
            "complaint as fitting no desk; train it again"
        )
    found = _classified(loaded, texts, None, on_progress, cancel, None)
    return None if found is None else (found[0], found[1])


def _classified(
    loaded: LoadedModel,
    texts: Sequence[str],
    review_threshold: float | None,
    on_progress: ProgressCallback | None,
    cancel: threading.Event | None,
    batch_size: int | None,
) -> tuple[pd.DataFrame, np.ndarray | None] | None:
    policy = loaded.review.with_confidence(_checked(review_threshold))
    texts = ["" if t is None else str(t) for t in texts]
    # A blend with the frozen encoder reads every text twice: progress counts both passes.
    passes = 2 if loaded.reads_frozen else 1
    done_before = [0]

    def on_rows(done: int) -> None:
        if on_progress is not None:
            on_progress(Progress(done_before[0] + done, passes * len(texts), CLASSIFY_PHASE))

    options = {"on_rows": on_rows, "cancel": cancel}
    if loaded.detector is None:  # a model saved before the unknown-desk score
        neural_probs = predict_in_batches(loaded.scorer, texts, **options)
        scored = None if neural_probs is None else (neural_probs, None)
    else:
        scored = predict_with_features_in_batches(
            loaded.scorer, texts, batch_size=batch_size, **options
        )
    if scored is None:
        return None
    frozen_probs = None
    if passes == 2:
        done_before[0] = len(texts)
        frozen_probs = predict_in_batches(loaded.frozen.scorer, texts, **options)
        if frozen_probs is None:
            return None
    bow_probs = loaded.bow.predict_proba(texts)
    columns = _columns(loaded, texts, *scored, bow_probs, policy, frozen_probs)
    return columns, scored[1]


def _checked(review_threshold: float | None) -> float | None:
    if review_threshold is not None and not 0.0 <= review_threshold <= 1.0:
        raise UserError(f"the review threshold must lie in 0..1, got {review_threshold}")
    return review_threshold


def _columns(
    loaded: LoadedModel,
    texts: list[str],
    neural_probs: np.ndarray,
    features: np.ndarray | None,
    bow_probs: np.ndarray,
    policy: ReviewPolicy,
    frozen_probs: np.ndarray | None = None,
) -> pd.DataFrame:
    """The contract columns from the members' probabilities and the transformer's embeddings
    (None: a model saved before the unknown-desk score, whose score column stays empty)."""
    pred_probs = loaded.blend.combine(neural_probs, bow_probs, frozen_probs)
    classes = loaded.classes
    confidence = pred_probs.max(axis=1)
    blank = np.array([not t.strip() for t in texts], dtype=bool)
    unknown_scores = (
        np.full(len(texts), np.nan)
        if loaded.detector is None or features is None
        else loaded.detector.scores(features, neural_probs)
    )
    reasons = policy.reasons(confidence, unknown_scores, blank)
    columns = {
        "predicted_label": _top_labels(classes, pred_probs),
        "confidence": confidence,
        "needs_review": reasons != "",
        "review_reason": reasons.astype(str),
        "unknown_desk_score": unknown_scores,
        "decided_by": loaded.blend.decided_by,
        "transformer_label": _top_labels(classes, neural_probs),
        "transformer_confidence": neural_probs.max(axis=1),
        "bow_label": _top_labels(loaded.bow.classes_, bow_probs),
        "bow_confidence": bow_probs.max(axis=1),
    }
    columns.update({f"prob_{label}": pred_probs[:, i] for i, label in enumerate(classes)})
    return pd.DataFrame(columns, index=range(len(texts)))


@dataclass(frozen=True)
class OneComplaint:
    """One typed complaint routed: its contract columns and every model's probabilities."""

    row: pd.Series  # the columns of `classification_columns`
    # model -> label -> probability: "transformer", "bag of words", "frozen encoder" where the
    # blend reads it, and "decision" when the decision mixes several (otherwise it is one of
    # them, shown already)
    probabilities: dict[str, dict[str, float]]


def classify_one(
    loaded: LoadedModel, text: str, *, review_threshold: float | None = None
) -> OneComplaint:
    """Route one complaint, each model predicting once (the Classify page's single text); it
    may have at most MAX_COMPLAINT_CHARS characters (core.checks). `review_threshold` replaces
    the model's own confidence threshold when given."""
    check_complaint(text, purpose="classify")
    policy = loaded.review.with_confidence(_checked(review_threshold))
    if loaded.detector is None:
        neural_probs, features = loaded.scorer.predict_proba([text]), None
    else:
        neural_probs, features = loaded.scorer.predict_proba_and_features([text])
    bow_probs = loaded.bow.predict_proba([text])
    frozen_probs = loaded.frozen_probs([text])
    row = _columns(loaded, [text], neural_probs, features, bow_probs, policy, frozen_probs).iloc[0]
    classes = loaded.classes
    shown = {
        "transformer": dict(zip(classes, map(float, neural_probs[0]), strict=True)),
        "bag of words": dict(zip(classes, map(float, bow_probs[0]), strict=True)),
    }
    if frozen_probs is not None:
        shown[FROZEN] = dict(zip(classes, map(float, frozen_probs[0]), strict=True))
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
    review_threshold: float | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> pd.DataFrame | None:
    """`table` with the contract columns appended; None when cancelled."""
    if text_col not in table.columns:
        raise UserError(f"no column '{text_col}' in the input; it has {list(table.columns)}")
    texts = table[text_col].fillna("").astype(str).tolist()
    result = classification_columns(
        loaded, texts, review_threshold=review_threshold, on_progress=on_progress, cancel=cancel
    )
    if result is None:
        return None
    clash = sorted(set(result.columns) & set(map(str, table.columns)))
    if clash:
        raise UserError(f"the input already has columns {clash}; rename them and run again")
    return table.reset_index(drop=True).join(result)


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
