"""Challenger against live as a task of the server's queue: both saved models loaded (pinned to the
versions picked), scored on the same rows (core.analysis.compare), and the comparison recorded in
the trail as "comparison.run" under the actor who asked."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.access import Actor, Permission
from core.analysis.compare import Comparison, compare_models
from core.data.dataset import Dataset
from core.errors import UserError
from core.jobs import Job, JobQueue, JobSnapshot, Requester
from core.models.card import CARD_NAME, model_folder, read_card_and_digest
from core.models.classifier import DEFAULT_REVIEW_THRESHOLD
from core.models.registry import LoadedModel, load_model
from core.models.transformer.inference import DEFAULT_BATCH_SIZE
from core.progress import Progress, ProgressCallback, check_cancel
from core.review.store import Store

LOAD_PHASE = "load"  # the Progress phase while the two models load (done: models loaded)


@dataclass(frozen=True)
class ComparisonRequest:
    """What to compare: saved model `a` (the one in use) against `b` (the challenger) on
    `dataset`'s rows and the reviewers' `gold` rows, and how."""

    a: str  # untrusted model names: checked to stay inside the models folder when picked
    b: str
    dataset: Dataset
    gold: Dataset | None = None  # triage verdicts added to the rows (None: none)
    dataset_name: str = ""  # what the rows are, as the page names them
    threshold: float = DEFAULT_REVIEW_THRESHOLD  # decisions below it count as review load
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise UserError("pick two different models to compare")

    @property
    def rows(self) -> int:
        """Rows scored at most: the data set's and the verdicts'."""
        return len(self.dataset) + (len(self.gold) if self.gold is not None else 0)


@dataclass(frozen=True)
class ModelPick:
    """A saved model as picked: its folder and the card digest of the version seen then, so the
    task scores that version or refuses (a model saved again meanwhile is another model)."""

    name: str
    folder: Path
    digest: str
    max_length: int


@dataclass(frozen=True)
class ComparisonRun:
    """One comparison on the queue: model A (in use) against model B (challenger)."""

    job: Job[Comparison]
    a: ModelPick
    b: ModelPick
    dataset_name: str  # what the rows are, as the page names them
    # The finished job's result, kept once seen: the queue keeps only its newest results.
    comparison: Comparison | None = None

    def snapshot(self) -> JobSnapshot[Comparison]:
        return self.job.snapshot()

    def cancel(self) -> None:
        self.job.cancel()


def pick_model(models_root: str | Path, name: str) -> ModelPick:
    """Saved model `name` (untrusted: checked to stay inside `models_root`) at its current
    version; UserError when there is no such model."""
    folder = model_folder(models_root, name)
    if not (folder / CARD_NAME).is_file():
        raise UserError(f"no model named {name!r}; pick one from the list")
    card, digest = read_card_and_digest(folder)
    return ModelPick(folder.name, folder, digest, int(card.get("max_length", 0) or 0))


def start_comparison(
    store: Store,
    models_root: str | Path,
    request: ComparisonRequest,
    *,
    queue: JobQueue,
    requester: Requester,
) -> ComparisonRun:
    """Queue the comparison `request` asks for (reviewers and admins: RUN_JOBS); the job loads
    both saved models on `request.device`, compares them, records "comparison.run" and returns
    the `Comparison`. Poll `run.snapshot()`; `run.cancel()` stops it between batches."""
    requester.actor.require(Permission.RUN_JOBS)
    if store.read_only:  # refused now, not after minutes of work that could not be recorded
        raise UserError("the review store is read-only, so a comparison cannot be recorded; ask "
                        "the operator to make it writable")  # fmt: skip
    a, b = pick_model(models_root, request.a), pick_model(models_root, request.b)
    job = queue.start(
        load_and_compare, store, a, b, request, actor=requester.actor, requester=requester,
        title=f"Compare {b.name} against {a.name} on up to {request.rows:,} rows",
        kind="compare", permission=Permission.RUN_JOBS, lane=queue.heavy_lane(request.device),
        tokens_per_batch=DEFAULT_BATCH_SIZE * max(a.max_length, b.max_length, 1),
    )  # fmt: skip
    return ComparisonRun(job, a, b, request.dataset_name)


def load_and_compare(
    store: Store,
    a: ModelPick,
    b: ModelPick,
    request: ComparisonRequest,
    *,
    actor: Actor,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> Comparison:
    """Load the two picked versions, then `compare_and_record` them."""
    loaded = []
    for done, pick in enumerate((a, b)):
        check_cancel(cancel)
        if on_progress is not None:
            on_progress(Progress(done, 2, LOAD_PHASE))
        loaded.append(load_model(pick.folder, device=request.device, digest=pick.digest))
    return compare_and_record(
        store, *loaded, request, actor=actor, on_progress=on_progress, cancel=cancel
    )


def compare_and_record(
    store: Store,
    a: LoadedModel,
    b: LoadedModel,
    request: ComparisonRequest,
    *,
    actor: Actor,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> Comparison:
    """`compare_models` of the loaded `a` and `b` on the request's rows, then the trail event
    "comparison.run" (`actor` needs RUN_JOBS)."""
    actor.require(Permission.RUN_JOBS)
    comparison = compare_models(
        a, b, request.dataset, gold=request.gold, threshold=request.threshold,
        seed=request.seed, cancel=cancel, on_progress=on_progress,
    )  # fmt: skip
    record_comparison(store, comparison, actor=actor, dataset=request.dataset,
                      dataset_name=request.dataset_name)  # fmt: skip
    return comparison


def record_comparison(
    store: Store,
    comparison: Comparison,
    *,
    actor: Actor,
    dataset: Dataset | None = None,
    dataset_name: str = "",
) -> int:
    """Append "comparison.run" to the trail: both models (name, digest, accuracy, macro-F1),
    the rows, the p-value and the verdict; returns the event id. The changed complaints are not
    copied into the trail (the report saved with a promotion holds them)."""
    return store.record_event(
        "comparison.run", comparison_details(comparison, dataset, dataset_name),
        actor=actor, permission=Permission.RUN_JOBS,
    )  # fmt: skip


def comparison_details(
    comparison: Comparison, dataset: Dataset | None = None, dataset_name: str = ""
) -> dict[str, Any]:
    """The trail event's details of `comparison`."""

    def model(scores: Any) -> dict[str, Any]:
        return {"name": scores.name, "digest": scores.digest, "accuracy": scores.accuracy,
                "macro_f1": scores.macro_f1, "flagged": scores.flagged}  # fmt: skip

    return {
        "a": model(comparison.a), "b": model(comparison.b), "rows": comparison.rows,
        "gold_rows": comparison.gold_rows, "excluded_trained": comparison.excluded_trained,
        "changed": len(comparison.changed), "p_value": comparison.p_value,
        "verdict": comparison.verdict, "dataset": dataset_name,
        "dataset_fingerprint": dataset.fingerprint if dataset is not None else None,
    }  # fmt: skip
