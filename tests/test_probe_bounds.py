"""Bounded probes (#24): one cap for every complaint given one at a time, perturbations built
lazily and capped (work linear in the text), probes read only what the transformer reads, and
the data set scan cuts each row first and checks cancel between rows."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

import core.analysis.perturbations as perturbations
from core.analysis.perturbations import (
    MAX_PER_KIND,
    NEGATION_MOVE,
    TRIES_PER_KEPT,
    ProbeConfig,
    perturb,
)
from core.analysis.probe_compare import probed_part, run_probes
from core.analysis.probe_scan import ScanConfig, scan_dataset
from core.checks import MAX_COMPLAINT_CHARS, check_complaint
from core.errors import UserError
from core.progress import Cancelled
from core.text import token_char_cap
from tests.conftest import make_dataset

CLASSES = ["Card Fraud", "UPI Dispute"]
# 800 clauses, each negated and each with an auxiliary: 640,000 negation moves in all
MANY_CLAUSES = ("it was not paid, it was, " * 800)[:MAX_COMPLAINT_CHARS]


class ShortReader:
    """A model that reads 16 word pieces (512 characters of a text) and counts the texts it saw."""

    classes_ = np.array(CLASSES)
    max_length = 16
    truncation = "head"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def predict_proba(self, texts):
        self.seen += list(texts)
        return np.tile([0.6, 0.4], (len(texts), 1))


def test_one_cap_for_every_complaint_given_one_at_a_time():
    check_complaint("x" * MAX_COMPLAINT_CHARS, purpose="perturb")
    megabyte = "card not upi, " * 75_000
    with pytest.raises(UserError, match="at most 20,000"):
        perturb(megabyte)
    with pytest.raises(UserError, match="at most 20,000"):
        run_probes(ShortReader(), ShortReader(), megabyte)


def test_probe_config_bounds_the_variants_asked_for():
    with pytest.raises(UserError, match="n_shuffles may be at most"):
        ProbeConfig(n_shuffles=10**6)
    with pytest.raises(UserError, match="max_per_kind may be at most"):
        ProbeConfig(max_per_kind=MAX_PER_KIND + 1)


def test_negation_moves_are_built_only_as_far_as_they_are_kept(monkeypatch):
    built = []
    original = perturbations._insert_negator

    def counted(*args):
        built.append(1)
        return original(*args)

    monkeypatch.setattr(perturbations, "_insert_negator", counted)
    kept = [p for p in perturb(MANY_CLAUSES) if p.kind == NEGATION_MOVE]
    assert len(kept) == 3  # max_per_kind
    assert len(built) <= TRIES_PER_KEPT * 3  # not the 640,000 moves the text offers


def test_the_largest_complaint_perturbs_in_bounded_memory():
    config = ProbeConfig(n_shuffles=10, max_per_kind=10)
    tracemalloc.start()
    try:
        kept = perturb(MANY_CLAUSES, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(kept) <= 4 * config.max_per_kind + 3
    # each variant is one copy of the text: tens of copies, never one per clause pair
    assert peak < 200 * len(MANY_CLAUSES)


def test_probes_perturb_only_what_the_transformer_reads():
    model = ShortReader()
    long_text = "I paid by card, not by UPI. " * 500
    result = run_probes(model, ShortReader(), long_text)
    cap = token_char_cap(ShortReader.max_length)
    assert result.text == long_text[:cap]
    assert all(len(text) <= cap + 16 for text in model.seen)  # "Please, " may add a few
    assert probed_part(object(), "x" * (MAX_COMPLAINT_CHARS + 5)) == "x" * MAX_COMPLAINT_CHARS


def test_scan_cuts_each_row_before_perturbing_and_checks_cancel_between_rows(monkeypatch):
    lengths: list[int] = []
    cancel = threading.Event()
    original = perturbations.perturb

    def watched(text, config):
        lengths.append(len(text))
        if len(lengths) == 2:
            cancel.set()  # as if the user cancelled while the second row was perturbed
        return original(text, config)

    monkeypatch.setattr("core.analysis.probe_scan.perturb", watched)
    texts = ["paid by card, not by upi. " * 4000] * 4 + ["upi refund pending"] * 4
    data = make_dataset(texts, ["Card Fraud"] * 4 + ["UPI Dispute"] * 4)
    config = ScanConfig(perturb_rows=8)
    result = scan_dataset(ShortReader(), ShortReader(), data, config, cancel=cancel)
    assert result.cancelled and len(lengths) == 2  # stopped before the third row
    assert max(lengths) <= token_char_cap(ShortReader.max_length)


def test_a_probe_stops_between_batches_when_cancelled():
    cancel = threading.Event()
    cancel.set()
    model = ShortReader()
    with pytest.raises(Cancelled):
        run_probes(model, ShortReader(), "I paid by card, not by UPI.", cancel=cancel)
    assert model.seen == []
