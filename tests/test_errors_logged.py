"""Unexpected errors (bugs, not bad input) keep their traceback in the log: a background job's and
the command line's last line of defence both report one line and log the rest."""

import logging

from core import cli
from core.jobs import Job, JobStatus, Task


def test_a_failed_job_logs_its_traceback(caplog, unexpected_page_errors):
    def work(*, on_progress, cancel):
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="core.jobs"):
        snapshot = Job(Task(work, title="Audit", kind="audit", owner="o")).start().wait(10)
    assert snapshot.status is JobStatus.FAILED and "unexpected error" in snapshot.error
    [record] = caplog.records
    assert "(audit)" in record.getMessage() and record.exc_info[0] is RuntimeError
    unexpected_page_errors.clear()  # caused on purpose


def test_an_unexpected_cli_error_is_one_line_plus_a_logged_traceback(monkeypatch, capsys, caplog):
    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr("core.cli.data._cmd_demo_data", broken)
    with caplog.at_level(logging.ERROR, logger="core.cli"):
        code = cli.main(["demo-data", "out.csv"])
    assert code == cli.EXIT_INTERNAL
    assert capsys.readouterr().err.splitlines()[0] == (
        "error: unexpected RuntimeError: boom; this is a bug, the traceback is logged"
    )
    [record] = caplog.records
    assert record.exc_info[0] is RuntimeError
