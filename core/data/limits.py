"""Intake limits and the one error type of intake: ceilings on bytes, rows, columns, cells and
unpacked sizes (bytes and rows overridable by environment variables), and `DataError`, whose
message is one line."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import UserError

MAX_FILE_MB_ENV = "GRIEVANCE_LENS_MAX_FILE_MB"
MAX_ROWS_ENV = "GRIEVANCE_LENS_MAX_ROWS"
MAX_DESKS_ENV = "GRIEVANCE_LENS_MAX_DESKS"
MB = 1024**2


class DataError(UserError):
    """Unusable input; str() is one line that says what is wrong and what to do."""

    def __init__(self, message: str) -> None:
        # Library messages can span lines; the command line contract is a single line.
        super().__init__(" ".join(str(message).split()))


@dataclass(frozen=True)
class IntakeLimits:
    """Ceilings that keep a mistaken or hostile upload from exhausting memory or time."""

    max_file_bytes: int = 200 * MB
    max_rows: int = 500_000
    # Distinct labels (desks) a saved data set may have: a bank routes to tens of desks, so
    # thousands mean a column of ids or texts, and each desk costs every read of its summary.
    max_desks: int = 1_000
    # Sum of the sizes the members of an .xlsx zip declare for themselves once unpacked.
    max_xlsx_uncompressed_bytes: int = 500 * MB
    # Longer texts are kept but warned about: models only ever read their beginning.
    max_text_chars: int = 100_000
    # An .xlsx member (over 1 MiB) that unpacks to more than this many times its packed size is
    # treated as a zip bomb; ordinary worksheet XML compresses 5 to 30 times.
    max_compression_ratio: float = 100.0
    # Wider headers are refused before any row is built; real complaint exports have tens.
    max_columns: int = 500
    # Cells (rows x columns, blank and padded ones included) allowed before rows are built:
    # max(min_cells, cells_per_byte x file bytes). Every CSV cell but a padded one costs at
    # least one byte (its separator), so one cell per byte admits any file that is not mostly
    # padding, and a table of strings costs about 16 to 24 bytes per cell; the floor admits
    # 500,000 rows of 4 columns from any file.
    min_cells: int = 2_000_000
    cells_per_byte: float = 1.0
    # Text a Parquet file may decode to: max(min_decoded_bytes, max_decoded_ratio x file bytes).
    # Real complaint text compresses 3 to 5 times; repeated labels decode to a few MB, within the
    # floor. A dictionary of one long string repeated on every row is what this stops.
    min_decoded_bytes: int = 32 * MB
    max_decoded_ratio: float = 20.0

    def __post_init__(self) -> None:
        for name in (
            "max_file_bytes",
            "max_rows",
            "max_desks",
            "max_xlsx_uncompressed_bytes",
            "max_text_chars",
            "max_columns",
            "min_cells",
            "min_decoded_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(
                    f"IntakeLimits.{name} must be a positive whole number, got {value!r}"
                )
        if not self.max_compression_ratio > 1:
            raise DataError(
                "IntakeLimits.max_compression_ratio must be above 1, "
                f"got {self.max_compression_ratio!r}"
            )
        for name in ("cells_per_byte", "max_decoded_ratio"):
            if not getattr(self, name) > 0:
                raise DataError(f"IntakeLimits.{name} must be above 0, got {getattr(self, name)!r}")

    def max_cells(self, file_bytes: int) -> int:
        """Cells a file of `file_bytes` bytes may hold (see `min_cells`)."""
        return max(self.min_cells, int(self.cells_per_byte * file_bytes))

    def max_decoded_bytes(self, file_bytes: int) -> int:
        """Bytes of text a Parquet file of `file_bytes` bytes may decode to."""
        return max(self.min_decoded_bytes, int(self.max_decoded_ratio * file_bytes))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> IntakeLimits:
        """Defaults overridden by GRIEVANCE_LENS_MAX_FILE_MB, GRIEVANCE_LENS_MAX_ROWS and
        GRIEVANCE_LENS_MAX_DESKS.

        `environ` defaults to `os.environ`; an unset or empty variable keeps the default.
        """
        env = os.environ if environ is None else environ
        overrides: dict[str, int] = {}
        if raw := env.get(MAX_FILE_MB_ENV, "").strip():
            overrides["max_file_bytes"] = parse_megabytes(MAX_FILE_MB_ENV, raw)
        if raw := env.get(MAX_ROWS_ENV, "").strip():
            overrides["max_rows"] = _parse_count(MAX_ROWS_ENV, raw)
        if raw := env.get(MAX_DESKS_ENV, "").strip():
            overrides["max_desks"] = _parse_count(MAX_DESKS_ENV, raw)
        return cls(**overrides)


DEFAULT_LIMITS = IntakeLimits()


def parse_megabytes(variable: str, raw: str) -> int:
    """The setting `variable` = `raw` (a positive number of megabytes) in bytes; a one-line
    DataError naming the setting otherwise."""
    message = f"{variable} must be a positive number of megabytes, got {raw!r}; fix or unset it"
    try:
        megabytes = float(raw)
    except ValueError as exc:
        raise DataError(message) from exc
    if not (math.isfinite(megabytes) and megabytes > 0):
        raise DataError(message)
    return max(1, int(megabytes * MB))


def _parse_count(variable: str, raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and int(raw) >= 1):
        raise DataError(f"{variable} must be a positive whole number, got {raw!r}; fix or unset it")
    return int(raw)
