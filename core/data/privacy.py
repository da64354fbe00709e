"""Personal-data masking: card, account, phone, Aadhaar and PAN numbers, e-mail addresses, UPI ids
and any other run of 10+ digits become readable placeholders, before a model is fitted on a text,
before a model reads one, and (as a display option) before a page shows one.

Decisions:
- One compiled alternation, tried left to right: at each position the first alternative that
  matches wins, so longer and more specific shapes come first (e-mail before UPI id, a grouped
  16-digit card before a 12-digit Aadhaar, a mobile before a bare account number, the catch-all
  for 10+ digits last). Every digit alternative refuses to start or end inside a longer run, so a
  shorter shape never takes a piece of a longer number.
- E-mail or UPI id: both are `name@something`. An e-mail's domain has a dot and a top-level
  domain (`name@gmail.com`); a UPI handle never has one (`name@okaxis`, `9876543210@ybl`). The
  e-mail alternative runs first, so `x@y.com` is an e-mail and a dotless `x@y` a UPI id.
- A bare run of digits cannot say what it is. A word just before it names it ("UTR", "Ref",
  "transaction id": a reference; "Aadhaar", "UID": Aadhaar; "A/c", "account": an account);
  otherwise 10 digits starting 6-9 is called a mobile, an unseparated 13-19 digit run a card,
  other 9-18 digit runs an account, and only the 4-4-4 grouped form of 12 digits Aadhaar. The
  name is a best guess; the digits are gone either way.
- Placeholders are one `\\w+` word each and never an ordinary word ("[CARD_NO]" reads as the
  token "card_no", not "card"), so masking adds no false evidence for a desk, and they hold no
  digit and no "@", so masking masked text changes nothing.
- Amounts ("₹5,00,000", "Rs. 25000"), dates, times, ticket ids with letters ("SR12345678") and
  the demo data's already-masked numbers ("XXXX XXXX XXXX 1234") have fewer than 9 digits in a
  row and stay as they are.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from core.errors import UserError

if TYPE_CHECKING:  # a type only: the pages mask text without importing pandas and scikit-learn
    from core.data.dataset import Dataset

# Recorded with a trained model; bump it when a change here changes what a model would see.
MASKING_VERSION = "personal-data-v1"

PLACEHOLDERS = {
    "email": "[EMAIL_ID]",
    "upi": "[UPI_ID]",
    "ref": "[REF_NO]",
    "card": "[CARD_NO]",
    "aadhaar": "[AADHAAR_NO]",
    "phone": "[PHONE_NO]",
    "pan": "[PAN_NO]",
    "account": "[ACCOUNT_NO]",
    "long": "[LONG_NO]",
}

_START = r"(?<![\w+])"  # not inside a word or number, nor right after a "+"
# A number right after one of these words is named by the word: "UTR 312345678901" is a
# reference, "Aadhaar 234567890123" an Aadhaar number, "A/c 123456789" an account.
_KEYS = {
    "ref": r"utr|rrn|ref(?:erence)?|txn|transaction",
    "aadhaar": r"aadhaa?r(?:\s+card)?|uid",
    "account": r"a/c|acct|account",
}
_KEY = rf"\b(?i:{'|'.join(_KEYS.values())})"
_KEY_GLUE = r"(?i:[ \t:#.-]{1,3}(?:(?:no|number|id)\b[ \t:#.-]{0,3})?(?:is\s+)?)"
# Indian mobiles: 10 digits from 6-9, as 5-5 or 3-3-4, after an optional +91, 91 or 0.
_MOBILE = (
    r"(?:\+91[ -]?|\b91[ -]|0)?[6-9]\d{4}[ -]?\d{5}"
    r"|(?:\+91[ -]?)?[6-9]\d{2}[ -]\d{3}[ -]\d{4}"
)
# 4-4-4 then 1-7 more digits (13-19 in all, as Visa, RuPay and Mastercard print them), or
# 4-6-4/5 (Diners, Amex); the separators are optional, so an unbroken 13-19 digit run is a card.
_CARD = r"\d{4}(?:[ -]?\d{4}){2}[ -]?\d{1,7}|\d{4}[ -]?\d{6}[ -]?\d{4,5}"
# A landline is 0 + STD code + number, 11 digits in all, the code in brackets or set apart.
_LANDLINE = r"\(?0\d{2}\)?[ -]?\d{8}|\(?0\d{3}\)?[ -]?\d{7}|\(?0\d{4}\)?[ -]?\d{6}"

# Alternatives in the order they are tried; see the module docstring for why this order.
_AT_SHAPES = (
    r"(?<![\w.+%-])(?P<email>[\w.+%-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,})(?![\w-])",
    r"(?<![\w.+%-])(?P<upi>[\w.-]{2,}@[A-Za-z][A-Za-z0-9]{1,63})(?![\w@-]|\.[\w-])",
)
_DIGIT_SHAPES = (
    rf"(?P<key>{_KEY}{_KEY_GLUE})(?P<keyed>\d{{9,22}})(?!\w)",
    rf"{_START}(?P<card>{_CARD})(?!\w)",
    rf"{_START}(?P<aadhaar>[2-9]\d{{3}}(?P<sep>[ -])\d{{4}}(?P=sep)\d{{4}})(?!\w)",
    rf"{_START}(?P<phone>{_MOBILE}|{_LANDLINE})(?!\w)",
    rf"{_START}(?P<pan>[A-Za-z]{{5}}\d{{4}}[A-Za-z])(?!\w)",
    rf"{_START}(?P<account>\d{{9,18}})(?!\w)",
    r"(?<!\d)(?P<long>\d{10,})",
)
# Case-insensitive only where it says so (the key words): a global flag doubles the scan time.
_ALL = re.compile("|".join(_AT_SHAPES + _DIGIT_SHAPES))
_DIGITS_ONLY = re.compile("|".join(_DIGIT_SHAPES))  # a text without "@" skips two alternatives
# Every alternative needs four digits in a row or an "@"; most complaints have neither (amounts
# are written "₹37,050"), and this one search is far cheaper than trying nine alternatives at
# every position.
_MAY_HOLD = re.compile(r"\d{4}|@")

_KEY_KINDS = [(kind, re.compile(words, re.IGNORECASE)) for kind, words in _KEYS.items()]


def _placeholder(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "keyed":  # keep "UTR " so the sentence still reads; mask only the number
        key = match.group("key")
        named = next(k for k, words in _KEY_KINDS if words.match(key))
        return key + PLACEHOLDERS[named]
    return PLACEHOLDERS[kind]


def mask_personal_data(text: str) -> str:
    """`text` with personal numbers, e-mail addresses and UPI ids replaced by placeholders.

    Idempotent: `mask_personal_data(mask_personal_data(t)) == mask_personal_data(t)`.
    """
    if not isinstance(text, str):
        raise UserError(f"text must be a string, got {type(text).__name__}")
    if _MAY_HOLD.search(text) is None:
        return text
    pattern = _ALL if "@" in text else _DIGITS_ONLY
    return pattern.sub(_placeholder, text)


def mask_texts(texts: Iterable[str]) -> list[str]:
    """`mask_personal_data` of each text, in order."""
    return [mask_personal_data(text) for text in texts]


def mask_dataset(dataset: Dataset) -> Dataset:
    """The same rows, labels and extra columns with every text masked."""
    return dataclasses.replace(dataset, texts=tuple(mask_texts(dataset.texts)))
