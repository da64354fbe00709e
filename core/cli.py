"""The command line: `python -m core <command> ...` (the contract is in DESIGN.md).

Every command exits 0 on success; on bad input it prints one line `error: <what to fix>` on stderr
and exits 2, never a traceback. `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


class CommandError(ValueError):
    """Bad input found by a command itself; its message is the user-facing line."""


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line error format."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


def _emit_json(document: dict) -> None:
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def _cmd_validate(args: argparse.Namespace) -> None:
    from core.data import load_dataset

    _, report = load_dataset(
        Path(args.file),
        text_col=args.text_col,
        label_col=args.label_col,
        max_tokens=args.max_tokens,
    )
    if args.json:
        _emit_json(report.to_json())
        return
    print(f"{args.file}: text column '{report.text_col}', label column '{report.label_col}'")
    print(f"rows read {report.rows_read}, kept {report.rows_kept}, dropped {len(report.dropped)}")
    for label, count in report.labels.items():
        print(f"  {count:>7}  {label}")
    print(f"duplicate texts {report.duplicates}, texts with conflicting labels {report.conflicts}")
    for dropped in report.dropped[:20]:
        print(f"  dropped row {dropped.row}: {dropped.reason}")
    if len(report.dropped) > 20:
        print(f"  ... and {len(report.dropped) - 20} more dropped rows (see --json)")
    for warning in report.warnings:
        print(f"warning: {warning}")


def _cmd_demo_data(args: argparse.Namespace) -> None:
    from core.demo_data import DemoConfig, write_demo_data

    config = DemoConfig(rows=args.rows, seed=args.seed)
    path = write_demo_data(Path(args.out), config)
    print(f"wrote {config.rows} demo complaints to {path}", file=sys.stderr)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a labelled complaint spreadsheet")
    p.add_argument("file", help="CSV, TSV, XLSX or Parquet file")
    p.add_argument("--text-col", help="column holding the complaint text (default: detected)")
    p.add_argument("--label-col", help="column holding the desk label (default: detected)")
    p.add_argument("--max-tokens", type=int, default=256, help="model length to warn about")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_validate)


def _add_demo_data(sub: argparse._SubParsersAction) -> None:
    from core.demo_data import DemoConfig

    p = sub.add_parser("demo-data", help="write the built-in demo grievance data set")
    p.add_argument("out", help="output file, .csv or .xlsx")
    p.add_argument("--rows", type=int, default=DemoConfig.rows, help="number of complaints")
    p.add_argument("--seed", type=int, default=DemoConfig.seed, help="random seed")
    p.set_defaults(handler=_cmd_demo_data)


# Each entry adds one subcommand; later capabilities append theirs here.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_validate, _add_demo_data]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, one subcommand per entry of COMMANDS."""
    parser = _Parser(prog="python -m core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add_command in COMMANDS:
        add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except (ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last line of defence: users never see a traceback
        print(f"error: unexpected {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INTERNAL
    return 0


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}; check the path"
    if isinstance(exc, IsADirectoryError) and exc.filename:
        return f"{exc.filename} is a folder; give a file"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"permission denied: {exc.filename}"
    return " ".join(str(exc).split()) or type(exc).__name__
