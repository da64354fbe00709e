"""Models on disk: save atomically and exclusively, list, load safely (safetensors, npz, json),
rename, delete.

A model is a folder `models/<name>/` with the neural model (config.json, model.safetensors,
tokenizer files), the bag of words (baseline.npz + baseline.json: file names kept from before the
glossary, ARCHITECTURE.md), its serving graphs, and card.json; a blend of both recipes also holds
the frozen-encoder head (frozen.safetensors and its graphs, core.models.graph.FROZEN_FILES).
A folder without card.json is not a model (an empty one is a save's claim on its name).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import platform
import shutil
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.access import Actor, Permission
from core.data.privacy import MASKING_VERSION
from core.errors import UserError
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.blend import Blend
from core.models.card import (
    CARD_FORMAT,
    CARD_NAME,
    CARD_VERSION,
    FILES_KEY,
    NAME_PATTERN,
    card_digest,
    check_loadable,
    folder_digests,
    model_folder,
    read_card,
    read_card_and_digest,
)
from core.models.changes import (
    MODEL_DELETED,
    MODEL_RENAMED,
    MODEL_SAVED,
    ModelEvent,
    ModelRecorder,
)
from core.models.classifier import DEFAULT_REVIEW_THRESHOLD, Prediction
from core.models.flagging import UNKNOWN_FILE, ReviewPolicy, UnknownDeskDetector
from core.models.graph import (
    FROZEN_FILES,
    INT8,
    MAIN_FILES,
    PROBE_TEXTS,
    SERVING_KEY,
    MemberFiles,
    ServingEntry,
)
from core.models.serving import (
    ServingClassifier,
    load_serving,
    pieces_agree,
    serving_precision,
)
from core.models.torch_loading import (
    ARCH_LSTM,
    ARCH_TINY,
    ARCH_TRANSFORMERS,
    FrozenMember,
    TorchModel,
    card_truncation,
    save_frozen_weights,
    torch_classifier,
    verify_files,
)
from core.models.transformer.config import FULL, QUICK
from core.pending import DELETING, RENAMING, SAVING, Change, created_held, holding, new_change

if TYPE_CHECKING:  # torch loads only when torch routes or explains; training brings sklearn
    import torch

    from core.models.transformer.inference import NeuralClassifier
    from core.models.transformer.training import TrainResult

# card.json's entry for the frozen-encoder head blended beside a fine-tuned transformer (recipe
# "auto", core.models.blend): its weights file, its head's strength and its serving graphs.
FROZEN_KEY = "frozen"


@dataclass(frozen=True)
class ModelSummary:
    """One saved model as listed: enough to pick it without loading it."""

    name: str
    path: Path
    created_at: str
    backbone: str
    labels: tuple[str, ...]
    neural_accuracy: float | None
    neural_macro_f1: float | None
    bow_accuracy: float | None
    bow_macro_f1: float | None
    recipe: str = FULL  # "quick": frozen encoder and a fitted head (cards before it: "full")
    data_fingerprint: str = ""  # of the data set it was trained on (core.data.Dataset)


@dataclass(frozen=True)
class LoadedModel:
    """A saved model ready to classify: what routes (`scorer`), the bag of words, how they
    decide together, and the card they were saved with; the torch model (`neural`) loads when
    an explanation first needs it."""

    # What routes: the serving graph (core.models.serving) or the torch classifier itself
    scorer: ServingClassifier | NeuralClassifier
    bow: BagOfWordsClassifier
    card: dict[str, Any]
    path: Path
    digest: str  # SHA-256 of card.json, which pins every file (see core.models.card.card_digest)
    torch_model: TorchModel
    blend: Blend = Blend()  # the routing decision (core.models.blend); older cards: transformer
    # When a complaint goes to a person (core.models.flagging); models saved before the
    # unknown-desk score have no detector and flag by the fixed default confidence.
    review: ReviewPolicy = ReviewPolicy(DEFAULT_REVIEW_THRESHOLD)
    detector: UnknownDeskDetector | None = None
    # The frozen-encoder head, where the blend gives it a share (core.models.blend)
    frozen: FrozenMember | None = None

    @property
    def reads_frozen(self) -> bool:
        """Whether its decision reads the frozen encoder (a second encoder pass per text)."""
        return self.frozen is not None and self.blend.needs_frozen

    def frozen_probs(self, texts: list[str]) -> np.ndarray | None:
        """The frozen encoder's probabilities (n, k) of `texts` where the decision reads them,
        else None."""
        return self.frozen.scorer.predict_proba(texts) if self.reads_frozen else None

    def frozen_prediction(self, text: str) -> Prediction | None:
        """The frozen encoder's answer for one text where the decision reads it, else None."""
        probs = self.frozen_probs([text])
        return None if probs is None else Prediction.of(self.classes, probs[0])

    @property
    def neural(self) -> NeuralClassifier:
        """The torch classifier (attention, gradients: Explain and the probes), loaded at the
        first ask; its probabilities equal the scorer's within the serving graph's check."""
        return self.torch_model.get()

    @property
    def routing(self) -> dict[str, str]:
        """What routes, for people and JSON: runtime ("onnxruntime" or "torch"), device and
        precision."""
        if isinstance(self.scorer, ServingClassifier):
            return self.scorer.to_json()
        return {**self.scorer.runtime.to_json(), "runtime": "torch"}

    def describe_routing(self) -> str:
        """For people: "its serving graph on ONNX Runtime (int8: the same desk as the model on
        99.9% of its validation rows)" or "torch (cpu, bf16)"."""
        if not isinstance(self.scorer, ServingClassifier):
            return f"torch ({self.scorer.runtime.describe()})"
        entry = ServingEntry.from_card(self.card)
        check = entry.checks[self.scorer.precision]
        recheck = ""
        if self.scorer.precision == INT8:
            recheck = f", a top-two margin under {check.recheck_margin:g} decided in fp32"
        agreement = f"{check.label_agreement:.1%}"
        return (f"its serving graph on ONNX Runtime ({self.scorer.precision}{recheck}: the same "
                f"desk as the model on {agreement} of its validation rows)")  # fmt: skip

    @property
    def classes(self) -> list[str]:
        """The desks, in the column order of every probability."""
        return [str(c) for c in self.scorer.classes_]

    @property
    def neural_name(self) -> str:
        """What the pages call the neural model: "LSTM" for an LSTM, else "Transformer"."""
        return "LSTM" if self.card.get("architecture") == ARCH_LSTM else "Transformer"

    @property
    def key(self) -> str:
        """What identifies this model in caches and job records: its name and content digest,
        so a model saved again under the same name is another key."""
        return f"{self.path.name}@{self.digest}"


