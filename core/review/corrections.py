"""Retrain from corrections: what the next version of a saved data set holds (the parent with the
reviewers' relabels applied and excluded rows dropped, plus triage verdicts as new labelled
rows), planned before anything is written so an admin sees every change and whose it is, and
built without applying anything twice (core.tasks.retrain saves it and trains the challenger)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from core.access import Actor, Permission
from core.data.dataset import Dataset, text_key
from core.data.saved import SavedDataset, children_of, list_datasets, load_dataset, read_summary
from core.data.saved_index import DatasetEntry
from core.errors import UserError
from core.review.records import ReviewDecision, TriageItem
from core.review.store import Store
from core.review.triage import decided_items

SOURCE_COLUMN = "source"  # where an added row came from: "triage #12"; "" for the parent's rows
# Why a triage verdict is not added, as the preview names it.
FOLDED, PRESENT, BLANK = "already folded", "already a row", "blank"


@dataclass(frozen=True)
class Relabel:
    """A row whose latest decision relabels it, still holding the text and label decided on."""

    decision_id: int
    row: int
    text: str
    old_label: str
    new_label: str
    reviewer: str


@dataclass(frozen=True)
class Exclusion:
    """A row whose latest decision drops it from the next version."""

    decision_id: int
    row: int
    text: str
    label: str
    reviewer: str


@dataclass(frozen=True)
class AddedVerdict:
    """A triage verdict that becomes a new labelled row: the complaint and the reviewer's desk."""

    item_id: int
    text: str
    label: str
    reviewer: str
    status: str  # "confirmed" (the model was right) or "corrected"


@dataclass(frozen=True)
class StaleDecision:
    """A relabel or exclusion that is not applied: its row no longer holds what was decided on."""

    decision_id: int
    row: int
    reason: str
    reviewer: str


@dataclass(frozen=True)
class CorrectionPlan:
    """Everything the next version of `parent_name` changes, before anything is written."""

    parent_name: str
    parent_fingerprint: str
    parent_rows: int
    relabels: tuple[Relabel, ...]
    exclusions: tuple[Exclusion, ...]
    added: tuple[AddedVerdict, ...]
    stale: tuple[StaleDecision, ...]
    # Triage verdicts not added, by reason (FOLDED: in this data set's lineage already;
    # PRESENT: the complaint is a row of the parent, or was decided again later; BLANK: no text).
    skipped_verdicts: dict[str, int] = field(default_factory=dict)
    by_reviewer: dict[str, int] = field(default_factory=dict)  # e-mail -> changes applied
    desks_before: dict[str, int] = field(default_factory=dict)
    desks_after: dict[str, int] = field(default_factory=dict)
    already_built_as: str | None = None  # a child of the parent that folded exactly these

    @property
    def decision_ids(self) -> list[int]:
        """The decisions this version applies (relabels and exclusions), sorted."""
        return sorted([r.decision_id for r in self.relabels] +
                      [e.decision_id for e in self.exclusions])  # fmt: skip

    @property
    def verdict_ids(self) -> list[int]:
        """The triage items whose verdicts become rows, sorted."""
        return sorted(v.item_id for v in self.added)

    @property
    def changes(self) -> int:
        """Rows relabelled, excluded or added."""
        return len(self.relabels) + len(self.exclusions) + len(self.added)

    @property
    def folded_verdicts(self) -> int:
        return self.skipped_verdicts.get(FOLDED, 0)

    def counts(self) -> dict[str, int]:
        """How many of each kind, for the preview and the trail."""
        return {
            "relabelled": len(self.relabels), "excluded": len(self.exclusions),
            "added": len(self.added), "stale": len(self.stale),
            "verdicts_already_folded": self.folded_verdicts,
            "verdicts_already_rows": self.skipped_verdicts.get(PRESENT, 0),
            "rows_before": self.parent_rows,
            "rows_after": self.parent_rows - len(self.exclusions) + len(self.added),
        }  # fmt: skip

    def check_buildable(self) -> None:
        """Refuse (UserError) a version that would change nothing or repeat an earlier one."""
        if self.already_built_as is not None:
            raise UserError(
                f"these corrections of {self.parent_name} were already built as "
                f"{self.already_built_as}; retrain from that data set, or record new decisions "
                "first"
            )
        if self.changes == 0:
            raise UserError(
                f"there are no corrections to apply to {self.parent_name} yet: record relabels "
                "or exclusions on Label audit, or triage verdicts, first"
            )


def plan_corrections(
    store: Store, datasets_root: str | Path, parent_name: str, *, actor: Actor
) -> CorrectionPlan:
    """What the next version of saved data set `parent_name` would hold (`actor` needs
    MANAGE_DATA): the latest decision per row of the parent's fingerprint (relabels applied and
    exclusions dropped only where the row still holds the text and label decided on; others
    reported as stale), and every triage verdict not folded into this data set's lineage yet
    whose complaint is not already a row. Nothing is written."""
    return load_and_plan(store, datasets_root, parent_name, actor=actor)[1]


