"""AppTest for the Train page: train a tiny model on the demo data, save it, manage saved models."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "train.py")


@pytest.fixture()
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def train_tiny(at: AppTest, *, max_steps: int) -> None:
    at.button(key="train.use_demo").click().run()
    at.selectbox(key="train.backbone").set_value("tiny").run()
    at.number_input(key="train.max_steps").set_value(max_steps)
    at.button(key="FormSubmitter:train.form-Start training").click().run()
    assert not at.exception
    snapshot = at.session_state["train.job"].job.wait(120)
    assert snapshot.status == "done", snapshot.error
    at.run()
    assert not at.exception


def test_without_models_or_data_the_page_says_what_to_do(app: AppTest):
    assert any("No saved models yet" in c.value for c in app.caption)
    assert any("No data set is loaded" in i.value for i in app.info)


def test_train_tiny_save_and_list(app: AppTest, tmp_path: Path):
    train_tiny(app, max_steps=3)
    assert any("Trained in" in s.value for s in app.success)
    table = app.dataframe[-1].value
    assert list(table["model"]) == ["Transformer", "Bag of words"]
    assert table["accuracy"].between(0, 1).all()
    app.text_input(key="train.save_name").set_value("tiny-demo")
    app.button(key="FormSubmitter:train.save_form-Save and use this model").click().run()
    assert not app.exception
    assert (tmp_path / "models" / "tiny-demo" / "card.json").is_file()
    assert app.session_state["active_model"].endswith("tiny-demo")
    app.run()
    assert app.dataframe[0].value["name"].tolist() == ["tiny-demo"]


def test_bad_backbone_is_reported_by_the_run(app: AppTest):
    app.button(key="train.use_demo").click().run()
    app.selectbox(key="train.backbone").set_value("other").run()
    app.text_input(key="train.custom").set_value("/no/such/model-folder").run()
    app.button(key="FormSubmitter:train.form-Start training").click().run()
    snapshot = app.session_state["train.job"].job.wait(60)
    assert snapshot.status == "failed" and "no/such/model-folder" in snapshot.error
    app.run()
    assert any("Training failed" in e.value for e in app.error)


def test_cancel_saves_nothing(app: AppTest, tmp_path: Path):
    app.button(key="train.use_demo").click().run()
    app.selectbox(key="train.backbone").set_value("tiny").run()
    app.button(key="FormSubmitter:train.form-Start training").click().run()
    run = app.session_state["train.job"]
    run.job.cancel()
    assert run.job.wait(120).status == "cancelled"
    app.run()
    assert any("cancelled" in i.value for i in app.info)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
