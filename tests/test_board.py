"""The routing board: desks, ages, breaches and the at-risk list on small tables worked out by
hand, received times read or refused by row, and the what-if counted and expected by hand."""

from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from core.board.board import (
    BREACHED,
    DUE,
    NO_TIME,
    ON_TIME,
    BoardConfig,
    build_board,
    dataset_table,
    render_board_text,
)
from core.board.received import detect_received_column, parse_received
from core.board.tat import load_tat
from core.data.dataset import Dataset
from core.data.demo import DemoConfig, generate_demo_data
from core.data.limits import DataError
from core.errors import UserError

IST = ZoneInfo("Asia/Kolkata")
AS_OF = datetime(2026, 3, 6, 12, 0)  # naive: read in the TAT file's zone, IST

TAT = """\
timezone = "Asia/Kolkata"
default_hours = 50
default_source = "house rule"
reroute_hours = 20
triage_hours = 5

[desks.A]
hours = 10
source = "circular A"

[desks.B]
hours = 100
source = "circular B"
"""


@pytest.fixture()
def tat(tmp_path: Path):
    path = tmp_path / "tat.toml"
    path.write_text(TAT, encoding="utf-8")
    return load_tat(path)


def received(hours_ago: float | None) -> str:
    """A naive received time `hours_ago` before AS_OF (blank for None)."""
    if hours_ago is None:
        return ""
    return (AS_OF - timedelta(hours=hours_ago)).strftime("%Y-%m-%d %H:%M")


def six_rows() -> pd.DataFrame:
    """Six classified complaints (spreadsheet rows 2..7). Ages 5, 12, 85, 40, 3 hours and one
    without a time; desk C is not in the TAT file (default 50 h)."""
    return pd.DataFrame({
        "text": [f"complaint number {i} about money" for i in range(2, 8)],
        "predicted_label": ["A", "A", "B", "B", "C", "C"],
        "desk": ["A", "B", "B", "C", "A", "C"],  # the reviewed (right) desk
        "confidence": ["0.9", "0.6", "0.5", "0.7", "0.5", "0.6"],
        "needs_review": ["FALSE", "TRUE", "TRUE", "FALSE", "TRUE", "TRUE"],
        "prob_A": [0.9, 0.6, 0.4, 0.0, 0.45, 0.0],
        "prob_B": [0.1, 0.3, 0.5, 0.7, 0.05, 0.4],
        "prob_C": [0.0, 0.1, 0.1, 0.3, 0.5, 0.6],
        "received_at": [received(h) for h in (5, 12, 85, 40, 3, None)],
    })  # fmt: skip


def test_desks_ages_and_breaches_by_hand(tat):
    board = build_board(six_rows(), tat, BoardConfig(as_of=AS_OF))
    assert board.as_of == datetime(2026, 3, 6, 12, 0, tzinfo=IST)
    assert (board.desk_col, board.received_col, board.text_col) == (
        "predicted_label", "received_at", "text",
    )  # fmt: skip
    assert (board.rows, board.no_time, board.closed) == (6, 1, 0)
    loads = {d.desk: d for d in board.desks}
    assert [d.desk for d in board.desks] == ["A", "B", "C"]
    a, b, c = loads["A"], loads["B"], loads["C"]
    assert (a.open, a.unsure, a.breached, a.due_24h, a.no_time) == (2, 1, 1, 1, 0)
    assert (b.open, b.unsure, b.breached, b.due_24h, b.no_time) == (2, 1, 0, 1, 0)
    assert (c.open, c.unsure, c.breached, c.due_24h, c.no_time) == (2, 2, 0, 0, 1)
    assert (a.tat_hours, b.tat_hours, c.tat_hours) == (10.0, 100.0, 50.0)
    assert (a.tat_source, c.tat_source) == ("circular A", "house rule")
    assert a.age_p50_hours == pytest.approx(8.5) and a.age_p90_hours == pytest.approx(11.3)
    assert b.age_p50_hours == pytest.approx(62.5) and b.age_p90_hours == pytest.approx(80.5)
    assert c.age_p50_hours == pytest.approx(3.0)
    assert list(board.items["status"]) == [DUE, BREACHED, DUE, ON_TIME, ON_TIME, NO_TIME]
    assert any("default 50 h (house rule): 'C'" in w for w in board.warnings)
    assert any("1 open complaints have no received_at" in w for w in board.warnings)


