"""AppTest for the Order probes page: the probe table with its plain-words note, the positional
ablation, the card/UPI demonstration, and the data set scan run as a background job."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.analysis.probe_compare import DEMO_TEXT
from core.jobs import JobStatus
from ui.state import ACTIVE_MODEL, PROBE_SCAN

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "order_probes.py")
HOSTILE = "<img src=x onerror=alert(1)> paid by card, not by UPI ![x](http://127.0.0.1:9/x.png)"


def _open(model: Path) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state[ACTIVE_MODEL] = str(model)
    at.run()
    assert not at.exception, at.exception
    return at


def test_without_a_model_the_page_points_to_train():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any("No model is active" in i.value for i in at.info)


def test_probe_table_note_ablation_and_demonstration(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    assert any("**cannot** change its answer" in i.value for i in at.info)
    probes = at.dataframe[0].value
    assert {"kind", "same bag of words", "text", "transformer", "bag of words"} <= set(probes)
    same_bag = probes[probes["same bag of words"]]
    assert len(same_bag) and not same_bag["bag of words flipped"].any()
    swap = "I paid ₹2,500 to Croma by UPI, not by card, and was charged twice."
    assert swap in probes["text"].tolist()
    ablation = at.dataframe[1].value
    assert ablation["variant"].tolist() == ["normal", "shuffled positions", "one position"]
    demo = at.dataframe[2].value
    assert demo["complaint"].tolist() == [DEMO_TEXT, swap]
    assert demo["bag of words"].nunique() == 1  # equal bags, equal answers


def test_hostile_complaint_is_probed_as_text(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.text_area(key="probes.text").set_value(HOSTILE)
    at.button(key="FormSubmitter:probes.form-Probe").click().run()
    assert not at.exception
    texts = at.dataframe[0].value["text"].tolist()
    assert any("onerror=alert(1)" in t for t in texts)


def test_mean_pooled_tiny_model_explains_why_there_is_no_ablation(tiny_model_dir):
    at = _open(tiny_model_dir)
    assert any("Not available for this model" in i.value for i in at.info)


def test_scan_runs_in_the_background_and_shows_its_tables(tiny_bert_cls_model_dir):
    at = _open(tiny_bert_cls_model_dir)
    at.button(key="probes.use_demo").click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Same-bag groups with several desks"].replace(",", "")) > 50
    at.number_input(key="probes.rows").set_value(60)
    at.number_input(key="probes.prows").set_value(10)
    at.button(key="FormSubmitter:probes.scan_form-Scan with both models").click().run()
    assert not at.exception
    run = at.session_state[PROBE_SCAN]
    assert run.job.wait(timeout=120).status is JobStatus.DONE
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Rows classified"] == "60"
    headers = [t.label for t in at.tabs]
    assert any(h.startswith("Only the transformer is right") for h in headers)
    stats = at.dataframe[-1].value
    assert "transformer flip rate" in stats.columns and len(stats) >= 3
