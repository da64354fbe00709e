"""Train both models on one split: the transformer (tiny, bundled MiniLM or any backbone) with
the fine-tuning loop, and the bag of words beside it, each evaluated on the validation
rows and their slices (core.models.training_job runs it as a job of the server's queue).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from core.data.dataset import TWIN_SLICE, Dataset, split_record
from core.data.privacy import mask_dataset
from core.errors import UserError
from core.metrics import EvalReport
from core.models.bag_of_words import BagOfWordsClassifier, BagOfWordsConfig
from core.models.blend import (
    BAG_OF_WORDS,
    FROZEN,
    NEURAL,
    NEURAL_ONLY,
    Blend,
    Mix,
    blend_of,
    choose_blend,
    choose_mix,
)
from core.models.device import resolve_device
from core.models.evaluation import reports_with_slices
from core.models.flagging import (
    DETECTOR,
    MAX_REFERENCE_ROWS,
    ReviewPolicy,
    UnknownDeskDetector,
    choose_policy,
    detector_for,
    fit_detector,
)
from core.models.profile import ValidationProfile, validation_profile
from core.models.seeding import job_generator, seeded_dropout
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import AUTO, FULL, QUICK, TrainConfig
from core.models.transformer.inference import NeuralClassifier
from core.models.transformer.loop import (
    EpochRecord,
    FitInputs,
    FitOutcome,
    fit_classifier,
)
from core.models.transformer.quick import quick_fit
from core.models.transformer.recipe import (
    RecipeChoice,
    blended_choice,
    median_rows_per_desk,
    only_full,
    quick_only,
    try_full,
)
from core.progress import ProgressCallback


@dataclass(frozen=True)
class ValidationOutputs:
    """What a trained run's members gave on the validation rows (never saved): the recipe
    "auto" blends two runs from these without predicting again."""

    neural_probs: np.ndarray  # (n, k) the transformer's
    features: np.ndarray  # (n, d) its embeddings, as the unknown-desk score reads them
    bow_probs: np.ndarray  # (n, k) the bag of words'


@dataclass(frozen=True)
class TrainResult:
    """Both trained models and their validation reports; a cancelled run holds no models."""

    history: tuple[EpochRecord, ...]
    best_epoch: int  # 1-based epoch whose weights were kept; 0 when none finished
    train_seconds: float
    device: str
    cancelled: bool
    config: TrainConfig
    bow_config: BagOfWordsConfig
    train_fingerprint: str
    val_fingerprint: str
    split: dict[str, list] = field(default_factory=dict)  # core.data.dataset.split_record
    neural: NeuralClassifier | None = None
    bow: BagOfWordsClassifier | None = None
    neural_report: EvalReport | None = None
    bow_report: EvalReport | None = None
    neural_twin_report: EvalReport | None = None  # val rows whose "slice" is "twin"
    bow_twin_report: EvalReport | None = None
    head_strength: float | None = None  # quick recipe: the logistic regression's chosen C
    # How the saved model routes: both models mixed as the validation rows chose
    # (core.models.blend), and that decision's validation reports.
    blend: Blend = NEURAL_ONLY
    decision_report: EvalReport | None = None
    decision_twin_report: EvalReport | None = None
    # When the saved model sends a complaint to a person (core.models.flagging): its
    # unknown-desk score and the thresholds, both chosen on the validation rows.
    detector: UnknownDeskDetector | None = None
    review: ReviewPolicy | None = None
    # recipe "auto": which recipe the data chose and why (core.models.transformer.recipe)
    recipe_choice: dict | None = None
    # How the decision routed the validation rows, the baseline of the live monitor
    # (core.models.profile).
    validation_profile: ValidationProfile | None = None
    # The validation rows' texts: saving checks the serving graphs against torch on them
    # (core.models.transformer.export); they are never written to the model folder.
    validation_texts: tuple[str, ...] = ()
    validation_outputs: ValidationOutputs | None = None
    # recipe "auto" with both recipes in the blend: the quick recipe's model (frozen encoder and
    # its fitted head) beside the fine-tuned one, and its head's strength
    frozen: NeuralClassifier | None = None
    frozen_head_strength: float | None = None


def check_split(train: Dataset, val: Dataset) -> tuple[str, ...]:
    """The sorted class labels of `train`; every validation label must be among them."""
    if len(train) == 0 or len(val) == 0:
        raise UserError("both the training and the validation split need rows; add data")
    classes = tuple(sorted(set(train.labels)))
    if len(classes) < 2:
        raise UserError(f"training needs at least two labels, found {list(classes)}")
    unseen = sorted(set(val.labels) - set(classes))
    if unseen:
        raise UserError(
            f"validation labels {unseen} never occur in the training split; add training rows "
            "for them or lower val_fraction"
        )
    return classes


def fine_tune(
    train: Dataset,
    val: Dataset,
    config: TrainConfig,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> tuple[NeuralClassifier, FitOutcome]:
    """Load `config.backbone` with a fresh head for the labels of `train` and train it by
    `config.recipe`: the fine-tuning loop, seeded, or the quick recipe's frozen encoder and
    fitted head; the transformer half of `train_models` (and of
    each fold of the transformer label audit). After a cancel the classifier holds a
    half-trained model.

    All randomness (the new weights, every dropout mask, the batch order) comes from
    `config.seed` through generators of this run's own: nothing process-wide is seeded or
    changed, so concurrent runs on a shared server give the results each gives alone.

    Both splits are masked (core.data.privacy) before anything reads them: the tiny backbone's
    vocabulary is built from the training texts and is saved with the model."""
    classes = check_split(train, val)
    train, val = mask_dataset(train), mask_dataset(val)
    device = resolve_device(config.device)
    model, tokenizer = load_backbone(config, classes, texts=train.texts)
    model.to(device)
    inputs = FitInputs(model, tokenizer, train, val, config, classes, device)
    options = {"on_progress": on_progress, "cancel": cancel}
    if config.recipe == QUICK:
        outcome = quick_fit(inputs, **options)
    else:
        if config.head_init == "probe":  # the quick recipe's head first, then fine-tune it all
            probed = quick_fit(inputs, **options)
            if probed.cancelled:
                return NeuralClassifier(model, tokenizer, classes, device=device), probed
        with seeded_dropout(model, job_generator(config.seed, device)):
            outcome = fit_classifier(inputs, **options)
    if isinstance(tokenizer, PreTrainedTokenizerBase):  # so pipeline(truncation=True) cuts alike
        tokenizer.model_max_length = config.max_length
    neural = NeuralClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device,
        truncation=config.truncation,
    )  # fmt: skip
    return neural, outcome


def train_models(
    train: Dataset,
    val: Dataset,
    config: TrainConfig = TrainConfig(),
    *,
    bow_config: BagOfWordsConfig = BagOfWordsConfig(),
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> TrainResult:
    """Fine-tune the transformer and fit the bag of words on the same split.

    Both are evaluated on `val` (and on its twin slice when `val.extra` has a "slice" column).
    A set `cancel` event stops training at the next step and returns `cancelled=True` with no
    models. Recipe "auto" lets the data choose (`train_auto`).
    """
    if config.recipe == AUTO:
        return train_auto(train, val, config, bow_config=bow_config,
                          on_progress=on_progress, cancel=cancel)  # fmt: skip
    started = time.perf_counter()
    neural, outcome = fine_tune(train, val, config, on_progress=on_progress, cancel=cancel)
    common = {
        "history": outcome.history,
        "best_epoch": outcome.best_epoch,
        "device": str(neural.device),
        "config": config,
        "bow_config": bow_config,
        "train_fingerprint": train.fingerprint,
        "val_fingerprint": val.fingerprint,
        "split": split_record(train, val),
        "head_strength": outcome.head_strength,
        "validation_texts": tuple(val.texts),
    }
    if outcome.cancelled:
        return TrainResult(**common, cancelled=True, train_seconds=time.perf_counter() - started)
    bow = BagOfWordsClassifier(bow_config).fit(list(train.texts), list(train.labels))
    reports = _validation_reports(neural, bow, val)
    val_features, val_probs = reports.pop("val_features"), reports.pop("val_probs")
    outputs = ValidationOutputs(val_probs, val_features, reports.pop("bow_probs"))
    detector = fit_unknown_desk(
        neural, train, val_features, val_probs, config.seed, outcome.train_features,
        method=detector_for(config.recipe),
    )  # fmt: skip
    unknown_scores = detector.scores(val_features, val_probs)
    decision_probs = reports.pop("decision_probs")
    review = _review_policy(decision_probs, val, neural, unknown_scores)
    return TrainResult(
        **common,
        cancelled=False,
        train_seconds=time.perf_counter() - started,
        neural=neural,
        bow=bow,
        detector=detector,
        review=review,
        validation_profile=_profile(decision_probs, neural, review, unknown_scores),
        validation_outputs=outputs,
        **reports,
    )


def train_auto(
    train: Dataset,
    val: Dataset,
    config: TrainConfig,
    *,
    bow_config: BagOfWordsConfig = BagOfWordsConfig(),
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> TrainResult:
    """`train_models` with the recipe the data choose (core.models.transformer.recipe): quick,
    then full as well where the desks have rows enough, and the better on the validation rows.
    The result's config holds the recipe chosen, its `recipe_choice` the reason; its
    train_seconds count both trainings."""
    started = time.perf_counter()
    options = {"bow_config": bow_config, "on_progress": on_progress, "cancel": cancel}
    rows_per_desk = median_rows_per_desk(train.labels)
    fixed = only_full(config)
    if fixed is not None:
        result = train_models(train, val, replace(config, recipe=FULL), **options)
        choice = RecipeChoice(FULL, f"full: {fixed}", rows_per_desk, {})
        return replace(result, recipe_choice=choice.to_json())
    tried = {QUICK: train_models(train, val, replace(config, recipe=QUICK), **options)}
    if try_full(rows_per_desk) and not tried[QUICK].cancelled:
        tried[FULL] = train_models(train, val, replace(config, recipe=FULL), **options)
    if any(result.cancelled for result in tried.values()):
        return tried[FULL if FULL in tried else QUICK]
    if FULL in tried:
        blended = blend_recipes(tried[FULL], tried[QUICK], val, rows_per_desk)
        return replace(blended, train_seconds=time.perf_counter() - started)
    choice = quick_only(rows_per_desk, tried[QUICK].decision_report.accuracy)
    return replace(tried[QUICK], train_seconds=time.perf_counter() - started,
                   recipe_choice=choice.to_json())  # fmt: skip


# The members `blend_recipes` chooses from, in order of preference: the fine-tuned model reads
# word order, the frozen encoder's head less, the bag of words not at all.
_RECIPE_MEMBERS = (FULL, QUICK, BAG_OF_WORDS)


def blend_recipes(
    full: TrainResult, quick: TrainResult, val: Dataset, rows_per_desk: float
) -> TrainResult:
    """One model from both recipes' runs on the same split: the members of the fine-tuned
    transformer, the quick recipe's frozen-encoder head and the bag of words that the validation
    rows choose (core.models.blend.choose_mix: each joins only where it clearly pays), with the
    review policy and validation profile of that decision. Nothing is predicted again."""
    outputs = {FULL: full.validation_outputs, QUICK: quick.validation_outputs}
    if outputs[FULL] is None or outputs[QUICK] is None:
        raise ValueError("both runs must hold their validation outputs")
    classes = [str(c) for c in full.neural.classes_]
    label_ids = np.array([classes.index(str(y)) for y in val.labels])
    member_probs = {FULL: outputs[FULL].neural_probs, QUICK: outputs[QUICK].neural_probs,
                    BAG_OF_WORDS: outputs[FULL].bow_probs}  # fmt: skip
    mix = choose_mix({name: member_probs[name] for name in _RECIPE_MEMBERS}, label_ids)
    base = full if FULL in mix.shares else quick
    blend = blend_of(_as_blend_members(mix))
    frozen = quick if blend.needs_frozen else None
    out = base.validation_outputs
    frozen_probs = None if frozen is None else outputs[QUICK].neural_probs
    decision_probs = blend.combine(out.neural_probs, out.bow_probs, frozen_probs)
    decision_report, slices = reports_with_slices(decision_probs, classes, val)
    unknown_scores = base.detector.scores(out.features, out.neural_probs)
    review = _review_policy(decision_probs, val, base.neural, unknown_scores)
    alone = {name: float((probs.argmax(1) == label_ids).mean())
             for name, probs in member_probs.items()}  # fmt: skip
    seconds = {FULL: round(full.train_seconds, 1), QUICK: round(quick.train_seconds, 1)}
    chosen = FULL if base is full else QUICK
    choice = blended_choice(rows_per_desk, blend.describe(), mix.accuracy, alone,
                            chosen=chosen, train_seconds=seconds)  # fmt: skip
    return replace(
        base, blend=blend, decision_report=decision_report,
        decision_twin_report=slices.get(TWIN_SLICE), review=review,
        validation_profile=_profile(decision_probs, base.neural, review, unknown_scores),
        recipe_choice=choice.to_json(),
        frozen=None if frozen is None else frozen.neural,
        frozen_head_strength=None if frozen is None else frozen.head_strength,
    )  # fmt: skip


def _as_blend_members(mix: Mix) -> Mix:
    """A mix over the recipes, named as the Blend names its members: the fine-tuned model is
    the transformer where it takes part, the quick head is the frozen encoder beside it (or the
    transformer without it)."""
    neural = FULL if FULL in mix.shares else QUICK
    names = {neural: NEURAL, BAG_OF_WORDS: BAG_OF_WORDS}
    if neural == FULL:
        names[QUICK] = FROZEN
    rename = {old: names[old] for old in mix.shares}
    return Mix({rename[k]: v for k, v in mix.shares.items()},
               {rename[k]: v for k, v in mix.temperatures.items()}, mix.right,
               mix.log_loss)  # fmt: skip


def fit_unknown_desk(
    neural: NeuralClassifier,
    train: Dataset,
    val_features: np.ndarray,
    val_probs: np.ndarray,
    seed: int,
    train_features: np.ndarray | None = None,
    *,
    method: str = DETECTOR,
) -> UnknownDeskDetector:
    """The unknown-desk score of a trained model: fitted on its embeddings of (at most
    MAX_REFERENCE_ROWS of) the training rows, ranked on the validation rows' embeddings and
    probabilities (the transformer's own). The quick recipe hands over the embeddings it fitted
    its head on (of the same masked texts); otherwise they are computed here."""
    label_ids = {str(c): i for i, c in enumerate(neural.classes_)}
    labels = np.array([label_ids[str(y)] for y in train.labels])
    rows = np.arange(len(train))
    if len(rows) > MAX_REFERENCE_ROWS:  # a seeded draw; a desk it missed keeps one row
        rows = np.sort(np.random.default_rng(seed).permutation(rows)[:MAX_REFERENCE_ROWS])
        present = set(labels[rows].tolist())
        missing = [
            np.flatnonzero(labels == c)[0] for c in range(len(label_ids)) if c not in present
        ]
        rows = np.sort(np.concatenate([rows, np.asarray(missing, dtype=int)]))
    if train_features is None or len(train_features) != len(train):
        features = neural.predict_proba_and_features([train.texts[i] for i in rows])[1]
    else:
        features = train_features[rows]
    return fit_detector(features, labels[rows], val_features, n_classes=len(label_ids),
                        method=method, val_probs=val_probs)  # fmt: skip


def _review_policy(
    decision_probs: np.ndarray,
    val: Dataset,
    neural: NeuralClassifier,
    unknown_scores: np.ndarray,
) -> ReviewPolicy:
    classes = [str(c) for c in neural.classes_]
    right = np.array([classes[i] for i in decision_probs.argmax(1)]) == np.array(val.labels)
    return choose_policy(decision_probs.max(1), right, unknown_scores)


def _profile(
    decision_probs: np.ndarray,
    neural: NeuralClassifier,
    review: ReviewPolicy,
    unknown_scores: np.ndarray,
) -> ValidationProfile:
    """The validation rows as the saved model routes them: its policy's reasons on them."""
    confidence = decision_probs.max(axis=1)
    reasons = review.reasons(confidence, unknown_scores, np.zeros(len(confidence), dtype=bool))
    classes = [str(c) for c in neural.classes_]
    return validation_profile(decision_probs, classes, reasons, has_unknown_score=True)


def _validation_reports(
    neural: NeuralClassifier, bow: BagOfWordsClassifier, val: Dataset
) -> dict[str, Any]:
    """Both models on `val`, the blend chosen on it and the decision it makes there, each also
    on the twin slice when the data marks one; every model predicts once. Also the decision's
    probabilities ("decision_probs"), the transformer's ("val_probs") and its embeddings
    ("val_features") there."""
    classes = [str(c) for c in neural.classes_]
    texts, labels = list(val.texts), list(val.labels)
    neural_probs, val_features = neural.predict_proba_and_features(texts)
    pred_probs = {"neural": neural_probs, "bow": bow.predict_proba(texts)}
    blend = choose_blend(pred_probs["neural"], pred_probs["bow"], labels, classes)
    pred_probs["decision"] = blend.combine(pred_probs["neural"], pred_probs["bow"])
    reports: dict[str, Any] = {"blend": blend, "val_features": val_features,
                               "val_probs": neural_probs, "bow_probs": pred_probs["bow"],
                               "decision_probs": pred_probs["decision"]}  # fmt: skip
    for name, probs in pred_probs.items():
        reports[f"{name}_report"], slices = reports_with_slices(probs, classes, val)
        reports[f"{name}_twin_report"] = slices.get(TWIN_SLICE)
    return reports