def test_the_most_urgent_complaints_come_first(tat):
    board = build_board(six_rows(), tat, BoardConfig(as_of=AS_OF, top=2))
    assert board.at_risk_total == 3
    assert [(r.row, r.desk) for r in board.at_risk] == [(3, "A"), (2, "A")]
    first = board.at_risk[0]
    assert first.hours_left == pytest.approx(-2.0)
    assert first.received_at == datetime(2026, 3, 6, 0, 0, tzinfo=IST)
    assert (first.confidence, first.needs_review) == (0.6, True)
    assert first.text == "complaint number 3 about money"
    document = board.to_json()
    assert document["at_risk"][0] == {
        "row": 3, "desk": "A", "received_at": "2026-03-06T00:00:00+05:30", "hours_left": -2.0,
        "confidence": 0.6, "needs_review": True, "text": "complaint number 3 about money",
    }  # fmt: skip
    assert {"desk", "open", "unsure", "breached", "due_24h", "tat_hours"} <= set(
        document["desks"][0]
    )
    assert document["as_of"] == "2026-03-06T12:00:00+05:30"


def test_each_desk_keeps_its_own_at_risk_list(tat):
    """Desk A's two urgent complaints fill the overall top 2; desk B's own list still has its
    one due complaint (row 4, 15 h left), with its own text."""
    board = build_board(six_rows(), tat, BoardConfig(as_of=AS_OF, top=2))
    by_desk = board.at_risk_by_desk
    assert [(r.row, r.desk) for r in by_desk["A"]] == [(3, "A"), (2, "A")]
    assert [(r.row, r.hours_left) for r in by_desk["B"]] == [(4, pytest.approx(15.0))]
    assert by_desk["B"][0].text == "complaint number 4 about money"
    assert by_desk["C"] == ()
    assert [r["row"] for r in board.to_json()["at_risk_by_desk"]["B"]] == [4]


def scenarios(board) -> dict[str, tuple]:
    return {
        s.name: (s.changed_desk, round(s.breached, 6), round(s.avoided, 6), round(s.caused, 6))
        for s in board.what_if.scenarios
    }


def test_what_if_counted_with_the_reviewed_desk(tat):
    """Breach when age + delay > TAT(right desk); wrong desk +20 h, people first +5 h.
    As routed: row 6 (B, right C: 40+20 > 50) and row 7 (C, right A: 3+20 > 10) breach; row 3
    (A, right B: 12+20 <= 100) does not, though desk A's own clock says it has.
    Second choice of the unsure (3->B, 4->A, 7->A, 8->B): row 4 now breaches (85+20 > 100),
    row 7 no longer (3 <= 10). People first: row 7 avoided (3+5 <= 10), nothing caused."""
    board = build_board(six_rows(), tat, BoardConfig(as_of=AS_OF))
    assert board.what_if.basis == "reviewed desk column desk"
    assert scenarios(board) == {
        "as routed": (0, 2.0, 0.0, 0.0),
        "unsure to second choice": (4, 2.0, 1.0, 1.0),
        "unsure to people first": (4, 1.0, 1.0, 0.0),
    }
    assert "1 open complaints without a received time" in board.what_if.note
    assert "20 h (reroute_hours)" in board.what_if.note


def test_what_if_expected_over_the_models_probabilities(tat):
    """Without a reviewed desk: the sum over desks of probability x breach.
    As routed: row 3 0.6 (right A: 12 > 10), row 4 0.4 + 0.1 (A, C), row 5 0.3 (C: 60 > 50),
    row 6 0.45 (A: 23 > 10): 1.85. Second choice: row 4 at A breaches under B too (+0.5),
    row 6 at A breaches under none (-0.45): 1.9. People first: only row 6 changes: 1.4."""
    board = build_board(six_rows().drop(columns=["desk"]), tat, BoardConfig(as_of=AS_OF))
    assert board.what_if.basis == "the model's probabilities"
    assert scenarios(board) == {
        "as routed": (0, 1.85, 0.0, 0.0),
        "unsure to second choice": (4, 1.9, 0.45, 0.5),
        "unsure to people first": (4, 1.4, 0.45, 0.0),
    }


def test_a_label_column_of_another_vocabulary_is_not_taken_for_the_right_desk(tat):
    table = six_rows().drop(columns=["desk"]).assign(product=["Savings", "Card"] * 3)
    board = build_board(table, tat, BoardConfig(as_of=AS_OF))
    assert board.what_if.basis == "the model's probabilities"
    assert scenarios(board)["as routed"] == (0, 1.85, 0.0, 0.0)


