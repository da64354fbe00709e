"""The triage queue's logic on top of the store: queue the predictions a model was unsure about,
once per classified file, and turn reviewed items into labelled training rows."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from core.access import Actor, Permission
from core.checks import check_non_empty_str
from core.errors import UserError
from core.review.limits import TriageLimits
from core.review.records import OTHER_REVIEWER, TriageItem

if TYPE_CHECKING:  # only annotations: pandas is imported by the functions that build frames
    import pandas as pd

    from core.data.dataset import Dataset
    from core.review.store import Store


class RoutedPrediction(Protocol):
    """What the triage queue needs of a prediction (core.models.classifier.Prediction fits)."""

    label: str
    confidence: float
    probabilities: Mapping[str, float]


def as_seen_by(items: Iterable[TriageItem], actor: Actor) -> list[TriageItem]:
    """`items` as `actor` may see them, by the trail's rule: an admin (SEE_ALL_TRAIL) sees who
    decided each; everyone else sees other reviewers' verdicts as by "another reviewer"."""
    if actor.can(Permission.SEE_ALL_TRAIL):
        return list(items)
    return [
        item if item.reviewer in (None, actor.user) else replace(item, reviewer=OTHER_REVIEWER)
        for item in items
    ]


def triage_batch_id(name: str, texts: Sequence[str]) -> str:
    """A batch id for a classified file: its name and a digest of its texts.

    The same file classified again gets the same id, so `enqueue_uncertain` queues it once.
    """
    check_non_empty_str("name", name)
    digest = hashlib.sha256()
    for text in texts:
        digest.update(json.dumps(text, ensure_ascii=False).encode("utf-8") + b"\n")
    return f"{name.strip()} · {digest.hexdigest()[:12]}"


def enqueue_uncertain(
    store: Store,
    texts: Sequence[str],
    predictions: Sequence[RoutedPrediction],
    *,
    actor: Actor,
    threshold: float,
    batch: str,
    rows: Sequence[int] | None = None,
    decided_by: str = "transformer",
    limits: TriageLimits | None = None,
    flagged: Sequence[bool] | None = None,
) -> list[int]:
    """Queue for review the predictions whose confidence is below `threshold`, or those
    `flagged` when given (the model's review policy: unsure or unknown desk); return new ids.

    Parameters
    ----------
    store : the review store.
    texts : (n,) the classified texts, in the order of `predictions`.
    predictions : (n,) objects with `label`, `confidence` and `probabilities`
        (e.g. core.models.classifier.Prediction from `predict_labels`).
    actor : who queues them; needs RUN_JOBS (reviewer), as classifying a file does, and may
        queue at most `limits.max_items_per_hour` items per hour (default: from the environment).
    threshold : review threshold in [0, 1]: confidence below it goes to the queue.
    batch : where the predictions came from, e.g. `triage_batch_id(file name, texts)`.
    rows : (n,) 1-based spreadsheet rows of the texts in their file, when known.
    decided_by : which model made these calls (core.models.blend.Blend.decided_by).
    flagged : (n,) whether each prediction needs review (classify's `needs_review`), in place
        of the threshold.

    Everything is written in one transaction; a (batch, row, text) already queued is skipped.
    """
    actor.require(Permission.RUN_JOBS)
    texts, predictions = list(texts), list(predictions)
    rows = [None] * len(texts) if rows is None else list(rows)
    if not len(texts) == len(predictions) == len(rows):
        raise UserError(
            f"texts ({len(texts)}), predictions ({len(predictions)}) and rows ({len(rows)}) "
            "must be equally long: one prediction per classified text"
        )
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not ok or not math.isfinite(threshold) or not 0 <= threshold <= 1:
        raise UserError(f"threshold must be a number in [0, 1], got {threshold!r}")
    if flagged is None:
        flagged = [prediction.confidence < threshold for prediction in predictions]
    elif len(flagged) != len(texts):
        raise UserError(f"flagged ({len(flagged)}) must have one entry per text ({len(texts)})")
    items = [
        _triage_item(batch, text, prediction, row, decided_by)
        for text, prediction, row, chosen in zip(texts, predictions, rows, flagged, strict=True)
        if chosen
    ]
    return store.enqueue_triage(items, actor=actor, skip_queued=True, limits=limits)


def _triage_item(
    batch: str, text: str, prediction: RoutedPrediction, row: int | None, decided_by: str
) -> TriageItem:
    return TriageItem(
        batch=batch,
        text=text,
        predicted_label=str(prediction.label),
        confidence=float(prediction.confidence),
        probabilities={str(k): float(v) for k, v in prediction.probabilities.items()},
        row=None if row is None else int(row),
        decided_by=decided_by,
    )


def triage_training_rows(
    items: Iterable[TriageItem], *, actor: Actor, include_confirmed: bool = True
) -> pd.DataFrame:
    """Reviewed triage items as labelled training rows, oldest first: a relabelled export, so
    `actor` needs DECIDE (reviewer).

    Columns `text` and `label` (the reviewer's final label), so the file loads on the Data page
    as it is, then `source` (e.g. "triage #12, corrected from Other"), `batch` and `row`.
    Open items are left out; confirmed ones too when `include_confirmed` is False.
    """
    import pandas as pd  # only here: the review modules load without pandas

    actor.require(Permission.DECIDE)

    wanted = ("confirmed", "corrected") if include_confirmed else ("corrected",)
    chosen = [item for item in items if item.status in wanted]
    return pd.DataFrame(
        {
            "text": [item.text for item in chosen],
            "label": [item.final_label for item in chosen],
            "source": [_triage_source(item) for item in chosen],
            "batch": [item.batch for item in chosen],
            "row": pd.array([item.row for item in chosen], dtype="Int64"),
        }
    )


def _triage_source(item: TriageItem) -> str:
    if item.status == "corrected":
        return f"triage #{item.id}, corrected from {item.predicted_label}"
    return f"triage #{item.id}, confirmed"


def with_training_rows(dataset: Dataset, extra_rows: pd.DataFrame) -> pd.DataFrame:
    """`dataset`'s text and label (and other columns) followed by `extra_rows` (text, label, ...).

    A `source` column says where each row came from ("data set row N" or the extra row's own
    source), so the combined file can be loaded on the Data page to retrain with both.
    """
    import pandas as pd

    if not {"text", "label"} <= set(extra_rows.columns):
        raise UserError("extra_rows needs 'text' and 'label' columns (see triage_training_rows)")
    frame = dataset.to_frame()
    base = frame.drop(columns=["row"]).assign(source=[f"data set row {r}" for r in dataset.rows])
    added = extra_rows.drop(columns=["batch", "row"], errors="ignore")
    return pd.concat([base, added], ignore_index=True)


VERDICT_STATUSES = ("confirmed", "corrected")  # the statuses that carry a reviewer's desk
_VERDICT_PAGE = 1000  # decided items read per query


def decided_items(store: Store) -> list[TriageItem]:
    """Every confirmed or corrected triage item, oldest first, read a page at a time: the
    reviewers' verdicts that retraining folds in (core.review.corrections) and a comparison
    scores as gold rows (core.review.gold)."""
    items: list[TriageItem] = []
    for status in VERDICT_STATUSES:
        offset = 0
        while page := store.triage_items(status=status, limit=_VERDICT_PAGE, offset=offset):
            items += page
            offset += len(page)
            if len(page) < _VERDICT_PAGE:
                break
    return sorted(items, key=lambda item: int(item.id))
