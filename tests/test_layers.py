"""core/ must stay importable without Streamlit: the UI is a thin layer over it."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_streamlit():
    offenders = [p.name for p in CORE.rglob("*.py") if "streamlit" in _imported_modules(p)]
    assert offenders == []
    assert len(list(CORE.rglob("*.py"))) >= 3
