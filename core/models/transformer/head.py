"""The mean-pooled classification head: any encoder's token states averaged over the attention
mask, then dropout and one linear layer; saved and loaded like any Hugging Face model."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.configuration_utils import SubConfigSpec
from transformers.modeling_outputs import SequenceClassifierOutput

from core.models.scratch import mean_pool  # the same masked mean the from-scratch models pool with


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
    `core.models.transformer.head` is imported (without the import, transformers refuses the unknown
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
        pooled = mean_pool(out.last_hidden_state, attention_mask)
        logits = self.classifier(self.dropout(pooled))  # (batch, num_labels)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, attentions=out.attentions)


# Registered so that AutoModelForSequenceClassification.from_pretrained loads a saved folder.
AutoConfig.register(MeanPoolConfig.model_type, MeanPoolConfig, exist_ok=True)
AutoModelForSequenceClassification.register(
    MeanPoolConfig, MeanPoolForSequenceClassification, exist_ok=True
)
