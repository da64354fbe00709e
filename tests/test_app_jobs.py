"""AppTest for the Jobs page: the server's queue as a table (owner, state, place, times), and
cancelling a job from it."""

from __future__ import annotations

import threading

import pytest

from core.access import LOCAL_USER, Actor, Permission, Role
from core.jobs import JobStatus, Task
from tests.helpers import open_page
from ui.jobs import get_job_queue

PAGE = "pages/jobs.py"


def waiting_work(gate: threading.Event):
    def work(*, on_progress, cancel):
        while not gate.is_set() and not cancel.is_set():
            gate.wait(0.01)

    return work


@pytest.fixture
def queued():
    """Two heavy jobs on the server's queue: the local user's running, a colleague's queued."""
    queue = get_job_queue()
    gate = threading.Event()
    colleague = Actor("ravi@bank.in", Role.REVIEWER, signed_in=True)
    jobs = []
    for actor, title in ((LOCAL_USER, "Classify may.csv"), (colleague, "Audit june.csv")):
        task = Task(waiting_work(gate), title=title, kind="classify", owner=actor.user)
        jobs.append(queue.submit(task, actor=actor, permission=Permission.RUN_JOBS))
    yield jobs
    gate.set()
    for job in jobs:
        job.wait(10)


def test_the_page_lists_the_queue_and_cancels_a_job(queued):
    mine, theirs = queued
    at = open_page(PAGE).run()
    assert not at.exception
    active = at.dataframe[0].value.set_index("id")
    assert active.loc[theirs.id, "owner"] == "ravi@bank.in"
    assert (
        active.loc[theirs.id, "state"] == "queued" and active.loc[theirs.id, "place in queue"] >= 1
    )
    assert active.loc[theirs.id, "job"] == "Audit june.csv"  # the local user is admin
    at.selectbox(key="jobs.pick").set_value(theirs.id)
    at.button(key="FormSubmitter:jobs.cancel_form-Cancel this job").click().run()
    assert theirs.wait(10).status is JobStatus.CANCELLED
    assert mine.status.active  # only the chosen job was cancelled
