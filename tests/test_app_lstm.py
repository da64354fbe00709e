"""AppTest of the LSTM on the pages: a saved LSTM beside the bag of words on Classify and
Explain (and no selector without one), an active LSTM model on Explain without attention, and
the Attention lab's trained comparison run as a job (with a stubbed comparison)."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.jobs import JobStatus
from core.paths import MODELS_DIR_ENV
from tests.helpers import open_page
from tests.test_lstm_explain import save_tiny_lstm
from ui.lstm import LSTM_ROW, READERS_RUN
from ui.safe import md_escape
from ui.state import ACTIVE_MODEL

ROOT = Path(__file__).resolve().parent.parent
CLASSIFY = str(ROOT / "pages" / "classify.py")
EXPLAIN = str(ROOT / "pages" / "explain.py")
LAB = str(ROOT / "pages" / "attention_lab.py")
TEXT = "upi payment failed but money debited"
LSTM_LABEL = f"LSTM ({md_escape('lstm-test')})"  # metric labels are Markdown


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A models folder with the tiny transformer `tiny-test` and the LSTM `lstm-test`."""
    root = tmp_path_factory.mktemp("lstm-models")
    shutil.copytree(tiny_model_dir, root / "tiny-test")
    save_tiny_lstm(root / "lstm-test")
    return root


