"""Where Grievance Lens keeps what must survive a restart (the SQLite database and saved models),
and the one way files are written: atomically, so a failure never leaves half a file.

Both folders default to folders of the checkout and can be moved with environment variables, so
tests and several installations never share state by accident.
"""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR_ENV = "GRIEVANCE_LENS_DATA_DIR"
MODELS_DIR_ENV = "GRIEVANCE_LENS_MODELS_DIR"


def data_dir() -> Path:
    """Folder of the SQLite database: $GRIEVANCE_LENS_DATA_DIR, else <repo>/data."""
    return _dir_from_env(DATA_DIR_ENV, ROOT / "data")


def models_dir() -> Path:
    """Folder of saved models: $GRIEVANCE_LENS_MODELS_DIR, else <repo>/models."""
    return _dir_from_env(MODELS_DIR_ENV, ROOT / "models")


def _dir_from_env(variable: str, default: Path) -> Path:
    value = os.environ.get(variable, "").strip()
    return Path(value) if value else default


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk, then rename it over
    `path`: readers see the old file or the new one, and a failure leaves no temporary file."""
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o644)  # mkstemp makes 0600; these are ordinary readable files
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def read_json(path: Path, *, missing: str) -> Any:
    """The JSON document in `path`; UserError `missing` when there is no such file, and a
    one-line reason when it is not JSON."""
    if not path.is_file():
        raise UserError(missing)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path} is not valid JSON ({err}); save the model again") from err
    return data


def read_json_object(path: Path, *, max_bytes: int, what: str, fix: str, missing: str) -> dict:
    """The JSON object in the regular file `path`, its size checked before it is read.

    One-line UserErrors: `missing` when it is not a regular file (a link is not followed);
    otherwise "`what` is too large / not valid JSON / not a JSON object; `fix`"."""
    if path.is_symlink() or not path.is_file():
        raise UserError(missing)
    if path.stat().st_size > max_bytes:
        raise UserError(f"{what} is over {max_bytes:,} bytes; {fix}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{what} is not valid JSON ({err}); {fix}") from err
    if not isinstance(data, dict):
        raise UserError(f"{what} is not a JSON object; {fix}")
    return data


def write_json(path: Path, data: dict) -> None:
    """`data` as indented UTF-8 JSON (non-ASCII kept readable)."""
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
