"""What makes a folder a saved model, checked without loading torch: its card.json, a safe
folder name inside the models folder, no file that can run code or that its card does not list,
and its content digest."""

from __future__ import annotations

import hashlib
import json
import os
from enum import Enum
from pathlib import Path
from typing import Any

from core.checks import SAFE_NAME, check_safe_name, folder_inside
from core.errors import UserError

CARD_NAME = "card.json"
CARD_FORMAT = "grievance-lens-model"
CARD_VERSION = 1
NAME_PATTERN = SAFE_NAME  # one safe path segment (core.checks)
# Files that can run code when loaded (pickle-based checkpoints). Their presence makes the
# whole folder untrusted: we refuse it rather than load the safe files beside them.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")
# JSON files in which transformers looks for `auto_map` (classes to import from .py files).
AUTO_MAP_FILES = ("config.json", "tokenizer_config.json")
FILES_KEY = "files"  # card.json: {file name: SHA-256} of every other file, written at save time


def validate_model_name(name: str) -> str:
    """Return `name` if it is a safe folder name; raise UserError saying what to change."""
    return check_safe_name("model", name)


def model_folder(root: str | Path, name: str) -> Path:
    """The folder of model `name` directly inside the models folder `root`.

    `name` must pass `validate_model_name` (one path segment); the folder must not be a symbolic
    link and must resolve to a direct child of the resolved `root`. Raises UserError otherwise;
    the folder need not exist yet (saving checks the same way).
    """
    return folder_inside(root, name, kind="model", place="the models folder")


def model_name_free(root: str | Path, name: str) -> bool:
    """Whether `name` looks free for a new model of `root`: no folder, or an empty one (a save
    in progress or one that crashed: `registry.save_model` tells them apart when it claims the
    name). Advisory, for refusing early; only the save's claim decides."""
    folder = model_folder(root, name)
    return not folder.exists() or (folder.is_dir() and not any(folder.iterdir()))


def read_card(folder: str | Path) -> dict[str, Any]:
    """The parsed card.json of a model folder; UserError when the folder is not a model."""
    return read_card_and_digest(folder)[0]


def read_card_and_digest(folder: str | Path) -> tuple[dict[str, Any], str]:
    """The parsed card.json and its `card_digest`, from one read of the file (so both always
    describe the same save)."""
    folder = Path(folder)
    path = folder / CARD_NAME
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError) as err:
        raise UserError(
            f"{_name(folder)!r} is not a model: it has no {CARD_NAME}; train and save one"
        ) from err
    try:
        card = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(
            f"model {_name(folder)!r}: its {CARD_NAME} is not valid JSON ({err}); save the model "
            "again"
        ) from err
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        raise UserError(
            f"model {_name(folder)!r}: its {CARD_NAME} is not a Grievance Lens model card; save "
            "the model again"
        )
    return card, hashlib.sha256(raw).hexdigest()


def check_no_pickle(folder: str | Path) -> None:
    """Raise UserError if `folder` holds a pickle-based file (.bin, .pt, .pkl, ...)."""
    folder = Path(folder)
    found = sorted(p.name for p in folder.rglob("*") if p.suffix.lower() in PICKLE_SUFFIXES)
    if found:
        raise UserError(
            f"{_refused(folder)}it holds pickle-based files ({_shown(found)}), which can run "
            "code when loaded; only safetensors, npz and json are accepted: re-save the model "
            "with this tool (safetensors) or remove those files if you trust the rest"
        )


def check_no_code(folder: str | Path) -> None:
    """Raise UserError if `folder` ships Python code: a .py file anywhere in it, or `auto_map`
    in config.json or tokenizer_config.json (transformers' pointer to classes in such files)."""
    folder = Path(folder)
    scripts = sorted(p.name for p in folder.rglob("*.py"))
    mapped = [n for n in AUTO_MAP_FILES if _has_auto_map(folder / n)]
    if scripts or mapped:
        found = scripts + [f"auto_map in {n}" for n in mapped]
        raise UserError(
            f"{_refused(folder)}it ships code ({_shown(found)}), which would run when loaded; "
            "only standard architectures with safetensors weights are accepted"
        )


