"""How the app says that something went wrong (ARCHITECTURE.md, "Errors"): the user's own mistake (a
`UserError`) in one line; anything else is a bug, shown as an unexpected error with a reference
to the server log, where its traceback is kept under that reference."""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import streamlit as st

from core.errors import UserError
from ui.safe import md_escape

log = logging.getLogger(__name__)


def unexpected_message(reference: str) -> str:
    """What a visitor reads about a bug: no type, no message, no path; only the reference."""
    return f"An unexpected error happened (reference {reference}); the server log has the details."


def log_unexpected(exc: BaseException) -> str:
    """Log `exc` with its traceback under a new reference (8 hex digits); return the reference."""
    reference = secrets.token_hex(4).upper()
    log.error("unexpected error, reference %s", reference, exc_info=exc)
    return reference


def render_error(exc: Exception) -> None:
    """A UserError as its one line, escaped; anything else as the unexpected-error message,
    its traceback logged."""
    if isinstance(exc, UserError):
        st.error(md_escape(exc))
    else:
        st.error(unexpected_message(log_unexpected(exc)))


@contextmanager
def shown_errors() -> Iterator[None]:
    """Run the block; an exception escaping it is shown by `render_error` instead of
    Streamlit's own error box. `st.stop` and `st.rerun` pass through: they are not
    `Exception`s."""
    try:
        yield
    except Exception as exc:
        render_error(exc)


def guarded(callback: Callable[..., None]) -> Callable[..., None]:
    """`callback` made fit for a widget's `on_click` / `on_change`: Streamlit runs callbacks
    before the page, outside `shown_errors`, so an exception one raises would reach Streamlit's
    own error box (a traceback). Here it is shown as `render_error` shows any other: a
    UserError as its line, a bug as the unexpected-error message with its reference."""

    @functools.wraps(callback)
    def run(*args: object, **kwargs: object) -> None:
        try:
            callback(*args, **kwargs)
        except Exception as exc:  # st.stop and st.rerun are not Exceptions: they pass through
            render_error(exc)

    return run
