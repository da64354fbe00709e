import json
import re

import numpy as np
import pytest

from core.data.privacy import PLACEHOLDERS, mask_personal_data, mask_texts
from core.text import words

MASKED = [
    ("card 4111 1111 1111 0000 blocked", "card [CARD_NO] blocked"),
    ("charged on 4111111111110000", "charged on [CARD_NO]"),
    ("card 4111-1111-1111-1111.", "card [CARD_NO]."),
    ("amex 3782 822463 10005", "amex [CARD_NO]"),
    ("aadhaar 2345 6789 0123 linked", "aadhaar [AADHAAR_NO] linked"),
    ("Aadhaar card 234567890123", "Aadhaar card [AADHAAR_NO]"),
    ("call +91 98765 43210 now", "call [PHONE_NO] now"),
    ("call +91-9876543210", "call [PHONE_NO]"),
    ("my number 9876543210.", "my number [PHONE_NO]."),
    ("ring 09876543210 or 987 654 3210", "ring [PHONE_NO] or [PHONE_NO]"),
    ("branch 022-24567890", "branch [PHONE_NO]"),
    ("office (0124) 2345678", "office [PHONE_NO]"),
    ("wrote to rahul.s@gmail.com.", "wrote to [EMAIL_ID]."),
    ("paid rahul@okaxis.", "paid [UPI_ID]."),
    ("sent to 9876543210@ybl", "sent to [UPI_ID]"),
    ("PAN ABCDE1234F and pan abcde1234f", "PAN [PAN_NO] and pan [PAN_NO]"),
    ("a/c 123456789 frozen", "a/c [ACCOUNT_NO] frozen"),
    ("debited from 50100123456789", "debited from [CARD_NO]"),
    ("debited from 123456789012", "debited from [ACCOUNT_NO]"),
    ("UTR 312345678901 failed", "UTR [REF_NO] failed"),
    ("UPI Ref No. 312345678901", "UPI Ref No. [REF_NO]"),
    ("customer id CIF1234567890", "customer id CIF[LONG_NO]"),
    ("x" + "1" * 25, "x[LONG_NO]"),
]

KEPT = [
    "Rs. 25000 debited on 12/05/2024 at 10:30 am",
    "₹5,00,000 and ₹37,050.50 for 2 days",
    "EMI of Rs 12500 since 2024-05-12, 3 months",
    "card XXXX XXXX XXXX 1234, a/c XXXXXX5678, aadhaar XXXX XXXX 9012",
    "ticket SR12345678, CMP-87654321, customer CIF123456789",
    "tweeted @HDFC_Bank about the 2024 charge",
    "pin code 560001, OTP 482913",
    "Nahi mila refund, 3 baar call kiya",
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_each_kind_of_personal_data_gets_its_placeholder(text, expected):
    assert mask_personal_data(text) == expected


@pytest.mark.parametrize("text", KEPT)
def test_amounts_dates_short_numbers_and_masked_numbers_are_kept(text):
    assert mask_personal_data(text) == text


def test_masking_is_idempotent():
    once = mask_texts([text for text, _ in MASKED] + KEPT)
    assert mask_texts(once) == once


def test_no_long_digit_run_e_mail_or_upi_id_survives():
    text = " ".join(t for t, _ in MASKED)
    masked = mask_personal_data(text)
    assert not re.search(r"\d{10,}", masked) and "@" not in masked


def test_email_wins_over_upi_id_and_the_dotless_handle_is_upi():
    assert mask_personal_data("a.b@okaxis.com") == "[EMAIL_ID]"
    assert mask_personal_data("a.b@okaxis") == "[UPI_ID]"


def test_a_shorter_shape_never_takes_part_of_a_longer_number():
    # 12 digits starting 9: not a mobile plus two digits, an account.
    assert mask_personal_data("987654321012") == "[ACCOUNT_NO]"
    assert mask_personal_data("41111111111100009") == "[CARD_NO]"  # 17 digits, one card


def test_each_placeholder_is_one_word_that_is_no_ordinary_word():
    for placeholder in PLACEHOLDERS.values():
        assert len(words(placeholder)) == 1
        assert words(placeholder)[0] not in {"card", "phone", "email", "upi", "pan", "account"}


def test_mask_texts_keeps_order_and_refuses_non_strings():
    assert mask_texts(["9876543210", "hello"]) == ["[PHONE_NO]", "hello"]
    with pytest.raises(ValueError, match="must be a string"):
        mask_personal_data(None)


# --------------------------------------------------------------------------- saved models

# Injected on top of the demo data's own UTRs and UPI ids; "zqx" marks the names so the scan can
# also look for the pieces a tokenizer would keep of an e-mail address or UPI id.
INJECTED = [
    ("Card Fraud", "Card 4111111111110000 was charged at night, call me on +919876543210"),
    ("Card Fraud", "Someone used card 5500000000000004, my mail is zqxpriya.test@gmail.com"),
    ("UPI Dispute", "Sent money to zqxrahul@okaxis from 9876501234@ybl but it failed"),
    ("UPI Dispute", "Refund to a/c 123456789012 pending, phone 09812345678"),
    ("KYC Update", "Aadhaar 234567890123 and PAN ZQXAB1234C submitted for KYC"),
    ("Loan Query", "Loan account 50100123456789 EMI wrong, write to zqxloan@bank.co.in"),
]
UPI_HANDLES = "okaxis|ybl|paytm|okhdfcbank|oksbi|okicici|ibl|axl|upi"
LEAKS = re.compile(
    r"(?P<digits>\d{10,})"
    r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})"
    rf"|(?P<upi>[A-Za-z0-9._-]+@(?:{UPI_HANDLES})\b)"
    r"|(?P<name>zqx\w*)",
    re.IGNORECASE,
)
# Not personal data: sha256 fingerprints and the digits of floats (metrics, losses) in JSON.
NOT_TEXT = re.compile(r"\b[0-9a-f]{40,64}\b|\d*\.\d+(?:e[-+]?\d+)?", re.IGNORECASE)


