"""The routing board's bounds (issue 38, "Hardening 3"): a board costs work linear in the rows of
its file, refuses a file with more desks than it can draw in one line, and stops when its job
is cancelled, so a viewer's upload cannot hold a short-lane worker."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from core.board.board import MAX_BOARD_DESKS, BoardConfig, build_board
from core.board.tat import load_tat
from core.data.demo import DemoConfig, generate_demo_data
from core.errors import UserError
from core.progress import Cancelled

AS_OF = datetime(2026, 12, 6, 9, 0)  # after every demo complaint was received


@pytest.fixture(scope="module")
def tat():
    return load_tat()


def queue(rows: int, desks: int, *, seed: int = 0) -> pd.DataFrame:
    """`rows` classified complaints spread over `desks` desks, received within 10 days."""
    rng = np.random.default_rng(seed)
    names = [f"desk {i}" for i in range(desks)]
    received = [AS_OF - timedelta(hours=float(h)) for h in rng.uniform(0, 240, rows)]
    return pd.DataFrame({
        "text": [f"complaint {i}" for i in range(rows)],
        "predicted_label": [names[i % desks] for i in range(rows)],
        "received_at": [r.strftime("%Y-%m-%d %H:%M") for r in received],
        "needs_review": rng.random(rows) < 0.3,
        "confidence": rng.random(rows),
    })  # fmt: skip


def test_a_file_with_a_desk_per_row_is_refused_at_once_in_one_line(tat):
    table = queue(20_000, 20_000)
    started = time.monotonic()
    with pytest.raises(UserError) as raised:
        build_board(table, tat, BoardConfig(as_of=AS_OF))
    assert time.monotonic() - started < 20  # generous: the refusal costs one pass
    message = str(raised.value)
    assert "\n" not in message
    assert "20,000 distinct desks" in message
    assert f"at most {MAX_BOARD_DESKS}" in message
    assert "check the desk column" in message


def test_a_board_at_the_desk_limit_is_built(tat):
    board = build_board(queue(2 * MAX_BOARD_DESKS, MAX_BOARD_DESKS), tat, BoardConfig(as_of=AS_OF))
    assert len(board.desks) == MAX_BOARD_DESKS
    assert len(board.at_risk_by_desk) == MAX_BOARD_DESKS


def counting_equals(monkeypatch) -> list[int]:
    """Count the cells pandas compares with `==` on a Series (a filter of the whole frame per
    desk compares rows × desks cells); the one-element list holds the count."""
    cells, real = [0], pd.Series.__eq__

    def counted(series: pd.Series, other):
        cells[0] += len(series)
        return real(series, other)

    monkeypatch.setattr(pd.Series, "__eq__", counted)
    return cells


def test_building_a_board_compares_cells_in_proportion_to_the_rows(tat, monkeypatch):
    rows, desks = 20_000, 150
    table = queue(rows, desks)
    cells = counting_equals(monkeypatch)
    board = build_board(table, tat, BoardConfig(as_of=AS_OF))
    assert len(board.desks) == desks
    assert cells[0] <= 20 * rows  # not rows × desks (3,000,000)


def test_a_reviewed_column_of_many_values_gives_no_what_if(tat):
    """A reviewed desk column whose other half is one distinct value per row would make the
    what-if's desks × rows tables quadratic: the board says why there is none instead."""
    rows = 4_000
    table = queue(rows, 5)
    desks = table["predicted_label"].to_numpy(dtype=object)
    table["reviewed_desk"] = np.where(
        np.arange(rows) % 2 == 0, desks, [f"x{i}" for i in range(rows)]
    )
    board = build_board(table, tat, BoardConfig(as_of=AS_OF))
    assert board.what_if is None
    assert f"at most {MAX_BOARD_DESKS}" in board.what_if_missing
    assert len(board.desks) == 5  # the rest of the board is drawn


class _CancelAfter(threading.Event):
    """An event that reads as set from its `after`-th check on (a cancel while building)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.checks = after, 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.after or super().is_set()


def classified_demo() -> pd.DataFrame:
    demo = generate_demo_data(DemoConfig())
    rng = np.random.default_rng(1)
    desks = sorted(demo["desk"].unique())
    probs = rng.dirichlet(np.ones(len(desks)), len(demo))
    table = demo.assign(
        predicted_label=demo["desk"], confidence=probs.max(axis=1),
        needs_review=rng.random(len(demo)) < 0.3,
    )  # fmt: skip
    return table.assign(**{f"prob_{d}": probs[:, i] for i, d in enumerate(desks)})


def test_a_cancel_set_before_building_stops_it(tat):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        build_board(classified_demo(), tat, BoardConfig(as_of=AS_OF), cancel=cancel)


@pytest.mark.parametrize("after", [2, 3, 4])
def test_a_cancel_set_while_building_stops_it(tat, after):
    cancel = _CancelAfter(after)
    with pytest.raises(Cancelled):
        build_board(classified_demo(), tat, BoardConfig(as_of=AS_OF), cancel=cancel)
    assert cancel.checks == after  # stopped at the first check that saw it


def test_an_uncancelled_board_checks_its_cancel_and_is_unchanged(tat):
    table = classified_demo()
    cancel = _CancelAfter(10**9)
    with_cancel = build_board(table, tat, BoardConfig(as_of=AS_OF, top=3), cancel=cancel)
    assert cancel.checks >= 4  # between its phases
    assert (
        with_cancel.to_json() == build_board(table, tat, BoardConfig(as_of=AS_OF, top=3)).to_json()
    )


def test_each_desks_list_is_its_share_of_the_whole_ordering(tat):
    table = classified_demo()
    board = build_board(table, tat, BoardConfig(as_of=AS_OF, top=3))
    everything = build_board(table, tat, BoardConfig(as_of=AS_OF, top=10_000)).at_risk
    assert len(everything) == board.at_risk_total
    assert board.at_risk == everything[:3]
    for desk, risks in board.at_risk_by_desk.items():
        assert risks == tuple(r for r in everything if r.desk == desk)[:3]
    assert set(board.at_risk_by_desk) == {d.desk for d in board.desks}


def test_the_pages_board_job_passes_its_cancel(tat, monkeypatch):
    """ui.board.boarded hands build_board the short-lane job's cancel: a cancelled job stops."""
    import ui.board

    def cancelled_run(cache, key, work, **kwargs):
        cancel = threading.Event()
        cancel.set()
        return work(cancel)

    monkeypatch.setattr(ui.board, "run_short_cached", cancelled_run)
    source = ui.board.BoardInput("demo", classified_demo(), "test:cancel")
    with pytest.raises(Cancelled):
        ui.board.boarded(source, tat, BoardConfig(as_of=AS_OF))
