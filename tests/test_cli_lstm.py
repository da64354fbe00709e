"""`python -m core train --backbone lstm` saves an LSTM model folder that classify, evaluate and
probe read like any other (in-process through core.cli.main, on tiny separable data)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from core.models.registry import load_model
from tests.conftest import separable_rows
from tests.helpers import run_cli


@pytest.fixture(scope="module")
def lstm_folder(tmp_path_factory) -> tuple[Path, Path, dict]:
    texts, labels = separable_rows(6)
    root = tmp_path_factory.mktemp("cli-lstm")
    data = root / "complaints.csv"
    pd.DataFrame({"complaint": texts, "desk": labels}).to_csv(data, index=False)
    out = root / "models" / "lstm-cli"
    result = run_cli(
        "train", str(data), "--out", str(out), "--backbone", "lstm", "--epochs", "1",
        "--batch-size", "8", "--max-length", "32", "--pooling", "mean", "--device", "cpu",
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return data, out, json.loads(result.stdout)


def test_train_saves_an_lstm_folder(lstm_folder):
    _, out, document = lstm_folder
    assert document["model_dir"] == str(out)
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert (card["architecture"], card["backbone"], card["train_config"]["epochs"]) == (
        "lstm", "lstm", 1,
    )  # fmt: skip
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "bilstm-classifier" and config["max_length"] == 32
    assert {"model.safetensors", "vocab.json", "baseline.npz"} <= {p.name for p in out.iterdir()}


def test_classify_reads_the_lstm_folder_and_writes_its_probabilities(lstm_folder, tmp_path):
    data, out, _ = lstm_folder
    written = tmp_path / "classified.csv"
    result = run_cli("classify", "--model", str(out), str(data), "--out", str(written),
                     "--device", "cpu", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    frame = pd.read_csv(written)
    texts = frame["complaint"].tolist()
    expected = load_model(out, device="cpu").neural.predict_proba(texts)
    classes = json.loads((out / "card.json").read_text(encoding="utf-8"))["labels"]
    probs = frame[[f"prob_{c}" for c in classes]].to_numpy()
    assert len(frame) == json.loads(result.stdout)["rows"] == len(texts)
    # prob_ columns are the transformer's (the decision may blend in the bag of words)
    assert abs(frame["transformer_confidence"] - expected.max(axis=1)).max() < 1e-4
    assert frame["transformer_label"].tolist() == [classes[i] for i in expected.argmax(axis=1)]
    assert probs.shape == expected.shape


def test_evaluate_and_probe_run_on_the_lstm(lstm_folder):
    data, out, _ = lstm_folder
    evaluated = run_cli("evaluate", "--model", str(out), str(data), "--device", "cpu", "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    assert 0.0 <= json.loads(evaluated.stdout)["transformer"]["accuracy"] <= 1.0
    probed = run_cli("probe", "--model", str(out), "upi refund not received", "--json")
    assert probed.returncode == 0, probed.stderr
    assert json.loads(probed.stdout)["perturbations"]


def test_the_lstm_refuses_cls_pooling_in_one_line(lstm_folder):
    data, out, _ = lstm_folder
    result = run_cli("train", str(data), "--out", str(out.parent / "cls"), "--backbone", "lstm",
                     "--pooling", "cls")  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("error: the LSTM takes pooling 'mean' or 'last'")
