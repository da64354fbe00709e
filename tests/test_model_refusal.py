"""A saved model the loader refuses (a stray file its card does not list, a pickle): the refusal
names the model, never the server's path; the Train page's list marks it and does not offer it;
a session whose model is refused drops it with one warning and its pages keep working (issue 38).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import Actor, Role
from core.errors import UserError
from core.models.registry import load_model
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import promote_model
from core.review.store import DB_NAME, Store
from ui.safe import md_escape
from ui.state import ACTIVE_MODEL

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
TRAIN = str(ROOT / "pages" / "train.py")
PAGES = [str(ROOT / "pages" / p) for p in ("classify.py", "explain.py", "train.py")]
ADMIN = Actor("ada@bank.example", Role.ADMIN, signed_in=True)
# A stray file the card does not list, and a pickle: both make the loader refuse the folder.
TAMPERINGS = ["notes.txt", "model.pkl"]


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's data and (empty) models folders."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    return (tmp_path / "models").resolve()


def copy_model(source: Path, models: Path, name: str, stray: str | None = None) -> Path:
    """A copy of the saved model `source` named `name`, with the file `stray` added."""
    folder = shutil.copytree(source, models / name)
    if stray is not None:
        (folder / stray).write_bytes(b"not listed")
    return folder


# ------------------------------------------------------------------ the message


@pytest.mark.parametrize("stray", TAMPERINGS)
def test_a_refusal_names_the_model_and_never_the_server_path(models, tiny_model_dir, stray):
    from core.models.card import load_refusal

    folder = copy_model(tiny_model_dir, models, "tampered", stray)
    reason = load_refusal(folder)
    assert reason is not None and reason.startswith("model 'tampered' is refused: ")
    assert stray in reason and str(models.parent) not in reason and "\n" not in reason
    with pytest.raises(UserError) as err:
        load_model(folder)
    assert str(err.value) == reason  # the loader refuses with the same line


def test_a_model_the_loader_takes_has_no_refusal(models, tiny_model_dir):
    from core.models.card import load_refusal

    assert load_refusal(copy_model(tiny_model_dir, models, "clean")) is None


@pytest.mark.parametrize("card", [None, "{not json", json.dumps({"format": "other"})])
def test_a_folder_that_is_not_a_model_is_named_without_its_path(models, card):
    folder = models / "odd"
    folder.mkdir()
    if card is not None:
        (folder / "card.json").write_text(card, encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_model(folder)
    assert "'odd'" in str(err.value) and str(models.parent) not in str(err.value)


# ------------------------------------------------------------------ the Train page's list


def test_the_list_marks_a_refused_model_and_does_not_offer_to_use_it(models, tiny_model_dir):
    copy_model(tiny_model_dir, models, "list-good")
    copy_model(tiny_model_dir, models, "list-stray", "notes.txt")
    copy_model(tiny_model_dir, models, "list-pickle", "model.pkl")
    at = AppTest.from_file(TRAIN, default_timeout=120).run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value.set_index("name")
    assert table.loc["list-good", "status"] == ""
    for name, stray in [("list-stray", "notes.txt"), ("list-pickle", "model.pkl")]:
        status = table.loc[name, "status"]
        assert status.startswith(f"cannot be loaded: model '{name}' is refused: ")
        assert stray in status and str(models.parent) not in status
        at.selectbox(key="train.pick").set_value(name).run()
        assert at.button(key="train.load").disabled
        assert md_escape("C" + status[1:]) in [c.value for c in at.caption]  # beside the pick
    at.selectbox(key="train.pick").set_value("list-good").run()
    assert not at.button(key="train.load").disabled


# ------------------------------------------------------------------ the session's model


def fresh_session() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    return at


def pick_on_train_page(at: AppTest, name: str) -> None:
    at.switch_page(TRAIN).run()
    at.selectbox(key="train.pick").set_value(name)
    at.button(key="train.load").click().run()
    assert not at.exception and not at.error


def refusal_warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "cannot be used" in w.value]


@pytest.mark.parametrize("stray", TAMPERINGS)
def test_a_chosen_model_refused_at_load_is_dropped_and_the_pages_keep_working(
    models, tiny_model_dir, stray
):
    name = f"chosen-{stray.replace('.', '-')}"  # a name of its own: the model cache is shared
    copy_model(tiny_model_dir, models, name)
    at = fresh_session()
    pick_on_train_page(at, name)
    assert at.session_state[ACTIVE_MODEL] == str(models / name)
    (models / name / stray).write_bytes(b"added after it was chosen")
    at.switch_page(PAGES[0]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert ACTIVE_MODEL not in at.session_state
    [warning] = refusal_warnings(at)  # one warning, naming the model, not the path
    assert md_escape(f"model '{name}' is refused") in warning
    assert str(models.parent) not in warning
    assert any("No model is active" in i.value for i in at.info)
    for page in PAGES:  # Classify, Explain and Train keep working, with no model
        at.switch_page(page).run()
        assert not at.exception and not at.error, (page, [e.value for e in at.error])
        assert refusal_warnings(at) == []  # said once
    assert (
        at.dataframe[0].value.set_index("name").loc[name, "status"].startswith("cannot be loaded: ")
    )  # the Train page's list says so too, and does not offer it again
    assert at.button(key="train.load").disabled


def test_a_refused_chosen_model_falls_back_to_the_live_model(models, tiny_model_dir):
    copy_model(tiny_model_dir, models, "fallback-live")
    copy_model(tiny_model_dir, models, "fallback-mine")
    with Store.open(models.parent / "data" / DB_NAME) as store:
        promote_model(store, models, "fallback-live", reason="checked", actor=ADMIN)
    at = fresh_session()
    pick_on_train_page(at, "fallback-mine")
    (models / "fallback-mine" / "notes.txt").write_text("stray", encoding="utf-8")
    at.switch_page(PAGES[0]).run()
    assert not at.exception and not at.error
    assert at.session_state[ACTIVE_MODEL] == str(models / "fallback-live")
    assert any(c.value.startswith(f"Model: {md_escape('fallback-live')} ·") for c in at.caption)
    [warning] = refusal_warnings(at)
    assert md_escape("model 'fallback-mine' is refused") in warning


def test_a_refused_live_model_is_named_without_its_path(models, tiny_model_dir):
    copy_model(tiny_model_dir, models, "live-pickled")
    with Store.open(models.parent / "data" / DB_NAME) as store:
        promote_model(store, models, "live-pickled", reason="checked", actor=ADMIN)
    (models / "live-pickled" / "model.pkl").write_bytes(b"pickle")  # after the promotion
    at = fresh_session()
    at.switch_page(PAGES[0]).run()
    assert not at.exception and ACTIVE_MODEL not in at.session_state
    [warning] = [w.value for w in at.warning if w.value.startswith("The live model cannot")]
    assert md_escape("model 'live-pickled' is refused") in warning
    assert str(models.parent) not in warning
