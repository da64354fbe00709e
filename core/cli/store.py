"""The `verify-store` command: recompute the review store's hash chains (the tamper check)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.cli.common import CommandError, add_json_option, emit_json

EXIT_BROKEN_CHAIN = 1  # the review store's hash chain is broken (an intact store exits 0)


def _cmd_verify_store(args: argparse.Namespace) -> int:
    """Recompute the review store's hash chains; exit 1 naming the first broken link, or the
    schema difference when a trigger or table was changed."""
    from core.review.schema import TamperedSchemaError
    from core.review.store import BrokenChainError, Store, default_db_path

    path = Path(args.db) if args.db is not None else default_db_path()
    if not path.is_file():
        raise CommandError(f"no review store at {path}; give its path with --db")
    try:
        with Store.open(path) as store:
            report = store.verify_chains()
    except BrokenChainError as exc:
        report = exc.report
    except TamperedSchemaError as exc:  # a trigger dropped or altered: tampered, like a chain
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BROKEN_CHAIN
    if args.json:
        emit_json({"db": str(path), **report.to_json()})
    elif report.broken is None:
        print(f"{path}: intact")
        for head in report.heads:
            print(f"  {head.table:<17} {head.rows:>9} rows  head {head.head}")
    else:
        print(f"{path}: broken at {report.broken.describe()} (changed outside Grievance Lens)")
    return 0 if report.intact else EXIT_BROKEN_CHAIN


def _add_verify_store(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify-store", help="check the review store's hash chains (tamper check)")
    p.add_argument("--db", help="the review store (default: $GRIEVANCE_LENS_DATA_DIR/lens.db)")
    add_json_option(p, "print the verdict, the first broken link and each chain's head as JSON")
    p.set_defaults(handler=_cmd_verify_store)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `verify-store`."""
    _add_verify_store(sub)
