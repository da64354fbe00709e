"""ui.state.saved_models: the saved models as list_models gives them, parsed again only when a
card changed (a rerun of a page that lists models hashes the cards instead of parsing them)."""

from __future__ import annotations

import shutil

import pytest

from core.models import registry
from core.paths import MODELS_DIR_ENV
from ui.state import saved_models


def test_cards_are_parsed_again_only_when_one_changes(tmp_path, tiny_model_dir, monkeypatch):
    models = tmp_path / "models"
    shutil.copytree(tiny_model_dir, models / "first")
    monkeypatch.setenv(MODELS_DIR_ENV, str(models))
    parsed = []
    real = registry.list_models
    monkeypatch.setattr(registry, "list_models", lambda root: parsed.append(root) or real(root))

    assert [s.name for s in saved_models()] == ["first"]
    assert [s.name for s in saved_models()] == ["first"]
    assert len(parsed) == 1  # the second call hashed the card and parsed nothing

    shutil.copytree(tiny_model_dir, models / "second")  # a new folder: listed at once
    assert sorted(s.name for s in saved_models()) == ["first", "second"]
    card = models / "first" / "card.json"
    card.write_text(card.read_text(encoding="utf-8") + " ", encoding="utf-8")
    saved_models()  # the same folders, one card's bytes changed: parsed again
    assert len(parsed) == 3
    (models / "second" / "card.json").unlink()  # no card, no model
    assert [s.name for s in saved_models()] == ["first"]


@pytest.fixture(autouse=True)
def fresh_cache():
    from ui.state import _listed_models

    _listed_models.clear()
    yield
    _listed_models.clear()
