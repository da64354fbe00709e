"""core.models.registry: atomic saves, safe loading (no pickle), names, list / rename / delete."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil

import numpy as np
import pytest

from core.access import OPERATOR
from core.models import registry
from core.models.baseline import BagOfWordsClassifier
from core.models.blend import Blend
from core.models.card import ModelChange, card_digest, model_change, validate_model_name
from core.models.registry import (
    delete_model,
    list_models,
    load_model,
    load_named_model,
    rename_model,
    save_model,
)
from tests.helpers import add_remote_code

TEXTS = ["upi payment failed", "card stolen fraud charge since yesterday", "loan emi", "kyc"]


@pytest.fixture(scope="module")
def result(tiny_bert_result):
    """The session's tiny BERT, trained two steps (mean pooling, max_length 32)."""
    return tiny_bert_result


@pytest.fixture(scope="module")
def saved(result, tmp_path_factory):
    return save_model(
        result,
        tmp_path_factory.mktemp("models"),
        "desk-router",
        data_fingerprint="f" * 64,
        actor=OPERATOR,
    )


def test_save_then_load_gives_identical_probabilities(result, saved):
    loaded = load_model(saved)
    np.testing.assert_array_equal(
        loaded.transformer.predict_proba(TEXTS), result.transformer.predict_proba(TEXTS)
    )
    np.testing.assert_array_equal(
        loaded.baseline.predict_proba(TEXTS), result.baseline.predict_proba(TEXTS)
    )
    assert loaded.transformer.max_length == 32
    assert loaded.transformer.classes_.tolist() == ["Card Fraud", "Loan Query", "UPI Dispute"]


