"""Tests for core.review.live: promoting the team's live model, its record in the trail, rolling
back, and the refusals (role, reason, a model that is not a saved model, a model saved again)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from core.access import OPERATOR, AccessDenied, Actor, Role
from core.errors import UserError
from core.models.card import card_digest
from core.review.live import (
    MAX_REASON_CHARS,
    NO_LIVE_MODEL,
    LiveModel,
    live_model,
    live_model_folder,
    promote_model,
    promotion_history,
    promotion_report,
    promotions_with_report,
)
from core.review.store import Store

ADMIN = Actor("ada@bank.example", Role.ADMIN, signed_in=True)
OTHER_ADMIN = Actor("bo@bank.example", Role.ADMIN, signed_in=True)
REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
VIEWER = Actor("vik@bank.example", Role.VIEWER, signed_in=True)


@pytest.fixture
def models(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A models folder with two saved models, `alpha` and `beta` (copies of the tiny model)."""
    root = tmp_path / "models"
    for name in ("alpha", "beta"):
        shutil.copytree(tiny_model_dir, root / name)
    return root


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def resave(folder: Path) -> None:
    """What a save under the same name does to the card: new bytes, so a new digest."""
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    card["created_at"] = "2099-01-01T00:00:00+00:00"
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")


def test_no_promotion_means_no_live_model_and_says_what_to_do(store: Store, models: Path):
    assert live_model(store) is None and promotion_history(store) == []
    with pytest.raises(UserError) as refused:
        live_model_folder(store, models)
    assert str(refused.value) == NO_LIVE_MODEL
    assert "python -m core promote NAME --reason" in NO_LIVE_MODEL


def test_promotion_is_recorded_in_the_trail_with_the_actor(store: Store, models: Path):
    report = {"rows": 12, "p_value": 0.5, "a": {"name": "beta"}, "changed": []}
    live = promote_model(store, models, "alpha", reason=" better on UPI ", actor=ADMIN,
                         report=report)  # fmt: skip
    assert live.name == "alpha" and live.promoted_by == "ada@bank.example"
    assert live.reason == "better on UPI" and live.previous is None
    assert promotion_report(store, live) == report
    assert live.digest == card_digest(models / "alpha")
    assert live_model(store) == live
    [event] = store.events("model.promoted")
    assert event.actor == "ada@bank.example" and event.id == live.event_id
    assert event.created_at == live.since
    assert event.details == {
        "name": "alpha", "digest": live.digest, "reason": "better on UPI", "report": report,
        "previous": None,
    }  # fmt: skip
    assert store.verify_chains().intact  # chained like every other record
    assert live_model_folder(store, models) == (models / "alpha").resolve()


@pytest.mark.parametrize("actor", [REVIEWER, VIEWER])
def test_only_an_admin_may_promote(store: Store, models: Path, actor: Actor):
    with pytest.raises(AccessDenied, match="needs the admin role"):
        promote_model(store, models, "alpha", reason="looks good", actor=actor)
    assert live_model(store) is None


@pytest.mark.parametrize("reason", ["", "   \n ", None, "x" * (MAX_REASON_CHARS + 1)])
def test_a_reason_is_required_and_bounded(store: Store, models: Path, reason):
    with pytest.raises(UserError, match="reason"):
        promote_model(store, models, "alpha", reason=reason, actor=ADMIN)
    assert live_model(store) is None


def test_history_and_rollback_are_promotions_newest_first(store: Store, models: Path):
    promote_model(store, models, "alpha", reason="first model", actor=ADMIN)
    promote_model(store, models, "beta", reason="challenger won", actor=OTHER_ADMIN)
    back = promote_model(store, models, "alpha", reason="beta misroutes KYC", actor=ADMIN)
    assert back.previous == "beta" and back.promoted_by == "ada@bank.example"
    history = promotion_history(store)
    assert [(m.name, m.previous, m.promoted_by) for m in history] == [
        ("alpha", "beta", "ada@bank.example"),
        ("beta", "alpha", "bo@bank.example"),
        ("alpha", None, "ada@bank.example"),
    ]
    assert [m.name for m in promotion_history(store, limit=1)] == ["alpha"]
    assert live_model_folder(store, models).name == "alpha"


def test_the_live_model_unchanged_is_not_promoted_twice(store: Store, models: Path):
    promote_model(store, models, "alpha", reason="first model", actor=ADMIN)
    with pytest.raises(UserError, match="already the live model"):
        promote_model(store, models, "alpha", reason="again", actor=ADMIN)
    assert len(promotion_history(store)) == 1


def test_a_live_model_saved_again_is_refused_until_promoted_again(store: Store, models: Path):
    promote_model(store, models, "alpha", reason="first model", actor=ADMIN)
    resave(models / "alpha")
    with pytest.raises(UserError, match="saved again after its promotion") as refused:
        live_model_folder(store, models)
    assert "python -m core promote alpha --reason" in str(refused.value)
    again = promote_model(store, models, "alpha", reason="re-trained, checked", actor=ADMIN)
    assert again.previous == "alpha" and again.digest == card_digest(models / "alpha")
    assert live_model_folder(store, models).name == "alpha"


def test_a_live_model_deleted_or_renamed_is_refused(store: Store, models: Path):
    promote_model(store, models, "beta", reason="first model", actor=ADMIN)
    (models / "beta").rename(models / "gamma")
    with pytest.raises(UserError, match="no longer in the models folder"):
        live_model_folder(store, models)