def build_card(result: TrainResult, *, data_fingerprint: str | None = None) -> dict[str, Any]:
    """The card.json document for a finished training run."""
    neural = result.neural
    return {
        "format": CARD_FORMAT,
        "format_version": CARD_VERSION,
        "labels": [str(c) for c in neural.classes_],
        "architecture": _architecture(neural.model),
        "backbone": result.config.backbone,
        "recipe": result.config.recipe,
        "head_strength": result.head_strength,
        "pooling": result.config.pooling,
        "max_length": neural.max_length,
        # Both models read texts with personal data masked (core.data.privacy), when fitted and
        # when predicting; a card without this key predates masking.
        "text_masking": MASKING_VERSION,
        # Who routes: the members mixed as the validation rows chose (core.models.blend).
        "blend": result.blend.to_json(),
        **_frozen_card(result),
        # When a routed complaint goes to a person, chosen on the validation rows
        # (core.models.flagging); the unknown-desk score itself is unknown.npz.
        "review": None if result.review is None else result.review.to_json(),
        "recipe_choice": result.recipe_choice,  # recipe "auto": what the data chose and why
        # The validation rows as it routed them: the live monitor's baseline (core.models.profile)
        "validation_profile": _report_json(result.validation_profile),
        "metrics": {
            "transformer": _report_json(result.neural_report),
            "bow": _report_json(result.bow_report),
            "decision": _report_json(result.decision_report),
        },
        "twin_metrics": {
            "transformer": _report_json(result.neural_twin_report),
            "bow": _report_json(result.bow_twin_report),
            "decision": _report_json(result.decision_twin_report),
        },
        "history": [asdict(record) for record in result.history],
        "best_epoch": result.best_epoch,
        "train_config": asdict(result.config),
        "baseline_config": asdict(result.bow_config),
        "data_fingerprint": data_fingerprint or _combined(result),
        "train_fingerprint": result.train_fingerprint,
        "val_fingerprint": result.val_fingerprint,
        # Which rows it trained and validated on, as rows and text keys (core.data.dataset
        # .split_record): a comparison scores two models only on rows neither trained on.
        "split": {"data_fingerprint": data_fingerprint or _combined(result), **result.split},
        "versions": _versions(),
        "device": result.device,
        "train_seconds": round(result.train_seconds, 3),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _frozen_card(result: TrainResult) -> dict[str, Any]:
    if result.frozen is None:
        return {}
    return {FROZEN_KEY: {"weights": FROZEN_FILES.weights,
                         "head_strength": result.frozen_head_strength}}  # fmt: skip


def _architecture(model: torch.nn.Module) -> str:
    from transformers import PreTrainedModel

    from core.models.lstm.model import LstmForSequenceClassification
    from core.models.tiny.model import TinyTransformerForSequenceClassification

    if isinstance(model, PreTrainedModel):
        return ARCH_TRANSFORMERS
    if isinstance(model, TinyTransformerForSequenceClassification):
        return ARCH_TINY
    if isinstance(model, LstmForSequenceClassification):
        return ARCH_LSTM
    raise TypeError(
        f"cannot save a {type(model).__name__}; only transformers, tiny and LSTM models"
    )


def _report_json(report: Any) -> dict[str, Any] | None:
    return None if report is None else report.to_json()


def _combined(result: TrainResult) -> str:
    text = f"{result.train_fingerprint}:{result.val_fingerprint}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _versions() -> dict[str, str]:
    import sklearn  # fitting the bag of words imported it already; loading a model never does
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sklearn": sklearn.__version__,
        "numpy": np.__version__,
    }


