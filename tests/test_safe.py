import re

import pytest

from ui.safe import WORD_JOINER, md_escape

J = WORD_JOINER


def test_markdown_specials_are_escaped():
    assert md_escape("**bold** [x](http://a) ![i](u) <b>") == (
        rf"\*\*bold\*\* \[x\]\(http\:{J}\/\/a\) \!\[i\]\(u\) \<b\>"
    )


def test_plain_words_and_unicode_untouched_and_flattened():
    assert md_escape("मेरा UPI  fail\nho gaya ₹500") == r"मेरा UPI fail ho gaya ₹500"


def test_the_reported_button_label_is_literal():
    label = "Confirm ![](https://attacker.example/b.png) [UPI Dispute](https://phish.example)"
    assert md_escape(label) == (
        rf"Confirm \!\[\]\(https\:{J}\/\/attacker\.example\/b\.png\) "
        rf"\[UPI Dispute\]\(https\:{J}\/\/phish\.example\)"
    )


@pytest.mark.parametrize(
    ("hostile", "escaped"),
    [
        ("<img src=x onerror=alert(1)>", r"\<img src\=x onerror\=alert\(1\)\>"),
        ("<script>alert(1)</script>", r"\<script\>alert\(1\)\<\/script\>"),
        ("&lt;b&gt; &#60;", r"\&lt\;b\&gt\; \&\#60\;"),  # entities stay literal
        ("$x^2$ and $$y$$", r"\$x\^2\$ and \$\$y\$\$"),  # no LaTeX
        ("`code` ```block```", r"\`code\` \`\`\`block\`\`\`"),
        (":smile: :material/bolt:", rf"\:{J}smile\: \:{J}material\/bolt\:"),
        (":red[alarm] :blue-background[x]", rf"\:{J}red\[alarm\] \:{J}blue\-background\[x\]"),
        ("# Heading", r"\# Heading"),
        ("1. item", r"1\. item"),
        ("> quote | table |", r"\> quote \| table \|"),
        ("a\\b", r"a\\b"),  # a backslash cannot escape the escape
    ],
)
def test_hostile_markdown_and_html_are_escaped(hostile: str, escaped: str):
    assert md_escape(hostile) == escaped


@pytest.mark.parametrize(
    ("hostile", "escaped"),
    [
        ("https://phish.example", rf"https\:{J}\/\/phish\.example"),
        ("HTTP://PHISH.EXAMPLE", rf"HTTP\:{J}\/\/PHISH\.EXAMPLE"),
        ("see www.phish.example", rf"see www{J}\.phish\.example"),
        ("WWW.phish.example", rf"WWW{J}\.phish\.example"),
        ("mail a@phish.example", rf"mail a\@{J}phish\.example"),
        ("mailto:a", rf"mailto\:{J}a"),
    ],
)
def test_bare_links_are_broken_with_an_invisible_joiner(hostile: str, escaped: str):
    """remark-gfm links bare URLs and e-mails on the unescaped text: backslashes cannot stop it."""
    assert md_escape(hostile) == escaped
    shown = md_escape(hostile).replace("\\", "").replace(J, "")
    assert shown == hostile
    assert not re.search(r"https?://|www\.|[\w.+-]@\w", md_escape(hostile).replace("\\", ""))


def test_newlines_and_tabs_become_one_line():
    assert md_escape("line one\n\n- item\r\n\tline two  ") == r"line one \- item line two"


def test_a_colon_before_a_space_gets_no_joiner():
    assert md_escape("Saved: row 3") == r"Saved\: row 3"


def test_non_strings_are_rendered_with_str():
    assert md_escape(ValueError("bad [file]")) == r"bad \[file\]"
    assert md_escape(3.5) == r"3\.5"


@pytest.mark.parametrize(
    "hostile",
    [
        "Confirm ![](https://attacker.example/b.png) [UPI Dispute](https://phish.example)",
        "<img src=x onerror=alert(1)> <script>alert(1)</script> $x$ :smile: `x` **b**",
        "a@b.example www.x.example http://y.example ~~s~~ _i_ [^1] [a]: http://z",
    ],
)
def test_every_ascii_punctuation_is_escaped_and_the_text_survives(hostile: str):
    escaped = md_escape(hostile)
    unescaped = re.sub(r"\\(.)", r"\1", escaped).replace(J, "")
    assert unescaped == hostile
    assert not re.search(r"(?<!\\)[!\[\]()<>`*$:&_~]", escaped.replace("\\\\", ""))
