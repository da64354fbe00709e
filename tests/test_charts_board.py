"""The routing board's charts and shown tables (core.charts.board) on a six-complaint board whose
counts are worked out by hand below, and the charts as valid Vega-Lite (rendered server-side)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import vl_convert

from core.board.board import BoardConfig, build_board
from core.board.tat import load_tat
from core.charts.board import (
    BoardTotals,
    age_bin_hours,
    age_chart,
    age_frame,
    as_of_text,
    at_risk_frame,
    board_chart,
    board_totals,
    desk_frame,
    load_by_day_chart,
    load_by_day_frame,
    status_chart,
    status_frame,
    tat_frame,
    what_if_frame,
)

IST = ZoneInfo("Asia/Kolkata")
AS_OF = datetime(2025, 6, 3, 12, 0, tzinfo=IST)
TAT = """timezone = "Asia/Kolkata"
default_hours = 100
default_source = "the default"
reroute_hours = 48
triage_hours = 8

[desks."UPI Dispute"]
hours = 24
source = "upi source"

[desks."Card Fraud"]
hours = 240
source = "card source"
"""
# Ages at AS_OF and hours left (TAT - age), by hand:
#   row 2: UPI, 36.5 h old, 24 - 36.5 = -12.5 (breached); IST day 1 Jun (UTC day 1 Jun)
#   row 3: UPI, 35 h old, -11 (breached); IST day 2 Jun, but UTC day 1 Jun (19:30 UTC)
#   row 4: UPI, 3 h old, 21 (due in 24 h); 3 Jun
#   row 5: Card, 26 h old, 214 (on time); 2 Jun
#   row 6: Card, no time
#   row 7: Other (default 100 h), 96 h old, 4 (due in 24 h); 30 May
TABLE = pd.DataFrame(
    {
        "text": ["upi a", "upi b", "upi c", "card a", "card b", "other a"],
        "desk": ["UPI Dispute"] * 3 + ["Card Fraud"] * 2 + ["Other"],
        "received_at": [
            "2025-06-01T23:30+05:30",
            "2025-06-02T01:00+05:30",
            "2025-06-03T09:00+05:30",
            "2025-06-02T10:00+05:30",
            "",
            "2025-05-30T12:00+05:30",
        ],
    }
)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    path = Path(tmp_path_factory.mktemp("tat")) / "tat.toml"
    path.write_text(TAT, encoding="utf-8")
    return build_board(TABLE, load_tat(path), BoardConfig(as_of=AS_OF))


def by_key(frame: pd.DataFrame, keys: list[str], value: str) -> dict:
    return {tuple(r[k] for k in keys): r[value] for _, r in frame.iterrows()}


def test_load_by_day_counts_local_days(board):
    counts = by_key(load_by_day_frame(board), ["day", "desk"], "complaints")
    assert counts == {
        ("2025-05-30", "Other"): 1,
        ("2025-06-01", "UPI Dispute"): 1,
        ("2025-06-02", "UPI Dispute"): 1,  # 01:00 IST is still 1 June in UTC
        ("2025-06-02", "Card Fraud"): 1,
        ("2025-06-03", "UPI Dispute"): 1,
    }


def test_status_counts_per_desk(board):
    counts = by_key(status_frame(board), ["desk", "status"], "complaints")
    assert counts == {
        ("UPI Dispute", "breached"): 2,
        ("UPI Dispute", "due in 24 h"): 1,
        ("Card Fraud", "on time"): 1,
        ("Card Fraud", "no time"): 1,
        ("Other", "due in 24 h"): 1,
    }


def test_age_histogram_bins_by_day(board):
    frame = age_frame(board)
    assert by_key(frame, ["desk", "start"], "complaints") == {
        ("UPI Dispute", 0.0): 1,
        ("UPI Dispute", 24.0): 2,
        ("Card Fraud", 24.0): 1,
        ("Other", 96.0): 1,
    }
    assert (frame["end"] - frame["start"] == 24).all()


def test_age_bins_widen_for_old_complaints():
    assert age_bin_hours(10.0) == 24
    assert age_bin_hours(24 * 60) == 24
    assert age_bin_hours(24 * 61) == 48  # 61 days would need 61 one-day bars
    assert age_bin_hours(24 * 365) == 24 * 7


def test_desk_and_at_risk_tables(board):
    desks = desk_frame(board).set_index("desk")
    assert desks.loc["UPI Dispute", ["open", "breached", "due in 24 h", "no time"]].tolist() == [
        3, 2, 1, 0,
    ]  # fmt: skip
    assert desks.loc["Card Fraud", ["open", "breached", "no time", "TAT (h)"]].tolist() == [
        2, 0, 1, 240,
    ]  # fmt: skip
    assert desks.loc["Other", ["TAT (h)", "TAT source"]].tolist() == [100, "the default"]
    risk = at_risk_frame(board)
    assert risk["row"].tolist() == [2, 3, 7, 4]  # most urgent first
    assert risk["hours left"].tolist() == [-12.5, -11.0, 4.0, 21.0]
    assert risk["received at"].iloc[0] == "2025-06-01 23:30 +0530"
    assert risk["text"].tolist() == ["upi a", "upi b", "other a", "upi c"]


def test_tat_table_lists_the_default_last(board):
    frame = tat_frame(board.tat)
    assert frame["desk"].tolist() == ["UPI Dispute", "Card Fraud", "(any other desk)"]
    assert frame["hours"].tolist() == [24, 240, 100]


def test_no_what_if_without_review_flags(board):
    assert board.what_if is None
    assert what_if_frame(board).empty


def test_board_chart_title_and_parts(board):
    spec = board_chart(board).to_dict()
    assert len(spec["vconcat"]) == 2
    assert spec["title"]["text"] == "Routing board as of 03 Jun 2025 12:00 IST"
    assert spec["title"]["subtitle"] == (
        "6 open · 2 breached · 2 due within 24 h · 1 without a received time"
    )
    assert as_of_text(board) == "03 Jun 2025 12:00 IST"
    assert board_totals(board) == BoardTotals(open=6, breached=2, due_24h=2, unsure=None, no_time=1)


@pytest.mark.parametrize("build", [board_chart, age_chart, status_chart, load_by_day_chart])
def test_charts_render_to_svg(board, build):
    """Valid Vega-Lite: vl-convert renders each server-side, as the deck downloads do."""
    svg = vl_convert.vegalite_to_svg(build(board).to_json())
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "UPI Dispute" in svg


def test_volumes_only_board_still_draws(tmp_path):
    """A file without received times: no days to draw, every complaint without a time."""
    path = tmp_path / "tat.toml"
    path.write_text(TAT, encoding="utf-8")
    board = build_board(TABLE.drop(columns="received_at"), load_tat(path), BoardConfig(as_of=AS_OF))
    assert load_by_day_frame(board).empty
    assert age_frame(board).empty
    assert status_frame(board)["complaints"].sum() == 6
    ET.fromstring(vl_convert.vegalite_to_svg(board_chart(board).to_json()))
