"""The review store the app shares (ui.state.get_store) is closed when Streamlit drops it from
its resource cache, as the job queue is shut down (issue 38): no connection outlives its entry."""

from __future__ import annotations

import sqlite3

import pytest

from core.paths import DATA_DIR_ENV
from ui.state import _open_store, get_store


def test_dropping_the_cached_store_closes_its_connection(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    store = get_store()
    assert store.schema_version >= 1 and get_store() is store  # one per file, shared
    _open_store.clear()
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        store.schema_version  # noqa: B018  (reading it is the test)
    reopened = get_store()  # the next ask opens the file again
    assert reopened is not store and reopened.schema_version >= 1
