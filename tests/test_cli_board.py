"""`python -m core board`: the contract keys of --json on the demo data the CLI writes, the
human output, --tat and --as-of, and one-line errors (exit 2) for bad input."""

import json
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import CliRun, run_cli, run_cli_process

TAT_HOURS = {"UPI Dispute": 24, "Card Fraud": 240}  # the shipped file; every other desk 720


def assert_one_line_error(result: CliRun, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def demo_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("board") / "demo.csv"
    assert run_cli("demo-data", str(path), "--rows", "120", "--seed", "5").returncode == 0
    return path


def test_board_json_on_the_demo_data_has_the_contract_keys(demo_csv, monkeypatch):
    monkeypatch.delenv("GRIEVANCE_LENS_TAT", raising=False)
    result = run_cli("board", str(demo_csv), "--json", "--top", "3")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {"as_of", "desks", "at_risk"} <= set(document)
    for desk in document["desks"]:
        assert {"desk", "open", "unsure", "breached", "due_24h", "tat_hours"} <= set(desk)
    for item in document["at_risk"]:
        assert {"row", "desk", "received_at", "hours_left"} <= set(item)
    assert len(document["at_risk"]) == 3
    hours_left = [item["hours_left"] for item in document["at_risk"]]
    assert hours_left == sorted(hours_left)
    # The same numbers, computed here from the file and the board's own as_of.
    as_of = datetime.fromisoformat(document["as_of"])
    demo = pd.read_csv(demo_csv)
    breached: dict[str, int] = {}
    for desk, when in zip(demo["desk"], demo["received_at"], strict=True):
        age = (as_of - datetime.fromisoformat(when)).total_seconds() / 3600
        breached[desk] = breached.get(desk, 0) + (TAT_HOURS.get(desk, 720) < age)
    assert {d["desk"]: d["breached"] for d in document["desks"]} == breached
    assert sum(d["open"] for d in document["desks"]) == document["rows"] == 120


def test_board_text_output_and_the_real_entry_point(demo_csv):
    result = run_cli_process("board", str(demo_csv), "--top", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("routing board as of ")
    assert "UPI Dispute" in result.stdout and "most at risk (2 of " in result.stdout


def classified(tmp_path: Path) -> Path:
    path = tmp_path / "classified.csv"
    pd.DataFrame({
        "text": ["upi money debited", "card used abroad", "loan emi question"],
        "predicted_label": ["UPI Dispute", "Card Fraud", "Loan Query"],
        "confidence": [0.9, 0.5, 0.8],
        "needs_review": [False, True, False],
        "prob_UPI Dispute": [0.9, 0.4, 0.1],
        "prob_Card Fraud": [0.05, 0.5, 0.1],
        "prob_Loan Query": [0.05, 0.1, 0.8],
        "received_at": ["2026-03-05 10:00", "2026-03-06 11:00", "2026-03-01 09:00"],
    }).to_csv(path, index=False)  # fmt: skip
    return path


def test_board_tat_and_as_of_change_the_counts(tmp_path):
    file = classified(tmp_path)
    result = run_cli("board", str(file), "--json", "--as-of", "2026-03-06T12:00+05:30")
    document = json.loads(result.stdout)
    assert document["as_of"] == "2026-03-06T12:00:00+05:30"
    assert {d["desk"]: d["breached"] for d in document["desks"]} == {
        "UPI Dispute": 1, "Card Fraud": 0, "Loan Query": 0,
    }  # fmt: skip
    assert [(i["row"], i["hours_left"]) for i in document["at_risk"]] == [(2, -2.0)]
    assert document["what_if"]["basis"] == "the model's probabilities"
    tat = tmp_path / "tat.toml"
    tat.write_text('default_hours = 720\nreroute_hours = 48\ntriage_hours = 8\n'
                   '[desks."UPI Dispute"]\nhours = 2400\n')  # fmt: skip
    result = run_cli("board", str(file), "--json", "--tat", str(tat), "--as-of", "2026-03-06 12:00")
    document = json.loads(result.stdout)
    assert {d["desk"]: d["breached"] for d in document["desks"]}["UPI Dispute"] == 0
    assert document["tat_path"] == str(tat)


def test_board_bad_input_is_one_line_and_exit_2(tmp_path):
    file = classified(tmp_path)
    tat = tmp_path / "bad.toml"
    tat.write_text('default_hours = 720\nreroute_hours = 48\ntriage_hours = 8\n'
                   '[desks."UPI Dispute"]\nhours = -1\n')  # fmt: skip
    assert_one_line_error(run_cli("board", str(file), "--tat", str(tat)), "line 5", "above 0")
    assert_one_line_error(run_cli("board", str(file), "--as-of", "tomorrow"), "--as-of 'tomorrow'")
    assert_one_line_error(
        run_cli("board", str(file), "--as-of", "2026-03-06 10:00"), "row 3", "future"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("text,desk,received_at\nupi failed,UPI Dispute,last week\n")
    assert_one_line_error(run_cli("board", str(bad)), "row 2", "'last week'")
    assert_one_line_error(run_cli("board", str(file), "--top", "0"), "top must be")
    assert_one_line_error(run_cli("board", str(tmp_path / "missing.csv")), "missing.csv")