def leaks_in(text: str) -> list[str]:
    return [m.group() for m in LEAKS.finditer(NOT_TEXT.sub(" ", text))]


def leaks_in_folder(folder) -> dict[str, list[str]]:
    """Every file's bytes (as UTF-8, bad bytes dropped) and every npz string array, scanned."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        texts = [path.read_bytes().decode("utf-8", errors="ignore")]
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                texts += [
                    " ".join(npz[k].ravel().tolist()) for k in npz if npz[k].dtype.kind in "US"
                ]
        hits = [hit for text in texts for hit in leaks_in(text)]
        if hits:
            found[path.name] = sorted(set(hits))
    return found


def train_and_save_on_demo_data(folder):
    from core.access import OPERATOR
    from core.data.dataset import Dataset, split_dataset
    from core.data.demo import DemoConfig, generate_demo_data
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    demo = generate_demo_data(DemoConfig(rows=120, seed=3))
    labels = demo["desk"].tolist() + [label for label, _ in INJECTED]
    texts = demo["text"].tolist() + [text for _, text in INJECTED]
    train, val = split_dataset(Dataset(texts, labels), val_fraction=0.2, seed=0)
    config = TrainConfig(backbone="tiny", lr=1e-3, epochs=1, max_steps=3, batch_size=16)
    result = train_models(train, val, config)
    return save_model(result, folder.parent, folder.name, actor=OPERATOR)


@pytest.fixture(scope="module")
def demo_model_dir(tmp_path_factory):
    return train_and_save_on_demo_data(tmp_path_factory.mktemp("models") / "demo-model")


def test_a_model_trained_on_demo_data_saves_no_number_e_mail_or_upi_id(demo_model_dir):
    folder = demo_model_dir
    assert {"vocab.json", "baseline.npz", "card.json"} <= {p.name for p in folder.iterdir()}
    assert leaks_in_folder(folder) == {}


def test_without_masking_the_same_scan_finds_the_numbers(tmp_path, monkeypatch):
    """The scan above can fail: with masking switched off, it finds what masking removes."""
    import core.models.bag_of_words
    import core.models.transformer.training

    monkeypatch.setattr(core.models.bag_of_words, "mask_personal_data", lambda text: text)
    monkeypatch.setattr(core.models.transformer.training, "mask_dataset", lambda data: data)
    found = leaks_in_folder(train_and_save_on_demo_data(tmp_path / "raw-model"))
    assert {"4111111111110000", "zqxpriya", "zqxrahul"} <= set(found["vocab.json"])
    assert "4111111111110000" in found["baseline.npz"]


def test_leak_scan_ignores_fingerprints_and_floats():
    assert leaks_in('{"accuracy": 0.8333333333333334, "fp": "' + "1234567890" * 6 + 'abcd"}') == []
    assert leaks_in('["4111111111110000", "a@okaxis"]') == ["4111111111110000", "a@okaxis"]


def test_both_models_mask_at_prediction_time_as_in_training(demo_model_dir):
    from core.data.privacy import MASKING_VERSION
    from core.models.registry import load_model

    model = load_model(demo_model_dir)
    # A reference number never seen in training reads as the "[REF_NO]" the models learned,
    # not as an unknown word.
    new, learned, unknown = "UTR 498765432109 failed", "UTR [REF_NO] failed", "UTR zzqq failed"
    for classifier in (model.neural, model.bow):
        probs = classifier.predict_proba([new, learned, unknown])
        np.testing.assert_array_equal(probs[0], probs[1])
        assert not np.array_equal(probs[0], probs[2])
    contributions = model.bow.word_contributions("card 4111111111119999 stolen")
    assert [w.text for w in contributions.words] == ["card", "CARD_NO", "stolen"]
    for name in ("baseline.json", "card.json"):
        meta = json.loads((demo_model_dir / name).read_text(encoding="utf-8"))
        assert meta["text_masking"] == MASKING_VERSION, name
