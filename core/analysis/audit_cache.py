"""Finished label audits kept in memory by cache key (core.analysis.audit.audit_cache_key), so that
the same audit asked for again, by any session of the server, is served without running it twice."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from core.errors import UserError

if TYPE_CHECKING:
    from core.analysis.audit import AuditResult

MAX_CACHED_AUDITS = 8  # results hold (rows, classes) probabilities: a few data sets' worth


class AuditCache:
    """A bounded, thread-safe map from cache key to finished audit; the oldest entry goes first."""

    def __init__(self, *, max_entries: int = MAX_CACHED_AUDITS) -> None:
        if max_entries < 1:
            raise UserError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._results: dict[str, AuditResult] = {}

    def get(self, key: str) -> AuditResult | None:
        """The finished audit cached under `key`, or None."""
        with self._lock:
            return self._results.get(key)

    def add(self, key: str, result: AuditResult) -> bool:
        """Cache `result` under `key`, evicting the oldest entries to stay within `max_entries`.

        Returns False (and keeps the cached result) when `key` was already there, so that a
        caller records each audit once however many sessions finish it.
        """
        with self._lock:
            if key in self._results:
                return False
            while len(self._results) >= self.max_entries:
                del self._results[next(iter(self._results))]
            self._results[key] = result
            return True

    def clear(self) -> None:
        """Forget every cached audit."""
        with self._lock:
            self._results.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._results)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._results
