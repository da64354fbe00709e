"""The quick recipe: a first transformer model in about a minute on a CPU.

The pretrained encoder stays frozen. Every text is embedded once (mean-pooled over real tokens,
length-sorted batches, inference mode), and a multinomial logistic regression fitted on those
embeddings becomes the linear head of the same mean-pooled model that full fine-tuning builds,
so the saved folder works on every page and command unchanged. The regression's strength C is
chosen on the validation split.

What it cannot do: the encoder never learns the desks, so word order counts only as far as the
pretrained sentence embedding already reflects it (held-out word-order twins: far below full
fine-tuning; BENCHMARKS.md, "Accuracy of both models and both recipes").
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from torch import nn

from core.errors import UserError
from core.metrics import evaluate_predictions
from core.models.device import Runtime
from core.models.scratch import mean_pool
from core.models.transformer.config import EMBED_PHASE, HEAD_PHASE
from core.models.transformer.head import MeanPoolForSequenceClassification
from core.models.transformer.inference import encode_batch, inference_view
from core.models.transformer.loop import (
    EpochRecord,
    FitInputs,
    FitOutcome,
    StepMetrics,
)
from core.models.transformer.truncation import HEAD
from core.numeric import clearly_more_right
from core.progress import Progress, ProgressCallback

EMBED_BATCH = 64  # texts per forward pass while embedding (inference: no activations kept)
# Logistic-regression strengths tried, weakest first; the validation split picks one. Frozen
# MiniLM embeddings have small norms, so the useful C sits above sklearn's default 1.
HEAD_STRENGTHS = (0.3, 1.0, 3.0, 10.0, 30.0)
HEAD_MAX_ITER = 1000
BatchCallback = Callable[[int], None]  # rows embedded so far


@dataclass(frozen=True)
class LinearHead:
    """A fitted linear head: logits = features @ weight.T + bias, for `classes` in order."""

    weight: np.ndarray  # (n_classes, hidden)
    bias: np.ndarray  # (n_classes,)
    strength: float  # the chosen C
    train_loss: float  # mean cross-entropy on the training rows
    val_accuracy: float
    val_macro_f1: float

    def logits(self, features: np.ndarray) -> np.ndarray:
        return features @ self.weight.T + self.bias


def embed_texts(
    model: MeanPoolForSequenceClassification,
    tokenizer,
    texts: Sequence[str],
    *,
    max_length: int,
    runtime: Runtime,
    truncation: str = HEAD,
    on_rows: BatchCallback | None = None,
    cancel: threading.Event | None = None,
) -> np.ndarray | None:
    """Mean-pooled encoder states of `texts`, (n_texts, hidden) float32 in input order; None
    when `cancel` was set. Texts must already be masked (core.data.privacy), as in training.

    Batches are cut from the length-sorted texts, so each pads to a similar length. The
    encoder runs on `runtime` (the model's device, under its autocast): a head fitted on these
    features then meets, at prediction, features computed exactly the same way.
    """
    view = inference_view(model)  # eval mode whatever `model` is in, fused attention
    order = np.argsort([len(t) for t in texts], kind="stable")
    features = np.empty((len(texts), model.classifier.in_features), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(texts), EMBED_BATCH):
            if cancel is not None and cancel.is_set():
                return None
            rows = order[start : start + EMBED_BATCH]
            batch = encode_batch(
                tokenizer, [texts[i] for i in rows], max_length, runtime.device, truncation
            )
            with runtime.autocast():
                states = view.encoder(**batch).last_hidden_state
            features[rows] = mean_pool(states.float(), batch["attention_mask"]).cpu().numpy()
            if on_rows is not None:
                on_rows(start + len(rows))
    return features


def fit_linear_head(
    features: np.ndarray,
    labels: np.ndarray,
    val_features: np.ndarray,
    val_labels: np.ndarray,
    *,
    n_classes: int,
    class_weights: bool = True,
    strengths: Sequence[float] = HEAD_STRENGTHS,
) -> LinearHead:
    """A multinomial logistic regression on `features` (rows, hidden) for integer `labels` in
    0..n_classes-1, its strength C chosen on the validation rows (`_weakest_within_noise`).

    `class_weights` balances the loss by inverse class frequency, as full fine-tuning does.
    """
    if len(set(labels.tolist())) != n_classes:
        raise UserError("every class needs training rows before a head can be fitted")
    regression = LogisticRegression(
        max_iter=HEAD_MAX_ITER,
        warm_start=True,  # each stronger C starts from the previous solution: fewer iterations
        class_weight="balanced" if class_weights else None,
    )
    fitted: list[tuple[LinearHead, np.ndarray, float]] = []  # weakest first
    val_rows = np.arange(len(val_labels))
    for strength in sorted(strengths):
        regression.set_params(C=strength)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter bounds the time
            regression.fit(features, labels)
        head = _head_of(regression, n_classes, strength, features, labels)
        logits = head.logits(val_features)
        predicted = logits.argmax(1)
        report = evaluate_predictions(  # class ids as strings: the metrics take label names
            [str(y) for y in val_labels], [str(y) for y in predicted],
            labels=[str(y) for y in range(n_classes)],
        )  # fmt: skip
        log_probs = logits - _logsumexp(logits)
        val_loss = float(-log_probs[val_rows, val_labels].mean())
        head = replace(head, val_accuracy=report.accuracy, val_macro_f1=report.macro_f1)
        fitted.append((head, predicted == val_labels, val_loss))
    return _steadiest(fitted)


def _steadiest(fitted: Sequence[tuple[LinearHead, np.ndarray, float]]) -> LinearHead:
    """Of the heads whose validation rows right are not clearly beaten by the most accurate
    head's, the one of the lowest validation log-loss (the weaker of equals).

    Why not the best macro-F1, as before: strengths a step apart often differ by a row or two of
    a few hundred, which is noise, so each retraining of the same data picked another head (#40:
    the closed loop's curve). The log-loss is smooth in the head's probabilities, so it moves
    little between retrainings, and it still refuses a head too weak to be sure of anything."""
    most_right = max(fitted, key=lambda found: int(found[1].sum()))[1]
    eligible = [found for found in fitted if not clearly_more_right(most_right, found[1])]
    return min(eligible, key=lambda found: round(found[2], 9))[0]


def _head_of(
    regression: LogisticRegression,
    n_classes: int,
    strength: float,
    features: np.ndarray,
    labels: np.ndarray,
) -> LinearHead:
    """The regression as softmax weights: a binary regression's one row z becomes logits
    (0, z), whose softmax is its sigmoid."""
    weight = np.asarray(regression.coef_, dtype=np.float64)
    bias = np.asarray(regression.intercept_, dtype=np.float64)
    if n_classes == 2 and weight.shape[0] == 1:
        weight = np.vstack([np.zeros_like(weight), weight])
        bias = np.concatenate([[0.0], bias])
    logits = features @ weight.T + bias
    log_probs = logits - _logsumexp(logits)
    loss = float(-log_probs[np.arange(len(labels)), labels].mean())
    return LinearHead(weight, bias, strength, loss, math.nan, math.nan)


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=1, keepdims=True)
    return top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))


def set_head(model: MeanPoolForSequenceClassification, head: LinearHead) -> None:
    """Write `head` into the model's linear classifier (same shapes, the model's dtype)."""
    layer: nn.Linear = model.classifier
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(head.weight, dtype=layer.weight.dtype))
        layer.bias.copy_(torch.as_tensor(head.bias, dtype=layer.bias.dtype))


def quick_fit(
    inputs: FitInputs,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> FitOutcome:
    """Embed both (masked) splits with the frozen encoder of `inputs.model` (a
    MeanPoolForSequenceClassification), fit the head, write it into the model.

    Progress is reported in rows embedded (phase "embed"), then once more when the head is
    fitted (phase "head"); the outcome holds one record, like a one-epoch fine-tuning. The
    texts are embedded with the runtime the saved model gets on `inputs.device` (precision
    "auto").
    """
    train, val, config = inputs.train, inputs.val, inputs.config
    label_ids = {label: i for i, label in enumerate(inputs.classes)}
    total = len(train) + len(val)
    done_before = [0]
    embedding = StepMetrics(1, math.nan, None, None)

    def on_rows(rows: int) -> None:
        if on_progress is not None:
            on_progress(Progress(done_before[0] + rows, total, EMBED_PHASE, embedding))

    runtime = Runtime.resolve(inputs.device)
    embedded = []
    for part in (train, val):
        features = embed_texts(
            inputs.model, inputs.tokenizer, part.texts, max_length=config.max_length,
            runtime=runtime,
            truncation=config.truncation, on_rows=on_rows, cancel=cancel,
        )  # fmt: skip
        if features is None:
            return FitOutcome((), 0, done_before[0], True)
        embedded.append(features)
        done_before[0] += len(part)
    head = fit_linear_head(
        embedded[0], np.asarray([label_ids[y] for y in train.labels]),
        embedded[1], np.asarray([label_ids[y] for y in val.labels]),
        n_classes=len(inputs.classes), class_weights=config.class_weights,
    )  # fmt: skip
    set_head(inputs.model, head)
    inputs.model.eval()
    record = EpochRecord(1, head.train_loss, head.val_accuracy, head.val_macro_f1)
    if on_progress is not None:
        fitted = StepMetrics(1, head.train_loss, head.val_accuracy, head.val_macro_f1)
        on_progress(Progress(total, total, HEAD_PHASE, fitted))
    return FitOutcome(
        (record,), 1, total, False, head_strength=head.strength, train_features=embedded[0]
    )