def save_model(
    result: TrainResult,
    root: str | Path,
    name: str,
    *,
    actor: Actor,
    data_fingerprint: str | None = None,
    overwrite: bool = False,
    record: ModelRecorder | None = None,
) -> Path:
    """Write a trained pair as model `name` of the models folder `root` atomically; returns the
    folder `root/name`. The models folder is shared: `actor` needs MANAGE_MODELS (admin).

    `name` is untrusted: it must be one safe path segment (`validate_model_name`) and the folder
    must stay inside `root`, symbolic links included (`model_folder`). Everything is written
    into a hidden folder beside the target (core.pending), held while the save runs, which is
    renamed into place only when complete and recorded: an interrupted save leaves no folder
    that lists as a model, and `record` (the trail) hears of it before anyone can see it.

    Without `overwrite` the name is claimed first (`_claimed`) and the save never replaces
    anything: when two saves of one name race, one wins and the other raises ModelNameTaken,
    and the winner's folder is never touched. `overwrite=True` replaces a model explicitly; it
    is the operator's tool for their own folders, never recorded (so never with `record`).
    """
    actor.require(Permission.MANAGE_MODELS)
    if overwrite and record is not None:
        raise ValueError("an overwrite replaces a model unrecorded; the team's saves never do")
    if result.cancelled or result.neural is None or result.bow is None:
        raise UserError("this training run was cancelled; there is no model to save")
    Path(root).mkdir(parents=True, exist_ok=True)
    target = model_folder(root, name)
    staging = new_change(target.parent, target.name, SAVING)
    try:
        if overwrite:
            staging.folder.mkdir()
            _write_model(result, staging.folder, data_fingerprint)
            _move_into_place(staging.folder, target)
            return target
        with _claimed(target, name), created_held(staging):
            _write_model(result, staging.folder, data_fingerprint)
            digest = card_digest(staging.folder) or ""
            if record is not None:
                record(ModelEvent(MODEL_SAVED, name, digest, staging.id))
            _rename_onto_claim(staging.folder, target, name)
    finally:
        if staging.folder.exists():
            shutil.rmtree(staging.folder)
    return target


class ModelNameTaken(UserError):
    """The name a save asked for is taken: a model or another folder has it, or another save
    claimed it first. Another name is the fix (`train_and_save` tries the next one)."""


