"""Render untrusted strings (complaint text, column and label names) without interpreting them."""

import string

# CommonMark lets a backslash escape any ASCII punctuation, which neutralises emphasis, links,
# images, raw HTML, tables, headings, LaTeX ($) and Streamlit's :emoji: and :color[...] syntax.
_MARKDOWN_SPECIALS = frozenset(string.punctuation)


def md_escape(text: object) -> str:
    """`text` as Markdown that displays literally, on one line."""
    flat = " ".join(str(text).split())
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in flat)
