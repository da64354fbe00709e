"""How much a pretrained encoder's prediction owes to word order, probed through position ids.

The same wordpieces are classified three ways: normally; with the position ids of the words
shuffled (a seeded permutation); and with every position id set to 0, which makes a BERT-style
model (absolute position embeddings) blind to order, like a bag of wordpieces.

Decision: the shuffle permutes only the positions of real wordpieces. Special tokens ([CLS],
[SEP]) keep theirs, so the model still reads its summary from a [CLS] at position 0 and the probe
measures word order alone, not the shock of a displaced [CLS].

Decision: a loaded classifier is ablated as it predicts (`order_ablation_of`): the same inference
view, device and precision (core.models.device.Runtime), so the normal variant is exactly the
answer Classify gives and the other two differ from it by the positions alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.data.privacy import mask_personal_data
from core.errors import UserError
from core.models.classifier import Prediction
from core.models.device import Runtime
from core.models.transformer.inference import NeuralClassifier
from core.models.transformer.truncation import (
    HEAD,
    cut_text,
    head_tail_pieces,
    reads_head_and_tail,
)
from core.text import cut_for_tokens

VARIANTS = ("normal", "shuffled positions", "one position")


@dataclass(frozen=True)
class PositionVariant:
    """One way of numbering the positions and the model's prediction under it."""

    variant: str
    position_ids: tuple[int, ...]
    prediction: Prediction


@dataclass(frozen=True)
class OrderAblation:
    """The normal prediction next to the shuffled-positions and one-position predictions."""

    text: str
    tokens: tuple[str, ...]
    normal: PositionVariant
    shuffled: PositionVariant
    single_position: PositionVariant

    @property
    def variants(self) -> tuple[PositionVariant, ...]:
        """The three predictions in display order."""
        return (self.normal, self.shuffled, self.single_position)


def shuffled_position_ids(special_tokens_mask: Sequence[int], *, seed: int = 0) -> np.ndarray:
    """Position ids 0..n-1 with the real tokens' ids permuted among themselves (seeded).

    special_tokens_mask (n,): 1 for [CLS]/[SEP]/padding, which keep their positions.
    """
    mask = np.asarray(special_tokens_mask)
    positions = np.arange(len(mask))
    real = positions[mask == 0]
    positions[real] = np.random.default_rng(seed).permutation(real)
    return positions


def single_position_ids(length: int, *, position: int = 0) -> np.ndarray:
    """Every token at the same position: (length,) filled with `position`."""
    return np.full(length, position, dtype=np.int64)


def _check_model(model: torch.nn.Module) -> None:
    if model.training:
        raise RuntimeError("call model.eval() first: dropout would make the comparison random")
    if "position_ids" not in inspect.signature(model.forward).parameters:
        raise UserError(
            f"{type(model).__name__}.forward takes no position_ids; order ablation needs a "
            "BERT-style model with absolute position embeddings"
        )


def _predict(model, encoding: dict, position_ids: np.ndarray, runtime: Runtime) -> np.ndarray:
    """Probabilities (num_labels,) for one encoded text with the given position ids, computed
    as NeuralClassifier.predict_proba computes them (softmax of fp32 logits)."""
    device = runtime.device
    inputs = {k: v.to(device) for k, v in encoding.items()}
    inputs["position_ids"] = torch.as_tensor(position_ids, device=device).unsqueeze(0)  # (1, n)
    with torch.inference_mode():
        with runtime.autocast():
            logits = model(**inputs).logits  # (1, num_labels)
        return torch.softmax(logits.float(), dim=-1)[0].cpu().numpy()


def _variant(
    model, encoding: dict, name: str, position_ids: np.ndarray, runtime: Runtime
) -> PositionVariant:
    probs = _predict(model, encoding, position_ids, runtime)
    classes = [model.config.id2label[i] for i in range(len(probs))]
    prediction = Prediction.of(classes, probs)
    return PositionVariant(name, tuple(int(p) for p in position_ids), prediction)


def order_ablation(
    model: torch.nn.Module,
    tokenizer,
    text: str,
    *,
    seed: int = 0,
    max_length: int = 256,
    truncation: str = HEAD,
    runtime: Runtime | None = None,
) -> OrderAblation:
    """Classify `text` normally, with shuffled word positions, and with all positions at 0.

    `model` is a Hugging Face sequence classifier in eval mode whose forward accepts position_ids;
    `tokenizer` is its fast tokenizer. The text is masked (core.data.privacy), as every trained
    model reads it, and cut to `max_length` wordpieces the way the model reads long texts
    (`truncation`, core.models.transformer.truncation): the normal variant is the model's own
    prediction. Every variant runs on `runtime` (its device, under its autocast); None: fp32 on
    the model's own device. `order_ablation_of` ablates a loaded classifier on its runtime.
    """
    _check_model(model)
    if runtime is None:
        runtime = Runtime(next(model.parameters()).device, "fp32")
    text = mask_personal_data(text)
    encoding, special = _encode(tokenizer, text, max_length, truncation)
    if all(special):
        raise UserError("the text has no words to reorder; enter a complaint text")
    input_ids = encoding["input_ids"][0].tolist()
    return OrderAblation(
        text,
        tuple(tokenizer.convert_ids_to_tokens(input_ids)),
        _variant(model, encoding, VARIANTS[0], np.arange(len(input_ids)), runtime),
        _variant(model, encoding, VARIANTS[1], shuffled_position_ids(special, seed=seed), runtime),
        _variant(model, encoding, VARIANTS[2], single_position_ids(len(input_ids)), runtime),
    )


def order_ablation_of(neural: NeuralClassifier, text: str, *, seed: int = 0) -> OrderAblation:
    """`order_ablation` of a loaded classifier as it predicts: its inference view, its runtime
    (device and precision), its cut of long texts, so the normal variant is exactly
    `transformer.predict_proba([text])`."""
    # Cut before masking, as predict_proba does: the two read the same characters.
    text = cut_text(text, neural.max_length, neural.truncation)
    return order_ablation(
        neural.predictor, neural.tokenizer, text, seed=seed,
        max_length=neural.max_length, truncation=neural.truncation,
        runtime=neural.runtime,
    )  # fmt: skip


def _encode(tokenizer, text: str, max_length: int, truncation: str) -> tuple[dict, list[bool]]:
    """The model's inputs for `text` (batch of one) and which wordpieces are special."""
    if reads_head_and_tail(tokenizer, truncation):
        (read,) = head_tail_pieces(tokenizer, [text], max_length)
        ids = torch.tensor([read.ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, list(read.special)
    encoding = dict(
        tokenizer(
            cut_for_tokens(text, max_length),
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
            return_special_tokens_mask=True,
        )
    )
    return encoding, encoding.pop("special_tokens_mask")[0].tolist()
