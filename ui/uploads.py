"""Uploaded spreadsheets as every page reads them: one bounded reader, cached by the SHA-256 of the
uploaded bytes (computed once per upload), never by a DataFrame, which Streamlit hashes only a
sample of when it is large."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.data.columns import detect_text_column
from core.data.contained import contain_uploads, load_table_contained
from core.data.intake import load_table
from core.data.limits import DataError, IntakeLimits
from ui.safe import md_escape

if TYPE_CHECKING:
    from streamlit.runtime.uploaded_file_manager import UploadedFile

DIGESTS = "uploads.digests"  # dict file_id -> SHA-256 of this session's latest uploads
_KEEP_DIGESTS = 8


@dataclass(frozen=True)
class Upload:
    """A table read from an uploaded file (or built in), and the key its caches use."""

    name: str
    key: str  # SHA-256 hex of the uploaded bytes; a fixed name for built-in data
    table: pd.DataFrame


def content_digest(content: bytes) -> str:
    """The SHA-256 hex digest of `content`: the cache key of an upload."""
    return hashlib.sha256(content).hexdigest()


def upload_digest(upload: UploadedFile) -> str:
    """`content_digest` of the upload, computed once per upload (its file_id) in this session."""
    digests: dict[str, str] = st.session_state.setdefault(DIGESTS, {})
    if upload.file_id not in digests:
        digests[upload.file_id] = content_digest(upload.getvalue())
        while len(digests) > _KEEP_DIGESTS:
            digests.pop(next(iter(digests)))
    return digests[upload.file_id]


def read_upload(upload: UploadedFile) -> Upload:
    """The uploaded file as a table, within the intake limits; raises core.data.DataError."""
    key = upload_digest(upload)
    return Upload(upload.name, key, _read_table(upload.name, key, upload.getvalue()))


@st.cache_data(show_spinner="Reading the file…", max_entries=4)
def _read_table(name: str, key: str, _content: bytes) -> pd.DataFrame:
    """Cached by (name, key); `_content` (the bytes `key` digests) is not hashed again."""
    # A child process with its own memory and time limit reads the untrusted bytes, so a file
    # no intake check foresaw costs that child, not the server every session shares.
    limits = IntakeLimits.from_env()
    if not contain_uploads():  # the operator trusts every uploader
        return load_table(_content, filename=name, limits=limits)
    return load_table_contained(_content, filename=name, limits=limits)


def pick_text_column(table: pd.DataFrame, *, key: str) -> str | None:
    """The complaint-text column of an upload, detected and preselected in a select box (widget
    `key`); none preselected when detection fails (never a guess: the warning says why)."""
    columns = [str(c) for c in table.columns]
    try:
        index = columns.index(detect_text_column(table)[0])
    except DataError as exc:
        st.warning(md_escape(exc))
        index = None
    return st.selectbox(
        "Text column", columns, index=index, key=key,
        placeholder="Choose the column that holds the complaints",
    )  # fmt: skip
