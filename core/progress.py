"""How long work reports how far it is and hears that it should stop: one `Progress` value for
every kind of work (training, classifying a file, audits, scans, samples, estimates) and the
cancel check they share. The queue (core.jobs) turns a run of these values into an ETA; the work
itself never computes one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    """`done` of `total` units of the current `phase` ("train", "embed", "classify", "fold", ...).

    Units are whatever the phase counts (optimiser steps, texts, folds; fractions allowed, as in
    "fold 2.5 of 5"). `detail` is what a page draws besides the bar, e.g. a training step's loss
    (core.models.transformer.loop.StepMetrics); None for plain counts.
    """

    done: float
    total: float
    phase: str = ""
    detail: Any = None

    @property
    def fraction(self) -> float:
        """`done / total` clipped to [0, 1] (0 while the total is unknown)."""
        return min(max(self.done / self.total, 0.0), 1.0) if self.total > 0 else 0.0


ProgressCallback = Callable[[Progress], None]


def is_cancelled(cancel: threading.Event | None) -> bool:
    """Whether the caller asked the work to stop (no event: never)."""
    return cancel is not None and cancel.is_set()


class Cancelled(Exception):
    """Raised by work that stops early because its caller asked and has no partial result to
    return; the queue (core.jobs) ends the job as cancelled, not failed."""


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise `Cancelled` when the caller asked the work to stop."""
    if is_cancelled(cancel):
        raise Cancelled
