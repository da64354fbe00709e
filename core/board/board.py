"""The routing board of a classified file: per desk, the open complaints against the desk's
turnaround time (TAT), the share the model was unsure of, their ages, breaches now and within
24 hours, the complaints most at risk first, and the what-if of rerouting the unsure ones.

Rules. Every row of the file is open (a classified intake file is the open queue), except rows
whose `status` column reads closed, resolved, done or completed. A complaint's age is
`as_of - received_at`; `hours_left = TAT(routed desk) - age`; it has breached when hours_left < 0
and is due within 24 hours when 0 <= hours_left <= 24. Rows without a received time are counted
apart (`no_time`), never dropped. The routed desk is `predicted_label` (a classified file), else
the desk column detected like a label (core.data.columns), unless `BoardConfig.desk_col` names one.

Cost. Building a board is linear in the file's rows: the rows are grouped by desk once, never
filtered per desk; a file with more than MAX_BOARD_DESKS distinct desks (a wrong desk column) is
refused before any per-desk work, and `build_board` checks its caller's cancel between phases.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from core.board.received import detect_received_column, parse_received
from core.board.tat import TatTable, check_tat_desks
from core.board.whatif import RoutingInputs, Scenario, WhatIf, build_what_if, prob_columns
from core.data.columns import LABEL_NAMES, column_list, detect_columns, detect_text_column
from core.data.dataset import Dataset
from core.data.limits import DataError
from core.errors import UserError
from core.progress import check_cancel

__all__ = [
    "MAX_BOARD_DESKS", "AtRisk", "Board", "BoardConfig", "DeskLoad", "Scenario", "WhatIf",
    "build_board", "dataset_table", "render_board_text",
]  # fmt: skip

PREDICTED = "predicted_label"
NEEDS_REVIEW = "needs_review"
CONFIDENCE = "confidence"
BREACHED, DUE, ON_TIME, NO_TIME = "breached", "due in 24 h", "on time", "no time"
DUE_WINDOW_HOURS = 24.0
NO_DESK = "(no desk)"
MAX_TOP = 10_000
MAX_BOARD_DESKS = 200  # distinct desks a board draws (a TAT file names at most 200 too)
AT_RISK_TEXT_CHARS = 500  # enough to recognise a complaint; the file has the rest

_MODEL_COLUMNS = {PREDICTED, "bow_label", "transformer_label"}
_REVIEWED_NAMES = ("reviewed_desk", "reviewed_label", "correct_desk", "verdict")
_STATUS_NAMES = ("status", "state", "complaint_status")
_CLOSED = {"closed", "resolved", "done", "complete", "completed"}
_TRUE = {"true", "1", "yes", "y", "1.0"}
_FALSE = {"false", "0", "no", "n", "0.0"}


@dataclass(frozen=True)
class BoardConfig:
    """What to board: column overrides (None: detected), the moment ages are measured at
    (None: now), and how many at-risk complaints to keep."""

    received_col: str | None = None
    desk_col: str | None = None
    as_of: datetime | None = None  # naive: in the TAT file's time zone
    top: int = 100  # at-risk rows kept (at_risk_total counts them all)

    def __post_init__(self) -> None:
        whole = isinstance(self.top, int) and not isinstance(self.top, bool)
        if not whole or not 1 <= self.top <= MAX_TOP:
            raise UserError(f"top must be a whole number from 1 to {MAX_TOP}, got {self.top!r}")
        if self.as_of is not None and not isinstance(self.as_of, datetime):
            raise UserError("as_of must be a date and time, e.g. 2026-11-30T14:05+05:30")


@dataclass(frozen=True)
class DeskLoad:
    """One desk's queue: open complaints, unsure ones (None without a needs_review column),
    breached and due within 24 h, its TAT, complaints without a time, and ages in hours."""

    desk: str
    open: int
    unsure: int | None
    breached: int
    due_24h: int
    tat_hours: float
    tat_source: str
    no_time: int
    age_p50_hours: float | None
    age_p90_hours: float | None


@dataclass(frozen=True)
class AtRisk:
    """A complaint breached or due within 24 hours (hours_left negative: breached)."""

    row: int  # 1-based spreadsheet row, header = row 1
    desk: str
    received_at: datetime
    hours_left: float
    confidence: float | None
    needs_review: bool | None
    text: str


@dataclass(frozen=True)
class Board:
    """The board of one file (see the module docstring for the rules)."""

    as_of: datetime
    tat: TatTable
    desk_col: str
    received_col: str | None
    text_col: str | None
    desks: tuple[DeskLoad, ...]
    at_risk: tuple[AtRisk, ...]  # most urgent first, at most BoardConfig.top
    at_risk_total: int
    rows: int  # rows of the file, closed ones included
    no_time: int  # open complaints without a received time
    what_if: WhatIf | None
    warnings: tuple[str, ...]
    # one row per open complaint: row, desk, received_at (tz-aware, NaT allowed), age_hours,
    # hours_left, status (BREACHED, DUE, ON_TIME or NO_TIME), needs_review, confidence
    items: pd.DataFrame = field(repr=False, compare=False)
    closed: int = 0  # rows whose status reads closed or resolved
    # each desk's own most urgent complaints (at most BoardConfig.top each): one desk's list is
    # not crowded out by a desk with a shorter clock
    at_risk_by_desk: dict[str, tuple[AtRisk, ...]] = field(default_factory=dict, compare=False)
    what_if_missing: str | None = None  # why there is no what-if (what the file lacks)

    def to_json(self) -> dict:
        """The `board --json` document: as_of, desks, at_risk (the DESIGN contract keys),
        what_if, rows, no_time, closed, warnings, tat_path and the columns used."""
        return {
            "as_of": self.as_of.isoformat(),
            "desks": [_rounded(asdict(d)) for d in self.desks],
            "at_risk": [_at_risk_json(a) for a in self.at_risk],
            "at_risk_total": self.at_risk_total,
            "at_risk_by_desk": {
                desk: [_at_risk_json(a) for a in risks]
                for desk, risks in self.at_risk_by_desk.items()
            },
            "what_if": None if self.what_if is None else _what_if_json(self.what_if),
            "what_if_missing": self.what_if_missing,
            "rows": self.rows, "no_time": self.no_time, "closed": self.closed,
            "warnings": list(self.warnings), "tat_path": self.tat.path,
            "timezone": self.tat.timezone, "desk_col": self.desk_col,
            "received_col": self.received_col, "text_col": self.text_col,
        }  # fmt: skip


def _rounded(record: dict) -> dict:
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in record.items()}


def _at_risk_json(item: AtRisk) -> dict:
    return _rounded({**asdict(item), "received_at": item.received_at.isoformat()})


def _what_if_json(what_if: WhatIf) -> dict:
    scenarios = [_rounded(asdict(s)) for s in what_if.scenarios]
    return {"basis": what_if.basis, "scenarios": scenarios, "note": what_if.note}


# ----------------------------------------------------------------------------- building


def build_board(
    table: pd.DataFrame,
    tat: TatTable,
    config: BoardConfig = BoardConfig(),
    *,
    rows: Sequence[int] | None = None,
    cancel: threading.Event | None = None,
) -> Board:
    """The routing board of `table` under `tat`.

    Parameters
    ----------
    table : (n, m) a classified file (`predicted_label`, `confidence`, `needs_review`,
        `prob_<desk>`) or any file with a desk column; `received_at` (or a column named like it)
        for the clock.
    tat : the TAT file (core.board.tat.load_tat).
    config : column overrides, as_of, top.
    rows : (n,) 1-based spreadsheet rows of the table's rows; default 2..n+1 (header = row 1).
    cancel : set by the caller to stop: checked between phases (and per desk).

    Raises DataError/UserError (one line) for a missing column, more than MAX_BOARD_DESKS
    distinct desks, unreadable or future received times (naming the row), unreadable
    needs_review cells, or a TAT desk that is a near miss of a desk of the file; Cancelled
    (core.progress) once `cancel` is set. Without a received-time column the board shows
    volumes only.
    """
    table = table.rename(columns=str).reset_index(drop=True)
    rows = _spreadsheet_rows(table, rows)
    as_of = _as_of(config.as_of, tat.timezone)
    desk_col = _desk_column(table, config.desk_col)
    desks = _desk_values(table[desk_col])
    check_cancel(cancel)
    warnings = check_tat_desks(tat, _board_desks(desks, desk_col))
    open_mask, closed = _open_rows(table)
    received_col = detect_received_column(table, received_col=config.received_col)
    received = _received(table, received_col, tat, as_of, rows, warnings)
    check_cancel(cancel)
    items = _items(table, rows, desks, received, as_of, tat)[open_mask].reset_index(drop=True)
    open_table = table[open_mask].reset_index(drop=True)
    text_col = _text_column(table, desk_col)
    warnings += _default_desk_warning(items, tat) + _no_time_warning(items, received_col)
    check_cancel(cancel)
    at_risk, total, by_desk = _at_risk(items, open_table, text_col, config.top)
    check_cancel(cancel)
    what_if, what_if_missing = _what_if(items, open_table, desk_col, received_col, tat, cancel)
    loads = _desk_loads(items, tat, cancel)
    return Board(
        as_of=as_of, tat=tat, desk_col=desk_col, received_col=received_col, text_col=text_col,
        desks=loads, at_risk=at_risk, at_risk_total=total, rows=len(table),
        no_time=int((items["status"] == NO_TIME).sum()), what_if=what_if,
        warnings=tuple(warnings), items=items, closed=closed, at_risk_by_desk=by_desk,
        what_if_missing=what_if_missing,
    )  # fmt: skip


def _spreadsheet_rows(table: pd.DataFrame, rows: Sequence[int] | None) -> np.ndarray:
    if rows is None:
        return np.arange(2, len(table) + 2)
    if len(rows) != len(table):
        raise UserError(f"rows has {len(rows)} entries for a table of {len(table)} rows")
    return np.asarray([int(r) for r in rows], dtype=int)


def _as_of(as_of: datetime | None, timezone: str) -> datetime:
    """`as_of` (naive: in `timezone`), or now, as an aware datetime in `timezone`."""
    zone = ZoneInfo(timezone)
    if as_of is None:
        return datetime.now(zone)
    return as_of.replace(tzinfo=zone) if as_of.tzinfo is None else as_of.astimezone(zone)


def _normalise_name(name: str) -> str:
    return re.sub(r"[\s\-_]+", "_", name.strip().casefold())


def _named(table: pd.DataFrame, names: Sequence[str], *, exclude: set[str]) -> str | None:
    """The first column whose normalised name is in `names` (their order), not in `exclude`."""
    found = {}
    for column in table.columns:
        if column not in exclude:
            found.setdefault(_normalise_name(column), column)
    return next((found[n] for n in names if n in found), None)


def _desk_column(table: pd.DataFrame, given: str | None) -> str:
    """The routed desk column: `given`, else predicted_label, else the detected label column."""
    if given is not None:
        if given not in table.columns:
            raise DataError(f"no desk column '{given}'; the file has: {column_list(table.columns)}")
        return given
    if PREDICTED in table.columns:
        return PREDICTED
    try:
        return detect_columns(table).label_col
    except DataError as err:
        raise DataError(
            "could not tell which column holds each complaint's desk; classify the file first "
            f"or pass --desk-col; the file has: {column_list(table.columns)}"
        ) from err


def _desk_values(column: pd.Series) -> np.ndarray:
    """(n,) desk names, stripped; a blank cell is NO_DESK (counted, never dropped)."""
    text = column.astype("string").str.strip()
    return text.where(text.str.len() > 0).fillna(NO_DESK).to_numpy(dtype=object)


def _board_desks(desks: np.ndarray, desk_col: str) -> list[str]:
    """The distinct desks, sorted; DataError when there are more than a board draws (a column
    of ids or texts taken for the desk: every per-desk part of the board grows with them)."""
    distinct = pd.unique(desks)
    if len(distinct) > MAX_BOARD_DESKS:
        raise DataError(
            f"the file has {len(distinct):,} distinct desks in column '{_one_line(desk_col, 40)}'; "
            f"a board draws at most {MAX_BOARD_DESKS}: check the desk column"
        )
    return sorted(distinct)


def _text_column(table: pd.DataFrame, desk_col: str) -> str | None:
    """The complaint-text column, or None when the file has none recognisable."""
    try:
        text_col, _ = detect_text_column(table.drop(columns=[desk_col]))
    except DataError:
        return None
    return text_col


def _open_rows(table: pd.DataFrame) -> tuple[np.ndarray, int]:
    """(n,) open flags and the count of closed rows (a status column reading closed)."""
    status_col = _named(table, _STATUS_NAMES, exclude=set())
    if status_col is None:
        return np.ones(len(table), dtype=bool), 0
    status = table[status_col].astype("string").str.strip().str.casefold()
    closed = status.isin(_CLOSED).fillna(False).to_numpy(dtype=bool)
    return ~closed, int(closed.sum())


def _received(
    table: pd.DataFrame,
    column: str | None,
    tat: TatTable,
    as_of: datetime,
    rows: np.ndarray,
    warnings: list[str],
) -> pd.Series:
    if column is None:
        warnings.append(
            "no received time column (received_at): the board shows volumes only; add a "
            "received_at column (e.g. 2026-11-30 14:05) to see breaches"
        )
        return pd.Series(pd.NaT, index=table.index, dtype=f"datetime64[ns, {tat.timezone}]")
    return parse_received(table[column], timezone=tat.timezone, as_of=as_of, rows=rows)


def _items(
    table: pd.DataFrame,
    rows: np.ndarray,
    desks: np.ndarray,
    received: pd.Series,
    as_of: datetime,
    tat: TatTable,
) -> pd.DataFrame:
    """One row per complaint (all of them; the caller keeps the open ones)."""
    age = ((pd.Timestamp(as_of) - received).dt.total_seconds() / 3600.0).to_numpy(dtype=float)
    hours = {d: tat.hours_for(d) for d in set(desks)}
    tat_hours = np.array([hours[d] for d in desks], dtype=float)
    hours_left = tat_hours - age
    status = np.select(
        [np.isnan(age), hours_left < 0, hours_left <= DUE_WINDOW_HOURS],
        [NO_TIME, BREACHED, DUE],
        default=ON_TIME,
    )
    return pd.DataFrame({
        "row": rows, "desk": desks, "received_at": received.reset_index(drop=True),
        "age_hours": age, "tat_hours": tat_hours, "hours_left": hours_left, "status": status,
        "needs_review": _review_flags(table, rows), "confidence": _confidence(table),
    })  # fmt: skip


def _review_flags(table: pd.DataFrame, rows: np.ndarray) -> pd.Series:
    """needs_review as a nullable boolean (NA without the column); DataError naming the first
    row whose cell is neither true nor false."""
    if NEEDS_REVIEW not in table.columns:
        return pd.Series(pd.NA, index=table.index, dtype="boolean")
    cells = table[NEEDS_REVIEW].astype("string").str.strip().str.casefold().fillna("")
    known = cells.isin(_TRUE | _FALSE | {""})
    if not known.all():
        first = int(np.flatnonzero(~known.to_numpy())[0])
        raise DataError(
            f"needs_review in row {rows[first]} is neither true nor false; write TRUE or FALSE"
        )
    flags = cells.isin(_TRUE).astype("boolean")
    return flags.mask(cells == "", pd.NA)


def _confidence(table: pd.DataFrame) -> pd.Series:
    if CONFIDENCE not in table.columns:
        return pd.Series(np.nan, index=table.index)
    return pd.to_numeric(table[CONFIDENCE], errors="coerce").astype(float)


def _default_desk_warning(items: pd.DataFrame, tat: TatTable) -> list[str]:
    named = {d.desk for d in tat.desks}
    missing = sorted(set(items["desk"].unique()) - named)
    if not missing:
        return []
    shown = ", ".join(f"'{_one_line(d, 40)}'" for d in missing[:10])
    more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
    return [
        f"desks not in the TAT file use its default {tat.default_hours:g} h "
        f"({_one_line(tat.default_source, 80)}): {shown}{more}"
    ]


def _no_time_warning(items: pd.DataFrame, received_col: str | None) -> list[str]:
    missing = int((items["status"] == NO_TIME).sum())
    if received_col is None or not missing:
        return []
    return [f"{missing} open complaints have no {received_col}: counted apart as 'no time'"]


def _desk_loads(
    items: pd.DataFrame, tat: TatTable, cancel: threading.Event | None
) -> tuple[DeskLoad, ...]:
    """One DeskLoad per desk with open complaints, the fullest queue first."""
    loads = []
    for desk, group in items.groupby("desk", sort=True):  # one pass: each row in one group
        check_cancel(cancel)
        loads.append(_desk_load(desk, group, tat))
    return tuple(sorted(loads, key=lambda load: (-load.open, load.desk)))


def _desk_load(desk: str, group: pd.DataFrame, tat: TatTable) -> DeskLoad:
    ages = group["age_hours"].dropna().to_numpy()
    flags = group["needs_review"]
    status = group["status"]
    return DeskLoad(
        desk=desk, open=len(group),
        unsure=None if flags.isna().all() else int(flags.fillna(False).sum()),
        breached=int((status == BREACHED).sum()), due_24h=int((status == DUE).sum()),
        tat_hours=tat.hours_for(desk), tat_source=tat.source_for(desk),
        no_time=int((status == NO_TIME).sum()),
        age_p50_hours=float(np.percentile(ages, 50)) if len(ages) else None,
        age_p90_hours=float(np.percentile(ages, 90)) if len(ages) else None,
    )  # fmt: skip


def _at_risk(
    items: pd.DataFrame, table: pd.DataFrame, text_col: str | None, top: int
) -> tuple[tuple[AtRisk, ...], int, dict[str, tuple[AtRisk, ...]]]:
    """Breached or due within 24 h, smallest hours_left first (then row): the first `top`, how
    many there are, and each desk's own first `top` (every desk of `items`, sorted; an empty
    list for a desk with none). One sort and one grouping: a desk's list is its share of the
    whole ordering. `items`' index points into `table`."""
    risky = items[items["status"].isin([BREACHED, DUE])]
    ordered = risky.sort_values(["hours_left", "row"], kind="stable")
    texts = table[text_col] if text_col is not None else None
    by_desk: dict[str, list[AtRisk]] = {desk: [] for desk in sorted(set(items["desk"]))}
    for item in _risks(ordered.groupby("desk", sort=False).head(top), texts):
        by_desk[item.desk].append(item)
    lists = {desk: tuple(risks) for desk, risks in by_desk.items()}
    return _risks(ordered.head(top), texts), len(risky), lists


