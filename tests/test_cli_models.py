"""The command-line contract of ARCHITECTURE.md for `train`, `evaluate` and `classify`.

The backbone is the tiny random BERT of conftest (a local folder), trained for a few steps.
Commands run in-process through `core.cli.main` (importing torch per subprocess costs seconds);
one test runs `python -m core` as users do.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import separable_rows
from tests.helpers import CliRun, add_remote_code, run_cli, run_cli_process
from tests.test_cli import assert_one_line_error

DESKS = ["Card Fraud", "Loan Query", "UPI Dispute"]
CONTRACT_COLUMNS = [
    "predicted_label", "confidence", "needs_review", "review_reason", "unknown_desk_score",
    "decided_by", "transformer_label", "transformer_confidence", "bow_label", "bow_confidence",
]  # fmt: skip


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> Path:
    texts, labels = separable_rows(8)
    path = tmp_path_factory.mktemp("cli") / "complaints.csv"
    pd.DataFrame({"id": range(len(texts)), "complaint": texts, "desk": labels}).to_csv(
        path, index=False
    )
    return path


@pytest.fixture(scope="module")
def trained(labelled, tiny_bert_dir) -> tuple[Path, dict, CliRun]:
    out = labelled.parent / "models" / "cli-model"
    result = run_cli(
        "train", str(labelled), "--out", str(out), "--backbone", str(tiny_bert_dir),
        "--epochs", "2", "--batch-size", "8", "--lr", "0.01", "--max-length", "32",
        "--val-fraction", "0.25", "--seed", "1", "--device", "cpu", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, json.loads(result.stdout), result


def test_train_json_has_the_contract_keys_and_saves_a_model(trained):
    out, document, result = trained
    assert document["model_dir"] == str(out) and document["train_seconds"] > 0
    for name in ("transformer", "bow", "decision"):
        assert {"accuracy", "macro_f1", "per_class"} <= set(document[name])
        assert set(document[name]["per_class"]) == set(DESKS)
    assert document["rows"] == {"train": 18, "val": 6}
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert document["blend"] == card["blend"]
    assert document["blend"]["decided_by"] in {"transformer", "bag of words", "blend"}
    assert card["train_config"]["epochs"] == 2 and card["train_config"]["lr"] == 0.01
    assert "train" in result.stderr  # the tqdm bar goes to stderr
    # --recipe auto (the default): 6 training rows a desk are too few for a full fine-tune
    assert document["recipe"] == card["recipe"] == "quick"
    assert document["recipe_choice"] == card["recipe_choice"]
    assert "recipe: quick: 6 training rows for the median desk" in result.stderr
    assert document["review"] == card["review"] and document["review"]["unknown_threshold"]


def test_train_refuses_an_existing_folder_and_bad_names(trained, labelled):
    out, _, _ = trained
    result = run_cli("train", str(labelled), "--out", str(out))
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert "already exists" in result.stderr and "Traceback" not in result.stderr
    bad = run_cli("train", str(labelled), "--out", str(labelled.parent / "bad name"))
    assert bad.returncode == 2 and "model name" in bad.stderr
    smooth = run_cli("train", str(labelled), "--out", str(labelled.parent / "smooth"),
                     "--label-smoothing", "0.7")  # fmt: skip
    assert smooth.returncode == 2 and smooth.stderr.startswith("error: label_smoothing must be")


def test_train_quick_recipe_saves_a_quick_model(labelled, tiny_bert_dir):
    out = labelled.parent / "models" / "cli-quick"
    result = run_cli(
        "train", str(labelled), "--out", str(out), "--backbone", str(tiny_bert_dir),
        "--recipe", "quick", "--max-length", "32", "--val-fraction", "0.25", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["best_epoch"] == 1 and document["transformer"]["accuracy"] > 0.5
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert card["recipe"] == "quick" and card["train_config"]["recipe"] == "quick"
    audit = run_cli("audit", str(labelled), "--model", str(out), "--folds", "3", "--json")
    assert audit.returncode == 0, audit.stderr
    audited = json.loads(audit.stdout)  # a quick model is audited the quick way: seconds
    assert (audited["model"], audited["backbone"]) == ("quick", Path(tiny_bert_dir).name)
    refused = run_cli("train", str(labelled), "--out", str(out) + "-2", "--backbone", "tiny",
                      "--recipe", "quick")  # fmt: skip
    assert_one_line_error(refused, "pretrained")
    assert not Path(str(out) + "-2").exists()


def test_train_tiny_without_flags_uses_the_tiny_backbones_own_defaults(labelled):
    from core.models.transformer.config import BACKBONE_DEFAULTS, TINY

    out = labelled.parent / "models" / "cli-tiny"
    result = run_cli("train", str(labelled), "--out", str(out), "--backbone", "tiny",
                     "--max-steps", "2", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / "card.json").read_text(encoding="utf-8"))["train_config"]
    assert (saved["lr"], saved["epochs"]) == (BACKBONE_DEFAULTS[TINY].lr,
                                              BACKBONE_DEFAULTS[TINY].epochs)  # fmt: skip


def test_evaluate_json(trained, labelled):
    out, _, _ = trained
    result = run_cli("evaluate", "--model", str(out), str(labelled), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["rows"] == 24
    for name in ("transformer", "bow", "decision"):
        assert 0.0 <= document[name]["accuracy"] <= 1.0
        assert {"macro_f1", "per_class"} <= set(document[name])
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert document["blend"] == card["blend"]


@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_classify_keeps_columns_and_order_and_neutralises_formulas(trained, tmp_path, suffix):
    out, _, _ = trained
    source = tmp_path / "incoming.csv"
    frame = pd.DataFrame(
        {
            "ref": ["r3", "r1", "r2", "r4"],
            "text": ["=HYPERLINK(1) upi payment failed", "loan emi\r=cmd|' /C calc'!A0",
                     "@card stolen", "  "],
            "note": ["+91 call", "ok\x0b\uff1d1", "-", "x"],
        }
    )  # fmt: skip
    frame.to_csv(source, index=False, quoting=csv.QUOTE_ALL)
    target = tmp_path / f"routed{suffix}"
    result = run_cli("classify", "--model", str(out), str(source), "--out", str(target), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {key: document[key] for key in ("rows", "out", "text_col", "parts", "engine")} == {
        "rows": 4, "out": str(target), "text_col": "text", "parts": 1, "engine": "local",
    }  # fmt: skip
    routed = (
        pd.read_csv(target, dtype=str) if suffix == ".csv" else pd.read_excel(target, dtype=str)
    )
    # XLSX reads the CR back as LF and holds no vertical tab (U+FFFD instead)
    line_break, note = ("\r", "ok\x0b'\uff1d1") if suffix == ".csv" else ("\n", "ok\ufffd\uff1d1")
    probs = [f"prob_{d}" for d in DESKS]
    assert list(routed.columns) == ["ref", "text", "note", *CONTRACT_COLUMNS, *probs]
    assert routed["ref"].tolist() == ["r3", "r1", "r2", "r4"]
    assert routed["text"].tolist()[:3] == [
        "'=HYPERLINK(1) upi payment failed",
        f"loan emi{line_break}'=cmd|' /C calc'!A0",
        "'@card stolen",
    ]
    assert routed["note"].tolist()[:3] == ["'+91 call", note, "'-"]
    assert set(routed["predicted_label"]) <= set(DESKS)
    assert routed["needs_review"].tolist()[3] in ("True", "TRUE")  # blank text
    sums = routed[probs].astype(float).sum(axis=1)
    assert sums.round(5).tolist() == [1.0] * 4


@pytest.mark.slow  # a real `python -m core` process: importing torch takes ~10 s
def test_classify_refuses_a_pickle_model_folder(trained, tmp_path, labelled):
    import shutil

    out, _, _ = trained
    folder = shutil.copytree(out, tmp_path / "unsafe")
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    result = run_cli_process("classify", "--model", str(folder), str(labelled))
    assert result.returncode == 2 and "pickle" in result.stderr
    assert "Traceback" not in result.stderr


def test_commands_refuse_a_model_folder_that_ships_code(trained, tmp_path, labelled):
    import shutil

    out, _, _ = trained
    folder = add_remote_code(shutil.copytree(out, tmp_path / "remote"), tmp_path / "ran")
    for command in (["classify", "--model", str(folder), str(labelled)],
                    ["explain", "--model", str(folder), "card stolen"]):  # fmt: skip
        result = run_cli(*command)
        assert result.returncode == 2 and "ships code" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "ran").exists()


def test_train_out_may_not_be_a_symbolic_link(labelled, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    result = run_cli("train", str(labelled), "--out", str(tmp_path / "link"), "--backbone", "tiny")
    assert result.returncode == 2 and "inside the models folder" in result.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_train_tiny_without_positions(labelled, tmp_path):
    out = tmp_path / "tiny-off"
    result = run_cli(
        "train", str(labelled), "--out", str(out), "--backbone", "tiny",
        "--positional-encoding", "off", "--max-steps", "3", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    card = json.loads((out / "card.json").read_text())
    assert card["train_config"]["positional_encoding"] is False
    assert json.loads((out / "config.json").read_text())["positional_encoding"] is False


def test_positional_encoding_flag_takes_only_on_or_off(labelled, tmp_path):
    result = run_cli(
        "train", str(labelled), "--out", str(tmp_path / "m"), "--backbone", "tiny",
        "--positional-encoding", "maybe",
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.startswith("error: ")
