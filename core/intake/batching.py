"""One inference thread per API process that routes the texts of every request waiting for it in
one pass (dynamic batching, as model servers do).

Why one thread: on a few cores one inference at a time is faster than several fighting for them,
and torch's OpenMP pool belongs to the thread that calls it, so the web server's rotating request
threads would each start a pool of their own, spinning beside the others (a single complaint
took 58 ms through them and 13 ms on one thread). Why merge: the texts of several requests,
sorted by length together, pad less than each request's alone, so concurrent callers share the
forward passes instead of queueing for them. A request never waits for more than the pass in
progress: the thread takes what is waiting when it is free, up to MAX_TEXTS.

The decision of a complaint does not depend on its neighbours: each text is encoded with its own
attention mask. In bf16 the probabilities move by up to about 0.02 with the batch's shape (fp32:
1e-6); the labels of 2,000 demo complaints were the same either way (BENCHMARKS.md, "Live
intake").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from core.models.registry import LoadedModel

MAX_TEXTS = 512  # texts in one pass at most (a batch of the API is at most 500 by default)
# Texts per forward pass inside it. Fifty complaints in arrival order padded to the longest ran
# at 40% of the rate of a whole file; sorted and cut into passes of 8 (or 16) they run at the
# rate of the file's own 64-text passes (bench/bench_intake.py).
BATCH_SIZE = 8


@dataclass
class _Pending:
    loaded: LoadedModel
    texts: list[str]
    done: Future = field(default_factory=Future)


class RoutingBatcher:
    """Routes texts with `classification_columns` on one thread, merging waiting requests."""

    def __init__(self, *, max_texts: int = MAX_TEXTS, batch_size: int = BATCH_SIZE) -> None:
        self._max_texts, self._batch_size = max_texts, batch_size
        self._waiting: list[_Pending] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="route", daemon=True)
        self._thread.start()

    def columns(self, loaded: LoadedModel, texts: Sequence[str]) -> pd.DataFrame:
        """The contract columns of `texts` (blocks until its pass is done)."""
        pending = _Pending(loaded, list(texts))
        with self._ready:
            if self._closed:
                raise RuntimeError("the routing thread was stopped")
            self._waiting.append(pending)
            self._ready.notify()
        return pending.done.result()

    def close(self) -> None:
        """Finish what is waiting, then stop the thread."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return
                taken = self._take()
            _route_together(taken, self._batch_size)

    def _take(self) -> list[_Pending]:
        """The oldest waiting request, and those after it for the same model while they fit."""
        taken = [self._waiting.pop(0)]
        size = len(taken[0].texts)
        while self._waiting and self._waiting[0].loaded is taken[0].loaded:
            if size + len(self._waiting[0].texts) > self._max_texts:
                break
            size += len(self._waiting[0].texts)
            taken.append(self._waiting.pop(0))
        return taken


def _route_together(taken: list[_Pending], batch_size: int) -> None:
    from core.models.classify import classification_columns

    texts = [text for pending in taken for text in pending.texts]
    try:
        columns = classification_columns(taken[0].loaded, texts, batch_size=batch_size)
        assert columns is not None  # no cancel was passed
    except BaseException as exc:  # every waiting request hears of it, none hangs
        for pending in taken:
            pending.done.set_exception(exc)
        return
    start = 0
    for pending in taken:
        end = start + len(pending.texts)
        pending.done.set_result(_rows(columns, start, end))
        start = end


def _rows(columns: Any, start: int, end: int) -> Any:
    return columns.iloc[start:end].reset_index(drop=True)
