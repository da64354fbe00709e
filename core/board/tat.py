"""The turnaround-time (TAT) file of the routing board: hours per desk with their regulatory
source, the time zone of naive received times, and the delays the what-if charges. Read from a
small TOML file (`GRIEVANCE_LENS_TAT`, default `core/board/tat.toml`), checked line by line."""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserError

TAT_ENV = "GRIEVANCE_LENS_TAT"
DEFAULT_TAT_PATH = Path(__file__).with_name("tat.toml")
MAX_TAT_BYTES = 64 * 1024  # a TAT file is a few dozen lines; anything bigger is not one
MAX_HOURS = 8760.0  # one year: a longer turnaround is a typo, not a policy
MAX_DESKS = 200
MAX_TEXT = 500  # characters of a desk name or a source

_TOP_KEYS = {"timezone", "default_hours", "default_source", "reroute_hours", "triage_hours"}
_DESK_KEYS = {"hours", "source"}
_DEFAULTS = {"timezone": "Asia/Kolkata", "default_source": "stated default (no source given)"}
_REQUIRED_HOURS = ("default_hours", "reroute_hours", "triage_hours")


@dataclass(frozen=True)
class DeskTat:
    """One desk's turnaround: hours from receipt to breach, and where the figure comes from."""

    desk: str
    hours: float
    source: str
    line: int | None = None  # line of its [desks."..."] header in the TAT file


@dataclass(frozen=True)
class TatTable:
    """The TAT file as loaded: per-desk hours, the default for desks it does not name, the time
    zone of naive received times, and the what-if delays (operating assumptions)."""

    desks: tuple[DeskTat, ...]
    default_hours: float
    default_source: str
    timezone: str  # naive received_at values are read in it; as_of is shown in it
    reroute_hours: float  # what a complaint at the wrong desk loses before it reaches the right one
    triage_hours: float  # what a complaint sent to people first loses
    path: str

    def _by_desk(self) -> dict[str, DeskTat]:
        return {d.desk: d for d in self.desks}

    def hours_for(self, desk: str) -> float:
        """The TAT of `desk`, or the default when the file does not name it."""
        found = self._by_desk().get(desk)
        return self.default_hours if found is None else found.hours

    def source_for(self, desk: str) -> str:
        """Where the TAT of `desk` comes from (the default's source when not named)."""
        found = self._by_desk().get(desk)
        return self.default_source if found is None else found.source


def tat_path() -> Path:
    """The TAT file in use: $GRIEVANCE_LENS_TAT when set, else the shipped default."""
    value = os.environ.get(TAT_ENV, "").strip()
    return Path(value) if value else DEFAULT_TAT_PATH


def load_tat(path: str | Path | None = None) -> TatTable:
    """Read and check a TAT file (None: `tat_path()`).

    Raises UserError, one line naming the file and the line to fix, for a file that is missing,
    too big, not UTF-8 or not TOML, an unknown key (a typo never falls back to a default), hours
    that are not a number in (0, 8760], or a time zone zoneinfo does not know.
    """
    path = tat_path() if path is None else Path(path)
    text = _read_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"TAT file {path}: not valid TOML ({err}); fix that line") from err
    return _table(data, _Locator(path, text))


def _read_text(path: Path) -> str:
    """The file's text, its size checked before it is read."""
    try:
        size = path.stat().st_size
    except FileNotFoundError as err:
        raise UserError(
            f"no TAT file at {path}; give an existing file (--tat or ${TAT_ENV})"
        ) from err
    if not path.is_file() or size > MAX_TAT_BYTES:
        raise UserError(f"TAT file {path} is not a file of at most {MAX_TAT_BYTES // 1024} KB")
    with path.open("rb") as handle:
        data = handle.read(MAX_TAT_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"TAT file {path} is not UTF-8 text; save it as UTF-8") from err


