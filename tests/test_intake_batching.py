"""The intake API's inference thread (core.intake.batching): requests waiting together are routed
in one pass and each gets exactly its own rows, the same decision as routing it alone; a failure
reaches every caller of that pass; closing finishes what waits."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import core.intake.batching as batching
from core.intake.batching import RoutingBatcher
from core.models.classify import classification_columns
from core.models.registry import load_model

REQUESTS = [
    ["upi payment failed money debited", "card stolen fraud"],
    ["loan emi wrong", "kyc update pending", "upi refund not received", "card blocked"],
    ["my account statement is wrong"],
]


@pytest.fixture(scope="module")
def loaded(tiny_model_dir: Path):
    return load_model(tiny_model_dir)


def test_waiting_requests_share_one_pass_and_each_gets_its_own_rows(loaded, monkeypatch):
    passes: list[int] = []
    release = threading.Event()
    real = classification_columns

    def counted(model, texts, **options):
        passes.append(len(texts))
        release.wait(5)  # the first pass holds the thread while the others queue behind it
        return real(model, texts, **options)

    monkeypatch.setattr("core.models.classify.classification_columns", counted)
    batcher = RoutingBatcher()
    answers: dict[int, object] = {}

    def ask(i: int) -> None:
        answers[i] = batcher.columns(loaded, REQUESTS[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    threads[0].start()
    while not passes:  # the first request is in its pass
        threading.Event().wait(0.01)
    threads[1].start()
    threads[2].start()
    while len(batcher._waiting) < 2:
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(10)
    batcher.close()
    assert passes == [2, 5]  # the two that waited went together
    for i, texts in enumerate(REQUESTS):
        alone = real(loaded, texts)
        got = answers[i]
        assert list(got["predicted_label"]) == list(alone["predicted_label"])
        assert list(got["review_reason"]) == list(alone["review_reason"])
        np.testing.assert_allclose(got["confidence"], alone["confidence"], atol=1e-5)


def test_a_failed_pass_reaches_every_caller_and_the_thread_goes_on(loaded, monkeypatch):
    batcher = RoutingBatcher()

    def broken(model, texts, **options):
        raise RuntimeError("the model broke")

    monkeypatch.setattr("core.models.classify.classification_columns", broken)
    with pytest.raises(RuntimeError, match="the model broke"):
        batcher.columns(loaded, REQUESTS[0])
    monkeypatch.undo()
    assert len(batcher.columns(loaded, REQUESTS[2])) == 1
    batcher.close()


def test_a_pass_holds_at_most_max_texts_unless_one_request_is_bigger(loaded):
    batcher = RoutingBatcher(max_texts=3)
    batcher.close()  # the thread is gone: take() is checked on its own
    batcher._waiting = [batching._Pending(loaded, t) for t in REQUESTS]
    assert [len(p.texts) for p in batcher._take()] == [2]  # 2 + 4 > 3
    assert [len(p.texts) for p in batcher._take()] == [4]  # alone, though over the cap
    with pytest.raises(RuntimeError, match="stopped"):
        batcher.columns(loaded, ["upi"])