def _has_auto_map(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(
            f"model {_name(path.parent)!r}: its {path.name} is not valid JSON ({err}); save the "
            "model again"
        ) from err
    return isinstance(data, dict) and "auto_map" in data


def check_loadable(folder: str | Path) -> None:
    """Every torch-free refusal before a folder is handed to torch or transformers: no
    pickle-based file, no shipped code, and in a saved model nothing its card does not list."""
    check_no_pickle(folder)
    check_no_code(folder)
    if (Path(folder) / CARD_NAME).is_file():  # a backbone folder has no card
        check_only_listed_files(folder, read_card(folder))


def check_only_listed_files(folder: str | Path, card: dict[str, Any]) -> None:
    """Raise UserError if `folder` holds anything besides card.json that the card's file list
    (FILES_KEY) does not name: transformers reads files by name (a tokenizer's extra vocabulary,
    a second weights file), so an unlisted file could change what loads. Cards saved before the
    list existed are not checked."""
    listed = card.get(FILES_KEY)
    if not isinstance(listed, dict):  # older cards; a damaged list is refused by the loader
        return
    extra = sorted(set(os.listdir(folder)) - set(listed) - {CARD_NAME})
    if extra:
        raise UserError(
            f"{_refused(Path(folder))}{_shown(extra)} is not listed in its {CARD_NAME}; "
            "remove the extra files or save the model again"
        )


def _refused(folder: Path) -> str:
    """How every refusal begins: the model by its name, never by the server's path (a visitor
    reads the message on a page)."""
    return f"model {_name(folder)!r} is refused: "


def _name(folder: Path) -> str:
    """The folder's own name, also for a relative path such as "." (whose `name` is empty)."""
    return Path(os.path.abspath(folder)).name


def _shown(names: list[str]) -> str:
    """At most five file names, and how many more: the line stays one line."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def load_refusal(folder: str | Path) -> str | None:
    """Why the loader would refuse the model in `folder` (`check_loadable`: a pickle, shipped
    code, a file its card does not list), in one line naming it by name only; None when those
    checks pass. Cheap enough for a list of models: torch-free, it lists the folder and reads its
    card but hashes no file, so a file changed since the save is found by the load alone."""
    try:
        check_loadable(folder)
    except UserError as exc:
        return str(exc)
    return None


def folder_signature(folder: str | Path) -> tuple[tuple[str, int, int], ...]:
    """(relative path, size, modification time in ns) of every entry under `folder`, sorted: the
    key a cached `load_refusal` is kept under, so that adding, removing or rewriting any file
    (card.json included) asks again."""
    folder = Path(folder)
    entries = []
    for path in sorted(folder.rglob("*")):
        try:
            stat = path.lstat()
        except FileNotFoundError:  # removed since it was listed: no longer part of the folder
            continue
        entries.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def folder_digests(folder: Path) -> dict[str, str]:
    """{file name: SHA-256} of every file directly in `folder` except card.json."""
    return {
        p.name: file_digest(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != CARD_NAME
    }


def card_digest(folder: str | Path) -> str | None:
    """SHA-256 of the folder's card.json bytes: the identity of one saved model; None if gone.

    Why this is enough: `save_model` writes the SHA-256 of every other file into card.json
    (FILES_KEY) and `load_model` verifies them, so the card's bytes pin the whole content, while
    a check costs one small file read per rerun instead of hashing the weights each time. Every
    save (a re-save under the same name included) writes a new card (new digests, created_at).
    """
    try:
        return hashlib.sha256((Path(folder) / CARD_NAME).read_bytes()).hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return None


class ModelChange(Enum):
    """How a model folder compares with the version a session chose."""

    SAME = "same"
    CHANGED = "changed"  # saved again or replaced: another model under the same name
    GONE = "gone"  # deleted or renamed


def model_change(folder: str | Path, digest: str) -> ModelChange:
    """Whether the model in `folder` is still the one whose card digest is `digest`."""
    current = card_digest(folder)
    if current is None:
        return ModelChange.GONE
    return ModelChange.SAME if current == digest else ModelChange.CHANGED
