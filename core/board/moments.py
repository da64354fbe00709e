"""The range of times the board works with: years FIRST_YEAR to LAST_YEAR.

pandas holds the board's timestamps in nanoseconds, from 1677-09-21 to 2262-04-11; a time
outside that range raises OutOfBoundsDatetime deep inside a computation. The board reads only
times in a narrower range, with decades of margin for time zones and turnaround times, and
refuses others at the boundary with one line that states the range: a received time as an
unreadable row (core.board.received), the moment ages are measured at by check_as_of (the
command line's --as-of, the page's `?as_of=` and picked time).

Imports nothing from pandas: the page and the command line check a time cheaply."""

from __future__ import annotations

from datetime import datetime

from core.errors import UserError

FIRST_YEAR = 1900
LAST_YEAR = 2199
YEARS = f"the years {FIRST_YEAR} to {LAST_YEAR}"
AS_OF_EXAMPLE = "2026-11-30T14:05+05:30"


def in_range(moment: datetime) -> bool:
    """Whether `moment`'s year, as written (in its own offset when it has one), is in range."""
    return FIRST_YEAR <= moment.year <= LAST_YEAR


def check_as_of(moment: datetime, what: str = "as_of") -> datetime:
    """`moment` itself when its year (as written) is FIRST_YEAR..LAST_YEAR.

    Raises UserError (one line, naming `what`, the time and the range) otherwise."""
    if not in_range(moment):
        raise UserError(_outside(what, moment.isoformat()))
    return moment


def parse_as_of(text: str, what: str = "as_of") -> datetime:
    """`text` (ISO 8601; naive stays naive) as a datetime within the range.

    Raises UserError (one line naming `what` and `text`) when it is not a time or lies outside
    the range."""
    shown = repr(text[:40])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as err:
        raise UserError(
            f"{what} {shown} is not a date and time; write e.g. {AS_OF_EXAMPLE}"
        ) from err
    if not in_range(moment):
        raise UserError(_outside(what, shown))
    return moment


def _outside(what: str, shown: str) -> str:
    return (
        f"{what} {shown} is outside {YEARS}; measure ages at a time in them, e.g. {AS_OF_EXAMPLE}"
    )
