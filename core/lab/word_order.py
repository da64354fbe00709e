"""The word-order demonstration: one random tiny transformer with and without positional encoding
on texts that are the same bag of words, showing that only positions tell them apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from core.checks import check_complaint
from core.errors import UserError
from core.models.tiny.model import TinyTransformerForSequenceClassification, create_tiny_classifier
from core.text import bag_key


@dataclass(frozen=True)
class WordOrderDemo:
    """One untrained tiny model's view of some texts, with positional encoding on and off.

    pooled_on / pooled_off (n_texts, d_model) and probs_on / probs_off (n_texts, num_labels) come
    from the same weights; only the positional switch differs. spread_on / spread_off: the largest
    absolute difference of a pooled coordinate between any two texts (0 means identical).
    """

    texts: tuple[str, ...]
    pooled_on: np.ndarray
    pooled_off: np.ndarray
    probs_on: np.ndarray
    probs_off: np.ndarray
    spread_on: float
    spread_off: float

    @property
    def same_bag_of_words(self) -> bool:
        """Whether all texts have the same bag of words (only then can "off" coincide)."""
        return len({bag_key(text) for text in self.texts}) == 1

    @property
    def identical_off(self) -> bool:
        """Pooled vectors without positional encoding agree to float tolerance."""
        return self.spread_off < IDENTICAL_TOLERANCE

    @property
    def identical_on(self) -> bool:
        """Pooled vectors with positional encoding agree to float tolerance."""
        return self.spread_on < IDENTICAL_TOLERANCE

    @property
    def prob_spread_on(self) -> float:
        """Largest absolute difference of a class probability between two texts, encoding on."""
        return _spread(self.probs_on)

    @property
    def prob_spread_off(self) -> float:
        """Largest absolute difference of a class probability between two texts, encoding off."""
        return _spread(self.probs_off)


# float32 sums of the same vectors in another order differ by ~1e-7; real differences from
# positional encoding are orders of magnitude larger (~1e-2 for the untrained demo model).
IDENTICAL_TOLERANCE = 1e-5


def _spread(x: np.ndarray) -> float:
    """Largest absolute difference of one coordinate between any two rows of x (rows, dims)."""
    return float(np.abs(x[:, None, :] - x[None, :, :]).max())


def _pooled_and_probs(model, tokenizer, texts) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        out = model(**tokenizer(list(texts)))
    return out.pooled.double().numpy(), out.logits.double().softmax(dim=-1).numpy()


def word_order_demo(texts: Sequence[str], *, seed: int = 0) -> WordOrderDemo:
    """Feed reorderings of one sentence (e.g. "India defeated Australia" both ways) to a seeded
    untrained tiny model with and without positional encoding; no training needed to see that
    without it the outputs coincide whenever the bags of words do."""
    if len(texts) < 2:
        raise UserError("give at least two texts to compare")
    for text in texts:  # the one cap on a complaint given one at a time
        check_complaint(text, purpose="compare")
    model, tokenizer = create_tiny_classifier(texts, ["A", "B"], dropout=0.0, seed=seed)
    off = TinyTransformerForSequenceClassification(replace(model.config, positional_encoding=False))
    off.load_state_dict(model.state_dict())
    pooled_on, probs_on = _pooled_and_probs(model.eval(), tokenizer, texts)
    pooled_off, probs_off = _pooled_and_probs(off.eval(), tokenizer, texts)
    return WordOrderDemo(
        tuple(texts),
        pooled_on,
        pooled_off,
        probs_on,
        probs_off,
        _spread(pooled_on),
        _spread(pooled_off),
    )
