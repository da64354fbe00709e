"""Seeded generator of the built-in demo grievance data set.

Thousands of varied bank complaints for five desks, in English and romanised Hindi-English, with a
marked slice of "twins": groups with exactly the same bag of words but different desks, and a
received time per complaint for the routing board (core.data.demo_times).
"""

import io
import random
import re
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from numbers import Integral, Real
from pathlib import Path

import openpyxl
import pandas as pd
from openpyxl.writer.excel import ExcelWriter

from core.data.demo_phrases import (
    DESKS,
    MISSPELLINGS,
    PHRASEBOOKS,
    REPHRASINGS,
    TWIN_PATTERNS,
    VAGUE_CORES,
    FixedPattern,
    Phrasebook,
    SwapPattern,
)
from core.data.demo_slots import Slots, fill
from core.data.demo_times import received_times
from core.errors import UserError
from core.paths import write_atomically
from core.text import bag_key, word_spans, words

COLUMNS: tuple[str, ...] = (
    "complaint_id",
    "channel",
    "language",
    "text",
    "desk",
    "slice",
    "twin_group",
    "received_at",  # last, and drawn from its own generator: the other columns never change
)

CHANNELS: tuple[str, ...] = ("email", "app", "chat", "branch")
# Roughly balanced, Other a little smaller: a real complaints inbox is never perfectly even.
_DESK_WEIGHTS: tuple[float, ...] = (0.22, 0.21, 0.20, 0.20, 0.17)
# A fixed moment for the XLSX metadata and zip entries, so the same seed gives the same bytes.
_FIXED_TIME = datetime(2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class DemoConfig:
    """What to generate: how many rows, from which seed, and the twin and code-mixed shares."""

    rows: int = 3000
    seed: int = 7
    twin_share: float = 0.12  # share of rows in twin groups (same bag of words, other desk)
    codemix_share: float = 0.2  # share of rows in romanised Hindi-English ("hi-en")
    # The queue is cut at 00:00 IST of this day (None: today in India): every received_at lies
    # before it. Fix it for data that must be the same on every day.
    received_until: date | None = None


@dataclass(frozen=True)
class _Row:
    """One generated complaint before ids are assigned."""

    channel: str
    language: str
    text: str
    desk: str
    slice: str = "regular"
    twin_group: int | None = None


def _swap_members(pattern: SwapPattern, rng: random.Random) -> list[tuple[str, str]]:
    """Rotate `size` entities of different desks through the roles; returns (template, desk)."""
    desks = rng.sample(sorted(pattern.entities), pattern.size)
    phrases = [rng.choice(pattern.entities[desk]) for desk in desks]
    roles = "ABC"[: pattern.size]
    members = []
    for shift in range(pattern.size):
        order = [(i + shift) % pattern.size for i in range(pattern.size)]
        template = pattern.template
        for role, index in zip(roles, order, strict=True):
            template = template.replace("{" + role + "}", phrases[index])
        members.append((template, desks[order[roles.index(pattern.decisive)]]))
    return members


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _twin_frame(language: str, rng: random.Random) -> tuple[str, str]:
    """An opener and closer shared by every member of a group (bags stay equal)."""
    book = PHRASEBOOKS[language]
    opener = rng.choice(book.openers) + " " if rng.random() < 0.35 else ""
    closer = " " + rng.choice(book.closers) if rng.random() < 0.4 else ""
    return opener, closer


def _twin_group(pattern: SwapPattern | FixedPattern, rng: random.Random) -> list[tuple[str, str]]:
    """One group of (text, desk) twins, checked to share a bag of words and differ in desk."""
    if isinstance(pattern, SwapPattern):
        members = _swap_members(pattern, rng)
    else:
        members = list(pattern.members)
    opener, closer = _twin_frame(pattern.language, rng)
    slots = Slots(rng)
    group = [(fill(opener + _capitalise(t) + closer, slots), desk) for t, desk in members]
    _check_twins(group)
    return group


def _check_twins(group: Sequence[tuple[str, str]]) -> None:
    """The twin guarantee: one bag of words, distinct texts, at least two desks."""
    texts = [text for text, _ in group]
    if len({bag_key(text) for text in texts}) != 1:
        raise RuntimeError(f"twin members differ in their bag of words: {texts}")
    if len(set(texts)) != len(texts) or len({desk for _, desk in group}) < 2:
        raise RuntimeError(f"twin members must differ in text and span two desks: {group}")


def _make_twins(count: int, rng: random.Random, *, languages: Sequence[str]) -> list[_Row]:
    """About `count` twin rows in groups of two or three (never a group of one)."""
    patterns = [p for p in TWIN_PATTERNS if p.language in languages]
    rows: list[_Row] = []
    seen: set[str] = set()
    group_id = attempts = 0
    while count - len(rows) >= 2:
        attempts += 1
        if attempts > 50 * count:
            raise RuntimeError("could not draw enough distinct twin groups; lower twin_share")
        fitting = [p for p in patterns if _pattern_size(p) <= count - len(rows)]
        pattern = rng.choice(fitting)
        group = _twin_group(pattern, rng)
        if any(text in seen for text, _ in group):
            continue  # a repeat of an earlier group: draw again
        group_id += 1
        for text, desk in group:
            seen.add(text)
            channel = _channel("medium", rng)
            rows.append(_Row(channel, pattern.language, text, desk, "twin", group_id))
    return rows


def _pattern_size(pattern: SwapPattern | FixedPattern) -> int:
    return pattern.size if isinstance(pattern, SwapPattern) else len(pattern.members)


_STYLES = ("terse", "short", "medium", "long")
_STYLE_WEIGHTS = (0.08, 0.30, 0.42, 0.20)
_LONG_WORDS = 60  # a "long" complaint rambles on until it has at least this many words

_CHANNEL_WEIGHTS = {  # email, app, chat, branch: terse texts come from chat, long from email
    "terse": (0.05, 0.45, 0.45, 0.05),
    "short": (0.25, 0.35, 0.30, 0.10),
    "medium": (0.40, 0.25, 0.15, 0.20),
    "long": (0.60, 0.10, 0.05, 0.25),
}

_TYPO_SHARE = 0.08
_VAGUE_SHARE = 0.12
_REPHRASE_CHANCE = 0.2


def _channel(style: str, rng: random.Random) -> str:
    return rng.choices(CHANNELS, weights=_CHANNEL_WEIGHTS[style])[0]


def _maybe(phrases: Sequence[str], probability: float, rng: random.Random) -> list[str]:
    """One phrase with the given probability, else none."""
    return [rng.choice(phrases)] if rng.random() < probability else []


def _misspell(word: str, rng: random.Random) -> str:
    """A common misspelling, or two neighbouring letters swapped."""
    if word in MISSPELLINGS:
        return MISSPELLINGS[word]
    i = rng.randrange(1, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _add_typos(text: str, rng: random.Random) -> str:
    """Misspell one or two ordinary lower-case words (never numbers, names or acronyms)."""
    spans = [s for s in word_spans(text) if s.text.isalpha() and s.text.islower()]
    spans = [s for s in spans if len(s.text) >= 5]
    chosen = rng.sample(spans, min(len(spans), rng.randint(1, 2)))
    for span in sorted(chosen, key=lambda s: s.start, reverse=True):
        text = text[: span.start] + _misspell(span.text, rng) + text[span.end :]
    return text


def _compose(style: str, book: Phrasebook, desk: str, rng: random.Random) -> list[str]:
    """The templates of one complaint in reading order: opener, body, closer."""
    core = rng.choice(book.cores[desk])
    if style == "short":
        return [core, *_maybe(book.closers, 0.3, rng)]
    is_long = style == "long"
    pool = [*book.details[desk], *book.generic_details]
    details = rng.sample(pool, 1 if not is_long else rng.randint(2, 3))
    context = _maybe(book.contexts, 0.6 if is_long else 0.2, rng)
    body = [core, *details, *_maybe(book.distractors, 0.4 if is_long else 0.2, rng)]
    body = [*context, *body] if rng.random() < 0.5 else [*body, *context]
    opener = _maybe(book.openers, 0.9 if is_long else 0.55, rng)
    return [*opener, *body, *_maybe(book.closers, 0.9 if is_long else 0.65, rng)]


def _ramble(parts: list[str], book: Phrasebook, desk: str, rng: random.Random) -> list[str]:
    """Extra detail sentences before the closer, for complaints that go on and on."""
    spare = [p for p in (*book.details[desk], *book.generic_details) if p not in parts]
    rng.shuffle(spare)
    return parts[:-1] + spare[:4] + parts[-1:]


def _vague_text(desk: str, language: str, rng: random.Random) -> str:
    """An underspecified complaint that was routed to `desk` (see VAGUE_CORES)."""
    options = [(template, weights.get(desk, 0)) for template, weights in VAGUE_CORES[language]]
    options = [(template, weight) for template, weight in options if weight > 0]
    template = rng.choices([t for t, _ in options], weights=[w for _, w in options])[0]
    book = PHRASEBOOKS[language]
    parts = [
        *_maybe(book.openers, 0.4, rng),
        template,
        *_maybe(book.generic_details, 0.4, rng),
        *_maybe(book.closers, 0.5, rng),
    ]
    slots = Slots(rng)
    return " ".join(fill(part, slots) for part in parts)


def _rephrase(text: str, rng: random.Random) -> str:
    """Swap a few stock phrases for their variants, as different writers would."""
    for old, variants in REPHRASINGS.items():
        if old in text and rng.random() < _REPHRASE_CHANCE:
            text = re.sub(rf"\b{re.escape(old)}\b", rng.choice(variants), text)
    return text


def _regular_text(desk: str, language: str, style: str, rng: random.Random) -> str:
    """One regular complaint of the given desk, language and style."""
    book = PHRASEBOOKS[language]
    slots = Slots(rng)
    if style == "terse":
        return fill(rng.choice(book.terse[desk]), slots)
    parts = _compose(style, book, desk, rng)
    text = " ".join(fill(part, slots) for part in parts)
    if style == "long" and len(words(text)) < _LONG_WORDS:
        text = " ".join(fill(part, slots) for part in _ramble(parts, book, desk, rng))
    return text


def _regular_row(desk: str, language: str, taken: set[str], rng: random.Random) -> _Row:
    """A regular row whose text is new (never a twin's text; repeats of terse texts allowed)."""
    for attempt in range(50):
        if rng.random() < _VAGUE_SHARE:
            style, text = "short", _vague_text(desk, language, rng)
        else:
            style = rng.choices(_STYLES, weights=_STYLE_WEIGHTS)[0]
            text = _regular_text(desk, language, style, rng)
        if language == "en":
            text = _rephrase(text, rng)
        if language == "en" and rng.random() < _TYPO_SHARE:
            text = _add_typos(text, rng)
        channel = _channel(style, rng)
        if channel == "chat" and rng.random() < 0.4:
            text = text.lower()
        if text not in taken or attempt >= 10:
            return _Row(channel, language, text, desk)
    raise RuntimeError(f"could not write a new {desk} complaint")


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` in proportion to `weights` (largest remainder, ties to the first)."""
    scale = sum(weights)
    exact = [total * w / scale for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _regular_desks(rows: int, twins: Sequence[_Row]) -> list[str]:
    """Desks for the regular rows so that the whole data set follows the desk weights."""
    target = _apportion(rows, _DESK_WEIGHTS)
    in_twins = Counter(row.desk for row in twins)
    need = [max(0, t - in_twins[desk]) for t, desk in zip(target, DESKS, strict=True)]
    counts = _apportion(rows - len(twins), need if sum(need) else _DESK_WEIGHTS)
    return [desk for desk, count in zip(DESKS, counts, strict=True) for _ in range(count)]


def _make_regular(config: DemoConfig, twins: Sequence[_Row], rng: random.Random) -> list[_Row]:
    """The regular rows: desks to the desk weights, a share of them code-mixed."""
    desks = _regular_desks(config.rows, twins)
    twin_hi = sum(row.language == "hi-en" for row in twins)
    hi_count = min(len(desks), max(0, round(config.rows * config.codemix_share) - twin_hi))
    hi_rows = set(rng.sample(range(len(desks)), hi_count))
    twin_texts = {row.text for row in twins}
    taken = set(twin_texts)
    rows = []
    for i, desk in enumerate(desks):
        row = _regular_row(desk, "hi-en" if i in hi_rows else "en", taken, rng)
        if row.text in twin_texts:
            raise RuntimeError("a regular complaint came out equal to a twin; change the seed")
        taken.add(row.text)
        rows.append(row)
    return rows


def _same_group(a: _Row, b: _Row) -> bool:
    return a.twin_group is not None and a.twin_group == b.twin_group


def _can_take(rows: Sequence[_Row], k: int, i: int) -> bool:
    """Whether the regular row at `k` may trade places with the twin at `i`."""
    if abs(k - i) < 2 or rows[k].slice != "regular":
        return False
    neighbours = [rows[j] for j in (k - 1, k + 1) if 0 <= j < len(rows)]
    return not any(_same_group(rows[i], row) for row in neighbours)


def _separate_twins(rows: list[_Row]) -> list[_Row]:
    """Move twins apart so no two members of a group sit next to each other."""
    rows = list(rows)
    for i in range(1, len(rows)):
        if _same_group(rows[i - 1], rows[i]):
            k = next((k for k in range(len(rows)) if _can_take(rows, k, i)), None)
            if k is not None:  # None only when nearly every row is a twin
                rows[i], rows[k] = rows[k], rows[i]
    return rows


def _frame(rows: Sequence[_Row], received: Sequence[str]) -> pd.DataFrame:
    """The data set as a DataFrame with the public columns, ids in row order."""
    frame = pd.DataFrame(
        {
            "complaint_id": [f"GL-{i:06d}" for i in range(1, len(rows) + 1)],
            "channel": [row.channel for row in rows],
            "language": [row.language for row in rows],
            "text": [row.text for row in rows],
            "desk": [row.desk for row in rows],
            "slice": [row.slice for row in rows],
            "twin_group": pd.array([row.twin_group for row in rows], dtype="Int64"),
            "received_at": list(received),
        }
    )
    return frame[list(COLUMNS)]


def _is_whole(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _validate(config: DemoConfig) -> None:
    if not isinstance(config, DemoConfig):
        raise TypeError(f"config must be a DemoConfig, got {type(config).__name__}")
    if not _is_whole(config.rows) or config.rows < 50:
        raise UserError(f"rows must be a whole number of at least 50, got {config.rows!r}")
    if not _is_whole(config.seed):
        raise UserError(f"seed must be a whole number, got {config.seed!r}")
    for name in ("twin_share", "codemix_share"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value <= 0.5:
            raise UserError(f"{name} must be a number between 0 and 0.5, got {value!r}")
    until = config.received_until
    if until is not None and (isinstance(until, datetime) or not isinstance(until, date)):
        raise UserError(f"received_until must be a date such as 2026-03-06, got {until!r}")


def _normalised(config: DemoConfig) -> DemoConfig:
    """Plain Python numbers (numpy integers seed `random` differently or not at all)."""
    return replace(
        config,
        rows=int(config.rows),
        seed=int(config.seed),
        twin_share=float(config.twin_share),
        codemix_share=float(config.codemix_share),
    )


def generate_demo_data(config: DemoConfig = DemoConfig()) -> pd.DataFrame:
    """Generate the demo grievance data set; the same config always gives the same rows.

    Parameters
    ----------
    config : DemoConfig
        Row count, seed, and the shares of twin and code-mixed rows.

    Returns
    -------
    pandas.DataFrame
        `(config.rows, 8)` with columns `complaint_id, channel, language, text, desk, slice,
        twin_group, received_at`, shuffled. `slice` is "twin" for rows in a twin group and
        "regular" otherwise; `twin_group` (nullable Int64) is the group id of a twin and NA
        otherwise. Every twin group has one bag of words (`core.text.bag_key`) and at least two
        desks. `received_at` is ISO 8601 with the +05:30 offset, growing with the complaint id,
        all before 00:00 IST of `config.received_until` (core.data.demo_times).
    """
    _validate(config)
    config = _normalised(config)
    rng = random.Random(config.seed)  # local: the global random state is never touched
    languages = ("en", "hi-en") if config.codemix_share > 0 else ("en",)
    twins = _make_twins(round(config.rows * config.twin_share), rng, languages=languages)
    rows = twins + _make_regular(config, twins, rng)
    rng.shuffle(rows)
    rows = _separate_twins(rows)
    received = received_times(len(rows), seed=config.seed, received_until=config.received_until)
    return _frame(rows, received)


class _FixedTimeZip(zipfile.ZipFile):
    """A zip whose entries all carry one fixed timestamp, so equal content gives equal bytes."""

    def writestr(self, zinfo_or_arcname, data, compress_type=None, compresslevel=None):
        if isinstance(zinfo_or_arcname, str):
            info = zipfile.ZipInfo(zinfo_or_arcname, date_time=_FIXED_TIME.timetuple()[:6])
            info.compress_type = self.compression
            info.external_attr = 0o600 << 16
            zinfo_or_arcname = info
        super().writestr(zinfo_or_arcname, data, compress_type, compresslevel)

    def write(self, filename, arcname=None, compress_type=None, compresslevel=None):
        # openpyxl streams each worksheet through a temporary file, whose mtime would leak in.
        data = Path(filename).read_bytes()
        self.writestr(arcname or Path(filename).name, data, compress_type, compresslevel)


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _xlsx_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as one XLSX sheet with fixed document times, so the bytes are reproducible."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "complaints"
    sheet.append(list(frame.columns))
    for values in frame.astype(object).itertuples(index=False):
        sheet.append([None if pd.isna(v) else v for v in values])
    workbook.properties.created = workbook.properties.modified = _FIXED_TIME
    buffer = io.BytesIO()
    # openpyxl's save_workbook stamps "now" into the file; its ExcelWriter does not.
    with _FixedTimeZip(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(workbook, archive).save()
    return buffer.getvalue()


def write_demo_data(path: str | Path, config: DemoConfig = DemoConfig()) -> Path:
    """Generate the demo data and write it to `path` as CSV (UTF-8, no index) or XLSX.

    The format follows the suffix. The file appears whole or not at all.

    Returns
    -------
    Path
        The path written.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in (".csv", ".xlsx"):
        raise UserError(f"cannot write demo data to {target.name!r}: use .csv or .xlsx")
    if not target.parent.is_dir():
        raise UserError(f"folder {target.parent} does not exist: create it first")
    frame = generate_demo_data(config)
    write_atomically(target, _csv_bytes(frame) if suffix == ".csv" else _xlsx_bytes(frame))
    return target