def _risks(ordered: pd.DataFrame, texts: pd.Series | None) -> tuple[AtRisk, ...]:
    """The AtRisk of each row of `ordered`, in its order (columns read once, not row by row)."""
    cells = [None] * len(ordered) if texts is None else texts.iloc[ordered.index].tolist()
    columns = ("row", "desk", "received_at", "hours_left", "confidence", "needs_review")
    values = zip(*(ordered[c].tolist() for c in columns), cells, strict=True)
    return tuple(
        AtRisk(
            row=int(row),
            desk=str(desk),
            received_at=received.to_pydatetime(),
            hours_left=float(left),
            confidence=None if pd.isna(confidence) else float(confidence),
            needs_review=None if pd.isna(flag) else bool(flag),
            text="" if text is None or pd.isna(text) else str(text)[:AT_RISK_TEXT_CHARS],
        )  # fmt: skip
        for row, desk, received, left, confidence, flag, text in values
    )


def _what_if(
    items: pd.DataFrame,
    table: pd.DataFrame,
    desk_col: str,
    received_col: str | None,
    tat: TatTable,
    cancel: threading.Event | None = None,
) -> tuple[WhatIf | None, str | None]:
    """The what-if, or None and what the file lacks for one (not a warning: a file routed by
    hand has no unsure complaints to route otherwise). Its tables are rows × desks: a file
    whose desk, reviewed desk and prob_ columns name more than MAX_BOARD_DESKS desks has
    none."""
    if received_col is None:
        return None, "the what-if needs received times"
    if items["needs_review"].isna().all():
        return None, "the what-if needs a needs_review column: classify the file first"
    probs = _probabilities(table)
    known = set(items["desk"].unique()) | (set(probs.columns) if probs is not None else set())
    reviewed_col = _reviewed_column(table, desk_col, known)
    if probs is None and reviewed_col is None:
        return None, "the what-if needs prob_<desk> columns or a reviewed desk column"
    reviewed = None if reviewed_col is None else _desk_or_none(table[reviewed_col])
    named = known | (set() if reviewed is None else set(reviewed.tolist()) - {None})
    if len(named) > MAX_BOARD_DESKS:
        return None, (
            f"the what-if weighs at most {MAX_BOARD_DESKS} desks; the desk, reviewed desk and "
            f"prob_ columns name {len(named):,}"
        )
    inputs = RoutingInputs(
        routed=items["desk"].to_numpy(dtype=object), age_hours=items["age_hours"].to_numpy(),
        unsure=items["needs_review"].fillna(False).to_numpy(dtype=bool), probs=probs,
        reviewed=reviewed, reviewed_col=reviewed_col,
    )  # fmt: skip
    return build_what_if(inputs, tat, cancel=cancel), None


