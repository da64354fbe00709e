"""core/ must stay importable without Streamlit: the UI is a thin layer over it."""

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core"
# Starts the app in a fresh interpreter (the test process has torch loaded already) and prints
# which heavy libraries the start pulled in.
STARTUP = f"""
import sys
from streamlit.testing.v1 import AppTest
import ui.state
assert "torch" not in sys.modules, "importing ui.state imported torch"
at = AppTest.from_file({str(CORE.parent / "app.py")!r}, default_timeout=60).run()
assert not at.exception, at.exception
at.switch_page("pages/label_audit.py").run()  # a bag-of-words audit needs no torch either
assert not at.exception, at.exception
print([name for name in ("torch", "transformers") if name in sys.modules])
"""


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


def test_starting_the_app_does_not_import_torch():
    """app.py, ui.state, the default page (Data) and the Label audit page, nothing loaded, start
    without torch."""
    done = subprocess.run(
        [sys.executable, "-c", STARTUP],
        cwd=CORE.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
