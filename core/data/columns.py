"""Column detection: the one place that picks the text and label columns of a table, by name
first and by content second, and checks a column a user named."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from core.data.limits import DataError
from core.data.readers import clean_cell
from core.text import words

TEXT_NAMES = (
    "text", "complaint", "complaint_text", "narrative", "description", "message", "body",
    "details", "consumer_complaint_narrative",
)  # fmt: skip

LABEL_NAMES = (
    "label", "category", "desk", "class", "product", "queue", "department", "intent", "target",
)  # fmt: skip

_ID_LIKE = re.compile(r"(^|_)(id|uuid|guid|key|ref|reference|no|num|number|index)$|^unnamed")
_MAX_LABELS = 50
_MIN_TEXT_WORDS = 2.0  # a text column holds phrases, not codes or single words
_SHOWN_COLUMNS = 30
_TEXT_SAMPLE_ROWS = 5_000
_MAX_RAW_LABEL_VALUES = 20 * _MAX_LABELS  # before stripping whitespace variants


@dataclass(frozen=True)
class ColumnChoice:
    """The text and label columns and, for each, why it was chosen."""

    text_col: str
    label_col: str
    text_reason: str
    label_reason: str


def detect_columns(
    df: pd.DataFrame, *, text_col: str | None = None, label_col: str | None = None
) -> ColumnChoice:
    """Choose the complaint-text and label columns of a labelled table `df`.

    By name first (case, surrounding whitespace and space/underscore/hyphen ignored), in the
    priority order of TEXT_NAMES and LABEL_NAMES; otherwise the column with the longest texts
    (mean of at least two words, mostly distinct values) and a column with 2 to 50 distinct values
    that cover at most half the rows (id-like names excluded). Columns passed in are kept as given.
    """
    df = df.rename(columns=str)
    columns = list(df.columns)
    for given in (text_col, label_col):
        if given is not None:
            _require_column(given, columns)
    if text_col is not None and text_col == label_col:
        raise DataError(f"the text and label columns are both '{text_col}'; choose two columns")
    text_by_name = _match_name(columns, TEXT_NAMES, exclude=label_col) if text_col is None else None
    label_by_name = (
        _match_name(columns, LABEL_NAMES, exclude=text_col or text_by_name)
        if label_col is None
        else None
    )
    text_col, text_reason = _pick_text(
        df, text_col, text_by_name, exclude=label_col or label_by_name
    )
    label_col, label_reason = _pick_label(df, label_col, label_by_name, exclude=text_col)
    return ColumnChoice(text_col, label_col, text_reason, label_reason)


def detect_text_column(df: pd.DataFrame, *, text_col: str | None = None) -> tuple[str, str]:
    """The complaint-text column of a table that may have no labels (a file to classify), and
    why: `text_col` when given (it must exist), else the rules of `detect_columns`, where a
    column named like a label is never taken for the text."""
    df = df.rename(columns=str)
    columns = list(df.columns)
    if text_col is not None:
        _require_column(text_col, columns)
        return text_col, "given"
    label_by_name = _match_name(columns, LABEL_NAMES, exclude=None)
    text_by_name = _match_name(columns, TEXT_NAMES, exclude=label_by_name)
    return _pick_text(df, None, text_by_name, exclude=label_by_name)


def _normalise_name(name: str) -> str:
    return re.sub(r"[\s\-_]+", "_", name.strip().casefold())


def _match_name(columns: list[str], wanted: tuple[str, ...], *, exclude: str | None) -> str | None:
    normalised = {}
    for col in columns:
        if col != exclude:
            normalised.setdefault(_normalise_name(col), col)
    return next((normalised[w] for w in wanted if w in normalised), None)


def _pick_text(
    df: pd.DataFrame, given: str | None, by_name: str | None, *, exclude: str | None
) -> tuple[str, str]:
    if given is not None:
        return given, "given"
    if by_name is not None:
        return by_name, f"named '{by_name}'"
    sample = df.iloc[:_TEXT_SAMPLE_ROWS]  # enough to judge a column, cheap on big files
    stats = {col: _text_stats(sample[col]) for col in df.columns if col != exclude}
    fits = {
        col: mean_chars
        for col, (mean_chars, mean_words, distinct_share) in stats.items()
        if not _is_id_like(col) and mean_words >= _MIN_TEXT_WORDS and distinct_share > 0.5
    }
    if not fits:
        raise DataError(
            "could not tell which column holds the complaint text; the file has: "
            f"{column_list(df.columns)}; pass --text-col (and --label-col) to name them"
        )
    best = max(fits, key=fits.__getitem__)
    return best, f"longest texts on average ({fits[best]:.0f} characters)"


def _text_stats(series: pd.Series) -> tuple[float, float, float]:
    """Mean characters, mean words and share of distinct values among the filled cells."""
    values = [v for v in map(clean_cell, series.tolist()) if v is not None]
    if not values:
        return 0.0, 0.0, 0.0
    mean_chars = sum(map(len, values)) / len(values)
    mean_words = sum(len(words(v)) for v in values) / len(values)
    return mean_chars, mean_words, len(set(values)) / len(values)


def _pick_label(
    df: pd.DataFrame, given: str | None, by_name: str | None, *, exclude: str
) -> tuple[str, str]:
    if given is not None:
        return given, "given"
    if by_name is not None:
        return by_name, f"named '{by_name}'"
    candidates = _label_candidates(df, exclude=exclude)
    if not candidates:
        raise DataError(
            "could not tell which column holds the labels (none is named like "
            f"{'/'.join(LABEL_NAMES[:4])} and none has 2 to {_MAX_LABELS} repeated values); "
            f"the file has: {column_list(df.columns)}; pass --label-col to name it"
        )
    # The fullest candidate wins; on a tie the rightmost, where labels usually sit.
    best = max(candidates, key=candidates.__getitem__)
    others = [str(c) for c in candidates if c != best]
    reason = f"{candidates[best][2]} distinct values in {len(df)} rows"
    return best, reason + (f" (other candidates: {', '.join(others)})" if others else "")


def _label_candidates(df: pd.DataFrame, *, exclude: str) -> dict[str, tuple[int, int, int]]:
    """Label-like columns -> (filled cells, position, distinct values)."""
    candidates = {}
    for position, col in enumerate(df.columns):
        if col == exclude or _is_id_like(col):
            continue
        filled, distinct = _filled_and_distinct(df[col])
        if 2 <= distinct <= min(_MAX_LABELS, 0.5 * len(df)):
            candidates[col] = (filled, position, distinct)
    return candidates


def _filled_and_distinct(series: pd.Series) -> tuple[int, int]:
    """Non-empty cells and their distinct stripped values; (0, 0) for a column with too many
    distinct raw values to be labels (ids, texts), which is decided without a row loop."""
    counts = series.value_counts(dropna=True)
    if len(counts) > _MAX_RAW_LABEL_VALUES:
        return 0, 0
    cleaned = [(clean_cell(value), n) for value, n in counts.items()]
    return sum(n for value, n in cleaned if value), len({value for value, _ in cleaned if value})


def _is_id_like(column: object) -> bool:
    return bool(_ID_LIKE.search(_normalise_name(str(column))))


def column_list(columns: Sequence[object]) -> str:
    names = [str(c) for c in columns]
    shown = ", ".join(names[:_SHOWN_COLUMNS])
    return shown + (
        f" … ({len(names) - _SHOWN_COLUMNS} more)" if len(names) > _SHOWN_COLUMNS else ""
    )


def _require_column(column: str, columns: list[str]) -> None:
    if column in columns:
        return
    close = difflib.get_close_matches(column, columns, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise DataError(f"no column '{column}'; the file has: {column_list(columns)}{hint}")
