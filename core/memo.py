"""A least-recently-used cache bounded by the bytes its values hold, not by their count: a cache
of results of what visitors type (explanations, probe results, masked texts) is then bounded by
memory however long the texts and however large the maps; `approx_bytes` prices a value."""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

from core.errors import UserError

V = TypeVar("V")
MB = 1024 * 1024


def approx_bytes(value: object) -> int:
    """The memory `value` holds, counting what it refers to: arrays by `nbytes`, tensors by
    element, strings and scalars by `sys.getsizeof`, dataclasses, mappings and sequences by
    their items; each object once, however often it is referred to."""
    if isinstance(value, str):  # the common case (masked texts), priced without the walk
        return sys.getsizeof(value)
    seen: set[int] = set()
    stack, total = [value], 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += _own_bytes(item)
        stack.extend(_parts(item))
    return total


def _own_bytes(item: object) -> int:
    if isinstance(item, np.ndarray):  # its data when it owns them, else its header
        return sys.getsizeof(item)
    if hasattr(item, "element_size") and hasattr(item, "numel"):  # a torch tensor
        return int(item.element_size() * item.numel())
    if hasattr(item, "memory_usage") and hasattr(item, "columns"):  # a pandas DataFrame
        return int(item.memory_usage(deep=True).sum())
    return sys.getsizeof(item)


def _parts(item: object) -> list[object]:
    """What `item` refers to that `_own_bytes` did not count."""
    if isinstance(item, np.ndarray):  # a view keeps its base alive
        return [] if item.base is None else [item.base]
    if isinstance(item, str | bytes) or hasattr(item, "memory_usage"):
        return []
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return [getattr(item, f.name) for f in dataclasses.fields(item)]
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, list | tuple | set | frozenset):
        return list(item)
    return []


class ByteBoundedCache(Generic[V]):
    """Values by key, at most `budget_bytes` of them (`approx_bytes` of each value and its key),
    the least recently used evicted first. A value larger than the whole budget is returned but
    not kept. Thread-safe; two sessions computing the same key at once both compute (each
    result is the same, and neither waits for the other)."""

    def __init__(self, budget_bytes: int, *, name: str = "cache") -> None:
        if not isinstance(budget_bytes, int) or budget_bytes < 1:
            raise UserError(f"{name} needs a budget of 1 byte or more, got {budget_bytes!r}")
        self.budget_bytes, self.name = budget_bytes, name
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()  # oldest first
        self._used = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The value cached under `key`, marked most recently used; None when absent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: V) -> V:
        """Keep `value` under `key` (unless it alone exceeds the budget); returns it."""
        size = approx_bytes(value) + approx_bytes(key)
        with self._lock:
            old = self._entries.pop(key, None)
            self._used -= old[1] if old is not None else 0
            if size <= self.budget_bytes:
                self._entries[key] = (value, size)
                self._used += size
            while self._used > self.budget_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._used -= dropped
        return value

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value of `key`, or `compute()` kept under it."""
        found = self.get(key)
        return found if found is not None else self.put(key, compute())

    @property
    def used_bytes(self) -> int:
        """The bytes the cached values and keys hold together (`approx_bytes`)."""
        with self._lock:
            return self._used

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
