"""Every widget callback of the app goes through `ui.errors.guarded` (ARCHITECTURE.md, "Errors"):
Streamlit runs callbacks before the page, outside its error wrapper, so an unwrapped one would
show a bug as Streamlit's traceback. Read from the source with `ast`, so a new callback that
forgets it fails here, not in front of a user."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLBACK_KEYWORDS = {"on_click", "on_change", "on_submit"}
# Streamlit's own sign-in and sign-out, and its built-in "rerun": no code of ours runs in them.
STREAMLIT_OWN = {"st.login", "st.logout"}


def unguarded_callbacks(source: str) -> list[str]:
    """`keyword=value` of every callback keyword whose value is not `guarded(...)`, a string or
    one of Streamlit's own functions."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg not in CALLBACK_KEYWORDS:
                continue
            value = keyword.value
            is_guarded = (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "guarded"
            )
            shown = ast.unparse(value)
            if not (is_guarded or isinstance(value, ast.Constant) or shown in STREAMLIT_OWN):
                found.append(f"{keyword.arg}={shown} (line {node.lineno})")
    return found


def test_the_checker_finds_an_unguarded_callback():
    assert unguarded_callbacks("st.button('x', on_click=save)") == ["on_click=save (line 1)"]
    assert unguarded_callbacks("st.button('x', on_click=guarded(save), args=(1,))") == []
    assert unguarded_callbacks("st.tabs(['a'], on_change='rerun')") == []


def test_every_callback_of_the_pages_and_ui_is_guarded():
    found = {
        str(path.relative_to(ROOT)): unguarded
        for folder in ("pages", "ui")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (unguarded := unguarded_callbacks(path.read_text(encoding="utf-8")))
    }
    assert not found, f"wrap these in ui.errors.guarded: {found}"
