"""The `discover` command: candidate desks among the complaints a model flags as fitting no desk,
in a complaint file (classified with the model) or in the inbox over a period."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.cli.common import (
    CommandError,
    add_column_options,
    add_json_option,
    add_model_option,
    add_runtime_options,
    check_runtime,
    emit_json,
    load_model_from_args,
    progress_bar,
)

INBOX = "inbox"


def _cmd_discover(args: argparse.Namespace) -> None:
    from core.analysis.discovery import DiscoveryConfig

    check_runtime(args)
    config = DiscoveryConfig.from_env(min_size=args.min_size)
    if args.source == INBOX:
        run, table = _from_inbox(args, config), None
    else:
        if args.since is not None:
            raise CommandError("--since reads the inbox; a file is read whole")
        run, table = _from_file(args, config)
    if args.out:
        _write_out(run, table, Path(args.out))
    document = _document(run)
    if args.json:
        emit_json(document)
        return
    found = document["candidates"]
    print(f"{run.flagged:,} of {run.total:,} complaints fit no desk: {len(found)} candidate "
          f"desks, {document['unclustered']} unclustered")  # fmt: skip
    for c in found:
        print(f"{c['id']} ({c['size']}): {', '.join(c['words'])}; nearest desk "
              f"{c['nearest_desk']} ({c['nearest_distance']})")  # fmt: skip


def _from_file(args: argparse.Namespace, config):
    from core.data.columns import detect_text_column
    from core.data.intake import load_table
    from core.data.limits import IntakeLimits
    from core.tasks.discovery import discover_in_file

    path = Path(args.source)
    table = load_table(path, limits=IntakeLimits.from_env())
    text_col, _ = detect_text_column(table, text_col=args.text_col)
    loaded = load_model_from_args(args.model, args)
    with progress_bar("classify", unit="text") as bar:
        run = discover_in_file(loaded, table[text_col].tolist(), source=path.name, config=config,
                               on_progress=_counted(bar))  # fmt: skip
    return run, table


def _from_inbox(args: argparse.Namespace, config):
    from core.review.store import Store
    from core.tasks.discovery import discover_in_inbox, since_moment

    since = since_moment(args.since)
    loaded = load_model_from_args(args.model, args)
    with Store.open(read_only=True) as store, progress_bar("embed", unit="text") as bar:
        return discover_in_inbox(store, loaded, since=since, config=config,
                                 on_progress=_counted(bar))  # fmt: skip


def _counted(bar):
    """A progress callback that moves `bar` to the complaints read so far."""

    def update(progress) -> None:
        bar.total = progress.total
        bar.update(progress.done - bar.n)

    return update


def _document(run) -> dict:
    """The --json document: the candidates (rows: the file's 1-based data rows, or for the
    inbox the complaints' ids) and how many flagged complaints stayed unclustered."""
    key = "complaints" if run.batch == INBOX else "rows"
    return {
        "source": run.source, "model": run.model, "complaints": run.total,
        "flagged": run.flagged, "unclustered": len(run.discovery.unclustered),
        "candidates": [
            {
                "id": c.id, "size": c.size, "words": list(c.words),
                "examples": run.discovery.example_texts(c), "nearest_desk": c.nearest_desk,
                "nearest_distance": c.nearest_distance, key: run.member_rows(c.id),
            }
            for c in run.discovery.candidates
        ],
    }  # fmt: skip


def _write_out(run, table, out: Path) -> None:
    """Every input row with its `candidate` (empty where it fits a desk or stays unclustered);
    for the inbox, every flagged complaint's id with its candidate."""
    import pandas as pd

    from core.data.export import write_table

    labels = run.discovery.labels()
    if table is None:
        frame = pd.DataFrame({"complaint_id": [m.complaint_id for m in run.members],
                              "candidate": labels})  # fmt: skip
    else:
        frame = table.copy()
        frame["candidate"] = ""
        for member, label in zip(run.members, labels, strict=True):
            frame.iat[member.row - 1, frame.columns.get_loc("candidate")] = label
    write_table(frame, out)


DEFAULT_MIN_SIZE = 10  # core.analysis.discovery.DEFAULT_MIN_SIZE; not imported: --help stays light


def _add_discover(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "discover", help="candidate desks among the complaints a model says fit no desk"
    )
    p.add_argument("source", help="a complaint file (CSV, TSV, XLSX or Parquet), or `inbox`")
    add_model_option(p)
    p.add_argument("--since", help="inbox only: complaints received from this time (ISO 8601, "
                   "UTC unless it says; default: the last 7 days)")  # fmt: skip
    p.add_argument("--min-size", type=int, default=DEFAULT_MIN_SIZE,
                   help=f"the smallest candidate desk (default {DEFAULT_MIN_SIZE})")  # fmt: skip
    p.add_argument("--out", help="write every row with its candidate (.csv or .xlsx)")
    add_column_options(p, label=False)
    add_runtime_options(p, routes=True)
    add_json_option(p, "print the candidates as JSON")
    p.set_defaults(handler=_cmd_discover)


def register(sub: argparse._SubParsersAction) -> None:
    _add_discover(sub)
