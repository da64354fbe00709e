"""The model folder is a format (ARCHITECTURE.md, "Model folder"): a model saved before the
glossary's renames loads and routes exactly as it did, and a model saved today writes the same
card keys."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from core.access import OPERATOR
from core.models.classify import classification_columns
from core.models.registry import load_model, save_model

FIXTURES = Path(__file__).parent / "fixtures"
BEFORE = FIXTURES / "saved-before-glossary"
EXPECTED = FIXTURES / "saved-before-glossary.expected.json"


# Objects whose keys depend on the data or the recipe (desks, twin rows, the recipe's choice).
DATA_DEPENDENT = ("files", "split", "per_class", "twin_metrics", "recipe_choice", "confusion")


def key_paths(document: dict, prefix: str = "") -> set[str]:
    """Every key of a JSON document's nested objects as a dotted path (lists not entered)."""
    paths = set()
    for key, value in document.items():
        path = f"{prefix}{key}"
        paths.add(path)
        if isinstance(value, dict) and key not in DATA_DEPENDENT:
            paths |= key_paths(value, path + ".")
    return paths


def test_a_model_saved_before_the_renames_routes_as_it_did(tmp_path):
    folder = shutil.copytree(BEFORE, tmp_path / BEFORE.name)
    expected = json.loads(EXPECTED.read_text())
    loaded = load_model(folder, device="cpu", precision="fp32")
    columns = classification_columns(loaded, expected["texts"])
    assert list(columns.columns) == list(expected["columns"])
    assert loaded.blend.decided_by == "blend"  # the card's blend keys were read, not defaulted
    for name, values in expected["columns"].items():
        if isinstance(values[0], float):
            np.testing.assert_allclose(columns[name].to_numpy(float), values, atol=1e-6)
        else:
            assert columns[name].tolist() == values, name


def test_a_model_saved_today_writes_the_card_keys_of_before(tiny_bert_result, tmp_path):
    saved = save_model(tiny_bert_result, tmp_path, "today", data_fingerprint="f" * 64,
                       actor=OPERATOR)  # fmt: skip
    today = json.loads((saved / "card.json").read_text())
    before = json.loads((BEFORE / "card.json").read_text())
    # the tiny transformer's card has no quick head and no recipe choice: compare what both have
    assert key_paths(before) - {"head_strength", "recipe_choice", "twin_metrics"} <= key_paths(
        today
    )
    assert {"baseline.npz", "baseline.json", "card.json"} <= {p.name for p in saved.iterdir()}
