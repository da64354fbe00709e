"""Argument checks for the public core boundary: each raises UserError with a message that says
what the value must be, so configs, CLI and pages all report bad input the same way."""

import math
import re
from collections.abc import Collection
from pathlib import Path

from core.errors import UserError
from core.text import word_spans


def check_int(name: str, value: object, *, minimum: int) -> None:
    """An int (not a bool) of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_int_fields(config: object, **minimums: int) -> None:
    """`check_int` on several fields of a config: `check_int_fields(self, seed=0, top_k=1)`."""
    for name, minimum in minimums.items():
        check_int(name, getattr(config, name), minimum=minimum)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_fraction(name: str, value: object, *, low: float, high: float) -> None:
    """A finite number in the half-open interval (low, high]."""
    if not _is_number(value) or not low < value <= high:
        raise UserError(f"{name} must be a number in ({max(low, 0)}, {high}], got {value!r}")


def check_positive(name: str, value: object) -> None:
    """A finite number above zero."""
    if not _is_number(value) or value <= 0:
        raise UserError(f"{name} must be a finite number > 0, got {value!r}")


def check_choice(name: str, value: object, choices: Collection[str]) -> None:
    """One of `choices`."""
    if value not in choices:
        raise UserError(f"{name} must be one of {choices}, got {value!r}")


def check_non_empty_str(name: str, value: object) -> None:
    """A string with something besides white space."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{name} must be a non-empty string, got {value!r}")


# The one cap on a complaint given one at a time (typed into Classify, Explain or Order probes,
# or passed to the command line's explain and probe): 20,000 characters is about 3,500 words,
# four times the longest complaint of the CFPB sample and far more than any model reads (the
# transformer reads 32 characters per word piece of max_length: 4,096 at 128). It bounds the
# work a viewer can ask for (masking, the bag of words, probes) before any of it starts.
MAX_COMPLAINT_CHARS = 20_000


def check_complaint(text: object, *, purpose: str) -> str:
    """A complaint with at least one word and at most MAX_COMPLAINT_CHARS characters; `purpose`
    completes "the text has no words to ..."."""
    if not isinstance(text, str):
        raise UserError(f"text must be a string, got {type(text).__name__}")
    if len(text) > MAX_COMPLAINT_CHARS:
        raise UserError(
            f"the complaint is {len(text):,} characters; one complaint may have at most "
            f"{MAX_COMPLAINT_CHARS:,}: shorten it, or classify it as a file"
        )
    if not word_spans(text):
        raise UserError(f"the text has no words to {purpose}; enter a complaint")
    return text


def check_texts(texts: object, *, allow_empty: bool = False) -> list[str]:
    """A list of strings (not one string); returns it as a list."""
    if isinstance(texts, str):
        raise UserError("texts must be a list of strings, not one string; wrap it as [text]")
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise UserError(f"texts[{bad}] is {type(texts[bad]).__name__}, not str; drop or fill it")
    if not texts and not allow_empty:
        raise UserError("texts is empty; give at least one text per class")
    return texts


# One safe path segment: the names of saved models and saved data sets (their folder names).
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_safe_name(kind: str, name: object) -> str:
    """Return `name` if it is a safe folder name for a `kind` ("model", "data set"); raise
    UserError saying what to change."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or name.strip(".") == "":
        raise UserError(
            f"{kind} name {name!r} is not allowed: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (no slashes, no spaces)"
        )
    return name


def folder_inside(root: str | Path, name: str, *, kind: str, place: str) -> Path:
    """The folder `name` (checked by `check_safe_name`) directly inside `root` (need not exist);
    UserError when it is a symbolic link or resolves elsewhere. `place` names `root` in the
    message ("the models folder"), never its path."""
    check_safe_name(kind, name)
    root = Path(root).resolve()
    folder = root / name
    if folder.is_symlink() or folder.resolve().parent != root:
        raise UserError(f"{kind} name {name!r} does not name a folder inside {place}")
    return folder
