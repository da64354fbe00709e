"""core.models.transformer.backbone.find_backbone: what a visitor may name as a backbone, and
that everything else reads as "not found", whatever the file system holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub.constants
import pytest

from core.models.transformer.backbone import NOT_FOUND, find_backbone, resolve_backbone
from core.models.transformer.config import backbone_label
from tests.helpers import add_remote_code


@pytest.fixture()
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache of this test only."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def cache_model(cache: Path, model_id: str, source: Path) -> Path:
    """Lay `source` out as the cached snapshot of `model_id`, as huggingface_hub does."""
    repo = cache / f"models--{model_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    return Path(shutil.copytree(source, repo / "snapshots" / ("0" * 40)))


@pytest.fixture()
def models(tmp_path: Path, tiny_bert_dir: Path) -> Path:
    root = tmp_path / "models"
    shutil.copytree(tiny_bert_dir, root / "bert-small")
    return root


def test_minilm_tiny_saved_names_and_cached_ids_are_found(models, hf_cache, tiny_bert_dir):
    cache_model(hf_cache, "acme/bert-tiny", tiny_bert_dir)
    assert find_backbone(" minilm ", models_root=models) == "minilm"
    assert find_backbone("tiny", models_root=models) == "tiny"
    assert find_backbone("bert-small", models_root=models) == str(models.resolve() / "bert-small")
    assert find_backbone("acme/bert-tiny", models_root=models) == "acme/bert-tiny"
    assert resolve_backbone("acme/bert-tiny") == "acme/bert-tiny"


def test_everything_else_is_only_not_found(models, hf_cache, tiny_bert_dir, tmp_path):
    (tmp_path / "a-file.txt").write_text("secret")
    probes = [
        str(tiny_bert_dir),  # a real model folder, by absolute path
        str(models / "bert-small"),  # even inside the models folder, a path is not a name
        "../models/bert-small", "models/../models/bert-small", str(tmp_path / "a-file.txt"),
        "/etc", "/etc/passwd", "/no/such/folder", "~", "acme/not-cached", "tests", "core/models",
        "a\\b", "C:\\models", "..", "",
    ]  # fmt: skip
    for text in probes:
        with pytest.raises(ValueError) as err:
            find_backbone(text, models_root=models)
        assert str(err.value) == NOT_FOUND.format(text=text.strip()), text


def test_a_saved_tiny_model_is_no_backbone(models, tiny_model_dir):
    shutil.copytree(tiny_model_dir, models / "tiny-test")
    with pytest.raises(ValueError, match="is a tiny model"):
        find_backbone("tiny-test", models_root=models)


def test_a_cached_model_that_ships_code_is_refused_without_running_it(
    models, hf_cache, tiny_bert_dir, tmp_path
):
    snapshot = cache_model(hf_cache, "acme/remote", tiny_bert_dir)
    add_remote_code(snapshot, tmp_path / "ran")
    with pytest.raises(ValueError, match="ships code"):
        resolve_backbone(find_backbone("acme/remote", models_root=models))
    assert not (tmp_path / "ran").exists()


def test_a_folder_backbone_is_shown_by_its_name():
    assert backbone_label("/srv/lens/models/bert-small") == "bert-small"
    assert backbone_label("minilm") == "minilm" and backbone_label("acme/bert") == "acme/bert"
