"""Batched inference: `NeuralClassifier` masks personal data as training did, sorts texts by
length, pads per batch and returns probabilities in the caller's order; `predict_labels` routes
texts with any classifier.

Decision: predictions run on an *inference view* of the model: a copy of its module tree that
shares every weight, kept in eval mode and, for Hugging Face models that support it, running
PyTorch's fused attention (SDPA) instead of the eager attention the model was loaded with. Eager
attention materialises every head's weights, which Explain needs and batch routing does not;
SDPA gives the same probabilities (within 1e-6) for less work. Because the view never leaves eval
mode, a prediction made while the model trains (validation) never sees dropout.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import BatchEncoding

from core.checks import check_fraction, check_int, check_texts
from core.errors import UserError
from core.models.classifier import Prediction
from core.models.device import Runtime
from core.models.graph import padded
from core.models.transformer.truncation import (
    HEAD,
    TRUNCATIONS,
    Pieces,
    head_tail_pieces,
    reads_head_and_tail,
    texts_as_read,
)
from core.text import cut_for_tokens

DEFAULT_BATCH_SIZE = 64  # texts per forward pass of predict_proba
FUSED_ATTENTION = "sdpa"


def inference_view(model: nn.Module) -> nn.Module:
    """A copy of `model`'s module tree that shares every parameter and buffer, in eval mode, with
    fused attention (SDPA) wherever a Hugging Face model supports it.

    The copy's modules are its own, so `model.train()` or a swapped dropout (training) does not
    reach it, and the eager attention of `model` (for attention maps) is left as it is. Weights
    are shared: an optimiser step or a loaded state dict on `model` is seen by the view. Move
    `model` to its device first: `.to()` replaces buffers, so a view made before keeps the old
    ones (NeuralClassifier moves the model, then makes its view).
    """
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
    view = copy.deepcopy(model, shared).eval()
    for module in view.modules():
        if getattr(module, "_supports_sdpa", False) and hasattr(module, "config"):
            module.config._attn_implementation = FUSED_ATTENTION
    return view


def encode_batch(
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int,
    device: torch.device,
    truncation: str = HEAD,
) -> BatchEncoding:
    """Tokenise a batch with dynamic padding: a BatchEncoding of input_ids and attention_mask
    (batch, seq) on `device`, ready for `model(**batch)`. Long texts keep their head, or their
    head and tail (core.models.transformer.truncation).

    Each text is first cut to `token_char_cap(max_length)` characters (at each end): the
    tokenizer would drop the rest anyway, after spending time and memory on all of it.
    """
    if reads_head_and_tail(tokenizer, truncation):
        return _padded(head_tail_pieces(tokenizer, texts, max_length), tokenizer, device)
    batch = tokenizer(
        [cut_for_tokens(text, max_length) for text in texts],
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )
    # Only these two: token_type_ids are all zeros for one-segment texts, and the tiny
    # transformer takes no such argument.
    wanted = {key: batch[key] for key in ("input_ids", "attention_mask")}
    return BatchEncoding(wanted).to(device)


def _padded(read: Sequence[Pieces], tokenizer: Any, device: torch.device) -> BatchEncoding:
    """Pieces padded to the longest: input_ids and attention_mask (batch, seq)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids, mask = padded([p.ids for p in read], pad)  # the serving graph pads the same way
    tensors = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
    return BatchEncoding(tensors).to(device)


class NeuralClassifier:
    """Batch classifier over a fine-tuned (model, tokenizer) pair; meets the `predict_proba`
    protocol of the bag of words (the transformer, the tiny transformer or the LSTM).

    Texts longer than `max_length` word pieces are truncated as the model was fine-tuned:
    `truncation` "head" keeps their start, "head_tail" their start and end.

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
    device : {"auto", "cpu", "cuda"} or torch.device
        Where the model runs; it is moved there.
    precision : {"auto", "fp32", "bf16"}
        bf16 autocast or full fp32; "auto" follows `Runtime.resolve` (GRIEVANCE_LENS_PRECISION,
        else bf16 on CUDA and on CPUs with hardware bf16).

    Device and precision are resolved once into `runtime` (core.models.device.Runtime), which
    every consumer of this model uses: prediction, training validation, explanation, probes.
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
        truncation: str = HEAD,
    ) -> None:
        check_int("max_length", max_length, minimum=2)
        if truncation not in TRUNCATIONS:
            raise UserError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        self.truncation = truncation
        self.runtime = Runtime.resolve(device, precision)  # decided once, for every consumer
        self.model = model.to(self.runtime.device).eval()
        self._predictor = inference_view(self.model)  # eval mode, fused attention; see above
        self.tokenizer = tokenizer
        self.classes_ = np.asarray(list(classes), dtype=str)
        self.max_length = max_length

    @property
    def device(self) -> torch.device:
        """Where the model runs (its runtime's device)."""
        return self.runtime.device

    @property
    def precision(self) -> str:
        """How precisely it runs, "fp32" or "bf16" (its runtime's precision)."""
        return self.runtime.precision

    @property
    def predictor(self) -> nn.Module:
        """The inference view `predict_proba` calls (eval mode, fused attention); probes that
        must give the model's own answer call it too, under `runtime.autocast()`."""
        return self._predictor

    def predict_proba(
        self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> np.ndarray:
        """Class probabilities, shape (n_texts, n_classes), rows in input order.

        Personal data is masked first (`fine_tune` trains on masked texts). Texts are sorted by
        length and batched so each batch pads to a similar length; the original order is
        restored at the end.
        """
        return self.predict_proba_and_features(texts, batch_size=batch_size)[0]

    def predict_proba_and_features(
        self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> tuple[np.ndarray, np.ndarray]:
        """`predict_proba`, and from the same forward passes each text's embedding: what the
        model's classification layer reads, (n_texts, hidden) float32 (the unknown-desk score's
        input, core.models.flagging)."""
        texts = texts_as_read(texts, self.max_length, self.truncation)
        check_int("batch_size", batch_size, minimum=1)
        order = np.argsort([len(t) for t in texts], kind="stable")
        pred_probs = np.empty((len(texts), len(self.classes_)), dtype=np.float64)
        head: nn.Linear = self._predictor.classifier
        features = np.empty((len(texts), head.in_features), dtype=np.float32)
        seen: list[torch.Tensor] = []
        # The view is shared by every session's thread: keep only this thread's own passes.
        owner = threading.get_ident()

        def keep(_module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            if threading.get_ident() == owner:
                seen.append(args[0])

        hook = head.register_forward_pre_hook(keep)
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), batch_size):
                    rows = order[start : start + batch_size]
                    pred_probs[rows] = self._batch_proba([texts[i] for i in rows])
                    features[rows] = seen.pop().float().cpu().numpy()
        finally:
            hook.remove()
        return pred_probs, features

    def _batch_proba(self, texts: list[str]) -> np.ndarray:
        batch = encode_batch(self.tokenizer, texts, self.max_length, self.device, self.truncation)
        with self.runtime.autocast():
            logits = self._predictor(**batch).logits
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
