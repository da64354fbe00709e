"""The turnaround-time (TAT) file of the routing board: the shipped defaults and their sources,
the operator's own file, and one line naming the line to fix for every kind of bad file."""

from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from core.board.board import BoardConfig, build_board
from core.board.tat import (
    DEFAULT_TAT_PATH,
    MAX_TAT_BYTES,
    TAT_ENV,
    check_tat_desks,
    load_tat,
    tat_path,
)
from core.errors import UserError

BASE = """\
timezone = "Asia/Kolkata"
default_hours = 720
default_source = "the default"
reroute_hours = 48
triage_hours = 8

[desks."UPI Dispute"]
hours = 24
source = "T+1"

[desks."Card Fraud"]
hours = 240
source = "10 days"
"""


def write_tat(tmp_path: Path, text: str = BASE, name: str = "tat.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_the_shipped_defaults_load_and_cite_their_sources(monkeypatch):
    monkeypatch.delenv(TAT_ENV, raising=False)
    assert tat_path() == DEFAULT_TAT_PATH
    tat = load_tat()
    hours = {d.desk: d.hours for d in tat.desks}
    assert hours == {
        "UPI Dispute": 24.0, "Card Fraud": 240.0, "Loan Query": 720.0, "KYC Update": 720.0,
        "Other": 720.0,
    }  # fmt: skip
    assert (tat.default_hours, tat.reroute_hours, tat.triage_hours) == (720.0, 48.0, 8.0)
    assert tat.timezone == "Asia/Kolkata"
    assert "RBI/2019-20/67" in tat.source_for("UPI Dispute")
    assert "DPSS.CO.PD No.629/02.01.014/2019-20" in tat.source_for("UPI Dispute")
    assert "RBI/2017-18/15" in tat.source_for("Card Fraud")
    for desk in ("Loan Query", "KYC Update", "Other"):
        assert "Integrated Ombudsman Scheme, 2021" in tat.source_for(desk)
    assert "Integrated Ombudsman Scheme, 2021" in tat.default_source
    assert tat.hours_for("Mortgage Desk") == 720.0  # a desk the file does not name
    assert "reroute_hours" in DEFAULT_TAT_PATH.read_text() and "NOT from any RBI" in (
        DEFAULT_TAT_PATH.read_text()
    )


def test_the_environment_variable_points_at_the_operators_file(tmp_path, monkeypatch):
    path = write_tat(tmp_path)
    monkeypatch.setenv(TAT_ENV, str(path))
    assert tat_path() == path
    tat = load_tat()
    assert tat.path == str(path)
    assert [d.desk for d in tat.desks] == ["UPI Dispute", "Card Fraud"]
    assert [d.line for d in tat.desks] == [7, 11]


def _table() -> pd.DataFrame:
    """Three UPI complaints 30, 50 and 10 hours old and one Card Fraud complaint 300 hours old
    at 2026-03-06 12:00 IST."""
    return pd.DataFrame({
        "text": ["upi money stuck", "upi debit not credited", "upi failed", "card misused"],
        "predicted_label": ["UPI Dispute", "UPI Dispute", "UPI Dispute", "Card Fraud"],
        "received_at": [
            "2026-03-05 06:00", "2026-03-04 10:00", "2026-03-06 02:00", "2026-02-22 00:00",
        ],
    })  # fmt: skip


def _breaches(tat) -> dict[str, int]:
    board = build_board(_table(), tat, BoardConfig(as_of=datetime(2026, 3, 6, 12, 0)))
    return {load.desk: load.breached for load in board.desks}


def test_a_changed_tat_file_changes_the_breach_counts(tmp_path):
    assert _breaches(load_tat()) == {"UPI Dispute": 2, "Card Fraud": 1}
    slower = BASE.replace("hours = 24\n", "hours = 2400\n").replace(
        "hours = 240\n", "hours = 301\n"
    )
    assert _breaches(load_tat(write_tat(tmp_path, slower))) == {"UPI Dispute": 0, "Card Fraud": 0}
    tighter = BASE.replace("hours = 24\n", "hours = 40\n")
    assert _breaches(load_tat(write_tat(tmp_path, tighter, "t.toml"))) == {
        "UPI Dispute": 1, "Card Fraud": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "fragments"),
    [
        ("hours = 24\n", "hours = = 24\n", ["line 8", "not valid TOML"]),
        ("hours = 24\n", "hour = 24\n", ["line 8", "unknown key 'hour'", "UPI Dispute"]),
        ("triage_hours = 8\n", "triage_hour = 8\n", ["line 5", "unknown key 'triage_hour'"]),
        ("hours = 24\n", "hours = -24\n", ["line 8", "hours of desk 'UPI Dispute' is -24"]),
        ("hours = 240\n", "hours = 9000\n", ["line 12", "at most 8760"]),
        ("hours = 240\n", "hours = 0\n", ["line 12", "above 0"]),
        ("hours = 24\n", 'hours = "24"\n', ["line 8", "must be a number"]),
        ("hours = 24\n", "hours = true\n", ["line 8", "must be a number"]),
        ("hours = 24\n", "hours = nan\n", ["line 8", "must be a number"]),
        ("reroute_hours = 48\n", "reroute_hours = -1\n", ["line 4", "reroute_hours"]),
        ('timezone = "Asia/Kolkata"', 'timezone = "Asia/Mumbai"', ["line 1", "unknown timezone"]),
        ('timezone = "Asia/Kolkata"', 'timezone = "../etc/passwd"', ["line 1", "timezone"]),
        ("default_hours = 720\n", "", ["default_hours is missing"]),
        ('[desks."Card Fraud"]\nhours = 240\n', '[desks."Card Fraud"]\n', ["line 11", "no hours"]),
    ],
)
def test_a_bad_tat_file_names_the_line_to_fix(tmp_path, old, new, fragments):
    assert old in BASE
    with pytest.raises(UserError) as error:
        load_tat(write_tat(tmp_path, BASE.replace(old, new, 1)))
    message = one_line(error)
    assert message.startswith(f"TAT file {tmp_path / 'tat.toml'}")
    for fragment in fragments:
        assert fragment in message, message


