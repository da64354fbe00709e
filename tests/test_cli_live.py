"""The command line's `--model live`, `--model NAME` and `python -m core promote` (ARCHITECTURE.md,
"Command line"), in-process through core.cli.main, on copies of the session's tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.store import DB_NAME, Store
from tests.helpers import TINY_LABELS, TINY_TEXTS, run_cli
from tests.test_cli import assert_one_line_error


@pytest.fixture
def folders(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Data and models folders of this test, the models folder holding `first` and `second`."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    for name in ("first", "second"):
        shutil.copytree(tiny_model_dir, tmp_path / "models" / name)
    return tmp_path


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.csv"
    pd.DataFrame({"complaint": TINY_TEXTS, "desk": TINY_LABELS}).to_csv(path, index=False)
    return path


def evaluated_with(model: str, labelled: Path) -> str:
    """The model folder `evaluate --model MODEL` used."""
    result = run_cli("evaluate", "--model", model, str(labelled), "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["model_dir"]


def test_model_live_without_a_promotion_says_how_to_promote(folders: Path, labelled: Path):
    result = run_cli("evaluate", "--model", "live", str(labelled))
    assert_one_line_error(result, "no model is live yet", "python -m core promote NAME --reason")
    assert not (folders / "data" / DB_NAME).exists()  # asking creates no store


def test_promote_then_model_live_uses_it_and_follows_a_rollback(folders: Path, labelled: Path):
    first = run_cli("promote", "first", "--reason", "the first model")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("first is the live model since ")
    assert "promoted by operator; the first live model" in first.stdout
    assert "reason: the first model" in first.stdout
    assert evaluated_with("live", labelled) == str((folders / "models" / "first").resolve())
    second = run_cli("promote", "second", "--reason", "better", "--json")
    assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    assert document["name"] == "second" and document["previous"] == "first"
    assert document["promoted_by"] == "operator" and document["reason"] == "better"
    assert {"digest", "since", "event_id", "report"} <= set(document)
    assert evaluated_with("live", labelled).endswith("second")
    back = run_cli("promote", "first", "--reason", "roll back")
    assert "before it: second" in back.stdout
    assert evaluated_with("live", labelled).endswith("first")
    with Store.open(folders / "data" / DB_NAME) as store:
        events = store.events("model.promoted")
    assert [(e.details["name"], e.actor) for e in events] == [
        ("first", "operator"), ("second", "operator"), ("first", "operator"),
    ]  # fmt: skip


def test_model_by_name_and_by_folder(folders: Path, labelled: Path):
    assert evaluated_with("second", labelled) == str((folders / "models" / "second").resolve())
    folder = str(folders / "models" / "first")
    assert evaluated_with(folder, labelled) == folder
    missing = run_cli("evaluate", "--model", "nosuch", str(labelled))
    assert_one_line_error(missing, "--model nosuch", "no saved model of that name", "live")


def test_model_live_refuses_a_model_saved_again_after_promotion(folders: Path, labelled: Path):
    assert run_cli("promote", "first", "--reason", "ok").returncode == 0
    card_path = folders / "models" / "first" / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    card_path.write_text(json.dumps({**card, "created_at": "2099-01-01"}), encoding="utf-8")
    result = run_cli("explain", "--model", "live", "upi payment failed")
    assert_one_line_error(result, "saved again after its promotion", "promote first --reason")


def test_classify_takes_model_live(folders: Path, tmp_path: Path):
    assert run_cli("promote", "second", "--reason", "ok").returncode == 0
    source = tmp_path / "in.csv"
    pd.DataFrame({"complaint": TINY_TEXTS[:3]}).to_csv(source, index=False)
    out = tmp_path / "out.csv"
    result = run_cli("classify", "--model", "live", str(source), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == 3 and len(pd.read_csv(out)) == 3


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["promote", "first", "--reason", "  "], "give a reason"),
        (["promote", "nosuch", "--reason", "r"], "is not a model"),
        (["promote", "../first", "--reason", "r"], "is not allowed"),
        (["promote", "first"], "--reason"),  # argparse: required
    ],
)
def test_promote_refusals_are_one_line_and_exit_2(folders: Path, args: list[str], fragment: str):
    assert_one_line_error(run_cli(*args), fragment)


def test_promoting_the_live_model_again_is_refused(folders: Path):
    assert run_cli("promote", "first", "--reason", "ok").returncode == 0
    assert_one_line_error(run_cli("promote", "first", "--reason", "ok"), "already the live model")


def test_promote_keeps_the_comparison_report(folders: Path, tmp_path: Path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": 40, "p_value": 0.03}), encoding="utf-8")
    result = run_cli("promote", "first", "--reason", "won", "--report", str(report), "--json")
    assert json.loads(result.stdout)["report"] == {"rows": 40, "p_value": 0.03}
    report.write_text("[1, 2]", encoding="utf-8")
    assert_one_line_error(
        run_cli("promote", "second", "--reason", "r", "--report", str(report)), "not a JSON object"
    )


def test_audit_takes_model_live_too(folders: Path, labelled: Path):
    result = run_cli("audit", str(labelled), "--model", "live")
    assert_one_line_error(result, "no model is live yet")
