"""One feature per file (ARCHITECTURE.md, "Packages and modules"): no module of core holds more
than 600 lines of code, so a module that grows past it is split along its features, not scrolled.
Data tables (the demo data's phrase lists) are not code and are left out."""

import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES_OF_CODE = 600
DATA_TABLES = {"core/data/demo_phrases.py"}
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}  # fmt: skip


def lines_of_code(source: str) -> int:
    """Lines holding at least one token that is not a comment or blank (docstrings count)."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines)


def test_lines_of_code_counts_code_and_docstrings_not_comments_or_blanks():
    source = (
        '"""Doc\nstring."""\n\n# a comment\nx = 1  # trailing\n\n'
        "def f():\n    return (\n        x\n    )\n"
    )
    assert lines_of_code(source) == 2 + 1 + 4


def test_no_module_of_core_is_over_the_limit():
    sizes = {
        str(path.relative_to(ROOT)): lines_of_code(path.read_text(encoding="utf-8"))
        for path in sorted((ROOT / "core").rglob("*.py"))
    }
    over = {
        name: n for name, n in sizes.items() if n > MAX_LINES_OF_CODE and name not in DATA_TABLES
    }
    assert not over, f"split these modules along their features: {over}"
