"""The `python -m core audit` contract of ARCHITECTURE.md: JSON keys, --folds checks, one-line
errors, the fine-tune audit of a saved (tiny) model, and the run recorded in the review store.

Commands run in-process through `core.cli.main`; the first test runs `python -m core audit` as
users run it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli import main
from core.data.demo import DemoConfig, write_demo_data
from tests.helpers import run_cli, run_cli_process

ISSUE_KEYS = {"row", "text", "given_label", "suggested_label", "quality"}


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def demo_csv(tmp_path_factory) -> Path:
    return write_demo_data(tmp_path_factory.mktemp("audit") / "demo.csv", DemoConfig(rows=300))


def test_audit_json_has_the_contract_keys(demo_csv: Path):
    result = run_cli_process("audit", str(demo_csv), "--json", "--folds", "4")  # real entry point
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {"issues", "folds", "model"} <= set(document)
    assert (document["folds"], document["model"]) == (4, "bow")
    issues = document["issues"]
    assert len(issues) >= 5
    assert all(set(issue) >= ISSUE_KEYS for issue in issues)
    qualities = [issue["quality"] for issue in issues]
    assert qualities == sorted(qualities)  # most suspicious first
    assert all(2 <= issue["row"] <= 301 for issue in issues)  # spreadsheet rows, header = 1
    assert "audit (bag of words)" in result.stderr  # tqdm progress on stderr, not stdout


def test_audit_without_json_prints_the_top_issues(demo_csv: Path, capsys):
    assert main(["audit", str(demo_csv), "--show", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("suspected label issues (bow, 5 folds)")
    assert out[1].startswith("  row ") and " -> " in out[1] and "quality" in out[1]
    assert out[-1].startswith("  ... and ") and out[-1].endswith("more (see --json)")


@pytest.mark.parametrize(
    ("folds", "fragment"),
    [("1", "folds must be an integer >= 2, got 1"), ("0", "folds must be an integer >= 2")],
)
def test_folds_below_two_are_one_line_errors(demo_csv: Path, capsys, folds: str, fragment: str):
    assert main(["audit", str(demo_csv), "--folds", folds]) == 2
    assert fragment in one_line_error(capsys.readouterr().err)


def test_more_folds_than_rows_is_a_one_line_error(tmp_path: Path, capsys):
    small = tmp_path / "small.csv"
    small.write_text("text,label\na b,A\nc d,A\ne f,B\ng h,B\n", encoding="utf-8")
    assert main(["audit", str(small), "--folds", "5"]) == 2
    assert "lower --folds" in one_line_error(capsys.readouterr().err)


def test_folds_that_are_not_a_number_are_refused_by_the_parser(demo_csv: Path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["audit", str(demo_csv), "--folds", "five"])
    assert stopped.value.code == 2
    assert "--folds" in one_line_error(capsys.readouterr().err)


def test_a_bad_file_is_a_one_line_error(tmp_path: Path):
    garbage = tmp_path / "complaints.csv"
    garbage.write_bytes(b"\x00\x01\x02garbage\xff\xfe")
    result = run_cli("audit", str(garbage), "--json")
    assert result.returncode == 2 and result.stdout == ""
    one_line_error(result.stderr)


def test_a_missing_file_and_a_folder_that_is_not_a_model(demo_csv: Path, tmp_path, capsys):
    assert main(["audit", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in one_line_error(capsys.readouterr().err)
    assert main(["audit", str(demo_csv), "--model", str(tmp_path)]) == 2
    assert "is not a model" in one_line_error(capsys.readouterr().err)


@pytest.mark.slow  # fine-tunes the session's tiny model (tests/conftest.py) once per fold
def test_audit_with_a_saved_model_fine_tunes_its_settings_per_fold(demo_csv, tiny_model_dir):
    args = ("audit", str(demo_csv), "--model", str(tiny_model_dir), "--folds", "2", "--json")
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["model"], document["folds"], document["backbone"]) == (
        "transformer",
        2,
        "tiny",
    )
    assert document["model_dir"] == str(tiny_model_dir)
    assert all(set(issue) >= ISSUE_KEYS for issue in document["issues"])
    assert "audit (tiny)" in result.stderr and "fold=2/2" in result.stderr  # tqdm steps


def test_an_audit_from_the_command_line_is_recorded_as_one_from_the_app(demo_csv: Path):
    from core.access import OPERATOR
    from core.review.store import Store, default_db_path

    run = run_cli("audit", str(demo_csv), "--folds", "3", "--json")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    with Store.open(default_db_path()) as store:
        (record,) = store.runs(kind="audit")
        (event,) = store.trail(actor=OPERATOR)
    assert record.parameters == {"model": "bow", "folds": 3, "fingerprint": document["fingerprint"]}
    assert record.metrics["issues"] == len(document["issues"])
    assert (event.action, event.entity_id, event.actor) == ("run.recorded", record.id, "operator")
