"""The `board` command: each desk's open complaints against its turnaround time (core.board)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.cli.common import add_json_option, emit_json


def _cmd_board(args: argparse.Namespace) -> None:
    """Each desk's open complaints of FILE against its turnaround time (core.board)."""
    from core.board.board import BoardConfig, build_board, render_board_text
    from core.board.tat import load_tat
    from core.data.intake import load_table
    from core.data.limits import IntakeLimits

    config = BoardConfig(
        received_col=args.received_col, desk_col=args.desk_col, as_of=_as_of(args.as_of),
        top=args.top,
    )  # fmt: skip
    tat = load_tat(args.tat)  # a bad TAT file fails before the data file is read
    table = load_table(Path(args.file), limits=IntakeLimits.from_env())
    board = build_board(table, tat, config)
    if args.json:
        emit_json(board.to_json())
    else:
        print(render_board_text(board))


def _as_of(value: str | None):
    """--as-of as a datetime (naive: the TAT file's time zone), in the years the board reads
    (core.board.moments); None: now. UserError when it is not a time or out of range."""
    from core.board.moments import parse_as_of

    return None if value is None else parse_as_of(value, "--as-of")


def _add_board(sub: argparse._SubParsersAction) -> None:
    from core.board.moments import YEARS  # no pandas: cheap at start-up

    p = sub.add_parser(
        "board", help="each desk's open complaints against its turnaround time (routing board)"
    )
    p.add_argument("file", help="classified (or desk-labelled) CSV, TSV, XLSX or Parquet file")
    p.add_argument(
        "--tat", help="turnaround-time TOML file (default: $GRIEVANCE_LENS_TAT, else the shipped "
        "core/board/tat.toml)",
    )  # fmt: skip
    p.add_argument(
        "--as-of", help=f"measure ages at this time, ISO 8601, in {YEARS} (default: now; "
        "naive: the TAT file's time zone)",
    )  # fmt: skip
    p.add_argument("--desk-col", help="routed desk column (default: predicted_label, or detected)")
    p.add_argument("--received-col", help="received time column (default: received_at, detected)")
    p.add_argument("--top", type=int, default=100, help="at-risk complaints to list (default 100)")
    add_json_option(p, "print the board as JSON on stdout")
    p.set_defaults(handler=_cmd_board)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `board`."""
    _add_board(sub)
