"""The command line: `python -m core <command> ...` (the contract is in ARCHITECTURE.md).

Builds the parser from the command groups (a module each, parsers beside handlers) and runs one
command: exit 0 on success; bad input (a `UserError`): one line `error: <what to fix>` on stderr,
exit 2, no traceback; anything else is a bug: one line, the traceback logged, exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from core.cli import (
    audit,
    board,
    classify,
    data,
    discover,
    explain,
    intake,
    monitor,
    store,
    team,
    training,
)
from core.errors import UserError

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE: what a shell reports for `yes | head`
# An argument path that is missing, a folder, or not readable: the user's to fix.
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, PermissionError)


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line error format."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


# Each group adds its subcommands, in this order (the order of `--help`); a later capability adds
# its module here.
GROUPS: tuple[ModuleType, ...] = (
    data, training, classify, audit, explain, store, team, board, intake, discover, monitor,
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser: each group of GROUPS adds its subcommands."""
    parser = _Parser(prog="python -m core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process exit code."""
    _log_to_stderr()
    args = build_parser().parse_args(argv)
    try:
        code = args.handler(args) or 0  # most handlers return None: success
        sys.stdout.flush()  # a reader that went away shows here, not in the flush at exit
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if _is_user_error(exc):
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        # The last line of defence: a bug, not bad input.
        print(
            f"error: unexpected {type(exc).__name__}: {_one_line(exc)}; this is a bug, the "
            "traceback is logged",
            file=sys.stderr,
        )
        log.error("the traceback of that unexpected error, for a bug report:", exc_info=exc)
        return EXIT_INTERNAL
    return code


def _is_user_error(exc: Exception) -> bool:
    """A UserError, or a path given on the command line that is missing, a folder or not
    readable (the OSError names it)."""
    return isinstance(exc, UserError) or (isinstance(exc, _PATH_ERRORS) and bool(exc.filename))


def _log_to_stderr() -> None:
    """Warnings and the traceback of an unexpected error go to stderr; a no-op when logging is
    configured already (by a caller of `main`, or pytest)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _stdout_closed() -> int:
    """The reader of stdout went away (`... | head`): end quietly, as `yes | head` does. Standard
    output now points at /dev/null, so the flush at exit cannot fail a second time."""
    with contextlib.suppress(OSError, ValueError):  # no file descriptor: a test's StringIO
        stdout = sys.stdout.fileno()
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout)
    return EXIT_BROKEN_PIPE


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}; check the path"
    if isinstance(exc, IsADirectoryError) and exc.filename:
        return f"{exc.filename} is a folder; give a file"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"permission denied: {exc.filename}"
    return " ".join(str(exc).split()) or type(exc).__name__
