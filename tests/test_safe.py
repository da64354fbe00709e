from ui.safe import md_escape


def test_markdown_specials_are_escaped():
    assert md_escape("**bold** [x](http://a) ![i](u) <b>") == (
        r"\*\*bold\*\* \[x\]\(http\:\/\/a\) \!\[i\]\(u\) \<b\>"
    )


def test_plain_words_and_unicode_untouched_and_flattened():
    assert md_escape("मेरा UPI  fail\nho gaya ₹500") == r"मेरा UPI fail ho gaya ₹500"
