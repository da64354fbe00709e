"""Caches of uploads are keyed on the SHA-256 of the uploaded bytes: two 60,000-row files that
differ only in 5,000 labels, all outside the 10,000-row sample Streamlit hashes of a large frame,
get different cached results."""

from __future__ import annotations

import pandas as pd
import pytest
import streamlit as st

from ui.datasets import validated
from ui.uploads import content_digest

ROWS, CHANGED = 60_000, 5_000


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two tables equal except for 5,000 labels, on rows Streamlit's hash sample leaves out."""
    texts = [f"complaint number {i} about my account" for i in range(ROWS)]
    first = pd.DataFrame({"text": texts, "label": ["Card Fraud", "UPI Dispute"] * (ROWS // 2)})
    sampled = set(first.sample(n=10_000, random_state=0).index)  # Streamlit's sample, seed 0
    unseen = [i for i in range(ROWS) if i not in sampled][:CHANGED]
    second = first.copy()
    second.loc[unseen, "label"] = "Loan Query"
    return first, second


@pytest.fixture(autouse=True)
def empty_cache():
    st.cache_data.clear()


def test_the_cache_key_of_an_upload_is_the_sha256_of_all_its_bytes():
    first, second = _frames()
    one, other = (f.to_csv(index=False).encode("utf-8") for f in (first, second))
    assert content_digest(one) == content_digest(bytes(one)) != content_digest(other)
    assert len(content_digest(one)) == 64


def test_uploads_differing_in_5000_labels_get_different_validations():
    first, second = _frames()
    keys = [content_digest(f.to_csv(index=False).encode("utf-8")) for f in (first, second)]
    _, report_one = validated(first, keys[0], "text", "label")
    _, report_two = validated(second, keys[1], "text", "label")
    assert "Loan Query" not in report_one.labels
    assert report_two.labels["Loan Query"] == CHANGED
    _, again = validated(second.copy(), keys[1], "text", "label")  # same bytes: from the cache
    assert again.labels == report_two.labels
