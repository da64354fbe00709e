"""The torch side of a saved model folder: its neural members loaded into torch (the fine-tuned
transformer, the frozen encoder's head beside it, the tiny transformer, the LSTM), each file
checked against the card first, and the frozen member's weights written. core.models.registry
loads and saves whole models with these; torch itself is imported only when a member loads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import UserError
from core.models.card import CARD_NAME, FILES_KEY, card_digest, file_digest, model_folder
from core.models.serving import ServingClassifier
from core.models.transformer.truncation import HEAD, TRUNCATIONS

if TYPE_CHECKING:
    import torch

    from core.models.transformer.inference import NeuralClassifier

ARCH_TRANSFORMERS = "transformers"  # loads with AutoModelForSequenceClassification
ARCH_TINY = "tiny"  # core.models.tiny
ARCH_LSTM = "lstm"  # core.models.lstm


class TorchModel:
    """A saved model's torch classifier, loaded at first use (explanations, probes) unless torch
    routes it already; thread-safe, one load for every session."""

    def __init__(
        self, load: Callable[[], NeuralClassifier], loaded: NeuralClassifier | None = None
    ) -> None:
        self._load, self._loaded = load, loaded
        self._lock = threading.Lock()

    @property
    def loaded(self) -> NeuralClassifier | None:
        """The classifier if it is loaded, else None (asking loads nothing)."""
        return self._loaded

    def get(self) -> NeuralClassifier:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded


@dataclass(frozen=True)
class FrozenMember:
    """The frozen-encoder head of a blended model: what routes it (its serving graph, or torch)
    and its torch classifier, loaded at first use (Explain's attributions)."""

    scorer: ServingClassifier | NeuralClassifier
    torch_model: TorchModel

    @property
    def neural(self) -> NeuralClassifier:
        return self.torch_model.get()


def card_truncation(card: dict[str, Any]) -> str:
    """How the saved model reads long texts (cards from before head_tail: "head")."""
    saved = (card.get("train_config") or {}).get("truncation")
    return saved if saved in TRUNCATIONS else HEAD


def verify_files(folder: Path, card: dict[str, Any]) -> None:
    """Check every file against the SHA-256 that save_model wrote into the card, so the card's
    digest identifies the weights too. Cards saved before digests existed carry none."""
    expected = card.get(FILES_KEY)
    if expected is None:
        return
    if not isinstance(expected, dict):
        raise UserError(f"model {folder.name!r}: {CARD_NAME} is damaged; save the model again")
    for name, digest in sorted(expected.items()):
        path = model_folder(folder, name)  # a card names files of this folder only
        if not path.is_file() or file_digest(path) != digest:
            raise UserError(
                f"model {folder.name!r}: {name} differs from the file it was saved with; "
                "save the model again"
            )


def load_neural(folder: Path, architecture: Any) -> tuple[torch.nn.Module, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from core.models.lstm.model import LstmForSequenceClassification
    from core.models.tiny.model import TinyTransformerForSequenceClassification
    from core.models.tiny.tokenizer import TinyTokenizer
    from core.models.transformer import head as _registers_mean_pool  # noqa: F401 (Auto classes)
    from core.models.weights import check_config_fits_weights

    if architecture == ARCH_TINY:
        model = TinyTransformerForSequenceClassification.from_pretrained(folder)
        return model, TinyTokenizer.from_pretrained(folder)
    if architecture == ARCH_LSTM:
        model = LstmForSequenceClassification.from_pretrained(folder)
        return model, TinyTokenizer.from_pretrained(folder)
    if architecture != ARCH_TRANSFORMERS:
        raise UserError(f"{folder.name}: unknown architecture {architecture!r} in {CARD_NAME}")
    check_config_fits_weights(folder)
    model = AutoModelForSequenceClassification.from_pretrained(
        folder, use_safetensors=True, local_files_only=True, attn_implementation="eager",
        trust_remote_code=False,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(
        folder, local_files_only=True, trust_remote_code=False
    )
    return model.eval(), tokenizer


def torch_classifier(
    folder: Path,
    card: dict[str, Any],
    digest: str,
    device: str,
    precision: str,
    *,
    verify: bool,
    weights: str | None = None,
) -> NeuralClassifier:
    """The torch classifier of the model at `folder` whose card digest is `digest`. `verify`: the
    files are checked again (a later load, after the folder may have changed). `weights`: a
    member's own weights file (the frozen encoder's) in place of the model's."""
    from core.models.device import Runtime
    from core.models.transformer.inference import NeuralClassifier

    # "int8" names a serving graph; torch itself follows the runtime rule.
    runtime = Runtime.resolve(device, "auto" if precision == "int8" else precision)
    if verify:
        if card_digest(folder) != digest:
            raise UserError(f"model {folder.name!r} changed on disk; load it again")
        verify_files(folder, card)
    model, tokenizer = load_neural(folder, card.get("architecture"))
    if weights is not None:
        load_member_weights(model, folder / weights)
    if card.get("architecture") == ARCH_LSTM:  # its forward always runs fp32 (core.models.lstm)
        runtime = Runtime(runtime.device, "fp32")
    return NeuralClassifier(
        model, tokenizer, [str(label) for label in card["labels"]],
        max_length=int(card["max_length"]), device=runtime.device, precision=runtime.precision,
        truncation=card_truncation(card),
    )  # fmt: skip


def load_member_weights(model: torch.nn.Module, path: Path) -> None:
    from safetensors.torch import load_file

    try:
        model.load_state_dict(load_file(str(path)), strict=True)
    except (RuntimeError, OSError) as err:  # other shapes or names, or a damaged file
        fits = f"{path.parent.name}: {path.name} does not fit the model; save it again"
        raise UserError(fits) from err


def save_frozen_weights(frozen: NeuralClassifier, path: Path) -> None:
    """The frozen-encoder head's weights, as safetensors: the same architecture, config and
    tokenizer as the fine-tuned model beside it (the quick recipe's model of the same backbone)."""
    from safetensors.torch import save_file

    state = {name: tensor.detach().to("cpu").contiguous()
             for name, tensor in frozen.model.state_dict().items()}  # fmt: skip
    save_file(state, str(path))
