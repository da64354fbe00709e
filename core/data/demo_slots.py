"""Slot values for demo complaints: rupee amounts in Indian digit grouping, dates, masked card and
account numbers, UPI references and ids; `fill` puts them into a phrase template."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from core.data.demo_phrases import (
    APPS,
    BANKS,
    CITIES,
    FIRST_NAMES,
    LAST_NAMES,
    LOAN_TYPES,
    MERCHANTS,
    MONTHS,
    UPI_HANDLES,
)


def _indian_grouping(value: int) -> str:
    """Digits grouped the Indian way: 1234567 -> "12,34,567"."""
    digits = str(value)
    if len(digits) <= 3:
        return digits
    head, groups = digits[:-3], [digits[-3:]]
    while len(head) > 2:
        groups.insert(0, head[-2:])
        head = head[:-2]
    return ",".join([head, *groups])


_RUPEE_FORMATS = ("₹{g}", "Rs. {v}", "INR {g}.{p:02d}", "Rs {g}/-", "₹ {v}", "Rs.{g}", "{g} rupees")


def _rupees(value: int, rng: random.Random) -> str:
    """One amount in one of the ways Indian customers write rupees."""
    if value >= 100_000 and rng.random() < 0.6:
        lakh = f"{value / 100_000:.2f}".rstrip("0").rstrip(".")
        return rng.choice((f"{lakh} lakh", f"Rs {lakh} lakh", f"₹{lakh} lakh"))
    template = rng.choice(_RUPEE_FORMATS)
    return template.format(g=_indian_grouping(value), v=value, p=rng.randrange(100))


def _amount_value(rng: random.Random, low: int, high: int) -> int:
    """A log-uniform amount, often rounded the way prices and transfers are."""
    value = int(low * (high / low) ** rng.random())
    step = rng.choice((1, 1, 10, 50, 100, 500))
    rounded = max(low, value // step * step)
    return rounded - 1 if step >= 100 and rng.random() < 0.3 else rounded


def _date(rng: random.Random) -> str:
    """A 2024-2025 date in one of the formats seen in complaints."""
    year, month, day = rng.choice((2024, 2025)), rng.randint(1, 12), rng.randint(1, 28)
    suffix = "th" if 10 <= day <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    name = MONTHS[month - 1]
    formats = (
        f"{day:02d}/{month:02d}/{year}",
        f"{day:02d}-{month:02d}-{year}",
        f"{day} {name} {year}",
        f"{name} {day}",
        f"{day}{suffix} {name[:3]}",
        f"{year}-{month:02d}-{day:02d}",
        f"{day:02d}.{month:02d}.{str(year)[2:]}",
        f"{day}{suffix} {name}",
    )
    return rng.choice(formats)


def _masked_card(rng: random.Random, last4: str) -> str:
    formats = (
        f"XXXX XXXX XXXX {last4}",
        f"**** {last4}",
        f"xxxx-xxxx-xxxx-{last4}",
        f"**** **** **** {last4}",
        f"ending {last4}",
        f"XXXX{last4}",
    )
    return rng.choice(formats)


def _upi_ref(rng: random.Random, utr: str) -> str:
    formats = (
        f"UTR {utr}",
        f"UPI Ref No. {utr}",
        f"RRN {utr}",
        f"UPI transaction ID {utr}",
        f"ref no {utr}",
        f"UTR: {utr}",
    )
    return rng.choice(formats)


def _digits(rng: random.Random, count: int) -> str:
    return f"{rng.randrange(10**count):0{count}d}"


def _upi_id(rng: random.Random, first: str) -> str:
    stem = rng.choice((first.lower(), f"{first.lower()}.{rng.choice(LAST_NAMES).lower()}"))
    stem = stem.replace("'", "")
    tail = rng.choice(("", _digits(rng, 2), _digits(rng, 4), "98" + _digits(rng, 8)))
    return f"{stem}{tail}@{rng.choice(UPI_HANDLES)}"


def _other(rng: random.Random, choices: Sequence[str], taken: str) -> str:
    """A choice different from `taken` (a second bank, a second city)."""
    return rng.choice([c for c in choices if c != taken])


def _time(rng: random.Random) -> str:
    hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    if rng.random() < 0.5:
        return f"{hour:02d}:{minute:02d}"
    return f"{(hour - 1) % 12 + 1}:{minute:02d} {rng.choice(('am', 'pm', 'AM', 'PM'))}"


def _rate(rng: random.Random, low: float) -> str:
    return f"{low + rng.randint(0, 60) * 0.05:.2f}".rstrip("0").rstrip(".") + "%"


_SlotMaker = Callable[[random.Random, "Slots"], str]

_SLOT_MAKERS: dict[str, _SlotMaker] = {
    "first": lambda rng, s: rng.choice(FIRST_NAMES),
    "last": lambda rng, s: rng.choice(LAST_NAMES),
    "name": lambda rng, s: f"{s['first']} {s['last']}",
    "bank": lambda rng, s: rng.choice(BANKS),
    "bank2": lambda rng, s: _other(rng, BANKS, s["bank"]),
    "app": lambda rng, s: rng.choice(APPS),
    "merchant": lambda rng, s: rng.choice(MERCHANTS),
    "city": lambda rng, s: rng.choice(CITIES),
    "city2": lambda rng, s: _other(rng, CITIES, s["city"]),
    "amount": lambda rng, s: _rupees(_amount_value(rng, 49, 90_000), rng),
    "amount2": lambda rng, s: _rupees(_amount_value(rng, 49, 20_000), rng),
    "small_amount": lambda rng, s: _rupees(_amount_value(rng, 59, 1_200), rng),
    "big_amount": lambda rng, s: _rupees(_amount_value(rng, 50_000, 6_000_000), rng),
    "emi": lambda rng, s: _rupees(_amount_value(rng, 1_500, 95_000), rng),
    "emi2": lambda rng, s: _rupees(_amount_value(rng, 1_500, 95_000), rng),
    "rate": lambda rng, s: _rate(rng, 7.2),
    "rate2": lambda rng, s: _rate(rng, 10.3),
    "last4": lambda rng, s: _digits(rng, 4),
    "card": lambda rng, s: _masked_card(rng, s["last4"]),
    "acct": lambda rng, s: "X" * rng.choice((4, 6, 8)) + _digits(rng, 4),
    "loan_acct": lambda rng, s: rng.choice(("HL", "PL", "LN", "CL")) + "XXXXXX" + _digits(rng, 4),
    "utr": lambda rng, s: rng.choice("3456") + _digits(rng, 11),
    "upi_ref": lambda rng, s: _upi_ref(rng, s["utr"]),
    "upi_id": lambda rng, s: _upi_id(rng, s["first"]),
    "payee": lambda rng, s: _upi_id(rng, rng.choice(FIRST_NAMES)),
    "date": lambda rng, s: _date(rng),
    "date2": lambda rng, s: _date(rng),
    "time": lambda rng, s: _time(rng),
    "ticket": lambda rng, s: rng.choice(("SR", "CMP-", "CRM", "REF")) + _digits(rng, 8),
    "phone": lambda rng, s: rng.choice("6789") + _digits(rng, 1) + "XXXXXX" + _digits(rng, 2),
    "days": lambda rng, s: str(rng.randint(3, 45)),
    "months": lambda rng, s: str(rng.randint(2, 14)),
    "years": lambda rng, s: str(rng.randint(2, 25)),
    "loan_type": lambda rng, s: rng.choice(LOAN_TYPES),
    "pan": lambda rng, s: "XXXXX" + _digits(rng, 4) + rng.choice("ABCDEFGHJKLMNPRSTZ"),
    "aadhaar": lambda rng, s: "XXXX XXXX " + _digits(rng, 4),
    "cust_id": lambda rng, s: "CIF" + _digits(rng, 9),
    "cheque": lambda rng, s: _digits(rng, 6),
}


class Slots(dict):
    """Slot values for one complaint, drawn on first use so every repeat of a slot agrees."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        value = _SLOT_MAKERS[key](self.rng, self)
        self[key] = value
        return value


def fill(template: str, slots: Slots) -> str:
    return template.format_map(slots)