@pytest.fixture
def models(saved: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(MODELS_DIR_ENV, str(saved))
    return saved


def _page(page: str, model: Path) -> AppTest:
    at = open_page(page, {ACTIVE_MODEL: str(model)}).run()
    assert not at.exception, at.exception
    return at


def _lstm_answer(folder: Path, text: str):
    from core.analysis.lstm_explain import explain_lstm_classifier
    from core.models.registry import load_model

    return explain_lstm_classifier(load_model(folder, device="cpu").neural, text)


def test_classify_shows_the_saved_lstm_beside_the_bag_of_words(models: Path):
    at = _page(CLASSIFY, models / "tiny-test")
    assert at.selectbox(key="classify.lstm").options == ["None", "lstm-test"]
    at.selectbox(key="classify.lstm").set_value("lstm-test")
    at.text_area(key="classify.text").set_value(TEXT)
    at.button(key="FormSubmitter:classify.one-Classify").click().run()
    assert not at.exception
    metrics = {m.label: m for m in at.metric}
    expected = _lstm_answer(models / "lstm-test", TEXT)
    assert metrics[LSTM_LABEL].value == expected.label
    assert f"{expected.prediction.confidence:.0%} sure" in str(metrics[LSTM_LABEL].delta)
    assert {"Decision", "Transformer", "Bag of words"} <= set(metrics)


def test_no_selector_without_a_saved_lstm(tmp_path: Path, tiny_model_dir: Path, monkeypatch):
    shutil.copytree(tiny_model_dir, tmp_path / "tiny-test")
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    at = _page(CLASSIFY, tmp_path / "tiny-test")
    assert not [s for s in at.selectbox if s.key == "classify.lstm"]


def test_explain_adds_the_lstm_row_to_the_word_grid(models: Path):
    at = _page(EXPLAIN, models / "tiny-test")
    at.text_area(key="explain.text").set_value(TEXT)
    at.button(key="FormSubmitter:explain.typed-Explain").click().run()
    assert "LSTM" not in at.get("html")[0].value  # none chosen: two rows
    at.selectbox(key="explain.lstm").set_value("lstm-test").run()
    assert not at.exception
    fragment = at.get("html")[0].value
    assert html.escape(LSTM_ROW) in fragment
    assert fragment.count(">payment</span>") == 3  # transformer, bag of words, LSTM
    target = fragment.split("Scores for the desk <b>")[1].split("</b>")[0]
    from core.analysis.lstm_explain import explain_lstm_classifier
    from core.models.registry import load_model

    lstm = load_model(models / "lstm-test", device="cpu").neural
    expected = explain_lstm_classifier(lstm, TEXT, target=html.unescape(target))
    for word, score in zip(expected.words, expected.scores, strict=True):
        assert html.escape(f"{word} · {LSTM_ROW} {score:+.4f}", quote=True) in fragment
    assert any(m.label == LSTM_LABEL and m.value == expected.label for m in at.metric)


def test_explain_with_an_active_lstm_shows_no_attention_and_no_error(models: Path):
    at = _page(EXPLAIN, models / "lstm-test")
    labels = {m.label: m.value for m in at.metric}
    assert set(labels) == {"Decision", "LSTM", "Bag of words"}
    expected = _lstm_answer(models / "lstm-test", at.text_area(key="explain.text").value)
    assert labels["LSTM"] == expected.label
    fragment = at.get("html")[0].value
    assert fragment.count(html.escape(LSTM_ROW)) >= 1 and "Transformer" not in fragment
    assert any("no attention heads" in i.value for i in at.info)
    assert not at.tabs  # no attention tabs
    assert len(at.get("download_button")) == 1
    assert at.button(key="explain.figure.strip.prepare")  # the strip as PNG and SVG


def _readers():
    from core.lab.order_models import OrderModels, OrderModelScore, OrderModelTiming

    scores = (
        OrderModelScore("bag of words", 0.81, 0.5, 40, 0.2),
        OrderModelScore("tiny transformer, positions off", 0.82, 0.5, 40, 3.0),
        OrderModelScore("tiny transformer, positions on", 0.84, 0.775, 40, 3.1),
        OrderModelScore("LSTM", 0.83, 0.725, 40, 2.5),
    )
    timing = pd.DataFrame({
        "model": ["tiny transformer, positions on"] * 2 + ["LSTM"] * 2,
        "tokens": [16, 32, 16, 32], "ms_per_complaint": [0.5, 0.6, 0.7, 1.3],
    })  # fmt: skip
    return OrderModels(scores, OrderModelTiming(timing), "a seeded split", 160, 20)


def test_attention_lab_trains_the_readers_as_a_job_and_shows_them(monkeypatch):
    from core.lab import order_models

    calls = []

    def stub(dataset, config, *, on_progress=None, cancel=None):
        calls.append((len(dataset), config))
        return _readers()

    monkeypatch.setattr(order_models, "compare_order_models", stub)
    at = open_page(LAB).run()
    assert not at.exception
    at.button(key="attention.readers_start").click().run()
    assert at.session_state[READERS_RUN].job.wait(timeout=60).status is JobStatus.DONE
    at.run()
    assert not at.exception
    assert calls and calls[0][0] > 1000  # the demo data, made the active data set
    table = next(d.value for d in at.dataframe if "twin accuracy" in d.value.columns)
    assert table["model"].tolist()[-1] == "LSTM"
    assert table["twin accuracy"].tolist() == [0.5, 0.5, 0.775, 0.725]
    assert any("n sequential steps" in c.value for c in at.caption)
    specs = [chart.proto.spec for chart in at.get("vega_lite_chart")]
    assert any("ms_per_complaint" in spec for spec in specs)  # the time-per-complaint chart
    assert at.button(key="attention.readers_chart.prepare")  # its PNG and SVG (ui.figures)
    at.run()  # a rerun keeps the result (per data set) without running again
    assert len(calls) == 1 and any("twin accuracy" in d.value.columns for d in at.dataframe)


def test_a_viewer_cannot_start_the_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from core.roles import ROLES_ENV
    from tests.helpers import AUTH

    (tmp_path / "roles.toml").write_text('viewer = ["*@bank.example"]\n')
    monkeypatch.setenv(ROLES_ENV, str(tmp_path / "roles.toml"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)  # the router: page links
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "vera@bank.example", "email_verified": True}
    at.run()
    at.switch_page(LAB).run()
    assert not at.exception
    assert not [b for b in at.button if b.key == "attention.readers_start"]
    assert any("Training the models needs the reviewer role" in c.value for c in at.caption)