@contextmanager
def _claimed(target: Path, name: str) -> Iterator[None]:
    """Hold the name `target` for one save: an empty folder there, locked while the save runs.

    The claim is `os.mkdir`, so only one save creates it. A save that crashed leaves an empty
    folder behind (a folder without card.json is not a model); its lock died with its process,
    so a claim nobody holds is taken over, while a held one or a folder with anything in it
    raises ModelNameTaken. On exit the claim is removed unless the save renamed a model onto it.
    """
    with suppress(FileExistsError):  # a model, another folder or a claim: decided under the lock
        os.mkdir(target)
    fd = _lock_empty_folder(target, name)
    try:
        yield
    finally:
        with suppress(OSError):  # not our empty claim any more (renamed onto, or removed)
            if os.path.samestat(os.fstat(fd), os.stat(target, follow_symlinks=False)):
                os.rmdir(target)  # never removes a model: rmdir fails on a folder with files
        os.close(fd)


def _lock_empty_folder(target: Path, name: str) -> int:
    """A descriptor of the empty folder `target`, exclusively locked (flock: per open file, so
    two threads of one process exclude each other too); ModelNameTaken if that is impossible."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:  # a file, a link, or removed meanwhile
        raise ModelNameTaken(
            f"{name!r} is taken in the models folder; choose another name"
        ) from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        entries = os.listdir(fd)
    except BaseException as err:
        os.close(fd)
        if isinstance(err, BlockingIOError):  # held: a live save's claim
            raise ModelNameTaken(
                f"another save is writing a model named {name!r}; choose another name"
            ) from err
        raise
    if entries:
        os.close(fd)
        what = "a model" if CARD_NAME in entries else "a folder (not a model)"
        raise ModelNameTaken(f"{what} named {name!r} already exists; choose another name")
    return fd


def _rename_onto_claim(staging: Path, target: Path, name: str) -> None:
    """Rename the complete `staging` onto the empty claim `target`: POSIX renames a folder onto
    an empty one atomically and refuses one with files in it, so a claim lost in a race (taken
    over as stale just before this save locked it) can never swap out the winner's model."""
    try:
        os.rename(staging, target)
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        raise ModelNameTaken(f"a model named {name!r} already exists; choose another name") from err


def _write_model(result: TrainResult, folder: Path, data_fingerprint: str | None) -> None:
    result.neural.model.save_pretrained(folder)
    result.neural.tokenizer.save_pretrained(folder)
    result.bow.save(folder)
    if result.detector is not None:
        result.detector.save(folder)
    if result.frozen is not None:
        save_frozen_weights(result.frozen, folder / FROZEN_FILES.weights)
    card = build_card(result, data_fingerprint=data_fingerprint)
    if card["architecture"] == ARCH_TRANSFORMERS:  # the graphs that route it (core.models.graph)
        card[SERVING_KEY] = _serving_graphs(result.neural, result, folder, MAIN_FILES).to_json()
        if result.frozen is not None:
            entry = _serving_graphs(result.frozen, result, folder, FROZEN_FILES)
            card[FROZEN_KEY][SERVING_KEY] = entry.to_json()
    card[FILES_KEY] = folder_digests(folder)  # pins the content; load_model verifies it
    (folder / CARD_NAME).write_text(json.dumps(card, indent=2), encoding="utf-8")  # last


