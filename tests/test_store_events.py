"""Trail events of the team's shared state (a data set saved or retired, a model promoted):
written by a role that may, chained like every row, and readable by anyone."""

import pytest

from core.access import AccessDenied, Actor, Permission, Role
from core.review.store import Store

ADMIN = Actor("admin@bank.example", Role.ADMIN, signed_in=True)
VIEWER = Actor("viewer@bank.example", Role.VIEWER, signed_in=True)


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def test_an_event_names_its_actor_and_anyone_reads_it_back_newest_first(store):
    first = store.record_event(
        "model.promoted", {"name": "a"}, actor=ADMIN, permission=Permission.MANAGE_MODELS
    )
    second = store.record_event(
        "model.promoted", {"name": "b"}, actor=ADMIN, permission=Permission.MANAGE_MODELS
    )
    store.record_event("dataset.saved", {"name": "d"}, actor=ADMIN, permission=Permission.DECIDE)
    events = store.events("model.promoted")
    assert [e.id for e in events] == [second, first]
    assert [e.details["name"] for e in events] == ["b", "a"]
    assert {e.actor for e in events} == {ADMIN.user}
    assert store.events("model.promoted", limit=1)[0].id == second
    assert store.verify_chains().broken is None
    # A viewer sees none of the admin's trail, but does see which model is live.
    assert store.trail(actor=VIEWER) == []
    assert store.events("model.promoted")[0].details == {"name": "b"}


def test_an_event_needs_its_permission_and_a_known_action(store):
    with pytest.raises(AccessDenied, match="admin"):
        store.record_event(
            "model.promoted", {"name": "a"}, actor=VIEWER, permission=Permission.MANAGE_MODELS
        )
    with pytest.raises(ValueError, match="PUBLIC_ACTIONS"):
        store.record_event("decision.recorded", {}, actor=ADMIN, permission=Permission.DECIDE)
    with pytest.raises(ValueError, match="not a public"):
        store.events("decision.recorded")
    assert store.events("model.promoted") == []
