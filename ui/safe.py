"""Render untrusted strings (complaint text, column and label names) without interpreting them."""

import re
import string

# CommonMark lets a backslash escape any ASCII punctuation, which neutralises emphasis, links,
# images, raw HTML, entities, tables, headings, LaTeX ($) and Streamlit's :emoji: and
# :color[...] syntax.
_MARKDOWN_SPECIALS = frozenset(string.punctuation)
# Streamlit's renderer (remark-gfm) turns bare "https://…", "www.…" and "a@b.c" into links
# after parsing, on the already unescaped text, so backslashes cannot stop it. An invisible
# WORD JOINER after a ":" or "@" that text follows ("https:", "mailto:", "a@b"), and between
# "www" and ".", breaks those patterns without changing what a reader sees.
WORD_JOINER = "\u2060"
_AUTOLINK_TRIGGERS = re.compile(r"(?<=[:@])(?=\S)|(?<=www)(?=\.)", re.IGNORECASE)


def md_escape(text: object) -> str:
    """`text` as Markdown that displays literally, on one line.

    For every Streamlit string parsed as Markdown: `st.markdown`/`st.caption`/`st.info`… bodies,
    widget labels and `help=` tooltips, metric labels and values, tab and expander titles, and
    the options of `st.radio`, `st.pills`, `st.segmented_control` and `st.select_slider`. Not for
    `st.selectbox`/`st.multiselect` options or `st.text`/`st.dataframe`, which show text as is.
    """
    flat = " ".join(str(text).split())
    joined = _AUTOLINK_TRIGGERS.sub(WORD_JOINER, flat)
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in joined)