def _serving_graphs(
    neural: NeuralClassifier, result: TrainResult, folder: Path, files: MemberFiles
) -> ServingEntry:
    """Export and check the serving graphs of one member, where the `tokenizers` library reads
    the validation rows as the model's own tokenizer does (else torch routes)."""
    from core.models.transformer.export import VERIFY_ROWS, export_serving

    texts = [*result.validation_texts[:VERIFY_ROWS], *PROBE_TEXTS]
    if not pieces_agree(folder, neural.tokenizer, texts, neural.max_length, neural.truncation):
        return ServingEntry(refused="the tokenizers library reads these texts otherwise than "
                                    "the model's tokenizer; torch routes",
                            files=files)  # fmt: skip
    return export_serving(neural, folder, result.validation_texts, files)


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename `staging` to `target` (an explicit overwrite); an existing `target` is swapped
    out, then removed."""
    if not target.exists():
        os.rename(staging, target)
        return
    retired = target.parent / f".{target.name}.replaced-{uuid.uuid4().hex[:8]}"
    os.rename(target, retired)
    os.rename(staging, target)
    shutil.rmtree(retired)


def load_model(
    folder: str | Path,
    *,
    device: str = "auto",
    precision: str = "auto",
    digest: str | None = None,
    threads: int | None = None,
) -> LoadedModel:
    """Load a saved model folder; never unpickles anything and never runs code it ships.

    The folder is trusted as a whole (the operator's models folder, or a path the operator
    typed); to load by an untrusted name use `load_named_model`.

    Parameters
    ----------
    folder : path
        A folder written by `save_model`.
    device, precision : str
        What routes (core.models.serving.serving_precision): on a CPU the model's serving
        graph, int8 where it has one ("auto") or fp32; torch on a GPU, for "bf16", and for
        models without a graph. Torch itself (explanations) runs on its runtime
        (core.models.device.Runtime.resolve): "auto" is CUDA when available, and the
        operator's GRIEVANCE_LENS_PRECISION or else bf16 where it is fast.
    digest : str, optional
        The card digest the caller expects (`core.models.card.card_digest`); ValueError when
        the folder now holds another model.
    threads : int, optional
        Cores the serving graph computes on (default: every core this process may use).
    """
    folder = Path(folder)
    card, found = read_card_and_digest(folder)
    entry = ServingEntry.from_card(card)
    # A bad setting fails before any weights are read; torch is imported only if it routes.
    graph = serving_precision(entry, device, precision)
    if digest is not None and found != digest:
        raise UserError(f"model {folder.name!r} changed on disk while loading; load it again")
    check_loadable(folder)
    verify_files(folder, card)
    labels = [str(label) for label in card["labels"]]

    def load_torch() -> NeuralClassifier:
        return torch_classifier(folder, card, found, device, precision, verify=graph is not None)

    if graph is None:
        scorer = load_torch()
        torch_model = TorchModel(load_torch, scorer)
    else:
        scorer = load_serving(folder, card, entry, graph, card_truncation(card), threads)
        torch_model = TorchModel(load_torch)
    frozen = _frozen_member(folder, card, found, device, precision, threads)
    bow = BagOfWordsClassifier.load(folder)
    if [str(c) for c in bow.classes_] != labels:
        raise UserError(
            f"{folder.name}: the bag of words' labels differ from the card's; save again"
        )
    detector = (
        UnknownDeskDetector.load(folder, n_classes=len(labels))
        if (folder / UNKNOWN_FILE).is_file()
        else None
    )
    if card_digest(folder) != found:  # a save swapped the folder while its files were read
        raise UserError(f"model {folder.name!r} changed on disk while loading; load it again")
    return LoadedModel(
        scorer=scorer, bow=bow, card=card, path=folder, digest=found, torch_model=torch_model,
        blend=Blend.from_card(card), detector=detector, frozen=frozen,
        review=ReviewPolicy.from_card(card, fallback=DEFAULT_REVIEW_THRESHOLD),
    )  # fmt: skip


def _frozen_member(
    folder: Path,
    card: dict[str, Any],
    digest: str,
    device: str,
    precision: str,
    threads: int | None,
) -> FrozenMember | None:
    """The frozen-encoder head of a blended model, routed as the main model is (its own serving
    graph on a CPU, else torch); None when the card has none."""
    saved = card.get(FROZEN_KEY)
    if saved is None:
        return None
    if not isinstance(saved, dict) or saved.get("weights") != FROZEN_FILES.weights:
        raise UserError(f"{folder.name}: the card's frozen encoder is damaged; save it again")
    entry = ServingEntry.from_card(saved, FROZEN_FILES)
    graph = serving_precision(entry, device, precision)

    def load_torch() -> NeuralClassifier:
        return torch_classifier(folder, card, digest, device, precision, verify=graph is not None,
                                 weights=FROZEN_FILES.weights)  # fmt: skip

    if graph is None:
        scorer = load_torch()
        return FrozenMember(scorer, TorchModel(load_torch, scorer))
    scorer = load_serving(folder, card, entry, graph, card_truncation(card), threads)
    return FrozenMember(scorer, TorchModel(load_torch))


def load_named_model(root: str | Path, name: str, **options: Any) -> LoadedModel:
    """Load model `name` of the models folder `root`; `name` may be untrusted (see
    `save_model`). Options are those of `load_model`."""
    return load_model(_model_folder(root, name), **options)


def list_models(root: str | Path) -> list[ModelSummary]:
    """Every model folder under `root` (those with card.json), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    summaries = []
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or not NAME_PATTERN.fullmatch(folder.name):
            continue  # hidden staging folders and odd names are never models
        if not (folder / CARD_NAME).is_file():
            continue
        try:
            summaries.append(_summary(folder, read_card(folder)))
        except ValueError as exc:
            warnings.warn(f"skipping {folder}: {exc}", stacklevel=2)
    return sorted(summaries, key=lambda s: s.created_at, reverse=True)


