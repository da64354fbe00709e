"""The one error type a user can fix (ARCHITECTURE.md, "Errors"). Everything else raised is a
bug: the command line logs its traceback and exits 1, the app logs it under a reference and says
so.

The bottom layer: it imports nothing from core, so every module may raise it."""

from __future__ import annotations


class UserError(ValueError):
    """What the user can fix: a bad file, a bad setting, a refusal, access denied, a full queue.

    str() is one line that says what is wrong and what to do; the command line prints it after
    `error:` and exits 2, the app shows it as is. A ValueError, so that an `except ValueError`
    written before this type existed still catches it.
    """
