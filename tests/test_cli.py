"""The command-line contract of ARCHITECTURE.md for `validate` and `demo-data`.

Commands run in-process through `core.cli.main`; one test per command runs `python -m core` as
users run it.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import CliRun, run_cli, run_cli_process


def assert_one_line_error(result: CliRun, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture()
def complaints(tmp_path: Path) -> Path:
    path = tmp_path / "complaints.csv"
    path.write_text(
        "id;Complaint ;Desk\n"
        "1;UPI payment failed;UPI Dispute\n"
        "2;;Card Fraud\n"
        "3;Card stolen and used;Card Fraud\n"
        "4;UPI payment failed;Card Fraud\n"
        "5;Loan EMI charged twice;\n",
        encoding="utf-8-sig",
    )
    return path


def test_validate_json_has_the_contract_keys(complaints: Path):
    result = run_cli_process("validate", str(complaints), "--json")  # the real entry point
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["text_col"] == "Complaint" and report["label_col"] == "Desk"
    assert report["rows_read"] == 5 and report["rows_kept"] == 3
    assert report["dropped"] == [
        {"row": 3, "reason": "empty text"},
        {"row": 6, "reason": "missing label"},
    ]
    assert report["labels"] == {"Card Fraud": 2, "UPI Dispute": 1}
    assert report["duplicates"] == 1 and report["conflicts"] == 1
    assert isinstance(report["warnings"], list) and report["warnings"]


def test_validate_human_output(complaints: Path):
    result = run_cli("validate", str(complaints))
    assert result.returncode == 0
    assert "rows read 5, kept 3, dropped 2" in result.stdout


def test_validate_unknown_column_lists_the_columns(complaints: Path):
    result = run_cli("validate", str(complaints), "--text-col", "complant")
    assert_one_line_error(result, "complant", "Complaint", "Desk")


def test_validate_missing_file():
    assert_one_line_error(run_cli("validate", "no/such/file.csv"), "no/such/file.csv")


def test_validate_refuses_xls(tmp_path: Path):
    path = tmp_path / "old.xls"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512)
    assert_one_line_error(run_cli("validate", str(path)), ".xls")


def test_bad_arguments_are_one_line_errors():
    assert_one_line_error(run_cli("validate"))
    assert_one_line_error(run_cli("demo-data", "x.csv", "--rows", "many"))


def test_demo_data_csv_is_deterministic_and_valid(tmp_path: Path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    assert run_cli("demo-data", str(first), "--rows", "300", "--seed", "3").returncode == 0
    assert run_cli("demo-data", str(second), "--rows", "300", "--seed", "3").returncode == 0
    assert first.read_bytes() == second.read_bytes()
    report = json.loads(run_cli("validate", str(first), "--json").stdout)
    assert report["rows_kept"] == 300 and len(report["labels"]) == 5


def test_demo_data_xlsx(tmp_path: Path):
    out = tmp_path / "demo.xlsx"
    # The real entry point, as users run it.
    assert run_cli_process("demo-data", str(out), "--rows", "200").returncode == 0
    assert len(pd.read_excel(out)) == 200


def test_demo_data_refuses_other_suffix_and_writes_nothing(tmp_path: Path):
    out = tmp_path / "demo.txt"
    assert_one_line_error(run_cli("demo-data", str(out)), ".csv")
    assert list(tmp_path.iterdir()) == []


def test_classify_honours_the_file_size_setting(tmp_path: Path, tiny_model_dir: Path, monkeypatch):
    # The app reads GRIEVANCE_LENS_MAX_FILE_MB; so does the command line, for every part.
    path = tmp_path / "archive.csv"
    path.write_text("text\n" + "my card was blocked abroad please help\n" * 40)
    assert path.stat().st_size > 1024
    monkeypatch.setenv("GRIEVANCE_LENS_MAX_FILE_MB", "0.001")
    out = tmp_path / "routed.csv"
    result = run_cli("classify", "--model", str(tiny_model_dir), str(path), "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # after the progress bar's lines
    assert last.startswith("error: 'archive.csv' is 0.0 MB, above the 0.000999")
    assert last.endswith("raise the limit with GRIEVANCE_LENS_MAX_FILE_MB")
    assert not out.exists()
    monkeypatch.setenv("GRIEVANCE_LENS_MAX_FILE_MB", "1")
    result = run_cli("classify", "--model", str(tiny_model_dir), str(path), "--out", str(out))
    assert result.returncode == 0, result.stderr
