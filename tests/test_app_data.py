"""AppTest for the Data page: upload through the file uploader, the demo button, the baseline."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
CSV = (
    b"id,complaint,desk\n"
    b"1,UPI payment failed but money debited,UPI Dispute\n"
    b"2,Card used for a purchase I never made,Card Fraud\n"
    b"3,,Card Fraud\n"
    b"4,EMI charged twice on my home loan,Loan Query\n"
    b"5,Please update my KYC address,KYC Update\n"
    b"6,UPI refund not received after 5 days,UPI Dispute\n"
    b"7,**Card** blocked after [fraud](http://127.0.0.1:9/x) alert,Card Fraud\n"
    b"8,Loan statement not received,\n"
)


@pytest.fixture()
def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_first_visit_invites_to_load_data(app: AppTest):
    assert app.title[0].value == "Data"
    assert any("Upload a spreadsheet or use the demo data" in i.value for i in app.info)


def test_upload_shows_report_with_dropped_rows(app: AppTest):
    app.file_uploader[0].set_value(("complaints.csv", CSV, "text/csv"))
    app.run()
    assert not app.exception
    assert _metric(app, "Rows read") == "8"
    assert _metric(app, "Rows kept") == "6"
    assert _metric(app, "Dropped") == "2"
    dropped = app.dataframe[0].value
    assert dropped.to_dict("records") == [
        {"row": 4, "reason": "empty text"},
        {"row": 9, "reason": "missing label"},
    ]
    assert [s.value for s in app.selectbox[:2]] == ["complaint", "desk"]


def test_bad_file_gets_one_clear_error(app: AppTest):
    app.file_uploader[0].set_value(("complaints.csv", b"\x00\x01\x02garbage\xff\xfe", "text/csv"))
    app.run()
    assert not app.exception
    assert len(app.error) == 1
    assert "Traceback" not in app.error[0].value


def test_wrong_label_column_is_reported_not_crashed(app: AppTest):
    app.file_uploader[0].set_value(("complaints.csv", CSV, "text/csv"))
    app.run()
    app.selectbox[1].set_value("id").run()  # numeric ids as labels: every label is unique
    assert not app.exception
    assert app.error or app.warning


def test_demo_button_then_baseline(app: AppTest):
    app.button(key="data.demo").click().run()
    assert not app.exception
    assert int(_metric(app, "Rows kept").replace(",", "")) >= 2000
    assert _metric(app, "Desks") == "5"
    app.button(key="FormSubmitter:data.baseline_form-Train the baseline").click().run()
    assert not app.exception
    accuracy = float(_metric(app, "Accuracy").rstrip("%")) / 100
    twins = float(_metric(app, "Accuracy on word-order twins").rstrip("%")) / 100
    assert accuracy > 0.7
    assert twins < accuracy  # the bag of words is capped on twins


def test_a_control_character_still_downloads_and_the_xlsx_waits_for_a_click(app: AppTest):
    upload = CSV + b"9,KYC\x0bform rejected;=1+1,KYC Update\n"  # \x0b: XLSX cannot hold it
    app.file_uploader[0].set_value(("complaints.csv", upload, "text/csv")).run()
    assert not app.exception
    labels = [b.proto.label for b in app.get("download_button")]
    assert labels == ["Download cleaned CSV"]
    app.button(key="data.download_xlsx.prepare").click().run()
    assert not app.exception
    labels = [b.proto.label for b in app.get("download_button")]
    assert labels == ["Download cleaned CSV", "Download cleaned XLSX"]
