"""Every change of the team's models folder is in the trail, whatever crashes (issue 38): saves,
renames and deletes are recorded under their actor before anyone can see them, the live model is
never renamed or deleted, and what a process killed midway left is finished or undone by what
the trail says (core.pending, core.models.changes, core.review.library)."""

import os
import shutil
import signal
from pathlib import Path

import pytest

from core.access import OPERATOR, Actor, Permission, Role
from core.errors import UserError
from core.models.card import CARD_NAME, card_digest
from core.models.registry import delete_model, list_models, rename_model, save_model
from core.pending import holding
from core.review.library import (
    delete_recorded,
    finish_interrupted_changes,
    model_recorder,
    rename_recorded,
)
from core.review.live import promote_model
from core.review.store import Store, StoreError

LEAD = Actor("lead@bank.in", Role.ADMIN, signed_in=True)


@pytest.fixture(scope="module")
def trained(tiny_bert_result, tmp_path_factory):
    """One saved model folder to copy from."""
    return save_model(tiny_bert_result, tmp_path_factory.mktemp("src"), "src", actor=OPERATOR)


@pytest.fixture()
def team(tmp_path, trained):
    """A models folder with the models "a" and "b", and the team's store."""
    models = tmp_path / "models"
    for name in ("a", "b"):
        shutil.copytree(trained, models / name)
    return models, Store.open(tmp_path / "lens.db")


def names(models: Path) -> list[str]:
    return [s.name for s in list_models(models)]


def hidden(models: Path) -> list[str]:
    return sorted(p.name for p in models.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------- recorded before it is seen


def test_a_save_is_recorded_under_its_actor_before_it_can_be_seen(tiny_bert_result, team):
    models, store = team
    record = model_recorder(store, actor=LEAD)
    seen_when_recorded = []

    def spying(event):
        seen_when_recorded.append((models / "new" / CARD_NAME).exists())
        record(event)

    folder = save_model(tiny_bert_result, models, "new", actor=LEAD, record=spying)
    assert seen_when_recorded == [False]
    (event,) = store.events("model.saved")
    assert (event.actor, event.details["name"]) == ("lead@bank.in", "new")
    assert event.details["digest"] == card_digest(folder)
    assert event.details["change"].startswith("saving-") and hidden(models) == []


def test_a_save_the_trail_refuses_leaves_nothing(tiny_bert_result, team):
    models, store = team

    def refusing(event):
        raise StoreError("disk full")

    with pytest.raises(StoreError, match="disk full"):
        save_model(tiny_bert_result, models, "new", actor=LEAD, record=refusing)
    assert names(models) == ["a", "b"] and hidden(models) == [] and not (models / "new").exists()


def test_rename_and_delete_are_recorded(team):
    models, store = team
    rename_recorded(store, models, "a", "renamed", actor=LEAD)
    delete_recorded(store, models, "b", actor=LEAD)
    assert names(models) == ["renamed"] and hidden(models) == []
    (renamed,) = store.events("model.renamed")
    assert renamed.details | {"change": ""} == {
        "name": "renamed", "from": "a", "digest": card_digest(models / "renamed"), "change": "",
    }  # fmt: skip
    (deleted,) = store.events("model.deleted")
    assert (deleted.actor, deleted.details["name"]) == ("lead@bank.in", "b")


def test_a_read_only_trail_changes_nothing(team, tmp_path):
    models, store = team
    read_only = Store.open(tmp_path / "lens.db", read_only=True)
    with pytest.raises(StoreError, match="read-only"):
        delete_recorded(read_only, models, "a", actor=LEAD)
    assert names(models) == ["a", "b"]


# ------------------------------------------------------------------------- the live model


def test_the_live_model_is_never_renamed_or_deleted_in_core(team):
    models, store = team
    promote_model(store, models, "a", reason="best on the held-out rows", actor=LEAD)
    for change in (
        lambda: rename_recorded(store, models, "a", "other", actor=LEAD),
        lambda: delete_recorded(store, models, "a", actor=LEAD),
    ):
        with pytest.raises(UserError, match="'a' is the live model: promote another model"):
            change()
    assert names(models) == ["a", "b"] and hidden(models) == []
    assert store.events("model.renamed") == [] and store.events("model.deleted") == []


def test_a_promotion_just_before_the_record_refuses_the_delete_and_puts_the_model_back(team):
    # The page checked before the promotion; the recorder checks again in its own transaction.
    models, store = team
    record = model_recorder(store, actor=LEAD)
    promote_model(store, models, "b", reason="promoted meanwhile", actor=LEAD)
    with pytest.raises(UserError, match="is the live model"):
        delete_model(models, "b", actor=LEAD, record=record)
    assert names(models) == ["a", "b"] and hidden(models) == []


# ------------------------------------------------------------------- whatever crashes


def killed_midway(models: Path, db: Path, change: str, *, recorded: bool) -> None:
    """Delete or rename model "a" in a forked child that kill -9s itself at the moment of
    recording: after the event was appended, or before. (Forked: the child needs no imports.)"""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            record = model_recorder(Store.open(db), actor=LEAD)

            def then_killed(event):
                if recorded:
                    record(event)
                os.kill(os.getpid(), signal.SIGKILL)

            if change == "delete":
                delete_model(models, "a", actor=LEAD, record=then_killed)
            else:
                rename_model(models, "a", "renamed", actor=LEAD, record=then_killed)
        finally:
            os._exit(3)  # only if the kill did not happen
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@pytest.mark.parametrize(
    ("change", "recorded", "after"),
    [
        ("delete", True, ["b"]),
        ("delete", False, ["a", "b"]),
        ("rename", True, ["b", "renamed"]),
        ("rename", False, ["a", "b"]),
    ],
)
def test_a_change_killed_midway_is_finished_or_undone_by_the_trail(team, change, recorded, after):
    models, store = team
    killed_midway(models, store.path, change, recorded=recorded)
    assert names(models) == ["b"] and len(hidden(models)) == 1  # the change, hidden and held by
    # nobody; a rename also left its claim on the new name (an empty folder, not a model)
    lines = finish_interrupted_changes(store, models_root=models)
    assert len(lines) == 1 and ("finished" in lines[0]) == recorded
    assert sorted(names(models)) == after and hidden(models) == []
    action = "model.deleted" if change == "delete" else "model.renamed"
    assert len(store.events(action)) == (1 if recorded else 0)


def test_a_save_killed_after_its_record_is_published_at_the_next_start(team, trained):
    models, store = team
    change = "saving-00112233445566ff"
    shutil.copytree(trained, models / f".new.{change}")  # complete, hidden, recorded
    os.mkdir(models / "new")  # the claim the killed save held
    details = {"name": "new", "digest": card_digest(trained), "change": change}
    store.record_event("model.saved", details, actor=LEAD, permission=Permission.MANAGE_MODELS)
    finish_interrupted_changes(store, models_root=models)
    assert names(models) == ["a", "b", "new"] and hidden(models) == []


def test_leftovers_of_saves_never_recorded_are_swept_and_held_ones_kept(team, trained):
    models, store = team
    shutil.copytree(trained, models / ".old.saving-0a1b2c3d")  # a killed save, older format
    shutil.copytree(trained, models / ".busy.saving-00000000000000aa")  # a save in progress
    with holding(models / ".busy.saving-00000000000000aa"):
        lines = finish_interrupted_changes(store, models_root=models)
    assert lines == ["model 'old': removed a save that was never recorded"]
    assert hidden(models) == [".busy.saving-00000000000000aa"]


def test_a_changed_name_in_the_trail_never_leaves_the_models_folder(team, trained, tmp_path):
    models, store = team
    change = "renaming-00112233445566aa"
    shutil.copytree(trained, models / f".a.{change}")
    details = {"name": "../escaped", "digest": "", "change": change}
    store.record_event("model.renamed", details, actor=LEAD, permission=Permission.MANAGE_MODELS)
    (line,) = finish_interrupted_changes(store, models_root=models)
    assert "waits" in line and not (tmp_path / "escaped").exists()


def test_the_command_line_records_a_save_into_the_teams_models_folder(
    tmp_path, tiny_bert_dir, monkeypatch
):
    from tests.conftest import separable_rows
    from tests.helpers import run_cli

    texts, labels = separable_rows(4)
    data = tmp_path / "complaints.csv"
    data.write_text(
        "text,label\n" + "".join(f"{t},{d}\n" for t, d in zip(texts, labels, strict=True))
    )
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "data"))
    options = ["--backbone", str(tiny_bert_dir), "--max-steps", "1", "--max-length", "32",
               "--device", "cpu"]  # fmt: skip
    for out in (tmp_path / "models" / "team", tmp_path / "mine" / "own"):
        run = run_cli("train", str(data), "--out", str(out), *options)
        assert run.returncode == 0, run.stderr
    (event,) = Store.open(tmp_path / "data" / "lens.db").events("model.saved")
    assert (event.actor, event.details["name"]) == ("operator", "team")  # the team's folder only