def _reviewed_column(table: pd.DataFrame, desk_col: str, desks: set[str]) -> str | None:
    """A column holding the right desk (a reviewed one, or the file's own label beside the
    model's): named like a label, and most of its filled cells are desks the board knows (a
    `product` column of another vocabulary is not one)."""
    column = _named(table, (*_REVIEWED_NAMES, *LABEL_NAMES), exclude={desk_col, *_MODEL_COLUMNS})
    if column is None:
        return None
    values = _desk_or_none(table[column])
    filled = values[values != None]  # noqa: E711 (elementwise on an object array)
    return column if len(filled) and np.isin(filled, list(desks)).mean() >= 0.5 else None


def _probabilities(table: pd.DataFrame) -> pd.DataFrame | None:
    """(n, k) the prob_<desk> columns as numbers (unreadable cells: 0), columns = desks."""
    columns = prob_columns(list(table.columns))
    if not columns:
        return None
    values = {desk: pd.to_numeric(table[c], errors="coerce") for desk, c in columns.items()}
    return pd.DataFrame(values).fillna(0.0).clip(lower=0.0)


def _desk_or_none(column: pd.Series) -> np.ndarray:
    text = column.astype("string").str.strip()
    return text.where(text.str.len() > 0).to_numpy(dtype=object, na_value=None)