def load_and_plan(
    store: Store, datasets_root: str | Path, parent_name: str, *, actor: Actor
) -> tuple[Dataset, CorrectionPlan]:
    """The parent data set (core.data.saved.load_dataset) and its `plan_corrections`."""
    actor.require(Permission.MANAGE_DATA)
    parent, summary = load_dataset(datasets_root, parent_name)
    relabels, exclusions, stale = _decided_rows(parent, store.latest_decisions(parent.fingerprint))
    folded = folded_verdict_ids(datasets_root, summary)
    added, skipped = _new_verdicts(parent, decided_items(store), folded)
    plan = CorrectionPlan(
        parent_name=summary.name, parent_fingerprint=parent.fingerprint, parent_rows=len(parent),
        relabels=relabels, exclusions=exclusions, added=added, stale=stale,
        skipped_verdicts=skipped, by_reviewer=_by_reviewer(relabels, exclusions, added),
        desks_before=_sorted_counts(parent.labels),
        desks_after=_sorted_counts(_labels_after(parent, relabels, exclusions, added)),
    )  # fmt: skip
    return parent, replace(plan, already_built_as=_built_as(datasets_root, summary.name, plan))


def _decided_rows(
    parent: Dataset, latest: Mapping[int, ReviewDecision]
) -> tuple[tuple[Relabel, ...], tuple[Exclusion, ...], tuple[StaleDecision, ...]]:
    """The relabels and exclusions that apply to `parent`, and those whose row changed."""
    record_of = dict(zip(parent.rows, zip(parent.texts, parent.labels, strict=True), strict=True))
    relabels, exclusions, stale = [], [], []
    for row in sorted(latest):
        d = latest[row]
        if d.decision not in ("relabel", "exclude"):
            continue  # keep and escalate change nothing
        reason = _stale_reason(d, record_of.get(row))
        if reason is not None:
            stale.append(StaleDecision(int(d.id), row, reason, d.reviewer))
        elif d.decision == "exclude":
            exclusions.append(Exclusion(int(d.id), row, d.text, d.given_label, d.reviewer))
        elif d.new_label != d.given_label:  # a relabel to the same desk is a keep
            relabels.append(
                Relabel(int(d.id), row, d.text, d.given_label, str(d.new_label), d.reviewer)
            )
    return tuple(relabels), tuple(exclusions), tuple(stale)


def _stale_reason(decision: ReviewDecision, record: tuple[str, str] | None) -> str | None:
    """Why `decision` no longer fits its row (None: it does)."""
    if record is None:
        return f"row {decision.row} is not in this data set"
    text, label = record
    if text != decision.text:
        return f"row {decision.row} now holds another complaint"
    if label != decision.given_label:
        return f"row {decision.row} is labelled {label}, not {decision.given_label}"
    return None


def folded_verdict_ids(datasets_root: str | Path, summary: SavedDataset) -> set[int]:
    """The triage items already folded into `summary`'s data set: its lineage's verdicts and
    those of every ancestor (following `parent`). An ancestor that cannot be read is refused:
    without it nobody can say which verdicts are in the data already."""
    folded: set[int] = set()
    seen: set[str] = set()
    current: SavedDataset | None = summary
    while current is not None and current.name not in seen:
        seen.add(current.name)
        folded.update(int(i) for i in (current.lineage or {}).get("verdicts", []))
        current = _parent_summary(datasets_root, current)
    return folded


def _parent_summary(datasets_root: str | Path, summary: SavedDataset) -> SavedDataset | None:
    if not summary.parent:
        return None
    try:
        return read_summary(datasets_root, summary.parent)
    except UserError as exc:
        raise UserError(
            f"cannot read {summary.parent}, the data set {summary.name} was derived from "
            f"({exc}); without its lineage triage verdicts could be added twice"
        ) from exc


def _new_verdicts(
    parent: Dataset, verdicts: Iterable[TriageItem], folded: set[int]
) -> tuple[tuple[AddedVerdict, ...], dict[str, int]]:
    """The verdicts to add as rows (the latest per complaint) and how many were skipped, why."""
    present = {text_key(t) for t in parent.texts}
    skipped: Counter[str] = Counter()
    latest: dict[str, AddedVerdict] = {}
    for item in verdicts:
        key = text_key(item.text)
        if int(item.id) in folded:
            skipped[FOLDED] += 1
        elif not item.text.strip():
            skipped[BLANK] += 1
        elif key in present:
            skipped[PRESENT] += 1
        else:
            if key in latest:  # the same complaint decided twice: the later verdict wins
                skipped[PRESENT] += 1
            latest[key] = AddedVerdict(int(item.id), item.text, str(item.final_label),
                                       str(item.reviewer), item.status)  # fmt: skip
    added = sorted(latest.values(), key=lambda v: v.item_id)
    return tuple(added), dict(sorted(skipped.items()))


