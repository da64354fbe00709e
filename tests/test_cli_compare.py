"""`python -m core compare --model A --model B FILE [--json]` (ARCHITECTURE.md, "Command line"): two
saved models scored on the rows of FILE that neither trained on, in-process through core.cli.main
on copies of the session's tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from tests.helpers import TINY_LABELS, TINY_TEXTS, run_cli
from tests.test_cli import assert_one_line_error

FRESH = [f"{text} again, complaint {i}" for i in range(4) for text in TINY_TEXTS]  # 32 rows


@pytest.fixture
def labelled(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Models `live-one` and `challenger` (copies of the tiny model) and a file of the 8 texts
    they trained on plus 32 they never saw."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    for name in ("live-one", "challenger"):
        shutil.copytree(tiny_model_dir, tmp_path / "models" / name)
    path = tmp_path / "labelled.csv"
    frame = pd.DataFrame({"text": TINY_TEXTS + FRESH, "desk": TINY_LABELS + TINY_LABELS * 4})
    frame.to_csv(path, index=False)
    return path


def test_compare_scores_only_rows_neither_model_trained_on(labelled: Path):
    result = run_cli(
        "compare", "--model", "live-one", "--model", "challenger", str(labelled), "--json",
        "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["rows"] == 32  # the 8 training texts are left out
    assert report["a"]["name"] == "live-one" and report["b"]["name"] == "challenger"
    for side in ("a", "b"):
        assert {"accuracy", "macro_f1", "per_class", "ece", "flagged"} <= set(report[side])
    # The same weights twice: identical decisions, nothing changes desk, no evidence either way.
    assert report["a"]["accuracy"] == report["b"]["accuracy"]
    assert report["changed"] == [] and report["p_value"] == 1.0


def test_compare_prints_a_verdict_without_json(labelled: Path):
    result = run_cli("compare", "--model", "live-one", "--model", "challenger", str(labelled))
    assert result.returncode == 0, result.stderr
    assert "within noise" in result.stdout and "32" in result.stdout


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([], "give --model twice"),
        (["--model", "challenger", "--review-threshold", "2"], "--review-threshold must lie"),
        (["--model", "nowhere"], "no saved model of that name"),
    ],
)
def test_compare_refusals_are_one_line(labelled: Path, extra: list[str], fragment: str):
    result = run_cli("compare", "--model", "live-one", *extra, str(labelled))
    assert_one_line_error(result, fragment)
