"""`TrainConfig`: every setting of a transformer training run, checked on creation; the CLI and
the Train page build one, core receives it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.checks import check_fraction, check_int, check_non_empty_str
from core.errors import UserError

MINILM = "minilm"
TINY = "tiny"
LSTM = "lstm"  # core.models.lstm: a bidirectional LSTM from scratch
# Backbones built from scratch on the training texts' own word vocabulary (no pretrained encoder).
FROM_SCRATCH = (TINY, LSTM)
POOLINGS = ("mean", "cls")
LSTM_POOLINGS = ("mean", "last")  # the LSTM has no [CLS]; "last": its final states
FULL, QUICK, AUTO = "full", "quick", "auto"
RECIPES = (FULL, QUICK, AUTO)  # "auto": the data choose (core.models.transformer.recipe)
# A training's Progress phases: optimiser steps (full), then for the quick recipe texts embedded
# and the linear head fitted.
TRAIN_PHASE, EMBED_PHASE, HEAD_PHASE = "train", "embed", "head"


@dataclass(frozen=True)
class BackboneDefaults:
    """The settings a backbone trains well with when the caller does not choose them."""

    lr: float
    epochs: int
    patience: int = 2  # epochs without a better validation macro-F1 before stopping early


# MiniLM-L6 is small (22M parameters, 384 wide): BERT-base's usual 2e-5 under-trains it; 2e-4
# beat 1e-4 at equal budgets on the demo data and on the CFPB sample (BENCHMARKS.md). The tiny
# transformer learns from scratch and needs a larger step. Any other backbone (a saved model, a
# BERT-base-sized id) gets the usual fine-tuning rate of full-size BERTs. The tiny transformer
# learns word order only with long training (bench_tiny_order).
BACKBONE_DEFAULTS = {
    MINILM: BackboneDefaults(lr=2e-4, epochs=4),
    # No early stop: its validation twins can improve after a flat stretch (bench_tiny_order);
    # the best epoch is still the one kept.
    TINY: BackboneDefaults(lr=2e-3, epochs=20, patience=20),
    # Chosen on the VALIDATION rows of the demo data (3000 rows; core.lab.order_models split,
    # seed 0: 1800 train, 449 validation with 53 twin rows), by twin accuracy, then macro-F1,
    # 15 epochs each: pooling mean at lr 1e-3 / 3e-3 / 1e-2: twins 0.887 / 0.925 / 0.962, F1
    # 0.905 / 0.918 / 0.926; last (final states): twins 0.925 at all three, F1 0.899 / 0.925 /
    # 0.921. Mean at 1e-2 won; its validation F1 was flat after epoch 4 (best epoch 8), so a
    # patience of 5 stops it early with the same kept epoch.
    LSTM: BackboneDefaults(lr=1e-2, epochs=15, patience=5),
}
OTHER_BACKBONE_DEFAULTS = BackboneDefaults(lr=5e-5, epochs=4)


def backbone_defaults(backbone: str) -> BackboneDefaults:
    """The defaults of `backbone`: its own for "minilm", "tiny" and "lstm", BERT's usual
    otherwise."""
    return BACKBONE_DEFAULTS.get(backbone, OTHER_BACKBONE_DEFAULTS)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides how the transformer is fine-tuned.

    The defaults were chosen from measurements on the demo data and the CFPB sample (see
    BENCHMARKS.md, "Transformer engine"), for the bundled all-MiniLM-L6-v2 backbone.
    """

    # "minilm" (bundled), "tiny" (core.models.tiny, from scratch), a local folder, or the
    # id of a model already in the Hugging Face cache (never downloaded).
    backbone: str = MINILM
    # "mean": average of real-token states, the interface all-MiniLM-L6-v2 was trained with.
    # It learned faster than "cls" (BERT's pooler over [CLS]) on both data sets and was better
    # on the real CFPB sample (test accuracy 0.730 vs 0.697); on the demo data they tied
    # (0.783 vs 0.780; cls did better on the small twin slice). "cls" folders load with plain
    # transformers; "mean" folders need `import core.models.transformer.head` first.
    # The LSTM backbone takes "mean" (its outputs over real tokens) or "last" (its final states).
    pooling: Literal["mean", "cls", "last"] = "mean"
    # "full" fine-tunes every weight; "quick" keeps the pretrained encoder frozen, embeds the
    # data once and fits a linear head on the embeddings (core.models.transformer.quick);
    # "auto" lets the data choose between them (core.models.transformer.recipe), which is what
    # `train` and the Train page do unless told otherwise. A trained model's config holds the
    # recipe it got, never "auto".
    recipe: Literal["full", "quick", "auto"] = FULL
    # None: the backbone's own (BACKBONE_DEFAULTS), resolved on creation, so `config.epochs` and
    # `config.lr` always hold numbers. Early stopping (patience) ends runs that stop improving.
    # dataclasses.replace() keeps resolved numbers: build a new TrainConfig to change backbone.
    epochs: int | None = None
    lr: float | None = None
    # How a text longer than max_length is cut: "head" keeps its start; "head_tail" its first
    # 64 word pieces and its last ones (Hugging Face backbones only). The two tied on the
    # validation rows of the CFPB sample and the demo data (BENCHMARKS.md, "Engine v2").
    truncation: Literal["head", "head_tail"] = "head"
    batch_size: int = 16
    # 128 word pieces hold the whole of 96% of demo complaints (median 43, p95 122) and the head
    # of CFPB narratives (median 69; 24% longer), where the product is usually named early;
    # 256 would double the CPU cost.
    max_length: int = 128
    warmup_ratio: float = 0.1  # share of steps with a linearly rising lr: protects the encoder
    weight_decay: float = 0.01  # AdamW decay, never on biases and LayerNorm weights
    class_weights: bool = True  # inverse-frequency loss weights so small desks are not ignored
    # Share of each target's probability spread over the other desks in the loss (Szegedy et
    # al.'s label smoothing); 0 trains on the hard labels (BENCHMARKS.md, "Engine v2").
    label_smoothing: float = 0.0
    val_fraction: float = 0.2  # for callers that split one data set (CLI, Train page); <= 0.5
    patience: int | None = None  # epochs without a better validation macro-F1 before stopping
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_steps: int | None = None  # stop after this many optimiser steps (quick runs, tests)
    classifier_dropout: float = 0.1  # dropout before the linear head (BERT's own value)
    # Full recipe: the head starts "random" (BERT's init) or from a "probe": the quick recipe's
    # head fitted on the frozen encoder's embeddings first (linear probe, then fine-tune).
    head_init: Literal["random", "probe"] = "random"
    # Tiny backbone only: sinusoidal positions on (order visible) or off (attention is then
    # permutation-equivariant and, pooled, exactly as order-blind as a bag of words).
    positional_encoding: bool = True

    def __post_init__(self) -> None:
        check_non_empty_str("backbone", self.backbone)
        defaults = backbone_defaults(self.backbone)
        if self.epochs is None:
            object.__setattr__(self, "epochs", defaults.epochs)
        if self.lr is None:
            object.__setattr__(self, "lr", defaults.lr)
        if self.patience is None:
            object.__setattr__(self, "patience", defaults.patience)
        if self.truncation not in ("head", "head_tail"):
            raise UserError(f"truncation must be 'head' or 'head_tail', got {self.truncation!r}")
        if self.truncation == "head_tail" and self.backbone in FROM_SCRATCH:
            raise UserError(f"the {_SCRATCH_NAMES[self.backbone]} reads the head of a long text "
                             "only; use truncation 'head'")  # fmt: skip
        if self.recipe not in RECIPES:
            raise UserError(f"recipe must be one of {RECIPES}, got {self.recipe!r}")
        if self.recipe == QUICK and self.backbone in FROM_SCRATCH:
            raise UserError(
                f"the quick recipe needs a pretrained encoder; the {_SCRATCH_NAMES[self.backbone]}"
                " starts from random weights, so train it with the full recipe"
            )
        if self.head_init not in ("random", "probe"):
            raise UserError(f"head_init must be 'random' or 'probe', got {self.head_init!r}")
        if self.head_init == "probe" and (self.backbone in FROM_SCRATCH or self.pooling != "mean"):
            raise UserError("head_init 'probe' needs a pretrained encoder with mean pooling")
        if self.recipe == QUICK and self.pooling != "mean":
            raise UserError("the quick recipe fits its head on mean-pooled embeddings; use "
                             "pooling 'mean'")  # fmt: skip
        self._check_pooling()
        for name in ("epochs", "batch_size", "max_length"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("patience", self.patience, minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, minimum=1)
        check_fraction("lr", self.lr, low=0.0, high=1.0)
        check_fraction("warmup_ratio", self.warmup_ratio, low=-1e-12, high=1.0)
        check_fraction("weight_decay", self.weight_decay, low=-1e-12, high=1.0)
        check_fraction("label_smoothing", self.label_smoothing, low=-1e-12, high=0.5)
        check_fraction("val_fraction", self.val_fraction, low=0.0, high=0.5)
        check_fraction("classifier_dropout", self.classifier_dropout, low=-1e-12, high=0.9)
        if not isinstance(self.positional_encoding, bool):
            raise UserError(
                f"positional_encoding must be True or False, got {self.positional_encoding!r}"
            )
        if not isinstance(self.class_weights, bool):
            raise UserError(f"class_weights must be True or False, got {self.class_weights!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise UserError(f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")

    def _check_pooling(self) -> None:
        """Pooling "mean" or "cls" for transformers, "mean" or "last" for the LSTM (no [CLS])."""
        if self.backbone == LSTM and self.pooling not in LSTM_POOLINGS:
            raise UserError(f"the LSTM takes pooling 'mean' or 'last', got {self.pooling!r}")
        if self.backbone != LSTM and self.pooling not in POOLINGS:
            raise UserError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")


_SCRATCH_NAMES = {TINY: "tiny transformer", LSTM: "LSTM"}


def backbone_label(backbone: str) -> str:
    """How a backbone is shown to users: a folder given by its absolute path is shown by its
    name only, never with the server's path."""
    if backbone == LSTM:
        return "LSTM (from scratch)"
    path = Path(backbone)
    return path.name if path.is_absolute() else backbone


QUICK_BACKBONE_ENV = "GRIEVANCE_LENS_QUICK_BACKBONE"


def quick_backbone(environ: Mapping[str, str] | None = None) -> str:
    """The backbone of the first-use quick model ("Build a quick model" on a page that needs a
    model): the operator's $GRIEVANCE_LENS_QUICK_BACKBONE (a folder or the id of a cached model,
    trusted as a command-line backbone is), else the bundled MiniLM. `environ` defaults to
    `os.environ`; an unset or empty variable keeps MiniLM."""
    env = os.environ if environ is None else environ
    return env.get(QUICK_BACKBONE_ENV, "").strip() or MINILM
