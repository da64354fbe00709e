"""The Data page in a real browser: upload a CSV, see the report, load the demo data."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

CSV = (
    "id,complaint,desk\n"
    "1,UPI payment failed but money debited,UPI Dispute\n"
    "2,Card used for a purchase I never made,Card Fraud\n"
    "3,,Card Fraud\n"
    "4,EMI charged twice on my home loan,Loan Query\n"
    "5,Please update my KYC address,KYC Update\n"
    "6,UPI refund not received after 5 days,UPI Dispute\n"
    "7,Card blocked after fraud alert,Card Fraud\n"
    "8,Loan statement not received,\n"
    '9,"<img src=x onerror=alert(1)> **bold** KYC pending",KYC Update\n'
)


def test_upload_csv_shows_validation_report(page, tmp_path: Path):
    upload = tmp_path / "complaints.csv"
    upload.write_text(CSV, encoding="utf-8")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    page.locator("input[type=file]").set_input_files(str(upload))

    expect(page.get_by_text("Validation report: complaints.csv")).to_be_visible()
    expect(page.get_by_test_id("stMetric").filter(has_text="Rows read")).to_contain_text("9")
    expect(page.get_by_test_id("stMetric").filter(has_text="Rows kept")).to_contain_text("7")
    page.get_by_role("tab", name="Dropped rows (2)").click()
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
    assert dialogs == []


def test_demo_data_then_bag_of_words(page):
    page.get_by_role("button", name="Use the demo data").click()
    expect(page.get_by_text("Validation report: Built-in demo data")).to_be_visible()
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Data set: Built-in demo data")
    page.get_by_role("button", name="Train the bag of words").click()
    expect(page.get_by_text("Accuracy on word-order twins")).to_be_visible()
    expect(page.get_by_test_id("stMetric").filter(has_text="Macro F1")).to_contain_text("0.")