def _by_reviewer(
    relabels: Sequence[Relabel], exclusions: Sequence[Exclusion], added: Sequence[AddedVerdict]
) -> dict[str, int]:
    counts = Counter(x.reviewer for x in [*relabels, *exclusions, *added])
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _labels_after(
    parent: Dataset,
    relabels: Sequence[Relabel],
    exclusions: Sequence[Exclusion],
    added: Sequence[AddedVerdict],
) -> list[str]:
    new_label = {r.row: r.new_label for r in relabels}
    dropped = {e.row for e in exclusions}
    kept = [new_label.get(row, label) for row, label in zip(parent.rows, parent.labels, strict=True)
            if row not in dropped]  # fmt: skip
    return kept + [v.label for v in added]


def _sorted_counts(labels: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(labels).items()))


def _built_as(datasets_root: str | Path, parent_name: str, plan: CorrectionPlan) -> str | None:
    """The child of `parent_name` (retired or not) whose lineage folded exactly the decisions
    and verdicts of `plan`, if one was built already."""
    wanted = (plan.decision_ids, plan.verdict_ids)
    for child in children_of(datasets_root, parent_name):
        if _folded_counts(child) != (len(plan.decision_ids), len(plan.verdict_ids)):
            continue  # it folded other work: its (possibly long) lineage need not be read
        lineage = read_summary(datasets_root, child.name).lineage
        folded = (sorted(int(i) for i in lineage.get("decisions", [])),
                  sorted(int(i) for i in lineage.get("verdicts", [])))  # fmt: skip
        if folded == wanted:
            return child.name
    return None


def _folded_counts(child: DatasetEntry) -> tuple[int, int]:
    """How many decisions and verdicts `child` folded in, as its listing counts them."""
    counts = child.lineage
    return (0, 0) if counts is None else (counts.decisions, counts.verdicts)


def build_next_version(parent: Dataset, plan: CorrectionPlan) -> tuple[Dataset, dict[str, Any]]:
    """The next version of `parent` as `plan` says, and its lineage (core.data.saved): parent
    rows keep their spreadsheet rows, texts and extra columns; excluded rows are dropped and
    relabels applied; each added verdict gets the next row after the largest, empty extra
    values and a `source` column naming its triage item. Refuses a plan that changes nothing,
    repeats a version already built, or was made for another data set."""
    if plan.parent_fingerprint != parent.fingerprint:
        raise UserError(
            f"this plan was made for another version of {plan.parent_name}; plan it again"
        )
    plan.check_buildable()
    dropped = {e.row for e in plan.exclusions}
    keep = [i for i, row in enumerate(parent.rows) if row not in dropped]
    new_label = {r.row: r.new_label for r in plan.relabels}
    first = max(parent.rows, default=1) + 1
    added_rows = list(range(first, first + len(plan.added)))
    dataset = Dataset(
        texts=[parent.texts[i] for i in keep] + [v.text for v in plan.added],
        labels=[new_label.get(parent.rows[i], parent.labels[i]) for i in keep]
        + [v.label for v in plan.added],
        rows=[parent.rows[i] for i in keep] + added_rows,
        extra=_extra_after(parent.extra, keep, plan.added),
    )
    return dataset, _lineage(plan, added_rows)


def _extra_after(
    extra: pd.DataFrame, keep: Sequence[int], added: Sequence[AddedVerdict]
) -> pd.DataFrame:
    """The parent's extra columns for the rows kept, then empty values (None) for each added
    row, and the `source` column (an existing one keeps its values: where earlier versions'
    rows came from)."""
    kept = extra.iloc[list(keep)].reset_index(drop=True)
    if SOURCE_COLUMN not in kept.columns:
        kept[SOURCE_COLUMN] = ""
    new = pd.DataFrame({c: [None] * len(added) for c in kept.columns})
    new[SOURCE_COLUMN] = [f"triage #{v.item_id}" for v in added]
    if not len(new):
        return kept
    return pd.concat([kept, new.astype(object)], ignore_index=True)


def _lineage(plan: CorrectionPlan, added_rows: Sequence[int]) -> dict[str, Any]:
    """Which decisions and verdicts produced the version (core.data.saved's `lineage`)."""
    return {
        "parent_fingerprint": plan.parent_fingerprint,
        "decisions": plan.decision_ids,
        "verdicts": [v.item_id for v in plan.added],
        "relabelled_rows": [r.row for r in plan.relabels],
        "excluded_rows": [e.row for e in plan.exclusions],
        "added_rows": list(added_rows),
        "stale": [
            {"decision": s.decision_id, "row": s.row, "reason": s.reason} for s in plan.stale
        ],
        "by_reviewer": dict(plan.by_reviewer),
    }


_VERSION_SUFFIX = re.compile(r"-v(\d+)$")


def next_version_name(datasets_root: str | Path, parent_name: str) -> str:
    """A free name for the next version of `parent_name`: "complaints-v2", then "-v3", ... (a
    parent already named "-vN" continues from N)."""
    taken = {s.name for s in list_datasets(datasets_root, include_retired=True)}
    found = _VERSION_SUFFIX.search(parent_name)
    stem = parent_name[: found.start()] if found else parent_name
    number = int(found[1]) + 1 if found else 2
    while f"{stem}-v{number}" in taken:
        number += 1
    return f"{stem}-v{number}"
