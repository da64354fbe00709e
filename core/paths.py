"""Where Grievance Lens keeps what must survive a restart: the SQLite database and saved models.

Both default to folders of the checkout and can be moved with environment variables, so tests
and several installations never share state by accident.
"""

import os
from pathlib import Path

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
