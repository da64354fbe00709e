"""AppTest for the Explain page: a typed complaint, a hostile one, the target selector, a row
picked from the data set (also through `?row=N`), and a model without [CLS]."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.analysis.probe_compare import DEMO_TEXT
from core.jobs import JobStatus
from core.models.blend import Blend
from core.models.registry import load_model
from tests.helpers import with_blend
from ui.state import ACTIVE_MODEL, EXPLAIN_REVIEW

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "explain.py")
HOSTILE = "<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/x.png) **card** fraud"


def _open(model: Path, **query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[ACTIVE_MODEL] = str(model)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_without_a_model_the_page_points_to_train():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any("No model is active" in i.value for i in at.info)


def test_example_complaint_is_explained_with_both_models(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    assert at.text[0].value == DEMO_TEXT
    labels = {m.label: m.value for m in at.metric}
    assert set(labels) == {"Decision", "Transformer", "Bag of words"}
    assert labels["Bag of words"] in {"UPI Dispute", "Card Fraud", "Loan Query"}
    fragment = at.get("html")[0].value
    for word in ("Croma", "card", "UPI"):
        assert f">{word}</span>" in fragment
    assert len(at.get("download_button")) == 1
    assert len(at.tabs) >= 4  # every head, one head, [CLS] row, rollout


def test_hostile_complaint_stays_text(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.text_area(key="explain.text").set_value(HOSTILE)
    at.button(key="FormSubmitter:explain.typed-Explain").click().run()
    assert not at.exception
    assert at.text[0].value == HOSTILE  # st.text: shown verbatim, never interpreted
    fragment = at.get("html")[0].value
    assert "<img" not in fragment and "http:" not in fragment  # words only, no markup
    assert ">img</span>" in fragment and ">onerror</span>" in fragment


def test_target_selector_changes_the_explained_desk(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.selectbox(key="explain.target").set_value("Loan Query").run()
    assert not at.exception
    assert "Scores for the desk <b>Loan Query</b>" in at.get("html")[0].value
    at.session_state["explain.attention"] = "One head"  # the tab a click opens
    at.run()
    at.selectbox(key="explain.layer").set_value(2).run()
    at.selectbox(key="explain.head").set_value(2).run()
    assert not at.exception


def _charts(at: AppTest) -> list[str]:
    """The titles of the Vega-Lite charts the run sent to the browser."""
    import json

    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    titles = [spec.get("title", "") for spec in specs]
    return [t["text"] if isinstance(t, dict) else t for t in titles]


def test_only_the_open_tab_and_the_layers_picked_are_sent(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    assert [t.label for t in at.tabs] == ["Every head", "One head", "[CLS] row", "Rollout"]
    assert len(at.get("vega_lite_chart")) == 1  # the grid: closed tabs and bars unsent
    [title] = _charts(at)
    assert title.startswith("Every head")  # a 2-layer model: its last layer by default
    assert "layer 2" in title
    at.session_state["explain.attention"] = "One head"
    at.run()
    at.selectbox(key="explain.head").set_value(2).run()
    assert _charts(at) == ["Layer 1, head 2"]
    at.session_state["explain.attention"] = "Rollout"
    at.run()
    assert _charts(at) == ["Attention rollout"]
    at.session_state["explain.attention"] = "One head"  # its choices were kept meanwhile
    at.run()
    assert _charts(at) == ["Layer 1, head 2"]
    at.session_state["explain.bars"] = True  # the bars, once their expander is opened
    at.run()
    assert len(at.get("vega_lite_chart")) == 2


def test_pictures_asked_for_belong_to_one_complaint(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.button(key="explain.figure.grid.prepare").click().run()
    assert not at.exception and "explain.figure.grid.prepared" in at.session_state
    at.text_area(key="explain.text").set_value("kyc documents rejected twice")
    at.button(key="FormSubmitter:explain.typed-Explain").click().run()
    assert not at.exception
    assert "explain.figure.grid.prepared" not in at.session_state  # not rebuilt to compare
    assert at.button(key="explain.figure.grid.prepare")  # asked for again, for this one


def _finish_review(at: AppTest) -> None:
    """Wait for the background classification of the sample, then rerun the page."""
    assert at.session_state[EXPLAIN_REVIEW].job.wait(timeout=120).status is JobStatus.DONE
    at.run()
    assert not at.exception


def test_pick_a_row_from_the_demo_data(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.radio(key="explain.source").set_value("Pick one from the data set").run()
    at.button(key="explain.use_demo").click().run()
    assert not at.exception
    _finish_review(at)
    picker = at.dataframe[0].value
    assert {"row", "desk", "transformer", "bag of words", "wrong", "text"} <= set(picker.columns)
    wrong = picker["wrong"].tolist()
    assert wrong == sorted(
        wrong, key=lambda w: ("both", "transformer", "bag of words", "").index(w)
    )
    row = int(picker["row"].iloc[3])
    at.selectbox(key="explain.row").set_value(row).run()
    assert not at.exception
    assert at.text[0].value == picker.set_index("row").loc[row, "text"]


def test_row_query_parameter_opens_that_row(tiny_bert_cls_model_dir):
    first = _open(tiny_bert_cls_model_dir)
    first.radio(key="explain.source").set_value("Pick one from the data set").run()
    first.button(key="explain.use_demo").click().run()
    active = first.session_state["active_dataset"]
    first.session_state[EXPLAIN_REVIEW].job.cancel()
    row = active.dataset.rows[1234]
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[ACTIVE_MODEL] = str(tiny_bert_cls_model_dir)
    at.session_state["active_dataset"] = active
    at.query_params["row"] = str(row)
    at.run()
    assert not at.exception
    _finish_review(at)
    assert at.selectbox(key="explain.row").value == row
    assert at.text[0].value == active.dataset.texts[1234]


def test_model_without_cls_says_so(tiny_model_dir):
    at = _open(tiny_model_dir)
    at.session_state["explain.attention"] = "[CLS] row"
    at.run()
    assert any("no [CLS] token" in i.value for i in at.info)
    assert at.get("html")


def test_a_blended_model_says_who_decides_and_shows_the_decision(tiny_bert_cls_model_dir, tmp_path):
    blended = with_blend(tiny_bert_cls_model_dir, tmp_path / "blended", Blend(0.5))
    at = _open(blended)
    labels = {m.label: m.value for m in at.metric}
    neural, bow = predictions_of(*_models(blended), DEMO_TEXT)
    assert labels["Decision"] == Blend(0.5).decide(neural, bow).label
    assert any("a blend of 50% transformer and 50% bag of words" in c.value for c in at.caption)
    assert "decision" in at.dataframe[0].value.columns


def test_a_three_member_blend_shows_each_member_and_the_reasons_of_those_that_carry_it(
    three_member_model_dir: Path,
):
    at = _open(three_member_model_dir)
    labels = {m.label: m.value for m in at.metric}
    assert set(labels) == {"Decision", "Transformer", "Frozen encoder", "Bag of words"}
    loaded = load_model(three_member_model_dir)
    shown = loaded.blend.describe()  # 40% transformer, 40% frozen encoder and 20% bag of words
    assert any(shown in c.value and "carried by the transformer and the frozen encoder" in c.value
               for c in at.caption)  # fmt: skip
    assert {"transformer", "frozen encoder", "bag of words", "decision"} <= set(
        at.dataframe[0].value.columns
    )
    assert "frozen encoder (Integrated Gradients)" in at.get("html")[0].value  # its word row


def test_a_frozen_encoder_with_a_share_that_does_not_carry_the_decision(
    three_member_model_dir: Path, tmp_path: Path
):
    minor = Blend(neural_weight=0.6, frozen_weight=0.3, neural_temperature=1.5)
    at = _open(with_blend(three_member_model_dir, tmp_path / "minor", minor))
    labels = {m.label: m.value for m in at.metric}
    assert "Frozen encoder" in labels  # its answer still goes into the decision
    assert any("carried by the transformer." in c.value for c in at.caption)
    assert "frozen encoder (Integrated Gradients)" not in at.get("html")[0].value


def _models(folder: Path):
    loaded = load_model(folder)
    return loaded.neural, loaded.bow


def predictions_of(neural, bow, text: str):
    """Both models' predictions of `text`, as the Explain page shows them."""
    from core.models.classifier import Prediction

    classes = [str(c) for c in neural.classes_]
    return (Prediction.of(classes, neural.predict_proba([text])[0]),
            Prediction.of(classes, bow.predict_proba([text])[0]))  # fmt: skip
