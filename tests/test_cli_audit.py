"""The `python -m core audit` contract of DESIGN.md: JSON keys, --folds checks, one-line errors,
and the transformer audit of a saved (tiny) model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import main
from core.data.dataset import split_dataset
from core.data.demo import DemoConfig, write_demo_data
from core.data.validation import load_dataset
from core.models.registry import save_model
from core.models.transformer.config import TrainConfig
from core.models.transformer.training import train_models

ROOT = Path(__file__).resolve().parent.parent
ISSUE_KEYS = {"row", "text", "given_label", "suggested_label", "quality"}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def demo_csv(tmp_path_factory) -> Path:
    return write_demo_data(tmp_path_factory.mktemp("audit") / "demo.csv", DemoConfig(rows=300))


def test_audit_json_has_the_contract_keys(demo_csv: Path):
    result = run_cli("audit", str(demo_csv), "--json", "--folds", "4")
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


@pytest.fixture(scope="module")
def tiny_model(demo_csv: Path, tmp_path_factory) -> Path:
    """A saved model with the tiny backbone, trained for one epoch on the demo file."""
    dataset, _ = load_dataset(demo_csv)
    train, val = split_dataset(dataset, val_fraction=0.2, seed=0)
    config = TrainConfig(backbone="tiny", epochs=1, lr=1e-2, max_length=48, device="cpu")
    result = train_models(train, val, config)
    return save_model(result, tmp_path_factory.mktemp("models") / "tiny")


@pytest.mark.slow  # a subprocess that imports torch and fine-tunes twice: 10 to 20 s here
def test_audit_with_a_saved_model_fine_tunes_its_settings_per_fold(demo_csv, tiny_model):
    # One torch thread: on the shared 2-core dev machine two made tiny fits ~10x slower.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ("audit", str(demo_csv), "--model", str(tiny_model), "--folds", "2", "--json")
    result = run_cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["model"], document["folds"], document["backbone"]) == (
        "transformer",
        2,
        "tiny",
    )
    assert document["model_dir"] == str(tiny_model)
    assert all(set(issue) >= ISSUE_KEYS for issue in document["issues"])
    assert "audit (tiny)" in result.stderr and "fold=2/2" in result.stderr  # tqdm steps