def test_what_if_needs_a_needs_review_column_and_a_right_desk(tat):
    plain = six_rows().drop(columns=["needs_review"])
    board = build_board(plain, tat, BoardConfig(as_of=AS_OF))
    assert board.what_if is None and board.desks[0].unsure is None
    assert "needs_review" in board.what_if_missing
    assert not any("what-if" in w for w in board.warnings)
    bare = six_rows().drop(columns=["desk", "prob_A", "prob_B", "prob_C"])
    board = build_board(bare, tat, BoardConfig(as_of=AS_OF))
    assert board.what_if is None
    assert "prob_<desk>" in board.what_if_missing
    assert "not available" in render_board_text(board)


def test_without_received_times_the_board_shows_volumes_only(tat):
    board = build_board(six_rows().drop(columns=["received_at"]), tat, BoardConfig(as_of=AS_OF))
    assert board.received_col is None and board.what_if is None
    assert [(d.desk, d.open, d.breached, d.due_24h) for d in board.desks] == [
        ("A", 2, 0, 0), ("B", 2, 0, 0), ("C", 2, 0, 0),
    ]  # fmt: skip
    assert board.no_time == 6 and board.at_risk == ()
    assert any("volumes only" in w for w in board.warnings)


def test_closed_rows_are_not_open_and_blank_desks_are_counted(tat):
    table = six_rows().assign(Status=["open", "Closed", "", "RESOLVED", "open", "open"])
    table.loc[4, "predicted_label"] = "  "
    board = build_board(table, tat, BoardConfig(as_of=AS_OF))
    assert (board.rows, board.closed, len(board.items)) == (6, 2, 4)
    assert {d.desk: d.open for d in board.desks} == {"A": 1, "B": 1, "(no desk)": 1, "C": 1}
    assert [r.row for r in board.at_risk] == [2, 4]  # row 3 breached but is closed


def test_the_desk_column_can_be_named_and_must_exist(tat):
    board = build_board(six_rows(), tat, BoardConfig(as_of=AS_OF, desk_col="desk"))
    assert {d.desk: d.open for d in board.desks} == {"A": 2, "B": 2, "C": 2}
    with pytest.raises(DataError, match="no desk column 'team'"):
        build_board(six_rows(), tat, BoardConfig(as_of=AS_OF, desk_col="team"))
    with pytest.raises(DataError, match="could not tell which column holds each complaint's desk"):
        build_board(pd.DataFrame({"x": ["1", "2", "3"]}), tat, BoardConfig(as_of=AS_OF))


def test_a_bad_needs_review_cell_names_its_row(tat):
    table = six_rows()
    table.loc[3, "needs_review"] = "maybe"
    with pytest.raises(DataError, match="needs_review in row 5 is neither true nor false"):
        build_board(table, tat, BoardConfig(as_of=AS_OF))


@pytest.mark.parametrize("top", [0, -1, 10_001, 2.5, True])
def test_top_is_checked(top):
    with pytest.raises(UserError, match="top must be a whole number"):
        BoardConfig(top=top)


# ----------------------------------------------------------------------------- received times


def test_received_times_keep_offsets_and_read_naive_ones_in_the_zone():
    cells = pd.Series([
        "2026-03-05T14:05:33+05:30", "2026-03-05 14:05", "2026-03-05T08:00:00Z",
        "30/11/2025 14:05", "05 Mar 2026", None, "   ",
    ])  # fmt: skip
    parsed = parse_received(cells, timezone="Asia/Kolkata", as_of=AS_OF)
    assert str(parsed.dtype) == "datetime64[ns, Asia/Kolkata]"
    expected = [
        datetime(2026, 3, 5, 14, 5, 33), datetime(2026, 3, 5, 14, 5),
        datetime(2026, 3, 5, 13, 30), datetime(2025, 11, 30, 14, 5), datetime(2026, 3, 5),
    ]  # fmt: skip
    assert list(parsed[:5]) == [pd.Timestamp(e, tz=IST) for e in expected]
    assert parsed[5:].isna().all()


