"""Apply review decisions to a data set: the corrected table (relabels applied, original label and
review note beside it), ready to export."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from core.review.records import ReviewDecision

if TYPE_CHECKING:  # only annotations: this module loads neither pandas nor core.data
    import pandas as pd

    from core.data.dataset import Dataset


def apply_decisions(
    dataset: Dataset, decisions: Mapping[int, ReviewDecision] | Iterable[ReviewDecision]
) -> pd.DataFrame:
    """The corrected data set: `dataset.to_frame()` with relabels applied, ready for export.

    `decisions` are those of this data set (its fingerprint); when a row has several, the last
    one given wins (pass `Store.latest_decisions(...)` or `Store.decisions(...)`). Adds
    `original_label` (the label before review) and `review` ("relabelled from X", "kept",
    "escalated", or "" for rows nobody reviewed) after the `label` column. Export the frame with
    core.data.export, which neutralises formula-looking cells.
    """
    latest = _latest_by_row(dataset, decisions)
    frame = dataset.to_frame()
    clash = {c: f"{c}_original" for c in ("original_label", "review") if c in frame.columns}
    frame = frame.rename(columns=clash)
    original = frame["label"].tolist()
    pairs = list(zip(dataset.rows, original, strict=True))
    new_labels = [_new_label(latest.get(r), old) for r, old in pairs]
    reviews = [_review_note(latest.get(r), old) for r, old in pairs]
    position = frame.columns.get_loc("label")
    frame["label"] = new_labels
    frame.insert(position + 1, "original_label", original)
    frame.insert(position + 2, "review", reviews)
    return frame


def _latest_by_row(
    dataset: Dataset, decisions: Mapping[int, ReviewDecision] | Iterable[ReviewDecision]
) -> dict[int, ReviewDecision]:
    """Row -> last decision, after checking each belongs to `dataset` and matches its label."""
    items = decisions.values() if isinstance(decisions, Mapping) else decisions
    label_of = dict(zip(dataset.rows, dataset.labels, strict=True))
    latest: dict[int, ReviewDecision] = {}
    for decision in items:
        if not isinstance(decision, ReviewDecision):
            raise ValueError(f"expected ReviewDecision objects, got {type(decision).__name__}")
        _check_belongs(decision, dataset.fingerprint, label_of)
        latest[decision.row] = decision
    return latest


def _check_belongs(decision: ReviewDecision, fingerprint: str, label_of: dict[int, str]) -> None:
    if decision.fingerprint != fingerprint:
        raise ValueError(
            f"decision {decision.id} is for data set {decision.fingerprint[:12]}…, not this one "
            f"({fingerprint[:12]}…); load the decisions of this data set's fingerprint"
        )
    if decision.row not in label_of:
        raise ValueError(f"decision {decision.id} is for row {decision.row}, not in this data set")
    if label_of[decision.row] != decision.given_label:
        raise ValueError(
            f"row {decision.row} is labelled {label_of[decision.row]!r} but decision "
            f"{decision.id} was made on label {decision.given_label!r}; review the row again"
        )


def _new_label(decision: ReviewDecision | None, old: str) -> str:
    return decision.new_label if decision is not None and decision.decision == "relabel" else old


def _review_note(decision: ReviewDecision | None, old: str) -> str:
    if decision is None:
        return ""
    if decision.decision == "relabel":
        return f"relabelled from {old}" if decision.new_label != old else "kept"
    return {"keep": "kept", "escalate": "escalated"}[decision.decision]
