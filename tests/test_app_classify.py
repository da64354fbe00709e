"""AppTest for the Classify page: one typed complaint, and a whole file with its download."""

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.models.blend import Blend
from core.models.registry import load_model
from tests.helpers import with_blend

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "classify.py")
CONTRACT = [
    "predicted_label", "confidence", "needs_review", "review_reason", "unknown_desk_score",
    "decided_by", "transformer_label", "transformer_confidence", "bow_label", "bow_confidence",
]  # fmt: skip


@pytest.fixture()
def app(tiny_model_dir: Path) -> AppTest:
    # Through the router, so st.page_link finds the pages registered by st.navigation.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["active_model"] = str(tiny_model_dir)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    return at


def test_without_a_model_the_page_points_to_train():
    # Through the router: st.page_link needs the pages registered by st.navigation.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any("No model is active" in i.value for i in at.info)


def test_one_complaint_gets_both_predictions(app: AppTest, tiny_model_dir: Path):
    app.text_area(key="classify.text").set_value("<b>UPI</b> payment failed, money debited")
    app.button(key="FormSubmitter:classify.one-Classify").click().run()
    assert not app.exception
    labels = {m.label: m.value for m in app.metric}
    desks = {"UPI Dispute", "Card Fraud", "Loan Query", "KYC Update"}
    assert labels["Transformer"] in desks and labels["Bag of words"] in desks
    assert labels["Bag of words"] == "UPI Dispute"
    assert labels["Decision"] in desks
    said = f"The decision is made by {load_model(tiny_model_dir).blend.describe()},"
    assert any(c.value.startswith(said) for c in app.caption)


def test_a_blended_model_decides_with_both_and_says_so(tiny_model_dir: Path, tmp_path: Path):
    blended = with_blend(tiny_model_dir, tmp_path / "blended", Blend(0.0))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["active_model"] = str(blended)
    at.run()
    at.switch_page(PAGE).run()
    at.text_area(key="classify.text").set_value("upi payment failed, money debited")
    at.button(key="FormSubmitter:classify.one-Classify").click().run()
    assert not at.exception
    labels = {m.label: m.value for m in at.metric}
    assert labels["Decision"] == labels["Bag of words"]
    assert any("the bag of words alone" in c.value for c in at.caption)


def test_empty_complaint_is_refused(app: AppTest):
    app.button(key="FormSubmitter:classify.one-Classify").click().run()
    assert [e.value for e in app.error] == ["Type a complaint first."]


def test_the_slider_starts_at_the_models_own_threshold_and_the_page_says_its_policy(
    app: AppTest, tiny_model_dir: Path
):
    policy = load_model(tiny_model_dir).review
    assert app.slider(key="classify.threshold").value == round(policy.confidence_threshold, 2)
    assert any(c.value.startswith("This model flags a complaint when it is unsure below")
               for c in app.caption)  # fmt: skip


@pytest.mark.parametrize("text", ["kyc documents rejected", "zzqx vvbn plork"])
def test_threshold_one_flags_everything_for_review_and_says_why(
    app: AppTest, tiny_model_dir: Path, text: str
):
    from core.models.classify import classify_one
    from core.models.flagging import REASON_TEXT

    app.slider(key="classify.threshold").set_value(1.0)
    app.text_area(key="classify.text").set_value(text)
    app.button(key="FormSubmitter:classify.one-Classify").click().run()
    reason = classify_one(load_model(tiny_model_dir), text, review_threshold=1.0).row
    said = REASON_TEXT[reason["review_reason"]]  # unsure, or like none of the desks
    assert any(w.value.startswith(f"Needs review: {said}") for w in app.warning), said


