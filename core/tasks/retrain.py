"""Retrain from corrections as one action: build the next version of a saved data set from the
team's decisions and verdicts (core.review.corrections), save it with its lineage, and queue the
challenger's training with the live model's recipe, settings and split, recorded in the trail."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.access import Actor, Permission
from core.analysis.audit_fine_tune import train_config_from_card
from core.data.dataset import Dataset, split_inheriting
from core.data.saved import DatasetSave, SavedDataset
from core.errors import UserError
from core.jobs import JobQueue, Requester
from core.models.card import read_card
from core.models.training_job import check_new_model_name
from core.models.transformer.config import AUTO, TrainConfig
from core.review.corrections import CorrectionPlan, build_next_version, load_and_plan
from core.review.library import save_and_record
from core.review.live import live_model, live_model_folder
from core.review.store import Store
from core.tasks.training import TrainingRun, start_training

RETRAIN_QUEUED = "retrain.queued"  # the trail action (core.review.store.PUBLIC_ACTIONS)
NO_RECIPE = (
    "no model is live and none is active, so there is no recipe to retrain with: promote a "
    "model, or pick one on Train, first"
)


@dataclass(frozen=True)
class RetrainRequest:
    """Which saved data set to correct, the names of its next version and of the challenger,
    and whose recipe to use when no model was ever promoted."""

    parent: str  # the saved data set the corrections apply to
    new_name: str  # the next version's data set name
    challenger_name: str | None = None  # the model name; None: "<new_name>-challenger"
    fallback_model: str | Path | None = None  # folder of the session's active model

    @property
    def challenger(self) -> str:
        """The name the challenger is saved under, before it is checked to be free."""
        return self.challenger_name or f"{self.new_name}-challenger"


@dataclass(frozen=True)
class RecipeSource:
    """The model whose recipe, settings and split the challenger inherits."""

    name: str
    live: bool  # the team's live model (else the session's active model)
    config: TrainConfig
    split: Mapping[str, Any] | None  # its card's "split" (None: an older card without one)


@dataclass(frozen=True)
class RetrainRun:
    """A retraining: the version saved, the plan it was built from, and the queued training."""

    dataset: SavedDataset
    plan: CorrectionPlan
    recipe: RecipeSource
    training: TrainingRun
    split_inherited: bool  # the live model's held-out complaints stay held out
    event_id: int  # the "retrain.queued" trail event


def recipe_source(
    store: Store, models_root: str | Path, *, fallback: str | Path | None = None
) -> RecipeSource:
    """The live model's card (its folder checked: core.review.live.live_model_folder), or,
    when no model was ever promoted, the card of `fallback` (the session's active model);
    UserError when there is neither."""
    if live_model(store) is not None:
        folder, live = live_model_folder(store, models_root), True
    elif fallback is not None:
        folder, live = Path(fallback), False
    else:
        raise UserError(NO_RECIPE)
    card = read_card(folder)
    split = card.get("split")
    usable = isinstance(split, Mapping) and "train_keys" in split and "validation_keys" in split
    config = train_config_from_card(card)
    if card.get("recipe_choice") is not None:  # trained by "auto": the challenger chooses again
        config = replace(config, recipe=AUTO)
    return RecipeSource(folder.name, live, config, split if usable else None)


def inherited_split(dataset: Dataset, recipe: RecipeSource) -> tuple[Dataset, Dataset] | None:
    """(train, validation) keeping `recipe`'s model's held-out complaints held out; None when
    its card records no split (a fresh seeded split is drawn then)."""
    if recipe.split is None:
        return None
    return split_inheriting(
        dataset, train_keys=recipe.split["train_keys"],
        validation_keys=recipe.split["validation_keys"], val_fraction=recipe.config.val_fraction,
    )  # fmt: skip


@dataclass(frozen=True)
class PreparedRetrain:
    """The next version, built and saved, and everything its challenger's training needs."""

    dataset: Dataset  # the version itself
    saved: SavedDataset  # ... as saved, with its lineage
    plan: CorrectionPlan
    recipe: RecipeSource
    split: tuple[Dataset, Dataset] | None  # inherited from the recipe's model (None: fresh)
    challenger: str  # the model name the training saves under


def prepare_retrain(
    store: Store,
    datasets_root: str | Path,
    models_root: str | Path,
    request: RetrainRequest,
    *,
    actor: Actor,
) -> PreparedRetrain:
    """Build and save the next version of saved data set `request.parent` as
    `request.new_name`, after every check that can refuse (`actor` needs MANAGE_DATA and TRAIN;
    the challenger's name must be free; a recipe must exist; the plan must change something,
    once)."""
    actor.require(Permission.MANAGE_DATA)
    actor.require(Permission.TRAIN)
    challenger = check_new_model_name(models_root, request.challenger)
    recipe = recipe_source(store, models_root, fallback=request.fallback_model)
    parent, plan = load_and_plan(store, datasets_root, request.parent, actor=actor)
    dataset, lineage = build_next_version(parent, plan)
    split = inherited_split(dataset, recipe)
    version = DatasetSave(request.new_name, dataset, parent=plan.parent_name, lineage=lineage)
    saved = save_and_record(store, datasets_root, version, actor=actor)
    return PreparedRetrain(dataset, saved, plan, recipe, split, challenger)


def record_retrain(
    store: Store, prepared: PreparedRetrain, *, challenger: str, job: int | None, actor: Actor
) -> int:
    """The "retrain.queued" trail event of a prepared retraining whose training started (the
    queue's `job` id; None when the command line trains it itself)."""
    details = _event_details(prepared, challenger, job)
    return store.record_event(
        RETRAIN_QUEUED, details, actor=actor, permission=Permission.MANAGE_DATA
    )


def start_retrain(
    store: Store,
    datasets_root: str | Path,
    models_root: str | Path,
    request: RetrainRequest,
    *,
    queue: JobQueue,
    requester: Requester,
) -> RetrainRun:
    """Build and save the next version of saved data set `request.parent` as
    `request.new_name`, then queue the challenger's training (saved as `request.challenger`).

    The requester needs MANAGE_DATA and TRAIN (admin). The recipe and settings are the live
    model's (or, with no model ever promoted, `request.fallback_model`'s: the session's active
    model), and so is the split: complaints it held out stay held out. Everything that can be
    refused is checked before the version is saved. The "retrain.queued" trail event names the
    parent, the version, the challenger, the recipe's model and the counts of the plan.
    """
    actor = requester.actor
    prepared = prepare_retrain(store, datasets_root, models_root, request, actor=actor)
    training = _queue_training(prepared, store, models_root, queue, requester)
    # Recorded once the training is queued: the trail never says "queued" for one that the
    # queue refused (the saved version has its own "dataset.saved" event either way).
    event_id = record_retrain(
        store, prepared, challenger=training.model_name, job=training.job.id, actor=actor
    )
    return RetrainRun(prepared.saved, prepared.plan, prepared.recipe, training,
                      prepared.split is not None, event_id)  # fmt: skip


def _event_details(prepared: PreparedRetrain, challenger: str, job: int | None) -> dict[str, Any]:
    plan, saved, recipe = prepared.plan, prepared.saved, prepared.recipe
    return {
        "parent": plan.parent_name, "dataset": saved.name, "fingerprint": saved.fingerprint,
        "challenger": challenger, "live_model": recipe.name if recipe.live else None,
        "recipe_model": recipe.name,
        "split": "inherited" if prepared.split is not None else "fresh",
        "job": job, "counts": plan.counts(), "by_reviewer": dict(plan.by_reviewer),
    }  # fmt: skip


def _queue_training(
    prepared: PreparedRetrain,
    store: Store,
    models_root: str | Path,
    queue: JobQueue,
    requester: Requester,
) -> TrainingRun:
    """`start_training`, with a refusal that says the version is saved already (so the admin
    trains it from the Data and Train pages rather than building it again)."""
    name = prepared.saved.name
    try:
        return start_training(
            prepared.dataset, prepared.recipe.config, dataset_name=name,
            models_root=models_root, model_name=prepared.challenger, queue=queue,
            requester=requester, store=store, split=prepared.split,
        )  # fmt: skip
    except UserError as exc:
        raise UserError(
            f"the new version was saved as {name}, but its training was not queued "
            f"({exc}); load {name} on Data and train it on Train"
        ) from exc
