"""The intake API's request bodies and its settings: what a caller may send (pydantic models,
which also write the OpenAPI schema at /docs) and the operator's limits (environment)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import UserError

MAX_BATCH_ENV = "GRIEVANCE_LENS_API_MAX_BATCH"
MAX_BODY_MB_ENV = "GRIEVANCE_LENS_API_MAX_BODY_MB"
RATE_ENV = "GRIEVANCE_LENS_API_RATE_PER_MINUTE"
MODEL_ENV = "GRIEVANCE_LENS_API_MODEL"  # what `serve --model` hands its worker processes
EARLIEST_RECEIVED = datetime(2000, 1, 1, tzinfo=UTC)  # older is a typo, not a complaint
CLOCK_SLACK = timedelta(minutes=5)  # a caller's clock a little ahead of ours is not an error
# Printable, one line: ids and refs are shown on pages and in the trail.
_ONE_LINE = r"^[^\x00-\x1f\x7f]+$"


class ComplaintIn(BaseModel):
    """One complaint as the bank's system sends it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1, max_length=200, pattern=_ONE_LINE,
        description="The caller's own identifier; a complaint is stored once per id and source.",
    )  # fmt: skip
    text: str = Field(
        description="The complaint as the customer wrote it (at most 20,000 characters; a longer "
        "one is refused for that item, never cut)."
    )
    channel: str | None = Field(
        None, max_length=50, pattern=_ONE_LINE, description="branch, web, call centre, ..."
    )
    received_at: datetime | None = Field(
        None, description="When the bank received it (ISO 8601; without an offset, the time "
        "zone of the TAT file). Default: when the API received it."
    )  # fmt: skip
    customer_ref: str | None = Field(None, max_length=100, pattern=_ONE_LINE)

    @field_validator("id", "text", "channel", "customer_ref")
    @classmethod
    def _valid_unicode(cls, value: str | None) -> str | None:
        # JSON may escape half of a surrogate pair ("\ud899"): not text, and not storable.
        if value is not None and any("\ud800" <= ch <= "\udfff" for ch in value):
            raise ValueError("holds an unpaired surrogate (\\ud800-\\udfff): send valid Unicode")
        return value


class ComplaintBatch(BaseModel):
    """A batch of 1 to N complaints (N: GRIEVANCE_LENS_API_MAX_BATCH, default 500)."""

    model_config = ConfigDict(extra="forbid")

    complaints: list[ComplaintIn] = Field(min_length=1)


@dataclass(frozen=True)
class ApiSettings:
    """Where the API's state is and the limits it keeps."""

    db_path: Path
    models_root: Path
    model: str = "live"  # or a saved model's name, pinned
    max_batch: int = 500
    max_body_bytes: int = 32 * 1024 * 1024  # 500 complaints of a few thousand characters, and JSON
    rate_per_minute: int = 1200  # requests per token per API process
    device: str = "auto"
    precision: str = "auto"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiSettings:
        from core.paths import models_dir
        from core.review.store import default_db_path

        environ = os.environ if environ is None else environ
        values = {
            "db_path": default_db_path(),
            "models_root": models_dir(),
            "model": environ.get(MODEL_ENV, "").strip() or "live",
            "max_batch": _count(environ, MAX_BATCH_ENV, 500, upper=10_000),
            "max_body_bytes": _count(environ, MAX_BODY_MB_ENV, 32, upper=1024) * 1024 * 1024,
            "rate_per_minute": _count(environ, RATE_ENV, 1200, upper=1_000_000),
        }
        return cls(**values)


def _count(environ: Mapping[str, str], name: str, default: int, *, upper: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= upper:
        raise UserError(f"{name}={raw[:40]!r}: give a whole number from 1 to {upper:,}")
    return int(raw)


def received_error(moment: datetime, now: datetime) -> str | None:
    """Why a (tz-aware) received time cannot be right, or None."""
    if moment < EARLIEST_RECEIVED:
        return f"is before {EARLIEST_RECEIVED.date()}; send the date the bank received it"
    if moment > now + CLOCK_SLACK:
        return "is in the future; send the time the bank received it (with its UTC offset)"
    return None
