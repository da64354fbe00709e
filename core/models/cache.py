"""One process-wide cache of loaded models, shared by every session: keyed by each model's name
and card digest, bounded by the memory its models hold, least recently used evicted first."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path

from core.data.limits import parse_megabytes
from core.errors import UserError
from core.models.graph import FP32, FROZEN_FILES, INT8, MAIN_FILES
from core.models.registry import LoadedModel, load_model

CACHE_MB_ENV = "GRIEVANCE_LENS_MODEL_CACHE_MB"
DEFAULT_BUDGET_MB = 2048  # about twenty MiniLM models (some 90 MB each with their bags of words)
MB = 1024 * 1024
# A rough price of one vocabulary entry of the bag of words (a str key and an int in a dict): the
# estimate only has to rank models by size, not match the allocator.
_BYTES_PER_TERM = 100


def cache_key(folder: str | Path, digest: str) -> str:
    """The key of a model version: its folder's name and card digest, as `LoadedModel.key`, so a
    model saved again under the same name is another entry."""
    return f"{Path(folder).name}@{digest}"


def model_bytes(loaded: LoadedModel) -> int:
    """An estimate of the memory `loaded` holds: its weights and serving graphs as saved (the
    torch model, loaded now or at its first explanation, and the graph that routes), the bag of
    words' arrays and vocabulary, and the unknown-desk score's arrays."""
    used = [path for path in loaded.path.glob("*.safetensors") if path.is_file()]
    if loaded.routing["runtime"] == "onnxruntime":  # int8 holds the fp32 graph for its re-check
        graphs = [MAIN_FILES] + ([FROZEN_FILES] if loaded.frozen is not None else [])
        used += [loaded.path / files.graphs[FP32] for files in graphs]
        if loaded.routing["precision"] == INT8:
            used += [loaded.path / files.graphs[INT8] for files in graphs]
    weights = sum(path.stat().st_size for path in used if path.is_file())
    bow = loaded.bow.nbytes(bytes_per_term=_BYTES_PER_TERM)
    detector = 0 if loaded.detector is None else loaded.detector.nbytes()
    return weights + bow + detector


class ModelCache:
    """Loaded models by `cache_key`, at most `budget_bytes` of them (`model_bytes`), the least
    recently used evicted first; the newest is always kept, even alone over the budget.

    Thread-safe: sessions ask from their own threads. Two asking for the same model at once wait
    for one load; a load of another model never waits for it. Models are never mutated, so one
    copy serves every session.

    Parameters
    ----------
    budget_bytes : int
        Memory the cached models may hold together.
    loader : callable
        `loader(folder, digest=digest)` loads one model (default `load_model`: the process's
        runtime, core.models.device.Runtime).
    sizer : callable
        The bytes one loaded model holds (default `model_bytes`).
    """

    def __init__(
        self,
        budget_bytes: int = DEFAULT_BUDGET_MB * MB,
        *,
        loader: Callable[..., LoadedModel] = load_model,
        sizer: Callable[[LoadedModel], int] = model_bytes,
    ) -> None:
        if not isinstance(budget_bytes, int) or budget_bytes < 1:
            raise UserError(f"a model cache needs a budget of 1 byte or more, got {budget_bytes!r}")
        self.budget_bytes = budget_bytes
        self._loader, self._sizer = loader, sizer
        self._entries: OrderedDict[str, tuple[LoadedModel, int]] = OrderedDict()  # oldest first
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ModelCache:
        """A cache whose budget is GRIEVANCE_LENS_MODEL_CACHE_MB megabytes (default 2048)."""
        env = os.environ if environ is None else environ
        raw = env.get(CACHE_MB_ENV, "").strip()
        return cls(parse_megabytes(CACHE_MB_ENV, raw) if raw else DEFAULT_BUDGET_MB * MB)

    def get(self, folder: str | Path, digest: str) -> LoadedModel:
        """The model at `folder` whose card digest is `digest`, loaded at the first ask.

        ValueError (from the loader) when the folder no longer holds that version.
        """
        key = cache_key(folder, digest)
        with self._lock:
            if (found := self._touch(key)) is not None:
                return found
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:  # one load per key; other keys load meanwhile
            with self._lock:
                if (found := self._touch(key)) is not None:
                    return found
            try:
                loaded = self._loader(folder, digest=digest)
                size = self._sizer(loaded)
            except BaseException:
                with self._lock:
                    self._loading.pop(key, None)
                raise
            with self._lock:
                self._entries[key] = (loaded, size)
                self._loading.pop(key, None)
                self._evict()
        return loaded

    def holds(self, folder: str | Path, digest: str) -> bool:
        """Whether that model version is loaded already (asking for it costs no load)."""
        with self._lock:
            return cache_key(folder, digest) in self._entries

    def keys(self) -> list[str]:
        """The cached keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    @property
    def used_bytes(self) -> int:
        """The estimated memory the cached models hold together."""
        with self._lock:
            return sum(size for _, size in self._entries.values())

    def _touch(self, key: str) -> LoadedModel | None:
        """The cached model of `key`, marked most recently used; None when absent."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def _evict(self) -> None:
        """Drop the least recently used models until the rest fit; the newest always stays."""
        used = sum(size for _, size in self._entries.values())
        while used > self.budget_bytes and len(self._entries) > 1:
            _, (_, size) = self._entries.popitem(last=False)
            used -= size
