"""AppTest for the Train page: train a tiny model on the demo data, save it, manage saved models."""

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.models.transformer.backbone import NOT_FOUND
from ui.safe import md_escape

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "train.py")


@pytest.fixture()
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def train_tiny(at: AppTest, *, max_steps: int, name: str | None = None) -> None:
    if any(b.key == "train.use_demo" for b in at.button):  # else the demo data is loaded
        at.button(key="train.use_demo").click().run()
    at.radio(key="train.recipe").set_value("full").run()
    at.selectbox(key="train.backbone").set_value("tiny").run()
    at.number_input(key="train.max_steps").set_value(max_steps)
    if name is not None:
        at.text_input(key="train.model_name").set_value(name)
    at.button(key="train.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    snapshot = at.session_state["train.job"].job.wait(120)
    assert snapshot.status == "done", snapshot.error
    at.run()
    assert not at.exception


def test_without_models_or_data_the_page_says_what_to_do(app: AppTest, tmp_path: Path):
    assert [c.value for c in app.caption if "No saved models" in c.value] == [
        "No saved models yet."
    ]
    assert any("No data set is loaded" in i.value for i in app.info)
    assert str(tmp_path) not in shown_text(app)  # the server's models path is never shown


def test_the_demo_data_replaces_the_prompt_in_the_same_run(app: AppTest):
    app.button(key="train.use_demo").click().run()
    assert not any("No data set is loaded" in i.value for i in app.info)
    assert not any(b.key == "train.use_demo" for b in app.button)
    assert any("3,000 complaints · 5 desks" in c.value for c in app.caption)  # the form is on


def finish_estimates() -> None:
    """Wait for the server's queued or running training-time estimates."""
    from core.access import OPERATOR
    from ui.jobs import get_job_queue

    queue = get_job_queue()
    for info in queue.jobs(seen_by=OPERATOR):
        if info.kind == "estimate" and info.status.active:
            assert queue.find(info.id).wait(120).status == "done"


def shown_text(at: AppTest) -> str:
    """Every caption, message, markdown and widget label of the page, joined."""
    elements = [*at.caption, *at.markdown, *at.info, *at.error, *at.warning, *at.success]
    labels = [w.label for w in [*at.text_input, *at.selectbox, *at.button]]
    return "\n".join([str(e.value) for e in elements] + labels)


def test_a_training_saves_itself_under_the_name_given_and_becomes_active(
    app: AppTest, tmp_path: Path
):
    app.button(key="train.use_demo").click().run()
    app.radio(key="train.recipe").set_value("full").run()
    app.selectbox(key="train.backbone").set_value("tiny").run()
    for name in ["../escape", str(tmp_path / "escape")]:
        app.text_input(key="train.model_name").set_value(name)
        app.button(key="train.start").click().run()
        assert any("model name" in e.value for e in app.error)
        assert app.session_state["train.job"] is None  # refused before anything was queued
    assert not (tmp_path / "escape").exists()  # nothing escaped the models folder
    train_tiny(app, max_steps=3, name="tiny-demo")
    saved = f"Saved as {md_escape('tiny-demo')}"
    assert any("Trained in" in s.value and saved in s.value for s in app.success)
    table = app.dataframe[-1].value
    result = app.session_state["train.job"].job.snapshot().result.result
    decision = ["Decision (blend)"] if result.blend.decided_by == "blend" else []
    assert list(table["model"]) == ["Transformer", "Bag of words", *decision]
    assert table["accuracy"].between(0, 1).all()
    assert f"Routing decision: {result.blend.describe()}" in shown_text(app)
    assert (tmp_path / "models" / "tiny-demo" / "card.json").is_file()
    assert app.session_state["active_model"].endswith("tiny-demo")
    app.run()
    assert app.dataframe[0].value["name"].tolist() == ["tiny-demo"]
    offered = app.text_input(key="train.model_name").value
    assert offered.startswith("tiny-") and offered != "tiny-demo"  # a fresh name for the next


def test_a_name_already_taken_is_refused_before_training(app: AppTest, tmp_path: Path):
    (tmp_path / "models" / "taken").mkdir(parents=True)
    (tmp_path / "models" / "taken" / "card.json").write_text("{}")  # (an empty folder is free)
    app.button(key="train.use_demo").click().run()
    app.text_input(key="train.model_name").set_value("taken")
    app.button(key="train.start").click().run()
    assert [e.value for e in app.error] == [
        md_escape("a model named 'taken' already exists; choose another name")
    ]


@pytest.mark.parametrize("typed", ["/no/such/model-folder", "/etc", "/etc/passwd", "../models"])
def test_a_backbone_outside_the_allowed_places_is_only_not_found(app: AppTest, typed: str):
    app.button(key="train.use_demo").click().run()
    app.selectbox(key="train.backbone").set_value("other").run()
    app.text_input(key="train.custom").set_value(typed).run()
    assert app.button(key="train.start").disabled
    assert not app.exception
    assert [e.value for e in app.error] == [md_escape(NOT_FOUND.format(text=typed))]
    assert "train.job" not in app.session_state  # nothing was started, nothing was read


def test_a_session_is_told_when_its_model_changes_on_disk(
    app: AppTest, tmp_path: Path, tiny_model_dir: Path
):
    folder = shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny-test")
    app.session_state["active_model"] = str(folder)
    app.run()
    assert any(c.value == f"Active model: {md_escape('tiny-test')}" for c in app.caption)
    assert not app.warning
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    card["created_at"] = "2030-01-01T00:00:00+00:00"  # as a save under the same name does
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    app.run()
    assert [w.value for w in app.warning] == [
        f"Model {md_escape('tiny-test')} was saved again or replaced since you chose it, so it "
        "is no longer active; choose a model again on the Train page."
    ]
    assert "active_model" not in app.session_state
    app.run()
    assert not app.warning  # told once

    app.session_state["active_model"] = str(folder)
    app.run()
    shutil.rmtree(folder)
    app.run()
    assert "deleted or renamed" in app.warning[0].value
    assert not any("Active model" in c.value for c in app.caption)


def test_cancel_saves_nothing(app: AppTest, tmp_path: Path):
    app.button(key="train.use_demo").click().run()
    app.radio(key="train.recipe").set_value("full").run()
    app.selectbox(key="train.backbone").set_value("tiny").run()
    app.button(key="train.start").click().run()
    run = app.session_state["train.job"]
    run.job.cancel()
    assert run.job.wait(120).status == "cancelled"
    app.run()
    assert any("cancelled" in i.value for i in app.info)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_the_quick_recipe_trains_with_its_estimate(
    app: AppTest, tmp_path: Path, tiny_bert_cls_model_dir: Path, real_estimate: None
):
    # A saved transformers model as the backbone: the tiny random BERT, so this runs in seconds.
    shutil.copytree(tiny_bert_cls_model_dir, tmp_path / "models" / "tiny-bert")
    app.button(key="train.use_demo").click().run()
    assert app.radio(key="train.recipe").value == "auto"  # the data choose unless told
    app.radio(key="train.recipe").set_value("quick").run()
    assert app.number_input(key="train.epochs").disabled  # nothing to tune but the data
    assert "tiny" not in app.selectbox(key="train.backbone").options  # nothing pretrained
    app.selectbox(key="train.backbone").set_value("other").run()
    app.text_input(key="train.custom").set_value("tiny-bert").run()
    assert any("at most 64" in e.value for e in app.error)  # the tiny BERT has 64 positions
    app.number_input(key="train.maxlen").set_value(48).run()
    waiting = ("Timing a few training steps", "Duration estimate waiting")  # running or queued
    assert any(w in c.value for c in app.caption for w in waiting), shown_text(app)
    finish_estimates()  # on the heavy lane, timed for real on the tiny BERT
    app.run()  # as the waiting fragment does once the estimate has ended
    assert any("Estimated duration: **about" in c.value for c in app.caption), shown_text(app)
    app.text_input(key="train.model_name").set_value("first-quick")
    app.button(key="train.start").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert app.session_state["train.job"].job.wait(120).status == "done"
    app.run()
    assert any("quick model, linear head C =" in s.value for s in app.success)
    assert any("quick model" in i.value for i in app.info)  # what it can and cannot show
    card = json.loads((tmp_path / "models" / "first-quick" / "card.json").read_text())
    assert card["recipe"] == "quick" and card["data_fingerprint"]
    table = app.dataframe[0].value
    assert dict(zip(table["name"], table["recipe"], strict=True))["first-quick"] == "quick"


def test_letting_the_data_choose_says_which_recipe_and_the_review_policy(
    app: AppTest, tmp_path: Path
):
    app.button(key="train.use_demo").click().run()
    assert app.radio(key="train.recipe").value == "auto"
    app.selectbox(key="train.backbone").set_value("tiny").run()  # from scratch: full only
    app.number_input(key="train.max_steps").set_value(2)
    app.text_input(key="train.model_name").set_value("tiny-auto")
    app.button(key="train.start").click().run()
    assert app.session_state["train.job"].job.wait(120).status == "done"
    app.run()
    said = "Recipe chosen by the data: full\\: the backbone starts from random weights"  # escaped
    assert any(said in i.value for i in app.info), shown_text(app)
    assert any("Review policy: a complaint goes to a person when it is unsure below" in c.value
               for c in app.caption), shown_text(app)  # fmt: skip
    card = json.loads((tmp_path / "models" / "tiny-auto" / "card.json").read_text())
    assert card["recipe"] == "full" and card["recipe_choice"]["chosen"] == "full"
    assert card["review"]["unknown_threshold"] == 0.95