def _summary(folder: Path, card: dict[str, Any]) -> ModelSummary:
    metrics = card.get("metrics") or {}
    return ModelSummary(
        name=folder.name,
        path=folder,
        created_at=str(card.get("created_at", "")),
        backbone=str(card.get("backbone", "")),
        labels=tuple(str(label) for label in card.get("labels", [])),
        neural_accuracy=_metric(metrics, "transformer", "accuracy"),
        neural_macro_f1=_metric(metrics, "transformer", "macro_f1"),
        bow_accuracy=_metric(metrics, "bow", "accuracy"),
        bow_macro_f1=_metric(metrics, "bow", "macro_f1"),
        recipe=card_recipe(card),
        data_fingerprint=str(card.get("data_fingerprint", "")),
    )


def models_of_dataset(root: str | Path, fingerprint: str) -> list[ModelSummary]:
    """The saved models trained on the data set with `fingerprint`, newest first."""
    return [s for s in list_models(root) if s.data_fingerprint == fingerprint]


def card_recipe(card: dict[str, Any]) -> str:
    """How a saved model was trained: "quick" or "full" (cards from before recipes: "full")."""
    return QUICK if card.get("recipe") == QUICK else FULL


def _metric(metrics: dict, model: str, key: str) -> float | None:
    value = (metrics.get(model) or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def _model_folder(root: str | Path, name: str) -> Path:
    """The existing model folder `name` inside `root`; names are never echoed with paths."""
    folder = model_folder(root, name)
    if not (folder / CARD_NAME).is_file():
        raise UserError(f"no model named {name!r}; pick one from the list")
    return folder


def rename_model(
    root: str | Path, name: str, new_name: str, *, actor: Actor, record: ModelRecorder | None = None
) -> Path:
    """Rename model `name` of `root` to `new_name` (both checked like `save_model`'s name);
    returns the new folder. `actor` needs MANAGE_MODELS (admin). The model leaves its name for
    a hidden one first, is recorded, then takes the new name (core.pending)."""
    actor.require(Permission.MANAGE_MODELS)
    folder = _model_folder(root, name)
    target = model_folder(root, new_name)
    with _claimed(target, new_name), _held_model(folder, name):  # never onto a model or a save
        moving = _take_out_of_name(folder, RENAMING)
        _recorded_or_put_back(moving, folder, record, MODEL_RENAMED, new_name, renamed_from=name)
        _rename_onto_claim(moving.folder, target, new_name)
    return target


def delete_model(
    root: str | Path, name: str, *, actor: Actor, record: ModelRecorder | None = None
) -> None:
    """Delete model `name` of `root` (only folders that are models, inside `root`); `actor`
    needs MANAGE_MODELS (admin). The model leaves its name for a hidden one first (a
    half-deleted folder never lists as a model), is recorded, then removed (core.pending)."""
    actor.require(Permission.MANAGE_MODELS)
    folder = _model_folder(root, name)
    with _held_model(folder, name):
        retired = _take_out_of_name(folder, DELETING)
        _recorded_or_put_back(retired, folder, record, MODEL_DELETED, name)
        shutil.rmtree(retired.folder)


@contextmanager
def _held_model(folder: Path, name: str) -> Iterator[None]:
    """Hold model `folder` while it is renamed or deleted: two admins never change one model
    at once, and a change a killed process left is told from one in progress."""
    try:
        with holding(folder):
            yield
    except BlockingIOError as err:
        raise UserError(f"model {name!r} is being renamed or deleted; try again") from err


def _take_out_of_name(folder: Path, kind: str) -> Change:
    change = new_change(folder.parent, folder.name, kind)
    os.rename(folder, change.folder)
    return change


def _recorded_or_put_back(
    change: Change,
    folder: Path,
    record: ModelRecorder | None,
    action: str,
    name: str,
    *,
    renamed_from: str | None = None,
) -> None:
    """Tell `record` of the change; if it refuses (the live model, a read-only trail), the
    model goes back to its name and the refusal is raised."""
    if record is None:
        return
    try:
        digest = card_digest(change.folder) or ""
        record(ModelEvent(action, name, digest, change.id, renamed_from))
    except BaseException:
        os.rename(change.folder, folder)
        raise