class _Locator:
    """Finds the line of a key in the TAT text, so value errors can name it (tomllib only
    reports lines for syntax errors)."""

    _HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(?:#.*)?$")

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def _section(self, line: str) -> tuple[str, ...] | None:
        match = self._HEADER.match(line)
        if match is None:
            return None
        try:  # the header's dotted key, unquoted exactly as TOML reads it
            return _key_path(tomllib.loads(f"{match.group(1)} = 0"))
        except tomllib.TOMLDecodeError:
            return None

    def line_of(self, section: tuple[str, ...], key: str | None = None) -> int | None:
        """1-based line of `key` in table `section` (the header's line when key is None)."""
        current: tuple[str, ...] = ()
        for number, line in enumerate(self.lines, start=1):
            header = self._section(line)
            if header is not None:
                current = header
                if key is None and header == section:
                    return number
            elif key is not None and current == section and _assigns(line, key):
                return number
        return None

    def error(self, message: str, section: tuple[str, ...], key: str | None = None) -> UserError:
        line = self.line_of(section, key) or (self.line_of(section) if key else None)
        where = f" line {line}" if line else ""
        return UserError(f"TAT file {self.path}{where}: {message}")


def _key_path(parsed: dict) -> tuple[str, ...]:
    path: list[str] = []
    while isinstance(parsed, dict) and len(parsed) == 1:
        key, parsed = next(iter(parsed.items()))
        path.append(key)
    return tuple(path)


def _assigns(line: str, key: str) -> bool:
    stripped = line.strip()
    for quote in ("", '"', "'"):
        name = f"{quote}{key}{quote}"
        if stripped.startswith(name) and stripped[len(name) :].lstrip().startswith("="):
            return True
    return False


def _table(data: dict, where: _Locator) -> TatTable:
    desks = data.get("desks", {})
    unknown = sorted(set(data) - _TOP_KEYS - {"desks"})
    if unknown:
        raise where.error(
            f"unknown key '{unknown[0]}'; allowed: {_allowed(_TOP_KEYS)}", (), unknown[0]
        )
    if not isinstance(desks, dict):
        raise where.error(
            'desks must be tables: [desks."UPI Dispute"] then hours = 24', (), "desks"
        )
    if len(desks) > MAX_DESKS:
        raise where.error(f"{len(desks)} desks; at most {MAX_DESKS}", ())
    top = {**_DEFAULTS, **data}
    hours = {key: _hours(top.get(key), key, (), where) for key in _REQUIRED_HOURS}
    return TatTable(
        desks=tuple(_desk(name, value, where) for name, value in desks.items()),
        default_hours=hours["default_hours"],
        default_source=_text(top["default_source"], "default_source", (), where),
        timezone=_timezone(top["timezone"], where),
        reroute_hours=hours["reroute_hours"],
        triage_hours=hours["triage_hours"],
        path=str(where.path),
    )


def _allowed(keys: set[str]) -> str:
    return ", ".join(sorted(keys))


def _desk(name: str, value: object, where: _Locator) -> DeskTat:
    section = ("desks", name)
    if not isinstance(value, dict):
        raise where.error(f"desk '{_short(name)}' must be a table with hours and source", section)
    if not name.strip() or len(name) > MAX_TEXT:
        raise where.error(f"desk names must be 1 to {MAX_TEXT} characters", section)
    unknown = sorted(set(value) - _DESK_KEYS)
    if unknown:
        message = f"unknown key '{unknown[0]}' for desk '{_short(name)}'; allowed: hours, source"
        raise where.error(message, section, unknown[0])
    if "hours" not in value:
        raise where.error(f"desk '{_short(name)}' has no hours; add hours = 24 (say)", section)
    hours = _hours(value["hours"], "hours", section, where)
    source = _text(value.get("source", "no source given"), "source", section, where)
    return DeskTat(desk=name, hours=hours, source=source, line=where.line_of(section))


def _hours(value: object, key: str, section: tuple[str, ...], where: _Locator) -> float:
    """A turnaround in hours: a number in (0, MAX_HOURS]."""
    if value is None:
        raise where.error(f"{key} is missing; add {key} = <hours>", section)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise where.error(
            f"{key} must be a number of hours, got {_short(repr(value))}", section, key
        )
    if not 0 < value <= MAX_HOURS:
        desk = f" of desk '{_short(section[-1])}'" if section else ""
        raise where.error(
            f"{key}{desk} is {value:g}; give hours above 0 and at most {MAX_HOURS:g} (a year)",
            section,
            key,
        )
    return float(value)


def _text(value: object, key: str, section: tuple[str, ...], where: _Locator) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise where.error(f"{key} must be text of at most {MAX_TEXT} characters", section, key)
    return value


def _timezone(value: object, where: _Locator) -> str:
    if isinstance(value, str) and value and len(value) <= 64:
        try:
            zoneinfo.ZoneInfo(value)
            return value
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass  # refused below, with the line
    example = 'timezone = "Asia/Kolkata"'
    raise where.error(
        f"unknown timezone {_short(repr(value))}; write e.g. {example}", (), "timezone"
    )


def _short(text: str, limit: int = 60) -> str:
    """`text` on one line, cut to `limit` characters (names come from the file)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _normalised(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().casefold())


def check_tat_desks(tat: TatTable, desks: Sequence[str]) -> list[str]:
    """Compare the TAT file's desks with the desks of a file.

    Raises UserError naming the TAT line when a TAT desk is a near miss of a file desk (case,
    spaces, or a close spelling): its TAT would silently not apply. Returns one warning per TAT
    desk the file simply does not have.
    """
    present = sorted({str(d) for d in desks})
    by_normal = {_normalised(d): d for d in present}
    warnings = []
    for entry in tat.desks:
        if entry.desk in present:
            continue
        close = by_normal.get(_normalised(entry.desk))
        close = close or next(iter(difflib.get_close_matches(entry.desk, present, 1, 0.8)), None)
        if close is not None:
            where = f" line {entry.line}" if entry.line else ""
            raise UserError(
                f"TAT file {tat.path}{where}: desk '{_short(entry.desk)}' is not a desk of the "
                f"file; did you mean '{_short(close)}'? Spell it exactly as the file does"
            )
        warnings.append(f"the TAT file names desk '{_short(entry.desk)}', which this file lacks")
    return warnings
