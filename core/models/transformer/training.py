"""Train both models on one split: the transformer (tiny, bundled MiniLM or any backbone) with
the fine-tuning loop, and the bag-of-words baseline beside it, each evaluated on the validation
rows and their slices (core.models.training_job runs it as a job of the server's queue).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from transformers import PreTrainedTokenizerBase

from core.data.dataset import TWIN_SLICE, Dataset, split_record
from core.data.privacy import mask_dataset
from core.errors import UserError
from core.metrics import EvalReport
from core.models.baseline import BagOfWordsClassifier, BaselineConfig
from core.models.blend import TRANSFORMER_ONLY, Blend, choose_blend
from core.models.device import resolve_device
from core.models.evaluation import reports_with_slices
from core.models.seeding import job_generator, seeded_dropout
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import QUICK, TrainConfig
from core.models.transformer.inference import TransformerClassifier
from core.models.transformer.loop import (
    EpochRecord,
    FitInputs,
    FitOutcome,
    fit_classifier,
)
from core.models.transformer.quick import quick_fit
from core.progress import ProgressCallback


@dataclass(frozen=True)
class TrainResult:
    """Both trained models and their validation reports; a cancelled run holds no models."""

    history: tuple[EpochRecord, ...]
    best_epoch: int  # 1-based epoch whose weights were kept; 0 when none finished
    train_seconds: float
    device: str
    cancelled: bool
    config: TrainConfig
    baseline_config: BaselineConfig
    train_fingerprint: str
    val_fingerprint: str
    split: dict[str, list] = field(default_factory=dict)  # core.data.dataset.split_record
    transformer: TransformerClassifier | None = None
    baseline: BagOfWordsClassifier | None = None
    transformer_report: EvalReport | None = None
    baseline_report: EvalReport | None = None
    transformer_twin_report: EvalReport | None = None  # val rows whose "slice" is "twin"
    baseline_twin_report: EvalReport | None = None
    head_strength: float | None = None  # quick recipe: the logistic regression's chosen C
    # How the saved model routes: both models mixed as the validation rows chose
    # (core.models.blend), and that decision's validation reports.
    blend: Blend = TRANSFORMER_ONLY
    decision_report: EvalReport | None = None
    decision_twin_report: EvalReport | None = None


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
) -> tuple[TransformerClassifier, FitOutcome]:
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
                return TransformerClassifier(model, tokenizer, classes, device=device), probed
        with seeded_dropout(model, job_generator(config.seed, device)):
            outcome = fit_classifier(inputs, **options)
    if isinstance(tokenizer, PreTrainedTokenizerBase):  # so pipeline(truncation=True) cuts alike
        tokenizer.model_max_length = config.max_length
    transformer = TransformerClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device,
        truncation=config.truncation,
    )  # fmt: skip
    return transformer, outcome


def train_models(
    train: Dataset,
    val: Dataset,
    config: TrainConfig = TrainConfig(),
    *,
    baseline_config: BaselineConfig = BaselineConfig(),
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> TrainResult:
    """Fine-tune the transformer and fit the bag-of-words baseline on the same split.

    Both are evaluated on `val` (and on its twin slice when `val.extra` has a "slice" column).
    A set `cancel` event stops training at the next step and returns `cancelled=True` with no
    models.
    """
    started = time.perf_counter()
    transformer, outcome = fine_tune(train, val, config, on_progress=on_progress, cancel=cancel)
    common = {
        "history": outcome.history,
        "best_epoch": outcome.best_epoch,
        "device": str(transformer.device),
        "config": config,
        "baseline_config": baseline_config,
        "train_fingerprint": train.fingerprint,
        "val_fingerprint": val.fingerprint,
        "split": split_record(train, val),
        "head_strength": outcome.head_strength,
    }
    if outcome.cancelled:
        return TrainResult(**common, cancelled=True, train_seconds=time.perf_counter() - started)
    baseline = BagOfWordsClassifier(baseline_config).fit(list(train.texts), list(train.labels))
    return TrainResult(
        **common,
        cancelled=False,
        train_seconds=time.perf_counter() - started,
        transformer=transformer,
        baseline=baseline,
        **_validation_reports(transformer, baseline, val),
    )


def _validation_reports(
    transformer: TransformerClassifier, baseline: BagOfWordsClassifier, val: Dataset
) -> dict[str, EvalReport | Blend | None]:
    """Both models on `val`, the blend chosen on it and the decision it makes there, each also
    on the twin slice when the data marks one; every model predicts once."""
    classes = [str(c) for c in transformer.classes_]
    texts, labels = list(val.texts), list(val.labels)
    pred_probs = {"transformer": transformer.predict_proba(texts),
                  "baseline": baseline.predict_proba(texts)}  # fmt: skip
    blend = choose_blend(pred_probs["transformer"], pred_probs["baseline"], labels, classes)
    pred_probs["decision"] = blend.combine(pred_probs["transformer"], pred_probs["baseline"])
    reports: dict[str, EvalReport | Blend | None] = {"blend": blend}
    for name, probs in pred_probs.items():
        reports[f"{name}_report"], slices = reports_with_slices(probs, classes, val)
        reports[f"{name}_twin_report"] = slices.get(TWIN_SLICE)
    return reports
