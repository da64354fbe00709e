"""The Explain page benchmark's own logic (no browser): the complaints it types and its summary."""

from __future__ import annotations

import pytest

from bench.bench_explain_page import STEPPED, one_sentence_complaints, summary


def test_complaints_are_distinct_single_sentences_without_greetings():
    texts = one_sentence_complaints(5, seed=0)
    assert len(texts) == 6 and len(set(texts)) == 6  # five timed and one warm-up, each new
    for text in texts:
        assert 6 <= len(text.split()) <= 25 and text.endswith(".")
        assert text.split()[0].rstrip(",") not in {"Dear", "Hello", "Hi"}
    assert one_sentence_complaints(5, seed=0) == texts  # seeded


def test_summary_reads_median_p90_and_max():
    figures = summary([float(x) for x in range(1, 11)])
    assert figures == {"median": 5.5, "p90": 9.0, "max": 10.0}
    assert summary([2.0]) == {"median": 2.0, "p90": 2.0, "max": 2.0}


@pytest.mark.parametrize(
    ("log", "stepped"),
    [
        ("train:   0%|          | 1/3750 [00:12<12:47:12, 12.28s/step]", True),
        ("train: 0step [00:00, ?step/s]\nLoading weights: 100%|██| 103/103 [00:00<00:00]", False),
    ],
)
def test_the_training_beside_counts_once_it_steps(log, stepped):
    assert bool(STEPPED.search(log)) is stepped