def test_the_train_page_renames_and_deletes_through_the_trail(tmp_path, trained, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
    from ui.state import _listed_models

    models = tmp_path / "models"
    for name in ("a", "b"):
        shutil.copytree(trained, models / name)
    monkeypatch.setenv(MODELS_DIR_ENV, str(models))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    _listed_models.clear()
    page = Path(__file__).resolve().parent.parent / "pages" / "train.py"
    at = AppTest.from_file(str(page), default_timeout=120).run()
    at.selectbox(key="train.pick").set_value("a").run()
    at.text_input(key="train.new_name").set_value("renamed")
    at.button(key="train.rename").click().run()
    at.selectbox(key="train.pick").set_value("b").run()
    at.button(key="train.delete").click().run()
    assert not at.exception and not at.error
    assert names(models) == ["renamed"]
    store = Store.open(tmp_path / "data" / "lens.db")
    assert [e.details["name"] for e in store.events("model.renamed")] == ["renamed"]
    assert [e.details["name"] for e in store.events("model.deleted")] == ["b"]


def test_a_new_change_folder_is_never_seen_unheld_and_a_killed_making_is_swept(tmp_path):
    from core.pending import SAVING, created_held, if_abandoned, new_change, sweep_stale_making

    change = new_change(tmp_path, "m", SAVING)
    with created_held(change):
        assert [p.name for p in tmp_path.iterdir()] == [change.folder.name]
        with if_abandoned(change.folder) as abandoned:
            assert not abandoned  # held from the moment it has its name
    with if_abandoned(change.folder) as abandoned:
        assert abandoned
    old, fresh = tmp_path / ".a.making-saving-01", tmp_path / ".b.making-saving-02"
    old.mkdir()
    fresh.mkdir()
    os.utime(old, (0, 0))
    assert sweep_stale_making(tmp_path) == 1 and not old.exists() and fresh.exists()
