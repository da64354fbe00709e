"""The data commands: `validate` (check a labelled spreadsheet) and `demo-data` (write the
built-in demo data set)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.cli.common import add_column_options, add_json_option, emit_json


def _cmd_validate(args: argparse.Namespace) -> None:
    from core.data.validation import load_dataset

    _, report = load_dataset(
        Path(args.file),
        text_col=args.text_col,
        label_col=args.label_col,
        max_tokens=args.max_tokens,
    )
    if args.json:
        emit_json(report.to_json())
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


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a labelled complaint spreadsheet")
    p.add_argument("file", help="CSV, TSV, XLSX or Parquet file")
    add_column_options(p, label=True)
    p.add_argument("--max-tokens", type=int, default=256, help="model length to warn about")
    add_json_option(p, "print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_validate)


def _cmd_demo_data(args: argparse.Namespace) -> None:
    from core.data.demo import DemoConfig, write_demo_data

    given = {"rows": args.rows, "seed": args.seed}
    config = DemoConfig(**{k: v for k, v in given.items() if v is not None})
    path = write_demo_data(Path(args.out), config)
    print(f"wrote {config.rows} demo complaints to {path}", file=sys.stderr)


def _add_demo_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo-data", help="write the built-in demo grievance data set")
    p.add_argument("out", help="output file, .csv or .xlsx")
    # Defaults live in core.data.demo.DemoConfig, not imported here: it brings pandas and
    # openpyxl into every command's start (tests/test_classify_imports.py checks the figures).
    p.add_argument("--rows", type=int, help="number of complaints (default 3000)")
    p.add_argument("--seed", type=int, help="random seed (default 7)")
    p.set_defaults(handler=_cmd_demo_data)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `validate` and `demo-data`."""
    _add_validate(sub)
    _add_demo_data(sub)
