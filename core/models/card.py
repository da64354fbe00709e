"""What makes a folder a saved model, checked without loading torch: its card.json, a safe
folder name, and no pickle-based file anywhere in it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.paths import read_json

CARD_NAME = "card.json"
CARD_FORMAT = "grievance-lens-model"
CARD_VERSION = 1
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# Files that can run code when loaded (pickle-based checkpoints). Their presence makes the
# whole folder untrusted: we refuse it rather than load the safe files beside them.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")


def validate_model_name(name: str) -> str:
    """Return `name` if it is a safe folder name; raise ValueError saying what to change."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or name.strip(".") == "":
        raise ValueError(
            f"model name {name!r} is not allowed: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (no slashes, no spaces)"
        )
    return name


def read_card(folder: str | Path) -> dict[str, Any]:
    """The parsed card.json of a model folder; ValueError when the folder is not a model."""
    folder = Path(folder)
    path = folder / CARD_NAME
    missing = f"{folder} is not a model: it has no {CARD_NAME}; train and save one"
    card = read_json(path, missing=missing)
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise ValueError(f"{path} is not a Grievance Lens model card; save the model again")
    return card


def check_no_pickle(folder: str | Path) -> None:
    """Raise ValueError if `folder` holds a pickle-based file (.bin, .pt, .pkl, ...)."""
    found = sorted(p.name for p in Path(folder).rglob("*") if p.suffix.lower() in PICKLE_SUFFIXES)
    if found:
        raise ValueError(
            f"refusing to load {folder}: it contains pickle-based files {found}, which can run "
            "code when loaded; only safetensors, npz and json are accepted. Re-save the model "
            "with this tool (safetensors) or remove those files if you trust the rest"
        )