def test_an_unreadable_received_time_names_the_first_row_and_counts_the_rest():
    cells = pd.Series(["2026-03-05 10:00", "yesterday", "2026-03-01", "31/02/2026", "soon"])
    with pytest.raises(DataError) as error:
        parse_received(cells.rename("received_at"), timezone="Asia/Kolkata", as_of=AS_OF)
    message = str(error.value)
    assert message.startswith("received_at in row 3 is 'yesterday', which is not a date")
    assert "write it like 2026-11-30 14:05" in message and message.endswith("2 more rows like it")


def test_a_future_received_time_names_its_row_with_the_rows_given(tat):
    late = (AS_OF + timedelta(minutes=6)).strftime("%Y-%m-%d %H:%M")
    fine = (AS_OF + timedelta(minutes=4)).strftime("%Y-%m-%d %H:%M")
    cells = pd.Series([fine, late, "2027-01-01"])
    with pytest.raises(
        DataError, match=r"row 11 is '2026-03-06 12:06', which lies in the fut.*1 more row like it$"
    ):
        parse_received(cells, timezone="Asia/Kolkata", as_of=AS_OF, rows=[10, 11, 12])
    table = six_rows()
    table.loc[2, "received_at"] = "2030-01-01T00:00+05:30"
    with pytest.raises(DataError, match="row 14 .* future"):
        build_board(table, tat, BoardConfig(as_of=AS_OF), rows=range(12, 18))


def test_an_unsafe_cell_is_shown_short_and_printable():
    cells = pd.Series(["\x1b[31m" + "x" * 100])
    with pytest.raises(DataError) as error:
        parse_received(cells, timezone="Asia/Kolkata", as_of=AS_OF)
    message = str(error.value)
    assert "\x1b" not in message and "x" * 40 not in message and "…" in message


def test_the_received_column_is_found_by_name():
    frame = pd.DataFrame(columns=["text", "Date Received", "desk"])
    assert detect_received_column(frame) == "Date Received"
    assert detect_received_column(pd.DataFrame(columns=["text", "desk"])) is None
    assert detect_received_column(frame, received_col="desk") == "desk"
    with pytest.raises(DataError, match="no column 'when'"):
        detect_received_column(frame, received_col="when")


# ----------------------------------------------------------------------------- data sets


def test_a_data_set_is_boarded_with_its_own_rows(tat):
    extra = pd.DataFrame({"received_at": [received(15), received(1), ""]})
    dataset = Dataset(["upi failed", "card stolen", "loan"], ["A", "B", "A"], (5, 9, 12), extra)
    table, rows = dataset_table(dataset, label_col="Desk")
    assert list(table.columns) == ["text", "Desk", "received_at"] and rows == (5, 9, 12)
    board = build_board(table, tat, BoardConfig(as_of=AS_OF), rows=rows)
    assert board.desk_col == "Desk"
    assert [(r.row, r.hours_left) for r in board.at_risk] == [(5, -5.0)]
    assert board.no_time == 1 and list(board.items["row"]) == [5, 9, 12]


def test_the_demo_data_boards_with_numbers_computed_independently():
    """Every demo complaint is open; its age is as_of minus its received time; it has breached
    when that exceeds its desk's TAT in the shipped file (24 h UPI, 240 h cards, else 720 h)."""
    until = date(2026, 3, 6)
    demo = generate_demo_data(DemoConfig(rows=300, seed=3, received_until=until))
    as_of = datetime(2026, 3, 6, 9, 30, tzinfo=IST)
    board = build_board(demo, load_tat(), BoardConfig(as_of=as_of, top=5))
    tat_hours = {"UPI Dispute": 24, "Card Fraud": 240}
    expected: dict[str, list[int]] = {}
    for desk, when in zip(demo["desk"], demo["received_at"], strict=True):
        age = (as_of - datetime.fromisoformat(when)).total_seconds() / 3600
        left = tat_hours.get(desk, 720) - age
        counts = expected.setdefault(desk, [0, 0, 0])
        counts[0] += 1
        counts[1] += left < 0
        counts[2] += 0 <= left <= 24
    assert {d.desk: [d.open, d.breached, d.due_24h] for d in board.desks} == expected
    assert board.desk_col == "desk" and board.no_time == 0
    assert expected["UPI Dispute"][1] > 0  # the demo shows breaches to talk about
    assert board.at_risk_total == sum(b + d for _, b, d in expected.values())
    text = render_board_text(board)
    assert "UPI Dispute" in text and f"most at risk (5 of {board.at_risk_total})" in text
