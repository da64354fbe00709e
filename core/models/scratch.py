"""What the from-scratch models (the tiny transformer, the LSTM) share: a frozen config saved as
config.json with Hugging Face's label maps and checked limits, the output of the forward pass, and
a folder of config.json + model.safetensors checked against the weight file's header first."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from core.errors import UserError
from core.models.weights import read_safetensors_shapes
from core.paths import read_json, write_json

CONFIG_NAME, WEIGHTS_NAME = "config.json", "model.safetensors"


def size_limits(**own: int) -> dict[str, int]:
    """Upper bounds of a config's sizes: the vocabulary, width and label count every from-scratch
    model shares, around a model's `own` (checked in this order, so the first refusal is stable).

    Far above anything these models are trained with (vocab <= 20,000 words), so that a crafted
    config.json is refused before it allocates: the embedding table is vocab_size x d_model."""
    return {"vocab_size": 1_000_000, "d_model": 2048, **own, "num_labels": 10_000}


def read_saved_json(directory: str | Path, name: str) -> Any:
    """A JSON file of a folder written by `save_pretrained` (a model's or a tokenizer's)."""
    path = Path(directory) / name
    return read_json(path, missing=f"{path} is missing; save the model with save_pretrained first")


def label_maps(
    id2label: dict, label2id: dict, num_labels: int
) -> tuple[dict[int, str], dict[str, int]]:
    """Label maps with int ids and str labels; defaults LABEL_0.. and the inverse map."""
    id2label = {int(i): str(label) for i, label in id2label.items()} or {
        i: f"LABEL_{i}" for i in range(num_labels)
    }
    inverse = {label: i for i, label in id2label.items()}
    label2id = {str(k): int(v) for k, v in label2id.items()} or inverse
    if sorted(id2label) != list(range(num_labels)) or label2id != inverse:
        raise UserError(
            f"id2label must map 0..{num_labels - 1} to distinct labels and label2id must be its "
            "inverse; pass label maps with num_labels entries"
        )
    return id2label, label2id


class ScratchConfig:
    """Mixin of a frozen config dataclass with `num_labels`, `id2label` and `label2id` fields.

    A subclass sets `model_type` and `class_name`, defines `check_fields()` (its own checks,
    run before the label maps are normalised), and sets `__hash__ = ScratchConfig.config_hash`
    (the dataclass decorator would otherwise hash the label dicts and fail)."""

    model_type: ClassVar[str]
    class_name: ClassVar[str]

    def __post_init__(self) -> None:
        self.check_fields()
        self.normalise_labels()

    def check_fields(self) -> None:
        """Refuse field values the model cannot be built from (a subclass's own checks)."""
        raise NotImplementedError

    def normalise_labels(self) -> None:
        """Label maps with int ids (JSON gives strings), checked against num_labels."""
        id2label, label2id = label_maps(self.id2label, self.label2id, self.num_labels)
        object.__setattr__(self, "id2label", id2label)
        object.__setattr__(self, "label2id", label2id)

    def check_size_limits(self, limits: dict[str, int]) -> None:
        """Each field named in `limits` is a whole number from 1 to its limit: a crafted
        config.json is refused before it allocates anything."""
        for name, limit in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise UserError(f"{name} must be an integer in 1..{limit}; got {value!r}")

    def check_pooling(self, poolings: tuple[str, ...]) -> None:
        """`pooling` is one of the model's `poolings`."""
        if self.pooling not in poolings:
            choices = " or ".join(repr(p) for p in poolings)
            raise UserError(f"pooling must be {choices}; got {self.pooling!r}")

    def check_dropout(self) -> None:
        """`dropout` is a probability below 1 (nn.Dropout(1.0) would zero every activation)."""
        # A number first: a crafted "0.1" would otherwise fail the range check with a TypeError.
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise UserError(f"dropout must be a number in [0, 1); got {self.dropout!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"dropout must be in [0, 1); got {self.dropout}")

    def config_hash(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def to_dict(self) -> dict:
        """JSON-ready dictionary (label ids become strings, as in Hugging Face configs)."""
        data = asdict(self)
        data["id2label"] = {str(i): label for i, label in self.id2label.items()}
        return {"model_type": self.model_type, "architectures": [self.class_name], **data}

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Inverse of `to_dict`; extra keys (model_type, architectures) are ignored."""
        if not isinstance(data, dict) or data.get("model_type") != cls.model_type:
            found = data.get("model_type") if isinstance(data, dict) else None
            raise UserError(f"config is not a {cls.model_type} config (model_type {found!r})")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def label_fields(labels: Iterable[str]) -> dict[str, Any]:
    """`num_labels` and `id2label` of a new config for `labels`: sorted before ids are assigned,
    so the same label set always gets the same ids."""
    names = sorted(set(labels))
    return {"num_labels": len(names), "id2label": dict(enumerate(names))}


def is_model_dir(directory: str | Path, model_type: str) -> bool:
    """Whether `directory` holds config.json with `model_type` (an unreadable one: False)."""
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("model_type") == model_type


@dataclass(frozen=True)
class ScratchClassifierOutput:
    """What a from-scratch model's forward pass returns (Hugging Face's field names).

    logits (batch, num_labels); loss: mean cross-entropy when labels were given; attentions: one
    (batch, heads, seq, seq) tensor per layer when asked (always None for the LSTM, which has
    none); token_outputs (batch, seq, width): the last layer's output per position (the LSTM's is
    zeros on padding); pooled (batch, width): what the head reads.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    token_outputs: torch.Tensor | None = None
    pooled: torch.Tensor | None = None


def mean_pool(outputs: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(b, n, d) outputs and (b, n) mask → (b, d): the mean over real tokens (an empty row: 0)."""
    mask = attention_mask.unsqueeze(-1).to(outputs.dtype)  # (b, n, 1)
    return (outputs * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class ScratchModel(nn.Module):
    """Base of a from-scratch classifier: `config` (a ScratchConfig), an `embeddings` table and
    the folder format. A subclass sets `config_class`."""

    config_class: ClassVar[type[ScratchConfig]]

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return self.embeddings.weight.device

    def save_pretrained(self, directory: str | Path) -> None:
        """Write config.json and model.safetensors into `directory` (created if needed)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / CONFIG_NAME, self.config.to_dict())
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        save_file(tensors, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})

    @classmethod
    def from_pretrained(cls, directory: str | Path, *, device: str | torch.device = "cpu") -> Self:
        """Load a model written by `save_pretrained`, in eval mode, on `device`; the config is
        checked against the weight file's header before anything is allocated."""
        config = cls.config_class.from_dict(read_saved_json(directory, CONFIG_NAME))
        weights_path = Path(directory) / WEIGHTS_NAME
        if not weights_path.is_file():
            raise UserError(f"{weights_path} is missing; save the model with save_pretrained first")
        check_weights_fit(cls, config, weights_path)
        model = cls(config)
        try:
            model.load_state_dict(load_file(str(weights_path), device="cpu"))
        except RuntimeError as error:
            raise UserError(f"{weights_path} does not fit {config}: {error}") from error
        return model.to(device).eval()


def check_weights_fit(cls: type[nn.Module], config: Any, weights_path: Path) -> None:
    """Refuse a config whose tensor shapes differ from the weight file's, before allocating.

    The model is built on the meta device (no memory) and its shapes compared with the
    safetensors header, which lists each tensor's shape without reading it.
    """
    held = read_safetensors_shapes(weights_path)
    with torch.device("meta"):
        wanted = {k: tuple(v.shape) for k, v in cls(config).state_dict().items()}
    if held != wanted:
        diff = sorted(set(held.items()) ^ set(wanted.items()))[0][0]
        raise UserError(
            f"{weights_path.name} does not fit config.json (first difference: tensor {diff!r}); "
            "save the model again"
        )
