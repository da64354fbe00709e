import re

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
