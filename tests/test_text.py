from core.text import bag_key, bag_of_words, word_spans, words


def test_words_are_lower_cased_word_characters():
    assert words("Paid ₹500 by UPI, not by Card!") == [
        "paid",
        "500",
        "by",
        "upi",
        "not",
        "by",
        "card",
    ]


def test_reordered_texts_share_a_bag():
    a, b = "I paid by card, not by UPI", "I paid by UPI, not by card"
    assert bag_of_words(a) == bag_of_words(b)
    assert bag_key(a) == bag_key(b)
    assert bag_key(a) != bag_key("I paid by UPI, not card")


def test_word_spans_keep_casing_and_offsets():
    text = "KYC pending — मेरा account"
    spans = word_spans(text)
    assert [s.text for s in spans] == ["KYC", "pending", "मेरा", "account"]
    assert all(text[s.start : s.end] == s.text for s in spans)
