"""Gold rows: the triage verdicts reviewers gave after a moment (when the live model was trained),
as labelled rows a comparison scores both models on (core.analysis.compare). A reviewer who
confirmed or corrected a desk read the complaint; that desk is the truth for it."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from core.data.dataset import Dataset
from core.errors import UserError
from core.review.store import Store
from core.review.triage import decided_items


def gold_rows(store: Store, *, since: str) -> Dataset:
    """The triage items confirmed or corrected after `since` (an ISO 8601 time; one without a
    zone is read as UTC), oldest verdict first, as a Dataset: texts, the reviewer's final desks,
    rows 1..n and an extra column "source" ("triage #id")."""
    cutoff = _instant(since, "since")
    dated = [(_instant(item.decided_at, "decided_at"), item) for item in decided_items(store)]
    items = [item for when, item in sorted(dated, key=lambda d: (d[0], d[1].id)) if when > cutoff]
    return Dataset(
        texts=tuple(item.text for item in items),
        labels=tuple(str(item.final_label) for item in items),
        rows=tuple(range(1, len(items) + 1)),
        extra=pd.DataFrame({"source": [f"triage #{item.id}" for item in items]}),
    )


def _instant(value: str | None, what: str) -> datetime:
    """`value` as an aware time (UTC when it names no zone); UserError when it is not a time."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise UserError(f"{what} must be an ISO 8601 time such as 2025-01-31T09:00:00+00:00, "
                        f"got {value!r}") from exc  # fmt: skip
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
