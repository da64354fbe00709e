"""AppTest: the Train page offers the LSTM (from scratch) as a backbone, with its own pooling
choices and defaults, and trains and saves it."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.models.transformer.config import BACKBONE_DEFAULTS, LSTM

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "train.py")


@pytest.fixture()
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_the_lstm_backbone_trains_with_its_own_pooling_and_defaults(app: AppTest, tmp_path):
    if any(b.key == "train.use_demo" for b in app.button):
        app.button(key="train.use_demo").click().run()
    app.radio(key="train.recipe").set_value("full").run()
    assert "LSTM (from scratch, reads in order)" in app.selectbox(key="train.backbone").options
    app.selectbox(key="train.backbone").set_value(LSTM).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    pooling = app.selectbox(key="train.lstm_pooling")
    assert pooling.options == ["mean", "last"]
    assert app.checkbox(key="train.positional").disabled  # positions are the tiny model's
    defaults = BACKBONE_DEFAULTS[LSTM]
    assert app.number_input(key="train.epochs").value == defaults.epochs
    assert app.number_input(key="train.lr").value == pytest.approx(defaults.lr)
    app.number_input(key="train.max_steps").set_value(2)
    app.text_input(key="train.model_name").set_value("lstm-on-demo")
    app.button(key="train.start").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    snapshot = app.session_state["train.job"].job.wait(120)
    assert snapshot.status == "done", snapshot.error
    card = json.loads((tmp_path / "models" / "lstm-on-demo" / "card.json").read_text("utf-8"))
    assert (card["backbone"], card["architecture"]) == (LSTM, "lstm")
    assert card["train_config"]["pooling"] == pooling.value
