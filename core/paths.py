"""Where Grievance Lens keeps what must survive a restart: the SQLite database and saved models.

Both default to folders of the checkout and can be moved with environment variables, so tests
and several installations never share state by accident.
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Folder of the SQLite database: $GRIEVANCE_LENS_DATA_DIR, else <repo>/data."""
    return Path(os.environ.get("GRIEVANCE_LENS_DATA_DIR") or ROOT / "data")


def models_dir() -> Path:
    """Folder of saved models: $GRIEVANCE_LENS_MODELS_DIR, else <repo>/models."""
    return Path(os.environ.get("GRIEVANCE_LENS_MODELS_DIR") or ROOT / "models")
