"""The model the intake API routes with: the team's live model, followed as admins promote, or one
saved model pinned by name (`serve --model NAME`).

Each request asks `current()`, which costs one indexed read of the trail's newest promotion; when
it differs from the model held, the new one is loaded before that request is routed, and the
requests already routing finish on the old one, so a promotion switches the API without a
restart and without a failed request. A promoted model that cannot be loaded leaves the previous
one serving and is reported by `/v1/ready` (retried after RETRY_S). Inference runs on one
thread per process that merges waiting requests (core.intake.batching).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import UserError
from core.intake.batching import RoutingBatcher
from core.intake.inbox import Routing
from core.review.live import PROMOTED, checked_live_folder, live_model
from core.review.store import Store

if TYPE_CHECKING:
    from core.models.registry import LoadedModel

LOG = logging.getLogger(__name__)
LIVE = "live"
RETRY_S = 30.0  # how long a promoted model that failed to load is left before the next try


class NotReady(UserError):
    """No model can route yet (none promoted, or the promoted one does not load)."""


@dataclass(frozen=True)
class ServingModel:
    """A loaded model and what the inbox records of it."""

    name: str
    digest: str
    loaded: LoadedModel
    promotion: int | None  # the trail event that made it live (None: pinned by name)


Loader = Callable[[Path, str], "LoadedModel"]  # (folder, card digest) -> model


def default_loader(device: str = "auto", precision: str = "auto") -> Loader:
    def load(folder: Path, digest: str) -> LoadedModel:
        from core.models.registry import load_model

        return load_model(folder, device=device, precision=precision, digest=digest)

    return load


class LiveRouter:
    """Routes texts with the live model (or the pinned one) of `models_root`."""

    def __init__(
        self, store: Store, models_root: Path, *, model: str = LIVE, loader: Loader | None = None
    ) -> None:
        self._store = store
        self._root = Path(models_root)
        self._pinned = None if model == LIVE else model
        self._load = loader or default_loader()
        self._held: ServingModel | None = None
        self._problem: str | None = None
        self._failed: tuple[int, float] | None = None  # (promotion, when it failed to load)
        self._switch = threading.Lock()
        self._batcher = RoutingBatcher()

    def close(self) -> None:
        """Stop the inference thread (after the routing waiting for it)."""
        self._batcher.close()

    @property
    def problem(self) -> str | None:
        """Why the newest promotion is not serving (None: it is, or there is none)."""
        return self._problem

    def current(self) -> ServingModel:
        """The model to route the next request with; NotReady when there is none."""
        if self._pinned is not None:
            return self._held or self._load_pinned()
        newest = self._newest_promotion()
        held = self._held
        if held is not None and held.promotion == newest:
            return held
        if newest is None:
            raise NotReady("no model is live yet: an admin promotes one (Train page or `promote`)")
        with self._switch:
            if self._held is not None and self._held.promotion == newest:
                return self._held
            if not self._should_try(newest):
                return self._still_held()
            return self._load_live(newest)

    def route(self, texts: Sequence[str]) -> tuple[ServingModel, list[Routing]]:
        """The model's decision for each text: the contract columns `classify` gives."""
        serving = self.current()
        columns = self._batcher.columns(serving.loaded, texts)
        classes = serving.loaded.classes
        return serving, [_routing(row, classes) for row in columns.to_dict("records")]

    def _newest_promotion(self) -> int | None:
        rows = self._store.query("SELECT max(id) FROM trail WHERE action = ?", (PROMOTED,))
        return None if rows[0][0] is None else int(rows[0][0])

    def _should_try(self, promotion: int) -> bool:
        failed = self._failed
        return failed is None or failed[0] != promotion or time.monotonic() - failed[1] > RETRY_S

    def _still_held(self) -> ServingModel:
        if self._held is None:
            raise NotReady(self._problem or "the live model is not loaded yet")
        return self._held

    def _load_live(self, promotion: int) -> ServingModel:
        live = live_model(self._store)
        assert live is not None
        try:
            folder = checked_live_folder(live, self._root)
            loaded = self._load(folder, live.digest)
        except UserError as exc:
            LOG.warning("the live model %s does not load: %s", live.name, exc)
            self._problem = f"the live model {live.name} does not load ({exc})"
            self._failed = (promotion, time.monotonic())
            return self._still_held()
        serving = ServingModel(live.name, live.digest, loaded, promotion)
        self._held, self._problem, self._failed = serving, None, None
        LOG.info("routing with the live model %s", live.name)
        return serving

    def _load_pinned(self) -> ServingModel:
        from core.models.card import card_digest, model_folder

        with self._switch:
            if self._held is None:
                folder = model_folder(self._root, self._pinned)
                digest = card_digest(folder)
                if digest is None:
                    raise NotReady(f"no saved model named {self._pinned} in the models folder")
                self._held = ServingModel(self._pinned, digest, self._load(folder, digest), None)
            return self._held


def _routing(row: dict, classes: list[str]) -> Routing:
    score = row.get("unknown_desk_score")
    score = None if score is None or not math.isfinite(float(score)) else float(score)
    return Routing(
        desk=str(row["predicted_label"]),
        confidence=float(row["confidence"]),
        needs_review=bool(row["needs_review"]),
        review_reason=str(row["review_reason"]),
        unknown_desk_score=score,
        decided_by=str(row["decided_by"]),
        probabilities={c: float(row[f"prob_{c}"]) for c in classes},
    )
