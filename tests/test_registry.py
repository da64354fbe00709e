"""core.models.registry: atomic, exclusive saves, safe loading (no pickle, nothing unlisted),
names, list / rename / delete, and saved folders in plain transformers."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from core.access import OPERATOR
from core.errors import UserError
from core.models import registry, training_job
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.blend import Blend
from core.models.card import ModelChange, card_digest, model_change, validate_model_name
from core.models.registry import (
    ModelNameTaken,
    delete_model,
    list_models,
    load_model,
    load_named_model,
    rename_model,
    save_model,
)
from core.models.transformer.config import TrainConfig
from tests.conftest import make_dataset, separable_rows
from tests.helpers import ROOT, add_remote_code, run_cli

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
        loaded.neural.predict_proba(TEXTS), result.neural.predict_proba(TEXTS)
    )
    np.testing.assert_array_equal(loaded.bow.predict_proba(TEXTS), result.bow.predict_proba(TEXTS))
    assert loaded.neural.max_length == 32
    assert loaded.neural.classes_.tolist() == ["Card Fraud", "Loan Query", "UPI Dispute"]


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
    split = card["split"]  # the fixture trains and validates on the same 12 rows
    assert split["data_fingerprint"] == "f" * 64 and split["train_rows"] == list(range(2, 14))
    assert split["validation_rows"] == split["train_rows"] and len(split["train_keys"]) == 12
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
    cancelled = type(result)(**{**result.__dict__, "cancelled": True, "neural": None})
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
    assert summaries[0].neural_accuracy is not None and summaries[0].bow_macro_f1 is not None

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
    del card["serving"]  # older cards have no serving graph either: torch reads the config
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(ValueError, match="describes about"):
        load_model(folder)


# ------------------------------------------------------------------ one name, one save


def test_a_save_racing_another_of_its_name_loses_and_the_winner_is_intact(
    result, tmp_path, monkeypatch
):
    write, started, lost = registry._write_model, [], []

    def write_letting_another_save_in(run, folder, fingerprint):
        if not started:  # the second save of "desk" starts while the first one is writing
            started.append(True)
            with pytest.raises(ModelNameTaken, match="another save is writing") as err:
                save_model(result, tmp_path, "desk", data_fingerprint="b" * 64, actor=OPERATOR)
            lost.append(err.value)
        write(run, folder, fingerprint)

    monkeypatch.setattr(registry, "_write_model", write_letting_another_save_in)
    folder = save_model(result, tmp_path, "desk", data_fingerprint="a" * 64, actor=OPERATOR)
    assert isinstance(lost[0], UserError)
    assert [p.name for p in tmp_path.iterdir()] == ["desk"]  # no staging or claim left over
    assert load_model(folder).card["data_fingerprint"] == "a" * 64


def test_saves_of_one_name_started_together_have_exactly_one_winner(result, tmp_path):
    barrier, outcomes = threading.Barrier(4), {}

    def save(i: int) -> None:
        barrier.wait(timeout=60)
        try:
            outcomes[i] = save_model(
                result, tmp_path, "desk", data_fingerprint=str(i) * 64, actor=OPERATOR
            )
        except ModelNameTaken as err:
            outcomes[i] = err

    threads = [threading.Thread(target=save, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    winners = [i for i, outcome in outcomes.items() if outcome == tmp_path / "desk"]
    assert len(winners) == 1 and len(outcomes) == 4
    assert all(isinstance(outcomes[i], ModelNameTaken) for i in outcomes if i not in winners)
    assert [p.name for p in tmp_path.iterdir()] == ["desk"]
    assert load_model(tmp_path / "desk").card["data_fingerprint"] == str(winners[0]) * 64


def test_a_claim_left_by_a_crashed_save_is_not_a_model_and_is_reused(result, tmp_path):
    (tmp_path / "desk").mkdir()  # a save killed between its claim and its rename leaves this
    assert list_models(tmp_path) == []
    with pytest.raises(ValueError, match="no model named 'desk'"):
        load_named_model(tmp_path, "desk")
    folder = save_model(result, tmp_path, "desk", actor=OPERATOR)
    assert [s.name for s in list_models(tmp_path)] == ["desk"]
    assert load_model(folder).card["labels"] == ["Card Fraud", "Loan Query", "UPI Dispute"]


def test_a_held_claim_or_a_folder_with_files_is_never_taken_over(result, tmp_path):
    claim = tmp_path / "desk"
    claim.mkdir()
    held = os.open(claim, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as a live save holds its claim while it writes
    try:
        with pytest.raises(ModelNameTaken, match="another save is writing a model named 'desk'"):
            save_model(result, tmp_path, "desk", actor=OPERATOR)
    finally:
        os.close(held)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(ModelNameTaken, match=r"a folder \(not a model\) named 'notes'"):
        save_model(result, tmp_path, "notes", actor=OPERATOR)
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["todo.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["desk", "notes"]


def test_a_training_whose_name_was_taken_meanwhile_saves_as_the_next_and_says_so(
    result, tmp_path, monkeypatch
):
    def train_while_another_saves_desk(*args, **kwargs):
        save_model(result, tmp_path, "desk", data_fingerprint="a" * 64, actor=OPERATOR)
        return result

    monkeypatch.setattr(training_job, "train_models", train_while_another_saves_desk)
    data = make_dataset(*separable_rows(1))
    saved = training_job.train_and_save(
        data, data, TrainConfig(), models_root=tmp_path, model_name="desk",
        data_fingerprint="b" * 64, actor=OPERATOR,
    )  # fmt: skip
    assert saved.folder == tmp_path / "desk-2"
    assert (saved.requested_name, saved.renamed_from) == ("desk", "desk")
    assert saved.rename_note == "saved as 'desk-2' because 'desk' was taken meanwhile"
    assert load_model(tmp_path / "desk").card["data_fingerprint"] == "a" * 64
    assert load_model(saved.folder).card["data_fingerprint"] == "b" * 64
    fresh = training_job.save_under_free_name(result, tmp_path, "other", actor=OPERATOR)
    assert fresh.folder == tmp_path / "other" and fresh.renamed_from is fresh.rename_note is None


def test_the_command_line_says_when_its_out_name_was_taken_while_training(
    result, tmp_path, monkeypatch
):
    import core.models.transformer.training as training

    def train_while_another_saves_desk(*args, **kwargs):
        save_model(result, tmp_path / "models", "desk", actor=OPERATOR)
        return result

    monkeypatch.setattr(training, "train_models", train_while_another_saves_desk)
    texts, labels = separable_rows(4)
    data = tmp_path / "complaints.csv"
    rows = "".join(f"{text},{desk}\n" for text, desk in zip(texts, labels, strict=True))
    data.write_text("complaint,desk\n" + rows, encoding="utf-8")
    run = run_cli("train", str(data), "--out", str(tmp_path / "models" / "desk"), "--json")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["model_dir"] == str(tmp_path / "models" / "desk-2")
    assert document["renamed_from"] == "desk"
    assert "note: saved as 'desk-2' because 'desk' was taken meanwhile" in run.stderr


# ------------------------------------------------------------------ nothing unlisted


@pytest.mark.parametrize("extra", ["added_tokens.json", "notes.txt", ".hidden"])
def test_a_file_its_card_does_not_list_is_refused_in_one_line(saved, tmp_path, extra):
    folder = shutil.copytree(saved, tmp_path / "extra")
    (folder / extra).write_text("{}", encoding="utf-8")
    expected = f"{re.escape(extra)} is not listed in its card.json; remove the extra files"
    with pytest.raises(UserError, match=expected) as err:
        load_model(folder)
    assert "\n" not in str(err.value) and "save the model again" in str(err.value)


def test_a_card_saved_before_file_lists_still_loads_with_other_files(saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "older")
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    del card["files"]
    del card["serving"]  # cards before file lists had no serving graphs either
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    (folder / "notes.txt").write_text("trained on the March export", encoding="utf-8")
    assert load_model(folder).neural.predict(TEXTS)


# ------------------------------------------------------------------ taken elsewhere

# What a user who takes a saved folder elsewhere runs: plain transformers, in a fresh
# interpreter (nothing of this test process registered), by the Auto class and by pipeline.
PLAIN_TRANSFORMERS = """
import json, sys
{registration}
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
folder, texts = sys.argv[1], json.loads(sys.argv[2])
model = AutoModelForSequenceClassification.from_pretrained(folder)
tokenizer = AutoTokenizer.from_pretrained(folder)
with torch.no_grad():
    probs = model(**tokenizer(texts, return_tensors="pt", padding=True)).logits.softmax(-1)
classify = pipeline("text-classification", model=folder)
print(json.dumps({{
    "auto": [model.config.id2label[int(i)] for i in probs.argmax(-1)],
    "probabilities": probs.tolist(),
    "pipeline": [row["label"] for row in classify(texts)],
}}))
"""


@pytest.mark.parametrize(
    ("pooling", "registration"),
    [("mean", "import core.models.transformer.head  # registers the mean-pooling head"),
     ("cls", "")],
)  # fmt: skip
def test_a_saved_folder_loads_in_plain_transformers(
    pooling, registration, saved, tiny_bert_cls_model_dir
):
    folder = saved if pooling == "mean" else tiny_bert_cls_model_dir
    code = PLAIN_TRANSFORMERS.format(registration=registration)
    run = subprocess.run(
        [sys.executable, "-c", code, str(folder), json.dumps(TEXTS)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    ours = load_model(folder, device="cpu", precision="fp32").neural  # as transformers runs
    assert found["auto"] == found["pipeline"] == ours.predict(TEXTS)
    np.testing.assert_allclose(found["probabilities"], ours.predict_proba(TEXTS), atol=1e-5)