def test_folder_layout_and_card(result, saved):
    names = {p.name for p in saved.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert {"baseline.npz", "baseline.json", "card.json"} <= names
    card = json.loads((saved / "card.json").read_text(encoding="utf-8"))
    assert card["labels"] == ["Card Fraud", "Loan Query", "UPI Dispute"]
    assert card["data_fingerprint"] == "f" * 64
    assert set(card["metrics"]) == {"transformer", "bow", "decision"}
    assert Blend.from_card(card) == result.blend == load_model(saved).blend
    assert card["blend"]["decided_by"] == result.blend.decided_by
    assert 0.0 <= card["metrics"]["transformer"]["accuracy"] <= 1.0
    assert "macro_f1" in card["metrics"]["bow"] and "per_class" in card["metrics"]["bow"]
    assert card["train_config"]["max_steps"] == 2 and card["train_config"]["pooling"] == "mean"
    assert {"torch", "transformers", "sklearn"} <= set(card["versions"])
    assert card["device"] == "cpu" and card["train_seconds"] > 0 and card["created_at"]
    assert card["backbone"].endswith("tiny-bert0")
    config = json.loads((saved / "config.json").read_text(encoding="utf-8"))
    assert config["id2label"] == {"0": "Card Fraud", "1": "Loan Query", "2": "UPI Dispute"}


@pytest.mark.parametrize("name", ["pytorch_model.bin", "weights.pt", "model.pkl", "x.pickle"])
def test_folder_with_pickle_files_is_refused_without_running_them(saved, tmp_path, name):
    folder = shutil.copytree(saved, tmp_path / "suspicious")
    sentinel = tmp_path / "pwned"
    (folder / name).write_bytes(pickle.dumps(_Trap(str(sentinel))))
    with pytest.raises(ValueError, match="pickle-based files"):
        load_model(folder)
    assert not sentinel.exists()


class _Trap:
    """Unpickling this object would create a file: proof that loading ran pickle."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_folder_without_card_is_not_a_model(saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "no-card")
    (folder / "card.json").unlink()
    with pytest.raises(ValueError, match="not a model"):
        load_model(folder)
    assert list_models(tmp_path) == []


def test_failed_save_leaves_nothing_behind(result, tmp_path, monkeypatch):
    def explode(self, directory):
        (directory / "baseline.npz").write_bytes(b"half written")
        raise OSError("disk full")

    monkeypatch.setattr(BagOfWordsClassifier, "save", explode)
    with pytest.raises(OSError, match="disk full"):
        save_model(result, tmp_path, "broken", actor=OPERATOR)
    assert list(tmp_path.iterdir()) == []
    assert list_models(tmp_path) == []


def test_failed_overwrite_keeps_the_old_model(result, saved, tmp_path, monkeypatch):
    folder = shutil.copytree(saved, tmp_path / "kept")
    monkeypatch.setattr(registry, "build_card", _raise)
    with pytest.raises(RuntimeError):
        save_model(result, tmp_path, "kept", overwrite=True, actor=OPERATOR)
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert load_model(folder).card["data_fingerprint"] == "f" * 64


def _raise(*args, **kwargs):
    raise RuntimeError("interrupted")


def test_save_refuses_existing_target_and_cancelled_runs(result, saved):
    with pytest.raises(ValueError, match="already exists"):
        save_model(result, saved.parent, saved.name, actor=OPERATOR)
    cancelled = type(result)(**{**result.__dict__, "cancelled": True, "transformer": None})
    with pytest.raises(ValueError, match="cancelled"):
        save_model(cancelled, saved.parent, "other", actor=OPERATOR)


def test_overwrite_replaces_the_model(result, saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "again")
    save_model(result, tmp_path, "again", overwrite=True, data_fingerprint="0" * 64, actor=OPERATOR)
    assert load_model(folder).card["data_fingerprint"] == "0" * 64
    assert [p.name for p in tmp_path.iterdir()] == ["again"]


@pytest.mark.parametrize(
    "name", ["", "..", ".hidden", "../escape", "a/b", "a\\b", "with space", "x" * 65, "-dash", "é"]
)
def test_bad_model_names_are_refused(name, result, tmp_path):
    with pytest.raises(ValueError, match="model name"):
        validate_model_name(name)
    with pytest.raises(ValueError, match="model name"):
        save_model(result, tmp_path, name, actor=OPERATOR)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a", "desk-router_v2.1", "M" * 64, "2025-01-run"])
def test_good_model_names_pass(name):
    assert validate_model_name(name) == name


def test_list_rename_delete(saved, tmp_path):
    for name, created in [
        ("old", "2024-01-01T00:00:00+00:00"),
        ("new", "2025-06-01T00:00:00+00:00"),
    ]:
        folder = shutil.copytree(saved, tmp_path / name)
        card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
        card["created_at"] = created
        (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    (tmp_path / "notes").mkdir()  # a folder without card.json is not a model
    summaries = list_models(tmp_path)
    assert [s.name for s in summaries] == ["new", "old"]
    assert summaries[0].labels == ("Card Fraud", "Loan Query", "UPI Dispute")
    assert summaries[0].transformer_accuracy is not None and summaries[0].bow_macro_f1 is not None

    renamed = rename_model(tmp_path, "old", "older", actor=OPERATOR)
    assert renamed == tmp_path / "older" and load_model(renamed).card["labels"]
    assert [s.name for s in list_models(tmp_path)] == ["new", "older"]
    with pytest.raises(ValueError, match="already exists"):
        rename_model(tmp_path, "new", "older", actor=OPERATOR)

    delete_model(tmp_path, "new", actor=OPERATOR)
    assert [s.name for s in list_models(tmp_path)] == ["older"]
    with pytest.raises(ValueError, match="no model named"):
        delete_model(tmp_path, "notes", actor=OPERATOR)
    with pytest.raises(ValueError, match="model name"):
        delete_model(tmp_path, "../older", actor=OPERATOR)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "older"]


def test_list_models_of_missing_root_is_empty(tmp_path):
    assert list_models(tmp_path / "nowhere") == []


def test_a_loaded_model_is_keyed_by_its_name_and_content(saved):
    loaded = load_model(saved)
    digest = hashlib.sha256((saved / "card.json").read_bytes()).hexdigest()
    assert loaded.digest == card_digest(saved) == digest
    assert loaded.key == f"desk-router@{digest}"
    files = json.loads((saved / "card.json").read_text(encoding="utf-8"))["files"]
    assert {"model.safetensors", "baseline.npz", "config.json"} <= set(files)
    assert (
        files["model.safetensors"]
        == hashlib.sha256((saved / "model.safetensors").read_bytes()).hexdigest()
    )


def test_a_model_saved_again_under_its_name_is_another_key(result, saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "again")
    before = load_model(folder)
    assert model_change(folder, before.digest) is ModelChange.SAME
    save_model(result, tmp_path, "again", overwrite=True, actor=OPERATOR)
    after = load_model(folder)
    assert after.key != before.key and after.path == before.path
    assert model_change(folder, before.digest) is ModelChange.CHANGED
    with pytest.raises(ValueError, match="changed on disk"):
        load_model(folder, digest=before.digest)
    delete_model(tmp_path, "again", actor=OPERATOR)
    assert model_change(folder, after.digest) is ModelChange.GONE


@pytest.mark.parametrize("name", ["model.safetensors", "baseline.npz"])
def test_a_weight_file_swapped_under_its_card_is_refused(saved, tmp_path, name):
    folder = shutil.copytree(saved, tmp_path / "swapped")
    data = bytearray((folder / name).read_bytes())
    data[-1] ^= 1  # one bit of the last tensor
    (folder / name).write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{name} differs from the file it was saved with"):
        load_model(folder)


# ------------------------------------------------------------------ nothing escapes models/


@pytest.fixture()
def outside(tmp_path):
    """A models folder `models/` and, beside it, a folder `outside/` that nothing may touch."""
    (tmp_path / "models").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


@pytest.mark.parametrize("name", ["../outside/evil", "../../x/evil", "/tmp/evil", "..", "a/b"])
def test_save_refuses_names_that_leave_the_models_folder(result, outside, name):
    with pytest.raises(ValueError, match="model name"):
        save_model(result, outside / "models", name, actor=OPERATOR)
    with pytest.raises(ValueError, match="model name"):
        save_model(result, outside / "models", str(outside / "outside" / "evil"), actor=OPERATOR)
    assert list((outside / "outside").iterdir()) == []
    assert list((outside / "models").iterdir()) == []


def test_a_symbolic_link_out_of_the_models_folder_is_refused(result, saved, outside):
    models, elsewhere = outside / "models", outside / "outside"
    shutil.copytree(saved, elsewhere / "victim")
    (models / "link").symlink_to(elsewhere, target_is_directory=True)
    (models / "victim").symlink_to(elsewhere / "victim", target_is_directory=True)
    shutil.copytree(saved, models / "mine")
    with pytest.raises(ValueError, match="inside the models folder"):
        save_model(result, models, "link", overwrite=True, actor=OPERATOR)
    with pytest.raises(ValueError, match="inside the models folder"):
        delete_model(models, "victim", actor=OPERATOR)
    with pytest.raises(ValueError, match="inside the models folder"):
        rename_model(models, "victim", "renamed", actor=OPERATOR)
    with pytest.raises(ValueError, match="inside the models folder"):
        rename_model(models, "mine", "link", actor=OPERATOR)
    with pytest.raises(ValueError, match="inside the models folder"):
        load_named_model(models, "victim")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim"]
    assert (elsewhere / "victim" / "card.json").is_file()
    assert load_named_model(models, "mine").card["labels"]


def test_rename_and_delete_name_models_never_paths(saved, outside):
    models = outside / "models"
    shutil.copytree(saved, models / "mine")
    for bad in ["../outside", str(outside / "outside"), "mine/..", ".."]:
        with pytest.raises(ValueError, match="model name") as err:
            rename_model(models, "mine", bad, actor=OPERATOR)
        assert str(models) not in str(err.value)
    with pytest.raises(ValueError, match="no model named 'gone'") as err:
        delete_model(models, "gone", actor=OPERATOR)
    assert str(models) not in str(err.value)
    assert [p.name for p in models.iterdir()] == ["mine"]


# ------------------------------------------------------------------ nothing runs


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"script": False},
        {"auto_map": False},
        {"script": False, "where": "tokenizer_config.json"},
    ],
)
def test_a_folder_that_ships_code_is_refused_without_running_it(saved, tmp_path, options):
    folder = shutil.copytree(saved, tmp_path / "remote")
    marker = tmp_path / "ran"
    add_remote_code(folder, marker, **options)
    with pytest.raises(ValueError, match="ships code"):
        load_model(folder)
    assert not marker.exists()


def test_a_backbone_that_ships_code_is_refused_without_running_it(tiny_bert_dir, tmp_path):
    from core.models.transformer.backbone import load_backbone
    from core.models.transformer.config import TrainConfig

    folder = add_remote_code(shutil.copytree(tiny_bert_dir, tmp_path / "bert"), tmp_path / "ran")
    with pytest.raises(ValueError, match="ships code"):
        load_backbone(TrainConfig(backbone=str(folder)), ["a", "b"])
    assert not (tmp_path / "ran").exists()


def test_a_crafted_transformers_config_is_refused_before_allocating(saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "huge")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(vocab_size=50_000_000, hidden_size=4096, num_attention_heads=32)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    del card["files"]  # as an older card would be: the digests would catch the edit first
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(ValueError, match="describes about"):
        load_model(folder)