def test_a_missing_too_big_or_binary_tat_file_is_refused(tmp_path):
    with pytest.raises(UserError, match="no TAT file at"):
        load_tat(tmp_path / "missing.toml")
    big = write_tat(tmp_path, BASE + "#" * MAX_TAT_BYTES, "big.toml")
    with pytest.raises(UserError, match="at most 64 KB"):
        load_tat(big)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'timezone = "\xff\xfe"\n')
    with pytest.raises(UserError, match="not UTF-8"):
        load_tat(binary)
    with pytest.raises(UserError, match="is not a file"):
        load_tat(tmp_path)


def test_a_near_miss_desk_name_names_its_line_and_the_right_spelling(tmp_path):
    tat = load_tat(write_tat(tmp_path, BASE.replace('"UPI Dispute"', '"upi  dispute"')))
    with pytest.raises(UserError) as error:
        check_tat_desks(tat, ["UPI Dispute", "Card Fraud"])
    message = one_line(error)
    assert "line 7" in message and "did you mean 'UPI Dispute'" in message
    tat = load_tat(write_tat(tmp_path, BASE.replace('"Card Fraud"', '"Card Frauds"'), "t.toml"))
    with pytest.raises(UserError, match=r"line 11: desk 'Card Frauds' .* 'Card Fraud'"):
        check_tat_desks(tat, ["UPI Dispute", "Card Fraud"])


def test_a_tat_desk_the_file_lacks_is_a_warning_not_an_error():
    warnings = check_tat_desks(load_tat(), ["UPI Dispute", "Card Fraud", "Mortgage"])
    assert warnings == [
        f"the TAT file names desk '{desk}', which this file lacks"
        for desk in ("Loan Query", "KYC Update", "Other")
    ]
