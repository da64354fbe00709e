"""What the review store holds, as frozen dataclasses checked on construction: a reviewer's decision
on a data set row, a triage item, a run record and a trail event."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.checks import check_non_empty_str
from core.errors import UserError

# "exclude": drop the row from the next version of the data set (core.review.corrections);
# schema migration 5 lets the store hold it.
DECISIONS = ("keep", "relabel", "escalate", "exclude")
TRIAGE_STATUSES = ("open", "confirmed", "corrected")
Decision = Literal["keep", "relabel", "escalate", "exclude"]
TriageStatus = Literal["open", "confirmed", "corrected"]

# How a verdict by someone else is shown to a user who may not see everyone's trail.
OTHER_REVIEWER = "another reviewer"


@dataclass(frozen=True)
class ReviewDecision:
    """A reviewer's verdict on one row of a data set (identified by its fingerprint).

    `new_label` is required for "relabel" and must be None otherwise. `id` and `created_at` are
    filled in by the store.
    """

    fingerprint: str
    row: int  # 1-based spreadsheet row, as in Dataset.rows
    text: str
    given_label: str
    decision: Decision
    reviewer: str
    new_label: str | None = None
    note: str = ""
    id: int | None = None
    created_at: str | None = None

    def __post_init__(self) -> None:
        check_non_empty_str("fingerprint", self.fingerprint)
        if isinstance(self.row, bool) or not isinstance(self.row, int) or self.row < 1:
            raise UserError(f"row must be a 1-based spreadsheet row number, got {self.row!r}")
        if not isinstance(self.text, str):
            raise UserError(f"text must be a string, got {type(self.text).__name__}")
        check_non_empty_str("given_label", self.given_label)
        if self.decision not in DECISIONS:
            raise UserError(f"decision must be one of {DECISIONS}, got {self.decision!r}")
        check_non_empty_str("reviewer", self.reviewer)
        self._check_new_label()
        if not isinstance(self.note, str):
            raise UserError(f"note must be a string, got {type(self.note).__name__}")

    def _check_new_label(self) -> None:
        if self.decision == "relabel":
            if not isinstance(self.new_label, str) or not self.new_label.strip():
                raise UserError("a relabel decision needs new_label: the label to change to")
        elif self.new_label is not None:
            raise UserError(f"new_label must be None for a {self.decision!r} decision")


@dataclass(frozen=True)
class TriageItem:
    """A prediction the model was unsure about, waiting for (or given) a reviewer's verdict."""

    batch: str  # the data set fingerprint or classify batch id the prediction came from
    text: str
    predicted_label: str
    confidence: float
    probabilities: dict[str, float] = field(default_factory=dict)
    row: int | None = None  # 1-based spreadsheet row in the classified file, when known
    status: TriageStatus = "open"
    reviewer: str | None = None
    final_label: str | None = None
    id: int | None = None
    created_at: str | None = None
    decided_at: str | None = None
    # Which model made the call (core.models.blend.Blend.decided_by); before models blended,
    # always the transformer.
    decided_by: str = "transformer"

    def __post_init__(self) -> None:
        check_non_empty_str("batch", self.batch)
        check_non_empty_str("decided_by", self.decided_by)
        if not isinstance(self.text, str):
            raise UserError(f"text must be a string, got {type(self.text).__name__}")
        check_non_empty_str("predicted_label", self.predicted_label)
        ok = isinstance(self.confidence, int | float) and not isinstance(self.confidence, bool)
        if not ok or not math.isfinite(self.confidence) or not 0 <= self.confidence <= 1:
            raise UserError(f"confidence must be a number in [0, 1], got {self.confidence!r}")
        if self.status not in TRIAGE_STATUSES:
            raise UserError(f"status must be one of {TRIAGE_STATUSES}, got {self.status!r}")
        _check_probabilities(self.probabilities)


def _check_probabilities(probabilities: object) -> None:
    if not isinstance(probabilities, Mapping):
        raise UserError("probabilities must be a dict {label: probability}")
    for label, p in probabilities.items():
        bad = not isinstance(p, int | float) or isinstance(p, bool) or not math.isfinite(p)
        if not isinstance(label, str) or bad:
            raise UserError(f"probabilities must map str to a finite number, got {label!r}: {p!r}")


@dataclass(frozen=True)
class RunRecord:
    """One train / audit / classify run: what it was asked to do and what it measured."""

    kind: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    id: int | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class TrailEvent:
    """One entry of the append-only audit trail."""

    id: int
    created_at: str
    action: str  # e.g. "decision.recorded", "triage.decided"
    entity_id: int | None
    actor: str | None
    details: dict[str, Any]
