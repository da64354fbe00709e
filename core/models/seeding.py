"""Randomness of one training job, drawn from its own `torch.Generator`: the new head's initial
weights and every dropout mask, attention dropout included.

torch's dropout draws from the process-wide generator, so two trainings on a shared server (or a
training beside anything else that draws) would change each other's results, and seeding that
generator from a worker thread would change everyone's. Inside `seeded_dropout` each dropout of
the model draws from the job's generator instead, and the same seed gives the same weights
whatever else runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

# The attention implementation used while training: eager attention whose dropout draws from
# the module's SeededDropout. Registered once with transformers under this name.
SEEDED_ATTENTION = "grievance_lens_seeded_eager"


def job_generator(seed: int, device: torch.device) -> torch.Generator:
    """A generator of its own for one job, on the device its tensors live on."""
    return torch.Generator(device=device).manual_seed(seed)


class SeededDropout(nn.Module):
    """nn.Dropout that draws its mask from `generator` rather than torch's global one."""

    def __init__(self, p: float, generator: torch.Generator) -> None:
        super().__init__()
        self.p, self.generator = p, generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty_like(x).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)


def seeded_eager_attention(
    module: nn.Module,
    query: torch.Tensor,  # (batch, heads, n, d_head)
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # additive, (batch, 1, n, n) or broadcastable
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention (softmax(q kᵀ · scaling + mask) v) whose dropout is the module's own
    SeededDropout; the same arithmetic as transformers' BERT eager attention."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling  # (batch, heads, n, n)
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, : key.shape[-2]]
    weights = nn.functional.softmax(weights, dim=-1)
    if dropout > 0.0:
        seeded = getattr(module, "dropout", None)
        if not isinstance(seeded, SeededDropout):
            raise TypeError(f"{type(module).__name__} has no seeded dropout; use seeded_dropout")
        weights = seeded(weights)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (batch, n, heads, d)
    return output, weights


def _register_seeded_attention() -> None:
    """Make SEEDED_ATTENTION known to transformers (idempotent; imported here so that the tiny
    transformer, which needs none of it, does not import transformers)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(SEEDED_ATTENTION, seeded_eager_attention)
    AttentionMaskInterface.register(SEEDED_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


@contextmanager
def seeded_dropout(model: nn.Module, generator: torch.Generator) -> Iterator[None]:
    """Within the block every nn.Dropout of `model` draws from `generator`; a Hugging Face model
    that attends eagerly also drops attention weights with it. Restored on exit."""
    swapped = _swap_dropouts(model, generator)
    config = getattr(model, "config", None)
    attention = getattr(config, "_attn_implementation", None)
    switch = attention == "eager" and hasattr(model, "set_attn_implementation")
    if attention not in (None, "eager", SEEDED_ATTENTION):
        raise RuntimeError(f"training needs eager attention, the model uses {attention!r}")
    if switch:
        _register_seeded_attention()
        model.set_attn_implementation(SEEDED_ATTENTION)
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation("eager")
        for parent, name, original in swapped:
            setattr(parent, name, original)


def _swap_dropouts(
    model: nn.Module, generator: torch.Generator
) -> list[tuple[nn.Module, str, nn.Dropout]]:
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                seeded = SeededDropout(child.p, generator)
                seeded.train(child.training)
                setattr(parent, name, seeded)
                swapped.append((parent, name, child))
    return swapped


def reset_linear(layer: nn.Linear, generator: torch.Generator, *, std: float | None = None) -> None:
    """Fresh weights for `layer` from `generator`: normal(0, std) when `std` is given (BERT's
    initializer_range), else torch's own default (Kaiming uniform); the bias as torch does."""
    with torch.no_grad():
        if std is not None:
            nn.init.normal_(layer.weight, 0.0, std, generator=generator)
            if layer.bias is not None:
                layer.bias.zero_()
            return
        nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
        if layer.bias is not None:
            bound = 1.0 / math.sqrt(layer.weight.shape[1]) if layer.weight.shape[1] else 0.0
            nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


def reset_parameters(model: nn.Module, generator: torch.Generator) -> None:
    """Re-initialise every Linear, Embedding and LayerNorm of a model built from scratch (the
    tiny transformer) from `generator`, as torch's defaults would."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                reset_linear(module, generator)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, generator=generator)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm) and module.elementwise_affine:
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