def test_only_a_saved_model_that_passes_the_card_checks_is_promoted(store: Store, models: Path):
    for name in ("missing", "../alpha"):
        with pytest.raises(UserError):
            promote_model(store, models, name, reason="r", actor=ADMIN)
    (models / "beta" / "extra.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="pickle"):
        promote_model(store, models, "beta", reason="r", actor=ADMIN)
    weights = next(p for p in (models / "alpha").iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    with pytest.raises(UserError, match="differs from the file it was saved with"):
        promote_model(store, models, "alpha", reason="r", actor=ADMIN)
    assert live_model(store) is None


def test_a_report_that_is_not_plain_json_is_refused(store: Store, models: Path):
    with pytest.raises(UserError, match="not plain JSON"):
        promote_model(store, models, "alpha", reason="r", actor=ADMIN, report={"x": object()})
    with pytest.raises(UserError, match="not plain JSON"):
        promote_model(store, models, "alpha", reason="r", actor=ADMIN, report={"x": float("nan")})


def test_the_operator_promotes_as_itself(store: Store, models: Path):
    live = promote_model(store, models, "beta", reason="from the command line", actor=OPERATOR)
    assert live.promoted_by == "operator"


def paused_writes(monkeypatch: pytest.MonkeyPatch, thread_name: str, until: threading.Event):
    """Make the trail write of the thread named `thread_name` wait (after the promotion's read of
    the live model, before its event is written) until `until` is set and a moment more."""
    import core.review.store as store_module

    insert = store_module.insert_chained

    def paused(conn, table, row):
        if threading.current_thread().name == thread_name:
            until.wait(timeout=5)
            time.sleep(0.3)  # time for the other promotion to read the live model, if it can
        return insert(conn, table, row)

    monkeypatch.setattr(store_module, "insert_chained", paused)


@pytest.mark.parametrize("second", ["beta", "alpha"])
def test_overlapping_promotions_see_each_other(
    tmp_path: Path, models: Path, monkeypatch: pytest.MonkeyPatch, second: str
):
    """Two admins (two connections) promote at once; the first pauses between reading the live
    model and writing its promotion. The second must then see the first as `previous` (or be
    refused when it promotes the same model), never the live model before both."""
    path = tmp_path / "lens.db"
    stores = {"first": Store.open(path), "second": Store.open(path)}  # two sessions' own
    second_started = threading.Event()
    paused_writes(monkeypatch, "first-admin", second_started)
    outcome: dict[str, object] = {}

    def promote(name: str, actor: Actor, key: str) -> None:
        if key == "second":
            second_started.set()
        try:
            outcome[key] = promote_model(stores[key], models, name, reason="r", actor=actor)
        except UserError as exc:
            outcome[key] = exc

    first = threading.Thread(target=promote, name="first-admin", args=("alpha", ADMIN, "first"))
    first.start()
    time.sleep(0.2)  # the first is at its paused write
    promote(second, OTHER_ADMIN, "second")
    first.join(timeout=30)
    for opened in stores.values():
        opened.close()
    made = outcome["first"]
    assert isinstance(made, LiveModel) and made.name == "alpha" and made.previous is None
    if second == "beta":
        assert isinstance(outcome["second"], LiveModel) and outcome["second"].previous == "alpha"
    else:
        assert isinstance(outcome["second"], UserError)
        assert "already the live model" in str(outcome["second"])
    with Store.open(path) as store:
        history = promotion_history(store)
        assert [(m.name, m.previous) for m in history][-1] == ("alpha", None)
        assert len(history) == (2 if second == "beta" else 1)
        assert store.verify_chains().intact


def big_report(megabytes: float) -> dict:
    """A comparison report of about `megabytes` MB of JSON (changed complaints of 500 chars)."""
    rows = int(megabytes * 1_000_000 / 540)
    changed = [{"text": f"{i:08d}" + "x" * 492, "a": "Cards", "b": "UPI"} for i in range(rows)]
    return {"rows": rows, "p_value": 0.01, "changed": changed}


def test_the_live_model_read_leaves_the_report_unread(
    store: Store, models: Path, monkeypatch: pytest.MonkeyPatch
):
    """`live_model` (twice per Classify click) reads the promotion's fields, not its comparison
    report (up to 8 MiB of JSON); `promotion_report` reads the report."""
    report = big_report(7.5)
    promote_model(store, models, "beta", reason="first", actor=ADMIN)
    made = promote_model(store, models, "alpha", reason="won", actor=OTHER_ADMIN, report=report)
    fetched: list[int] = []
    query = store._query

    def measured(sql, params=()):
        rows = query(sql, params)
        fetched.append(max((len(v) for r in rows for v in r if isinstance(v, str)), default=0))
        return rows

    monkeypatch.setattr(store, "_query", measured)
    live = live_model(store)
    assert fetched and max(fetched) < 10_000  # no report came out of the store
    assert live == made
    assert (live.name, live.digest, live.previous) == ("alpha", card_digest(models / "alpha"),
                                                      "beta")  # fmt: skip
    assert (live.since, live.promoted_by, live.reason) == (made.since, "bo@bank.example", "won")
    assert promotion_report(store, live) == report and max(fetched) > 7_000_000
    history = promotion_history(store)
    assert promotions_with_report(store, history) == {history[0].event_id}
    assert promotion_report(store, history[1]) is None
