"""What a click or a start pays for the team's shared state: reading the live model when its
promotion kept an 8 MB comparison report, boarding a hostile file, opening a store whose
inbox holds 50,000 complaints, and listing saved data sets whose summaries are large.

    .venv/bin/python -m bench.bench_read_costs [--force]

- live model: `core.review.live.live_model` (the light read: SQLite drops the report) against
  the named baseline, the whole promotion event fetched and parsed as the read did before;
  median of 30.
- board: `build_board` on 60,000 rows with a distinct desk each (refused: more than
  MAX_BOARD_DESKS), and on 60,000 rows of 200 desks (built); median of 3.
- store: `Store.open` (schema and every hash chain verified) with 50,000 inbox complaints;
  median of 5.
- saved data sets: what each run of the Data page asks (`list_datasets`, then
  `find_by_fingerprint`) with four saved data sets whose summaries count 200,000 desks each
  (written before the desk cap), from a fresh index (median of 30), against the named
  baseline, every summary.json parsed as each listing did before the index (median of 5);
  and a listing after the index was deleted, which rebuilds it (median of 5).
Everything lives in a temporary folder; the tiny model stands in for a saved model (a promotion
needs one). The machine's load is recorded before and after (bench.machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from bench.machine import LoadGuard, machine, print_load, refuse_busy_start
from core.access import OPERATOR
from core.board.board import BoardConfig, build_board
from core.board.tat import load_tat
from core.data.dataset import Dataset
from core.data.saved import (
    SUMMARY_NAME,
    DatasetSave,
    find_by_fingerprint,
    list_datasets,
    read_summary,
    save_dataset,
)
from core.data.saved_index import INDEX_NAME
from core.errors import UserError
from core.intake.inbox import Routing, Submission, store_batch
from core.intake.tokens import create_token
from core.paths import write_atomically
from core.review.live import PROMOTED, live_model, promote_model
from core.review.store import Store


def median_ms(work: Callable[[], object], repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return round(statistics.median(seconds) * 1000, 2)


def live_model_read(folder: Path) -> dict:
    from tests.helpers import save_tiny_model

    models = folder / "models"
    save_tiny_model(models / "a")
    rows = int(7.5e6 / 540)  # changed complaints of 500 characters: about 8 MB of JSON
    changed = [{"text": f"{i:08d}" + "x" * 492, "a": "A", "b": "B"} for i in range(rows)]
    with Store.open(folder / "lens.db") as store:
        promote_model(store, models, "a", reason="bench", actor=OPERATOR,
                      report={"rows": rows, "changed": changed})  # fmt: skip
        whole = (
            "SELECT details FROM trail WHERE action = ? ORDER BY id DESC LIMIT 1",
            (PROMOTED,),
        )
        return {
            "light_ms": median_ms(lambda: live_model(store), 30),
            "whole_event_ms": median_ms(lambda: json.loads(store.query(*whole)[0][0]), 30),
        }


def board_bounds() -> dict:
    tat, as_of = load_tat(), datetime(2026, 12, 1, tzinfo=UTC)
    rows = 60_000
    frame = pd.DataFrame({
        "text": ["t"] * rows, "predicted_label": [f"desk {i}" for i in range(rows)],
        "received_at": ["2026-11-30T10:00+05:30"] * rows,
    })  # fmt: skip

    def refused() -> None:
        try:
            build_board(frame, tat, BoardConfig(as_of=as_of))
        except UserError:
            return
        raise AssertionError("a board of 60,000 desks was not refused")

    result = {"distinct_desks_refused_ms": median_ms(refused, 3)}
    frame["predicted_label"] = [f"desk {i % 200}" for i in range(rows)]
    result["200_desks_built_ms"] = median_ms(
        lambda: build_board(frame, tat, BoardConfig(as_of=as_of)), 3
    )
    return result


def store_open(folder: Path) -> dict:
    path, tat = folder / "inbox.db", load_tat()
    routing = Routing("UPI Dispute", 0.9, False, "", 0.1, "transformer", {"UPI Dispute": 0.9})
    with Store.open(path) as store:
        token = create_token(store, "bench", ["submit"], actor=OPERATOR).token
        for batch in range(100):
            items = [(Submission(f"{batch}-{j}", "upi payment failed, money debited " * 5),
                      routing) for j in range(500)]  # fmt: skip
            store_batch(store, token, items, model=("m", "d"), tat=tat)
    return {"inbox_rows": 50_000, "open_ms": median_ms(lambda: Store.open(path).close(), 5)}


def saved_listing(
    folder: Path, *, data_sets: int = 4, desks: int = 200_000, repeats: int = 30
) -> dict:
    """The Data page's reads of `data_sets` saved data sets whose summaries count `desks` desks
    each; the baseline parses every summary.json, as each listing did before the index."""
    root = folder / "datasets"
    texts = ["upi payment failed", "card stolen", "loan emi high", "kyc update please"]
    for n in range(data_sets):
        dataset = Dataset([f"{t} {n}" for t in texts], ["UPI", "Card", "Loan", "KYC"])
        save_dataset(root, DatasetSave(f"big-{n}", dataset), actor=OPERATOR)
        _widen_summary(root / f"big-{n}" / SUMMARY_NAME, desks)
    names = [f"big-{n}" for n in range(data_sets)]
    wanted = read_summary(root, names[0]).fingerprint

    def page_run() -> None:
        list_datasets(root)
        find_by_fingerprint(root, wanted)

    def rebuild() -> None:
        (root / INDEX_NAME).unlink(missing_ok=True)
        list_datasets(root)

    slow = max(3, repeats // 6)
    page_run()  # both warmed: the index is built, the files are in the page cache
    return {
        "data_sets": data_sets, "desks_each": desks,
        "summary_mb_each": round((root / names[0] / SUMMARY_NAME).stat().st_size / 2**20, 1),
        "page_run_ms": median_ms(page_run, repeats),
        "every_summary_parsed_ms": median_ms(lambda: [read_summary(root, n) for n in names], slow),
        "index_rebuilt_ms": median_ms(rebuild, slow),
    }  # fmt: skip


def _widen_summary(path: Path, desks: int) -> None:
    """A summary whose labels count `desks` desks, as one saved before the cap could have."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["labels"] = {f"desk {i:06d}": 1 for i in range(desks)}
    write_atomically(path, json.dumps(summary, indent=1).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    folder = Path(tempfile.mkdtemp(prefix="bench-read-costs-"))
    report = {
        "machine": machine(),
        "live_model": live_model_read(folder),
        "board": board_bounds(),
        "store": store_open(folder),
        "saved_data_sets": saved_listing(folder / "saved"),
    }
    load = guard.finish()
    report["machine_load"] = load.to_json()
    print(json.dumps(report, indent=2, default=str))
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
