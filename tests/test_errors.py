"""Typed errors (ARCHITECTURE.md, "Errors"): only a `UserError` is the user's to fix (one line,
exit 2 on the command line); anything else is a bug (traceback logged, exit 1, a reference in the
app). A command piped into `head` ends quietly, and the contained reader's stderr reaches the
log."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from core import cli
from core.access import AccessDenied
from core.cli.common import CommandError
from core.data import contained
from core.data.limits import DataError, IntakeLimits
from core.errors import UserError
from core.jobs import QueueFull
from core.review.schema import StoreError
from core.roles import RolesError, SignInRefused
from tests.helpers import ROOT, open_page

REFERENCE = (
    r"An unexpected error happened \(reference ([0-9A-F]{8})\); the server log has the details\."
)


@pytest.mark.parametrize(
    "error",
    [DataError, StoreError, RolesError, QueueFull, CommandError, AccessDenied, SignInRefused],
)
def test_every_error_the_user_can_fix_is_a_user_error(error):
    assert issubclass(error, UserError) and issubclass(error, ValueError)


def test_refusals_stay_permission_errors():
    assert issubclass(AccessDenied, PermissionError) and issubclass(SignInRefused, PermissionError)
    assert str(AccessDenied("anna is a viewer")) == "anna is a viewer"


def test_a_programming_mistake_is_not_a_user_error():
    from core.data.demo import generate_demo_data

    with pytest.raises(TypeError, match="DemoConfig"):
        generate_demo_data("1000 rows please")


# ------------------------------------------------------------------------------- command line


def _failing(monkeypatch, exc: BaseException) -> None:
    def handler(args):
        raise exc

    monkeypatch.setattr("core.cli.data._cmd_demo_data", handler)


def test_a_user_error_is_one_line_and_exit_2(monkeypatch, capsys, caplog):
    _failing(monkeypatch, UserError("rows must be at least 50,\n got 3"))
    with caplog.at_level(logging.DEBUG, logger="core.cli"):
        code = cli.main(["demo-data", "out.csv"])
    assert code == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == "error: rows must be at least 50, got 3\n"
    assert not caplog.records


@pytest.mark.parametrize(
    "exc", [ValueError("could not convert string to float: 'x'"), KeyError("k")]
)
def test_any_other_error_is_a_bug_with_a_logged_traceback(monkeypatch, capsys, caplog, exc):
    _failing(monkeypatch, exc)
    with caplog.at_level(logging.ERROR, logger="core.cli"):
        code = cli.main(["demo-data", "out.csv"])
    assert code == cli.EXIT_INTERNAL
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: unexpected {type(exc).__name__}: ")
    assert line.endswith("; this is a bug, the traceback is logged")
    [record] = caplog.records
    assert record.exc_info[1] is exc


def test_a_missing_argument_path_is_the_users_to_fix(monkeypatch, capsys):
    _failing(monkeypatch, FileNotFoundError(2, "No such file or directory", "in.csv"))
    assert cli.main(["demo-data", "out.csv"]) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == "error: no such file: in.csv; check the path\n"


def test_a_closed_stdout_ends_quietly(monkeypatch, capsys):
    _failing(monkeypatch, BrokenPipeError(32, "Broken pipe"))
    assert cli.main(["demo-data", "out.csv"]) == cli.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_the_traceback_of_a_bug_reaches_stderr():
    script = (
        "import sys\nfrom core import cli\n"
        "def broken(args):\n    raise KeyError('boom')\n"
        "cli.data._cmd_demo_data = broken\nsys.exit(cli.main(['demo-data', 'out.csv']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == cli.EXIT_INTERNAL
    lines = done.stderr.splitlines()
    assert lines[0] == "error: unexpected KeyError: 'boom'; this is a bug, the traceback is logged"
    assert lines[1].startswith("ERROR core.cli: ") and "Traceback" in done.stderr
    assert "in broken" in done.stderr  # the frame that raised


def test_a_command_piped_into_head_ends_quietly(tmp_path: Path):
    # Thousands of dropped rows: a JSON document far larger than a pipe's buffer.
    rows = [("upi payment failed", "UPI Dispute"), ("card stolen", "Card Fraud")] * 50
    rows += [("", "Card Fraud")] * 5000
    path = tmp_path / "complaints.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(path, index=False)
    command = f"set -o pipefail; {sys.executable} -m core validate {path} --json | head -c 1"
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "{"
    assert done.returncode in (0, cli.EXIT_BROKEN_PIPE), done.stderr
    assert done.stderr == ""


# ------------------------------------------------------------------------------------ the app


class _FakeStreamlit:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, body: str) -> None:
        self.errors.append(body)


def test_the_app_shows_a_user_error_as_its_one_line(monkeypatch):
    from ui import errors

    fake = _FakeStreamlit()
    monkeypatch.setattr(errors, "st", fake)
    errors.render_error(UserError("column *desk* not found;\nrename it"))
    assert fake.errors == [r"column \*desk\* not found\; rename it"]


def test_the_app_shows_a_bug_as_a_reference_to_the_log(monkeypatch, caplog, unexpected_page_errors):
    from ui import errors

    fake = _FakeStreamlit()
    monkeypatch.setattr(errors, "st", fake)
    bug = ValueError("operands could not be broadcast together with shapes (3,) (4,)")
    with caplog.at_level(logging.ERROR, logger="ui.errors"):
        errors.render_error(bug)
    [message] = fake.errors
    reference = re.fullmatch(REFERENCE, message).group(1)
    [record] = caplog.records
    assert reference in record.getMessage() and record.exc_info[1] is bug
    unexpected_page_errors.clear()  # expected here


@pytest.mark.parametrize(
    ("exc", "shown"),
    [(KeyError("demo"), None), (UserError("the demo data is *off*"), r"the demo data is \*off\*")],
)
def test_app_py_shows_what_escapes_a_page(monkeypatch, unexpected_page_errors, exc, shown):
    """app.py runs the page: a bug escaping it is a reference, a UserError its one line."""
    from streamlit.testing.v1 import AppTest

    def demo_table():
        raise exc

    # Only an app's first run goes through app.py under AppTest (later runs open the page
    # directly), so the demo data is chosen before it.
    monkeypatch.setattr("ui.datasets.demo_table", demo_table)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["data.source"] = "demo"
    at.run()
    assert not at.exception
    [message] = [error.value for error in at.error]
    if shown is not None:
        assert message == shown and not unexpected_page_errors
        return
    reference = re.fullmatch(REFERENCE, message).group(1)
    [record] = unexpected_page_errors
    assert reference in record.getMessage() and record.exc_info[1] is exc
    unexpected_page_errors.clear()  # expected here


def test_a_user_error_in_a_page_is_the_pages_own_message(monkeypatch):
    def refused(table):
        raise UserError("X has no rows; add at least one token")

    monkeypatch.setattr("core.lab.self_attention.tokens_and_matrix", refused)
    at = open_page("pages/attention_lab.py").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "Cannot compute attention: X has no rows\\; add at least one token"
    ]


# ---------------------------------------------------------------------------- contained reader


def _child_answers(monkeypatch, *, returncode: int, stdout: bytes, stderr: bytes) -> None:
    def run(command, **kwargs):
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    monkeypatch.setattr(contained.subprocess, "run", run)


def test_a_crashed_readers_stderr_is_logged_as_a_warning(monkeypatch, caplog):
    trace = b'Traceback (most recent call last):\n  File "x.py"\nKeyError: boom\n'
    _child_answers(monkeypatch, returncode=1, stdout=b"", stderr=trace)
    stopped = pytest.raises(DataError, match=r"the reader stopped \(exit code 1\)")
    with caplog.at_level(logging.DEBUG, logger="core.data.contained"), stopped:
        contained.load_table_contained(b"x", filename="a.csv", limits=IntakeLimits())
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "KeyError: boom" in record.getMessage()


def test_a_readers_stderr_is_kept_at_debug_level_when_it_succeeds(monkeypatch, caplog):
    table = pd.DataFrame({"text": ["refund"], "label": ["UPI Dispute"]})
    answer = contained._TABLE + contained._ipc_bytes(table)
    _child_answers(monkeypatch, returncode=0, stdout=answer, stderr=b"UserWarning: odd dates\n")
    with caplog.at_level(logging.DEBUG, logger="core.data.contained"):
        read = contained.load_table_contained(b"x", filename="a.csv", limits=IntakeLimits())
    pd.testing.assert_frame_equal(read, table)
    [record] = caplog.records
    assert record.levelno == logging.DEBUG and "odd dates" in record.getMessage()


def test_a_real_child_that_crashes_leaves_its_traceback_in_the_log(monkeypatch, tmp_path, caplog):
    # `python -m` looks in the working directory first: there, a reader that crashes.
    fake = tmp_path / "core" / "data"
    fake.mkdir(parents=True)
    (tmp_path / "core" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "contained.py").write_text("raise KeyError('boom')\n")
    monkeypatch.chdir(tmp_path)
    stopped = pytest.raises(DataError, match=r"the reader stopped \(exit code 1\)")
    with caplog.at_level(logging.WARNING, logger="core.data.contained"), stopped:
        contained.load_table_contained(
            b"text,label\na,b\n", filename="a.csv", limits=IntakeLimits()
        )
    [record] = caplog.records
    assert "Traceback" in record.getMessage() and "KeyError: 'boom'" in record.getMessage()