def test_file_keeps_columns_and_order_and_adds_contract_columns(app: AppTest):
    csv = "id,complaint,channel\n7,kyc documents rejected,app\n3,=HYPERLINK(1),email\n5,,chat\n"
    app.file_uploader(key="classify.upload").set_value(("in.csv", csv.encode(), "text/csv")).run()
    app.button(key="classify.start").click().run()
    app.session_state["classify.job"].job.wait(60)
    app.run()
    assert not app.exception
    result: pd.DataFrame = app.dataframe[0].value
    assert list(result["id"]) == ["7", "3", "5"]
    assert list(result.columns[:3]) == ["id", "complaint", "channel"]
    assert set(CONTRACT) <= set(result.columns)
    assert bool(result.loc[2, "needs_review"])  # an empty complaint always goes to a person
    assert sum(c.startswith("prob_") for c in result.columns) == 4


def test_unsure_predictions_go_to_the_triage_queue(
    app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path))
    app.slider(key="classify.threshold").set_value(1.0)  # every prediction is unsure
    csv = "complaint\nkyc documents rejected\nupi refund not received\n"
    app.file_uploader(key="classify.upload").set_value(("q.csv", csv.encode(), "text/csv")).run()
    app.button(key="classify.start").click().run()
    app.session_state["classify.job"].job.wait(60)
    app.run()
    app.button(key="classify.triage").click().run()
    assert not app.exception
    assert any("2 added to the triage queue" in s.value for s in app.success)
    app.button(key="classify.triage").click().run()
    assert any("0 added" in s.value and "2 were already there" in s.value for s in app.success)


def test_file_is_classified_by_its_complaint_column_not_its_id(app: AppTest):
    csv = "id,complaint,channel\n7,kyc documents rejected,app\n3,upi payment failed,email\n"
    app.file_uploader(key="classify.upload").set_value(("ids.csv", csv.encode(), "text/csv")).run()
    assert app.selectbox(key="classify.col.ids.csv").value == "complaint"
    assert not app.warning


def test_file_without_a_recognisable_text_column_asks_instead_of_guessing(app: AppTest):
    csv = "id,code\n1,A\n2,B\n"
    app.file_uploader(key="classify.upload").set_value(
        ("codes.csv", csv.encode(), "text/csv")
    ).run()
    assert app.selectbox(key="classify.col.codes.csv").value is None
    assert any("could not tell which column" in w.value for w in app.warning)
    assert app.button(key="classify.start").disabled


def test_a_control_character_still_downloads_and_the_xlsx_waits_for_a_click(app: AppTest):
    csv = "complaint\nkyc\x0bdocuments rejected\nupi refund\r=1+1\n"  # \x0b: XLSX cannot hold it
    app.file_uploader(key="classify.upload").set_value(("vt.csv", csv.encode(), "text/csv")).run()
    app.button(key="classify.start").click().run()
    app.session_state["classify.job"].job.wait(60)
    app.run()
    assert not app.exception
    assert [b.proto.label for b in app.get("download_button")] == ["Download CSV"]
    app.button(key="classify.xlsx.prepare").click().run()
    assert not app.exception
    assert [b.proto.label for b in app.get("download_button")] == ["Download CSV", "Download XLSX"]


def test_without_a_model_a_saved_model_of_this_data_set_is_one_click_away(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import json
    import shutil

    from core.data.demo import DemoConfig, generate_demo_data
    from core.data.validation import validate
    from ui.datasets import DEMO_NAME
    from ui.state import ActiveDataset

    demo, report = validate(generate_demo_data(DemoConfig()), text_col="text", label_col="desk")
    folder = shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny-demo")
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    card["data_fingerprint"] = demo.fingerprint  # as if trained on the demo data
    (folder / "card.json").write_text(json.dumps(card), encoding="utf-8")
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not any(b.key == "first_model.first.use" for b in at.button)  # no data set yet
    at.button(key="first_model.first.quick")  # the quick model is offered instead

    at.session_state["active_dataset"] = ActiveDataset(DEMO_NAME, demo, report)
    at.run()
    at.button(key="first_model.first.use").click().run()
    assert not at.exception
    assert at.session_state["active_model"] == str(folder)
    assert any(t.key == "classify.text" for t in at.text_area)  # the page itself now
