"""AppTest of the team's live model in the app: a fresh session uses it, the sidebar says which
model is live and since when, a page using another model says so, and a session that did not
pick a model follows the next promotion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import Actor, Role
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.live import LiveModel, format_since, promote_model
from core.review.store import DB_NAME, Store
from ui.safe import md_escape
from ui.state import ACTIVE_MODEL, ACTIVE_MODEL_FOLLOWS_LIVE, LIVE_MODEL_REFUSED

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
CLASSIFY = str(ROOT / "pages" / "classify.py")
TRAIN = str(ROOT / "pages" / "train.py")
ADMIN = Actor("ada@bank.example", Role.ADMIN, signed_in=True)


@pytest.fixture
def models(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's data folder, and its models folder holding `alpha` and `beta`."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    for name in ("alpha", "beta"):
        shutil.copytree(tiny_model_dir, tmp_path / "models" / name)
    return (tmp_path / "models").resolve()


def promote(models: Path, name: str, report: dict | None = None) -> LiveModel:
    with Store.open(models.parent / "data" / DB_NAME) as store:
        return promote_model(store, models, name, reason="checked", actor=ADMIN, report=report)


def fresh_session() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception
    return at


def sidebar_captions(at: AppTest) -> list[str]:
    return [c.value for c in at.sidebar.caption]


def not_live_warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "not the live model" in w.value]


def pick_on_train_page(at: AppTest, name: str) -> None:
    """The user's own choice: Train, Saved models, pick `name`, Use this model."""
    at.switch_page(TRAIN).run()
    at.selectbox(key="train.pick").set_value(name)
    at.button(key="train.load").click().run()
    assert not at.exception


def test_a_fresh_session_uses_the_live_model_and_the_sidebar_says_so(models: Path):
    live = promote(models, "beta")
    at = fresh_session()
    assert at.session_state[ACTIVE_MODEL] == str(models / "beta")
    line = (
        f"Live model: {md_escape('beta')}, since {format_since(live.since)} "
        f"(by {md_escape('ada@bank.example')})"
    )
    assert line in sidebar_captions(at)
    at.switch_page(CLASSIFY).run()  # classifying (and sending to triage) uses it
    assert not at.exception
    assert any(c.value.startswith(f"Model: {md_escape('beta')} ·") for c in at.caption)
    assert not_live_warnings(at) == []


def test_picking_another_model_says_it_is_not_the_live_one_until_back(models: Path):
    promote(models, "beta")
    at = fresh_session()
    pick_on_train_page(at, "alpha")
    at.switch_page(CLASSIFY).run()
    assert not at.exception
    assert not_live_warnings(at) == [
        f"You are using {md_escape('alpha')}, not the live model {md_escape('beta')}."
    ]
    at.button(key="live_model.use").click().run()
    assert at.session_state[ACTIVE_MODEL] == str(models / "beta")
    assert not_live_warnings(at) == []


def test_a_session_on_the_live_model_by_default_follows_a_new_promotion(models: Path):
    promote(models, "alpha")
    following, chosen = fresh_session(), fresh_session()
    pick_on_train_page(chosen, "alpha")  # the same model, but picked: it stays
    promote(models, "beta")
    following.switch_page(CLASSIFY).run()  # its next rerun
    assert following.session_state[ACTIVE_MODEL] == str(models / "beta")
    assert not_live_warnings(following) == []
    assert following.session_state[ACTIVE_MODEL_FOLLOWS_LIVE] is True
    chosen.switch_page(CLASSIFY).run()
    assert chosen.session_state[ACTIVE_MODEL] == str(models / "alpha")
    assert not_live_warnings(chosen) == [
        f"You are using {md_escape('alpha')}, not the live model {md_escape('beta')}."
    ]


def test_without_a_promotion_a_session_starts_without_a_model(models: Path):
    at = fresh_session()
    assert ACTIVE_MODEL not in at.session_state
    assert "No live model yet (an admin promotes one)." in sidebar_captions(at)
    assert not (models.parent / "data" / DB_NAME).exists()  # asking creates no store


def test_a_live_model_saved_again_is_not_used_and_the_sidebar_says_why(models: Path):
    promote(models, "alpha")
    card_path = models / "alpha" / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    card_path.write_text(json.dumps({**card, "created_at": "2099-01-01"}), encoding="utf-8")
    at = fresh_session()
    assert ACTIVE_MODEL not in at.session_state
    assert any("saved again after its promotion" in c for c in sidebar_captions(at))


def history_page(role: str = "admin") -> None:
    """The promotion history and the rollback form, as a page would draw them."""
    from core.access import Actor, Role
    from ui.widgets import render_live_model_history

    render_live_model_history(Actor("pat@bank.example", Role[role.upper()], signed_in=True))


def test_an_admin_rolls_back_to_the_previous_live_model_with_a_reason(models: Path):
    promote(models, "alpha")
    promote(models, "beta", report={"rows": 12, "changed": []})
    at = AppTest.from_function(history_page, default_timeout=60).run()
    assert not at.exception
    shown = at.dataframe[0].value
    assert list(shown["model"]) == ["beta", "alpha"] and list(shown["before"]) == ["alpha", ""]
    assert list(shown["with a comparison"]) == [True, False]
    assert at.selectbox(key="live_model.pick").value == "alpha"  # the rollback target
    at.button(key="FormSubmitter:live_model.rollback-Promote to live").click().run()
    assert [e.value for e in at.error] == [md_escape("give a reason for the promotion: the team "
                                                     "reads it in the trail")]  # fmt: skip
    at.text_input(key="live_model.reason").set_value("beta misroutes KYC")
    at.button(key="FormSubmitter:live_model.rollback-Promote to live").click().run()
    assert not at.exception and not at.error
    with Store.open(models.parent / "data" / DB_NAME) as store:
        [event, *_] = store.events("model.promoted")
    assert (event.details["name"], event.details["previous"]) == ("alpha", "beta")
    assert event.actor == "pat@bank.example" and event.details["reason"] == "beta misroutes KYC"
    assert list(at.dataframe[0].value["model"]) == ["alpha", "beta", "alpha"]


def test_a_reviewer_sees_the_history_but_cannot_promote(models: Path):
    promote(models, "alpha")
    at = AppTest.from_function(history_page, args=("reviewer",), default_timeout=60).run()
    assert not at.exception and len(at.dataframe) == 1
    assert not at.selectbox and any("needs the admin role" in c.value for c in at.caption)


def test_a_live_model_that_does_not_load_is_not_used_and_the_page_says_why(models: Path):
    # A name of its own: the process-wide model cache holds an `alpha` of the same digest.
    shutil.copytree(models / "alpha", models / "broken")
    promote(models, "broken")
    weights = models / "broken" / "baseline.npz"  # changed after the promotion, card unchanged
    weights.write_bytes(weights.read_bytes() + b"\0")
    at = fresh_session()
    at.switch_page(CLASSIFY).run()
    assert not at.exception and ACTIVE_MODEL not in at.session_state
    assert any("No model is active" in i.value for i in at.info)
    said = md_escape("differs from the file it was saved with")
    assert any(w.value.startswith("The live model cannot be used:") and said in w.value
               for w in at.warning)  # fmt: skip
    assert at.session_state[LIVE_MODEL_REFUSED][1].endswith(
        "differs from the file it was saved with; save the model again"
    )  # the sidebar says so from the next rerun, which does not load it again
