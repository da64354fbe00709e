"""Received times for the demo complaints: an open queue as it stood when a day began in India,
skewed to the last few days with a tail of three weeks, busier on weekdays than at weekends,
quieter on public and bank holidays, and mostly within 09:00-21:00 IST."""

from __future__ import annotations

import math
import random
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

IST = ZoneInfo("Asia/Kolkata")
SPAN_DAYS = 21  # the oldest complaint in the demo queue is three weeks old
RECENT_SHARE = 0.8  # share of the queue from the recency curve; the rest spreads over the span
RECENT_SCALE_DAYS = 2.0  # the recency curve falls by e every this many days
WEEKDAY_FACTOR = (1.0, 1.0, 1.0, 1.0, 0.95, 0.55, 0.35)  # Monday .. Sunday
HOLIDAY_FACTOR = 0.3

# Days most banks and customers in India are off (national holidays and the biggest festivals;
# festival dates move every year, so they are listed for 2025-2027 only). Fixed-date national
# holidays apply every year.
# Republic Day, Independence Day, Gandhi Jayanti, Christmas (month, day)
FIXED_HOLIDAYS = ((1, 26), (8, 15), (10, 2), (12, 25))
MOVABLE_HOLIDAYS = frozenset({  # each year: Holi, Good Friday, Diwali
    date(2025, 3, 14), date(2025, 4, 18), date(2025, 10, 20), date(2025, 10, 21),
    date(2026, 3, 4), date(2026, 4, 3), date(2026, 11, 8),
    date(2027, 3, 22), date(2027, 3, 26), date(2027, 10, 29),
})  # fmt: skip

# Hour-of-day weights (IST): little at night, most between 09:00 and 21:00, peaks mid-morning
# and early evening when people check their accounts.
HOUR_WEIGHTS = (
    0.2, 0.1, 0.1, 0.1, 0.1, 0.2, 0.4, 0.8, 1.5, 3.0, 4.0, 4.2,
    3.8, 3.5, 3.6, 3.4, 3.2, 3.3, 3.8, 4.0, 3.4, 2.2, 1.0, 0.5,
)  # fmt: skip


def is_holiday(day: date) -> bool:
    """Whether `day` is one of the holidays above."""
    return (day.month, day.day) in FIXED_HOLIDAYS or day in MOVABLE_HOLIDAYS


def queue_anchor(received_until: date | None) -> datetime:
    """The moment the demo queue is cut: 00:00 IST at the start of `received_until` (None:
    today in India), so every time lies before it and, for today, before now."""
    day = received_until if received_until is not None else datetime.now(IST).date()
    return datetime.combine(day, time(0, 0), tzinfo=IST)


def day_weights(anchor: datetime) -> list[tuple[date, float]]:
    """(day, weight) for the SPAN_DAYS days before `anchor`, most recent first."""
    weights = []
    for back in range(1, SPAN_DAYS + 1):
        day = anchor.date() - timedelta(days=back)
        recent = math.exp(-(back - 1) / RECENT_SCALE_DAYS)
        weight = RECENT_SHARE * recent + (1 - RECENT_SHARE) / SPAN_DAYS * _recent_total()
        weight *= WEEKDAY_FACTOR[day.weekday()] * (HOLIDAY_FACTOR if is_holiday(day) else 1.0)
        weights.append((day, weight))
    return weights


def _recent_total() -> float:
    """Sum of the recency curve over the span, so RECENT_SHARE is a share of the whole."""
    return sum(math.exp(-(back - 1) / RECENT_SCALE_DAYS) for back in range(1, SPAN_DAYS + 1))


def received_times(count: int, *, seed: int, received_until: date | None) -> list[str]:
    """`count` received times as ISO 8601 with the +05:30 offset, oldest first (complaint ids
    grow with time), all before `queue_anchor(received_until)`; the same arguments always give
    the same times. Drawn from a generator of their own, so the texts never change."""
    rng = random.Random(seed * 1_000_003 + 17)
    anchor = queue_anchor(received_until)
    days, weights = zip(*day_weights(anchor), strict=True)
    chosen = rng.choices(days, weights=weights, k=count)
    hours = rng.choices(range(24), weights=HOUR_WEIGHTS, k=count)
    moments = [
        datetime.combine(day, time(hour, rng.randrange(60), rng.randrange(60)), tzinfo=IST)
        for day, hour in zip(chosen, hours, strict=True)
    ]
    return [moment.isoformat() for moment in sorted(moments)]