# ----------------------------------------------------------------------------- data sets


def dataset_table(
    dataset: Dataset, *, text_col: str = "text", label_col: str = "desk"
) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """A data set as a table to board, and its spreadsheet rows: the text and label columns
    under `text_col`/`label_col` (the names the file used, when the caller knows them), then
    `dataset.extra` (received_at among them)."""
    extra = dataset.extra.drop(columns=[c for c in (text_col, label_col) if c in dataset.extra])
    base = pd.DataFrame({text_col: list(dataset.texts), label_col: list(dataset.labels)})
    return pd.concat([base, extra.reset_index(drop=True)], axis=1), tuple(dataset.rows)


# ----------------------------------------------------------------------------- text


def _one_line(text: str, limit: int) -> str:
    """Untrusted text for a terminal: printable characters only, one line, cut to `limit`."""
    flat = "".join(ch if ch.isprintable() else " " for ch in str(text))
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_board_text(board: Board) -> str:
    """The board as the command line prints it."""
    lines = [
        f"routing board as of {board.as_of:%Y-%m-%d %H:%M %Z} ({board.tat.timezone}); "
        f"TAT file {board.tat.path}",
        f"rows {board.rows}, closed {board.closed}, open {len(board.items)}, without a received "
        f"time {board.no_time}; desk column '{board.desk_col}'",
        f"  {'desk':<22}{'open':>7}{'unsure':>8}{'breached':>10}{'due 24h':>9}{'TAT h':>8}"
        f"{'age p50 h':>11}{'age p90 h':>11}",
        *(_desk_line(load) for load in board.desks),
        f"most at risk ({len(board.at_risk)} of {board.at_risk_total}):",
        *(_risk_line(item) for item in board.at_risk),
    ]
    lines += _what_if_lines(board) + [f"warning: {w}" for w in board.warnings]
    return "\n".join(lines)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _desk_line(load: DeskLoad) -> str:
    unsure = "-" if load.unsure is None else str(load.unsure)
    return (
        f"  {_one_line(load.desk, 21):<22}{load.open:>7}{unsure:>8}{load.breached:>10}"
        f"{load.due_24h:>9}{load.tat_hours:>8g}{_hours(load.age_p50_hours):>11}"
        f"{_hours(load.age_p90_hours):>11}"
    )


def _risk_line(item: AtRisk) -> str:
    state = "breached" if item.hours_left < 0 else "due"
    confidence = "" if item.confidence is None else f" conf {item.confidence:.2f}"
    review = " review" if item.needs_review else ""
    received = f"{item.received_at:%Y-%m-%d %H:%M}"
    return (
        f"  row {item.row}: {_one_line(item.desk, 21)}, received {received}, "
        f"{item.hours_left:+.1f} h ({state}){confidence}{review}  "
        f"{_one_line(item.text, 70)}"
    )


def _what_if_lines(board: Board) -> list[str]:
    what_if = board.what_if
    if what_if is None:
        return [f"what if: not available ({board.what_if_missing})"]
    lines = [f"what if (right desk from {what_if.basis}):"]
    for s in what_if.scenarios:
        lines.append(
            f"  {s.name:<26} changed desk {s.changed_desk:>6}, breached {s.breached:>9.1f} "
            f"(avoided {s.avoided:.1f}, caused {s.caused:.1f})"
        )
    return lines + [f"  {what_if.note}"]
