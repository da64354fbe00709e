"""The review store's limits and the settings that change them: how many triage items one user
may queue per hour, so that nobody can flood the queue the whole team reviews."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import UserError

TRIAGE_PER_HOUR_ENV = "GRIEVANCE_LENS_MAX_TRIAGE_PER_HOUR"


@dataclass(frozen=True)
class TriageLimits:
    """Caps on what one user adds to the shared triage queue."""

    # Items one user may queue in any hour. A reviewer decides a few hundred an hour, so 10,000
    # is more than a team clears in a day, yet lets one large file's unsure rows in at once (a
    # month of complaints at a 0.5 threshold); a loop sending file after file stops within the
    # hour, and the store grows by at most about 10 MB per user and hour.
    max_items_per_hour: int = 10_000

    def __post_init__(self) -> None:
        value = self.max_items_per_hour
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"max_items_per_hour must be an integer >= 1, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TriageLimits:
        """The defaults, with GRIEVANCE_LENS_MAX_TRIAGE_PER_HOUR where set."""
        env = os.environ if environ is None else environ
        raw = env.get(TRIAGE_PER_HOUR_ENV, "").strip()
        if not raw:
            return cls()
        try:
            value = int(raw)
        except ValueError:
            raise UserError(
                f"{TRIAGE_PER_HOUR_ENV} must be a whole number of items, got {raw!r}"
            ) from None
        if value < 1:
            raise UserError(f"{TRIAGE_PER_HOUR_ENV} must be at least 1, got {value}")
        return cls(max_items_per_hour=value)
