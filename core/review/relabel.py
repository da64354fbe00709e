"""Apply review decisions to a data set: the corrected table (relabels applied, original label and
review note beside it), ready to export; and carry decisions saved under a data set's legacy
fingerprint over to its current one when their rows still hold the same complaint. Both are
reviewers' work (Permission.DECIDE): a viewer neither exports relabels nor carries them over."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from core.access import Actor, Permission
from core.errors import UserError
from core.review.records import ReviewDecision

if TYPE_CHECKING:  # only annotations: this module loads neither pandas nor core.data
    import pandas as pd

    from core.data.dataset import Dataset


def apply_decisions(
    dataset: Dataset,
    decisions: Mapping[int, ReviewDecision] | Iterable[ReviewDecision],
    *,
    actor: Actor,
) -> pd.DataFrame:
    """The corrected data set: `dataset.to_frame()` with relabels applied, ready for export.
    `actor` needs DECIDE (reviewer).

    `decisions` are those of this data set (its fingerprint); when a row has several, the last
    one given wins (pass `Store.latest_decisions(...)` or `Store.decisions(...)`). Adds
    `original_label` (the label before review) and `review` ("relabelled from X", "kept",
    "escalated", "excluded", or "" for rows nobody reviewed) after the `label` column. Excluded
    rows stay in the file with their label, marked "excluded": the export is complete (every
    row of the data set, so a reviewer can see and undo an exclusion); the next version built
    by core.review.corrections is the one that drops them. Export the frame with
    core.data.export, which neutralises formula-looking cells.
    """
    actor.require(Permission.DECIDE)
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
    """Row -> last decision, after checking each belongs to `dataset` and matches its row."""
    items = decisions.values() if isinstance(decisions, Mapping) else decisions
    record_of = _records(dataset)
    latest: dict[int, ReviewDecision] = {}
    for decision in items:
        if not isinstance(decision, ReviewDecision):
            raise TypeError(f"expected ReviewDecision objects, got {type(decision).__name__}")
        if decision.fingerprint != dataset.fingerprint:
            raise UserError(
                f"decision {decision.id} is for data set {decision.fingerprint[:12]}…, not this "
                f"one ({dataset.fingerprint[:12]}…); load the decisions of this data set's "
                "fingerprint"
            )
        _check_row(decision, record_of)
        latest[decision.row] = decision
    return latest


def _records(dataset: Dataset) -> dict[int, tuple[str, str]]:
    return dict(zip(dataset.rows, zip(dataset.texts, dataset.labels, strict=True), strict=True))


def _check_row(decision: ReviewDecision, record_of: dict[int, tuple[str, str]]) -> None:
    """Refuse a decision whose row is missing or now holds another complaint or label.

    Refused, not skipped: an export that quietly drops (or moves) a relabel the reviewer made is
    worse than no export, and the one-line error names the row to review again.
    """
    if decision.row not in record_of:
        raise UserError(f"decision {decision.id} is for row {decision.row}, not in this data set")
    text, label = record_of[decision.row]
    if text != decision.text:
        raise UserError(
            f"row {decision.row} now holds {_clip(text)!r} but decision {decision.id} was made "
            f"on {_clip(decision.text)!r}; review the row again"
        )
    if label != decision.given_label:
        raise UserError(
            f"row {decision.row} is labelled {label!r} but decision {decision.id} was made on "
            f"label {decision.given_label!r}; review the row again"
        )


def _clip(text: str, width: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _new_label(decision: ReviewDecision | None, old: str) -> str:
    return decision.new_label if decision is not None and decision.decision == "relabel" else old


def _review_note(decision: ReviewDecision | None, old: str) -> str:
    if decision is None:
        return ""
    if decision.decision == "relabel":
        return f"relabelled from {old}" if decision.new_label != old else "kept"
    return {"keep": "kept", "escalate": "escalated", "exclude": "excluded"}[decision.decision]


@dataclass(frozen=True)
class CarryOver:
    """Decisions saved under a data set's legacy fingerprint (before rows were part of it)."""

    pending: tuple[ReviewDecision, ...]  # copies for the current fingerprint, not stored yet
    mismatched: tuple[ReviewDecision, ...]  # their row now holds another complaint or label
    carried: int  # legacy decisions whose copy is already stored

    @property
    def mismatched_rows(self) -> list[int]:
        """The rows to review again, sorted."""
        return sorted({d.row for d in self.mismatched})


def plan_carry_over(
    dataset: Dataset,
    legacy: Sequence[ReviewDecision],
    current: Sequence[ReviewDecision],
    *,
    actor: Actor,
) -> CarryOver:
    """Which `legacy` decisions (of `dataset.legacy_fingerprint`) still fit their rows.

    A decision fits when its row holds the same text and label today; its copy for
    `dataset.fingerprint` keeps the verdict, and its note says where it came from. `actor`
    needs DECIDE and carries the copies over: signed in, the copy is saved under the actor's
    e-mail (Store.record_decision allows no other) and its note names the original reviewer.
    Legacy decisions whose copy is already in `current` (the decisions of `dataset.fingerprint`,
    whoever carried them) are not pending again.
    """
    actor.require(Permission.DECIDE)
    record_of = _records(dataset)
    stored = {_carried_key(d) for d in current}
    pending, mismatched, carried = [], [], 0
    for decision in legacy:
        if record_of.get(decision.row) != (decision.text, decision.given_label):
            mismatched.append(decision)
            continue
        copy = _carried_copy(decision, dataset.fingerprint, actor)
        if _carried_key(copy) in stored:
            carried += 1
        else:
            pending.append(copy)
    return CarryOver(tuple(pending), tuple(mismatched), carried)


# How a carried copy's note ends: "(carried over from decision #12)", or, when another signed-in
# user carried it over, "(carried over from decision #12 by <original reviewer>)".
_CARRIED_MARK = "(carried over from decision #"


def _carried_copy(decision: ReviewDecision, fingerprint: str, actor: Actor) -> ReviewDecision:
    reviewer = actor.user if actor.signed_in else decision.reviewer
    by = f" by {decision.reviewer}" if reviewer != decision.reviewer else ""
    note = f"{decision.note} {_CARRIED_MARK}{decision.id}{by})".strip()
    return replace(
        decision, fingerprint=fingerprint, reviewer=reviewer, note=note, id=None, created_at=None
    )


def _carried_key(decision: ReviewDecision) -> tuple | None:
    """What identifies a carried copy, whoever saved it: the legacy decision it copies and the
    verdict on the row. None for a decision that is not a copy."""
    start = decision.note.rfind(_CARRIED_MARK)
    digits = re.match(r"\d+", decision.note[start + len(_CARRIED_MARK) :]) if start >= 0 else None
    if digits is None or not decision.note.endswith(")"):
        return None
    d = decision
    return (int(digits[0]), d.row, d.text, d.given_label, d.decision, d.new_label)
