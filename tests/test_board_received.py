"""Times outside the range pandas holds (issue 38, "Hardening 3"): a received time or an as_of
far in the past or future is a one-line user error naming the row or the value, never an
OutOfBoundsDatetime traceback."""

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from core.board.moments import FIRST_YEAR, LAST_YEAR, check_as_of, parse_as_of
from core.board.received import parse_received
from core.data.limits import DataError
from core.errors import UserError
from tests.helpers import CliRun, run_cli

RANGE = f"{FIRST_YEAR} to {LAST_YEAR}"
AS_OF = datetime(2026, 1, 1, tzinfo=UTC)


def assert_one_line_error(result: CliRun, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def board_csv(tmp_path: Path, *received: str) -> Path:
    path = tmp_path / "board.csv"
    pd.DataFrame({
        "text": [f"upi payment {i} failed" for i in range(len(received))],
        "desk": ["UPI Dispute"] * len(received),
        "received_at": list(received),
    }).to_csv(path, index=False)  # fmt: skip
    return path


@pytest.mark.parametrize(
    "value",
    ["1500-01-01", "9999-12-31", "01/01/1500", "1500-01-01T10:00+05:30", "9999-12-31T23:00-05:00",
     "2300-01-01 09:00"],
)  # fmt: skip
def test_a_received_time_outside_the_range_is_an_unreadable_row(value):
    series = pd.Series(["2025-06-01 10:00", value, "2025-06-02 10:00"], name="received_at")
    with pytest.raises(DataError) as caught:
        parse_received(series, timezone="Asia/Kolkata", as_of=AS_OF)
    message = str(caught.value)
    assert "received_at in row 3" in message and repr(value) in message and RANGE in message
    assert "\n" not in message


def test_received_timestamps_outside_the_range_name_their_row():
    """A column that is already timestamps (Parquet) in a unit that holds year 1500."""
    for zone in (None, "UTC"):
        values = pd.Series(
            pd.to_datetime(["2025-06-01", "1500-01-01"]).astype("datetime64[s]"), name="when"
        ).dt.tz_localize(zone)
        with pytest.raises(DataError, match=r"when in row 3 .*1500-01-01"):
            parse_received(values, timezone="Asia/Kolkata", as_of=AS_OF)


def test_received_times_at_the_edges_of_the_range_are_read():
    series = pd.Series([f"{FIRST_YEAR}-01-01 00:00", "2025-06-01T10:00+05:30"])
    parsed = parse_received(series, timezone="Asia/Kolkata", as_of=AS_OF)
    assert parsed.dt.year.tolist() == [FIRST_YEAR, 2025]


@pytest.mark.parametrize("as_of", [datetime(2300, 1, 1), datetime(1500, 1, 1, tzinfo=UTC)])
def test_parse_received_refuses_an_as_of_outside_the_range(as_of):
    series = pd.Series(["2025-06-01 10:00"], name="received_at")
    with pytest.raises(UserError, match=RANGE):
        parse_received(series, timezone="Asia/Kolkata", as_of=as_of)


@pytest.mark.parametrize(
    "moment",
    [datetime(2300, 1, 1), datetime(1500, 1, 1), datetime(9999, 12, 31, tzinfo=UTC),
     datetime.fromisoformat("0001-01-01T00:00+05:30")],
)  # fmt: skip
def test_check_as_of_refuses_times_outside_the_range(moment):
    with pytest.raises(UserError) as caught:
        check_as_of(moment)
    assert RANGE in str(caught.value) and moment.isoformat() in str(caught.value)


def test_check_as_of_passes_times_inside_the_range():
    for moment in (datetime(FIRST_YEAR, 1, 1), datetime(LAST_YEAR, 12, 31, 23, 59), AS_OF):
        assert check_as_of(moment) is moment


def test_parse_as_of_reads_checks_and_refuses():
    assert parse_as_of("2026-11-30T14:05+05:30") == datetime.fromisoformat("2026-11-30T14:05+05:30")
    with pytest.raises(UserError, match="not a date and time"):
        parse_as_of("yesterday")
    with pytest.raises(UserError, match=RANGE):
        parse_as_of("2300-01-01")


@pytest.mark.parametrize(
    "value", ["1500-01-01", "9999-12-31", "1500-01-01T10:00+05:30", "31/12/9999"]
)
def test_cli_board_names_the_row_of_a_received_time_outside_the_range(tmp_path, value):
    path = board_csv(tmp_path, "2025-06-01 10:00", value)
    result = run_cli("board", str(path), "--desk-col", "desk", "--as-of", "2026-01-01")
    assert_one_line_error(result, "received_at in row 3", repr(value), RANGE)


@pytest.mark.parametrize(
    "as_of", ["2300-01-01", "1500-01-01", "9999-12-31T23:59-05:00", "0001-01-01T00:00+05:30"]
)
@pytest.mark.parametrize("received", [("2025-06-01 10:00",), ()])
def test_cli_board_refuses_an_as_of_outside_the_range(tmp_path, as_of, received):
    path = board_csv(tmp_path, *received) if received else tmp_path / "no_time.csv"
    if not received:
        pd.DataFrame({"text": ["upi failed"], "desk": ["UPI Dispute"]}).to_csv(path, index=False)
    result = run_cli("board", str(path), "--desk-col", "desk", "--as-of", as_of)
    assert_one_line_error(result, "--as-of", as_of, RANGE)
