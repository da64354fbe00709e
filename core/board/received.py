"""When each complaint was received: the received-time column, found by name like the text
column, and its values read into time-zone-aware timestamps, vectorised (no Python loop over
rows), with one line naming the first row that cannot be read or lies in the future. A time
outside the years core.board.moments allows (pandas cannot hold 1500-01-01 or 9999-12-31 in
nanoseconds) reads as unreadable, never as an OutOfBoundsDatetime."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from core.board.moments import FIRST_YEAR, LAST_YEAR, YEARS, check_as_of
from core.data.columns import column_list
from core.data.limits import DataError

RECEIVED_NAMES = (
    "received_at", "received", "received_time", "received_on", "received_date", "date_received",
    "created_at", "created", "submitted_at", "complaint_date", "timestamp",
)  # fmt: skip

FUTURE_SLACK = timedelta(minutes=5)  # clocks of the intake system and this server differ a little
EXAMPLE = "2026-11-30 14:05 (or 2026-11-30T14:05+05:30 with its offset)"

# An ISO time of day followed by an offset (Z, +05:30, -0400): such values carry their own zone.
_OFFSET = re.compile(r"\d:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})$", re.IGNORECASE)
# Tried in order on naive values ISO 8601 does not read; Indian spreadsheets write day first.
_FALLBACK_FORMATS = (
    "%d/%m/%Y %H:%M:%S", "%d/%m/%Y %H:%M", "%d/%m/%Y %I:%M %p", "%d/%m/%Y",
    "%d-%m-%Y %H:%M:%S", "%d-%m-%Y %H:%M", "%d-%m-%Y", "%d.%m.%Y %H:%M", "%d.%m.%Y",
    "%d %b %Y %H:%M", "%d %b %Y", "%d %B %Y %H:%M", "%d %B %Y",
)  # fmt: skip


def _normalise_name(name: object) -> str:
    return re.sub(r"[\s\-_]+", "_", str(name).strip().casefold())


def detect_received_column(df: pd.DataFrame, *, received_col: str | None = None) -> str | None:
    """The column holding each complaint's received time: `received_col` when given (it must
    exist), else the first of RECEIVED_NAMES present (case, spaces, '-' and '_' ignored), else
    None."""
    columns = [str(c) for c in df.columns]
    if received_col is not None:
        if received_col not in columns:
            raise DataError(
                f"no column '{received_col}' for received times; the file has: "
                f"{column_list(columns)}"
            )
        return received_col
    by_name = {}
    for column in columns:
        by_name.setdefault(_normalise_name(column), column)
    return next((by_name[name] for name in RECEIVED_NAMES if name in by_name), None)


def parse_received(
    series: pd.Series,
    *,
    timezone: str,
    as_of: datetime,
    rows: Sequence[int] | None = None,
) -> pd.Series:
    """Read received times into tz-aware timestamps in `timezone`.

    Values with an offset (``2026-11-30T14:05+05:30``, ``...Z``) keep their instant; naive ones
    are read in `timezone`. ISO 8601 first, then a few day-first spreadsheet formats
    (``30/11/2026 14:05``). Blank cells give NaT (no time; the caller counts them).

    Parameters
    ----------
    series : (n,) the column's cells (strings, datetimes or NaN), any index.
    timezone : zoneinfo name, e.g. "Asia/Kolkata".
    as_of : the moment ages are measured at; naive means `timezone`; its year as written
        FIRST_YEAR..LAST_YEAR (core.board.moments).
    rows : (n,) 1-based spreadsheet rows of the cells (header = 1); default 2..n+1.

    Returns
    -------
    pandas.Series (n,) of ``datetime64[ns, timezone]``, the index of `series`.

    Raises DataError naming the first unreadable row (not a time, or outside the years
    FIRST_YEAR..LAST_YEAR in `timezone`; then the first row later than `as_of` plus five
    minutes), its value and how to write it, and how many more rows are like it; UserError for
    an `as_of` outside the range.
    """
    check_as_of(as_of)
    zone = ZoneInfo(timezone)
    rows = list(range(2, len(series) + 2)) if rows is None else [int(r) for r in rows]
    text = _cell_text(series)
    parsed = _from_datetimes(series, zone) if _is_datetimes(series) else _parse(text, zone)
    name = str(series.name) if series.name is not None else "received_at"
    _refuse(text.notna() & parsed.isna(), text, rows, name, _unreadable)
    limit = pd.Timestamp(as_of if as_of.tzinfo else as_of.replace(tzinfo=zone)) + FUTURE_SLACK
    _refuse(parsed > limit, text, rows, name, _future)
    parsed.index = series.index
    return parsed


def _is_datetimes(series: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(series)


def _from_datetimes(series: pd.Series, zone: ZoneInfo) -> pd.Series:
    """A column that is already timestamps (a Parquet file, a frame built in Python); NaT where
    out of range."""
    values = _in_range(series.reset_index(drop=True))  # in its own zone: safe to convert
    if values.dt.tz is None:
        flags = np.zeros(len(values), dtype=bool)  # an ambiguous hour (DST) reads as standard
        values = values.dt.tz_localize(zone, ambiguous=flags, nonexistent="shift_forward")
    return _in_range(values.dt.tz_convert(zone)).astype(f"datetime64[ns, {zone.key}]")


def _in_range(values: pd.Series) -> pd.Series:
    """`values` (datetimes of any unit, naive or aware) with NaT where the year, in their own
    zone, is outside FIRST_YEAR..LAST_YEAR: what is left fits nanoseconds with decades to spare
    for a change of zone."""
    return values.where(values.dt.year.between(FIRST_YEAR, LAST_YEAR))


def _cell_text(series: pd.Series) -> pd.Series:
    """Stripped strings, None for blank cells, on a 0..n-1 index."""
    text = series.reset_index(drop=True).astype("string").str.strip()
    return text.where(text.str.len() > 0)


def _parse(text: pd.Series, zone: ZoneInfo) -> pd.Series:
    """Both kinds of value, each vectorised, in one tz-aware series (NaT where unreadable or out
    of range)."""
    filled = text.notna().to_numpy(dtype=bool)
    aware = filled & text.fillna("").str.contains(_OFFSET).to_numpy(dtype=bool)
    result = pd.Series(pd.NaT, index=text.index, dtype=f"datetime64[ns, {zone.key}]")
    if aware.any():
        instants = pd.to_datetime(text[aware], format="ISO8601", utc=True, errors="coerce")
        local = _in_range(_in_range(instants).dt.tz_convert(zone))
        result[aware] = local.astype(result.dtype)
    naive = filled & ~aware
    if naive.any():
        local = _parse_naive(text[naive])
        flags = np.zeros(len(local), dtype=bool)  # an ambiguous hour (DST) reads as standard
        localised = local.dt.tz_localize(zone, ambiguous=flags, nonexistent="shift_forward")
        result[naive] = localised.astype(result.dtype)
    return result


def _parse_naive(text: pd.Series) -> pd.Series:
    """Naive timestamps: ISO 8601, then each fallback format on what is still unread; NaT where
    out of range (pandas reads 1500-01-01 in seconds, which nanoseconds cannot hold)."""
    parsed = _naive(text, "ISO8601")
    for fmt in _FALLBACK_FORMATS:
        missing = parsed.isna()
        if not missing.any():
            break
        parsed[missing] = _naive(text[missing], fmt)
    return parsed


def _naive(text: pd.Series, fmt: str) -> pd.Series:
    parsed = pd.to_datetime(text, format=fmt, errors="coerce")
    return _in_range(parsed).astype("datetime64[ns]")


def _refuse(bad: pd.Series, text: pd.Series, rows: list[int], name: str, message) -> None:
    positions = np.flatnonzero(bad.to_numpy(dtype=bool))
    if len(positions):
        first = int(positions[0])
        more = len(positions) - 1
        also = f"; {more} more row{'s' if more != 1 else ''} like it" if more else ""
        raise DataError(message(name, rows[first], _shown(text.iloc[first])) + also)


def _unreadable(name: str, row: int, value: str) -> str:
    return (
        f"{name} in row {row} is {value}, which is not a date and time in {YEARS}; write it "
        f"like {EXAMPLE}"
    )


def _future(name: str, row: int, value: str) -> str:
    return (
        f"{name} in row {row} is {value}, which lies in the future; fix that time (or the "
        "clock), or measure ages at a later time (--as-of, or the page's 'Measure ages at')"
    )


def _shown(value: object, limit: int = 40) -> str:
    """A cell for an error message: one line, printable, cut to `limit` characters, quoted."""
    flat = "".join(ch if ch.isprintable() else " " for ch in str(value))
    flat = " ".join(flat.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
