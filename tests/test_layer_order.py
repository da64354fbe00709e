"""The layers of core import one way only (DESIGN.md, "core layout"): what everything shares at
the bottom, then data, models, analysis, the services that run and guard them, and only then
the UI. A module may import its own layer and the layers below it, never one above."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module's layer is the first prefix (of its dotted name) listed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the shared bottom: words, checks, paths, metrics, errors, progress, the roles vocabulary
    (
        "core.text",
        "core.checks",
        "core.paths",
        "core.metrics",
        "core.errors",
        "core.progress",
        "core.numeric",
        "core.access",
        "core.memo",
    ),  # fmt: skip
    ("core.data",),
    ("core.models",),
    ("core.analysis", "core.lab", "core.board"),  # the routing board reads data only
    ("core.charts",),
    (
        "core.jobs",
        "core.eta",  # the queue's ETAs
        "core.queue_config",  # the queue's caps
        "core.scratch_folders",  # the queue's per-session scratch folders
        "core.tasks",
        "core.roles",
        "core.exposure",
        "core.review",
        "core.scale",
        "core.cli",
        "core.__main__",
    ),  # fmt: skip
    ("ui",),
    ("pages", "app"),
)


def layer_of(module: str) -> int | None:
    if module == "core":  # the package itself: a docstring, below everything
        return 0
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str) -> set[str]:
    """Every module `source` imports, at the top or inside functions (type-only imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)  # and `from core import cli` imports core.cli:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def upward_imports(module: str, source: str) -> list[str]:
    """The imports of `module` (its `source`) that reach a layer above its own."""
    here = layer_of(module)
    above = [name for name in imported(source) if (layer_of(name) or 0) > here]
    return [f"{module} imports {name}" for name in sorted(above)]


def sources() -> list[Path]:
    return [
        ROOT / "app.py",
        *(p for d in ("core", "ui", "pages") for p in (ROOT / d).rglob("*.py")),
    ]


def test_every_module_has_a_layer():
    unplaced = [module_name(p) for p in sources() if layer_of(module_name(p)) is None]
    assert unplaced == []


def test_imports_never_go_up_a_layer():
    upward = [
        line
        for path in sources()
        for line in upward_imports(module_name(path), path.read_text(encoding="utf-8"))
    ]
    assert upward == []


def test_the_checker_sees_an_upward_import():
    """The rule itself: the imports this change removed would fail it."""
    queue_in_models = "def start():\n    from core.jobs import JobQueue\n"
    assert upward_imports("core.models.training_job", queue_in_models) == [
        "core.models.training_job imports core.jobs",
        "core.models.training_job imports core.jobs.JobQueue",
    ]
    assert upward_imports("core.models.transformer.loop", "from core.analysis import metrics")
    assert upward_imports("core.models.tiny.model", "import core.lab.self_attention")
    assert upward_imports("ui.jobs", "from pages import train")
    assert upward_imports("core.models.loop", "from core.metrics import evaluate_proba") == []
    assert upward_imports("pages.train", "from core.tasks.training import start_training") == []
