"""Caches bounded by bytes (core.memo, ui.caches): what a value costs, eviction by bytes, and the
caches of what visitors type staying within their budgets however long the texts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from core.errors import UserError
from core.memo import MB, ByteBoundedCache, approx_bytes


@dataclass(frozen=True)
class Holder:
    text: str
    weights: np.ndarray
    parts: tuple


def test_approx_bytes_counts_arrays_strings_and_what_dataclasses_refer_to():
    weights = np.zeros((6, 12, 128, 128), dtype=np.float32)
    holder = Holder("x" * 10_000, weights, (weights, "y" * 5_000))
    size = approx_bytes(holder)
    assert weights.nbytes + 15_000 < size < weights.nbytes + 16_000  # the array counted once
    assert approx_bytes(weights[0]) > weights.nbytes  # a view keeps its whole base alive


def test_cache_evicts_the_least_recently_used_by_bytes():
    cache = ByteBoundedCache(10_000)
    for key in "abcd":
        cache.put(key, "x" * 3_000)
    assert cache.get("a") is None and cache.get("d") is not None
    cache.get("b")  # b is now the most recently used
    cache.put("e", "x" * 3_000)
    assert cache.get("b") is not None and cache.get("c") is None
    assert cache.used_bytes <= cache.budget_bytes


def test_a_value_larger_than_the_budget_is_returned_but_not_kept():
    cache = ByteBoundedCache(1_000)
    big = "x" * 5_000
    assert cache.get_or_compute("big", lambda: big) is big
    assert cache.get("big") is None and len(cache) == 0 and cache.used_bytes == 0
    with pytest.raises(UserError, match="budget"):
        ByteBoundedCache(0)


def test_the_masked_text_cache_stays_within_its_budget_for_any_number_of_long_texts(monkeypatch):
    import ui.widgets
    from ui.caches import MASKED_TEXTS

    assert ui.widgets._masked("card 4111 1111 1111 1111") == "card [CARD_NO]"
    monkeypatch.setattr(ui.widgets, "mask_personal_data", str.upper)  # the cache is under test
    for i in range(80):  # 80 texts of 1 MB each: 80 MB of input, more than the 64 MB budget
        ui.widgets._masked(f"{i} " + "z" * MB)
    assert MASKED_TEXTS.used_bytes <= MASKED_TEXTS.budget_bytes


def test_explanations_keep_attention_weights_as_float32(tiny_model_dir):
    from core.analysis.explain import explain_text
    from core.models.registry import load_model

    loaded = load_model(tiny_model_dir)
    expl = explain_text(loaded.neural, loaded.bow, "my card was charged twice")
    assert expl.attention.weights.dtype == np.float32
    assert approx_bytes(expl) < 2 * expl.attention.weights.nbytes + 100_000
