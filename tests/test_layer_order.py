"""The layers of core import one way only (ARCHITECTURE.md, "Layers"): what everything shares at
the bottom, then data, models, analysis, the services that run and guard them, and only then
the UI. A module may import its own layer and the layers below it, never one above."""

import ast
from collections.abc import Callable
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
        "core.pending",  # changes recorded before they are seen (models, data sets)
    ),  # fmt: skip
    ("core.data",),
    ("core.models",),
    # the routing board reads data only; the monitor works out its report from counts
    ("core.analysis", "core.lab", "core.board", "core.monitor"),
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
        "core.intake",  # the intake API: tokens, the inbox, its views
        "core.scale",
        "core.cli",
        "core.__main__",
    ),  # fmt: skip
    ("ui",),
    ("pages", "app"),
)


# Inside core.models, lowest first: the shared base every model uses, each model's package, then
# the modules that assemble saved models from them. Every module of core.models is listed.
MODEL_LAYERS: tuple[tuple[str, ...], ...] = (
    # the shared base: the classifier contract, devices, seeds, weight headers, cards, the
    # from-scratch base, and the bag of words with its blend, flags and evaluation (the
    # transformer package's training uses those four)
    (
        "core.models.classifier",
        "core.models.hardware",  # what the machine allows, without torch
        "core.models.device",
        "core.models.graph",  # the serving graph on ONNX Runtime
        "core.models.seeding",
        "core.models.weights",
        "core.models.card",
        "core.models.changes",
        "core.models.scratch",
        "core.models.bag_of_words",
        "core.models.blend",
        "core.models.flagging",
        "core.models.profile",  # the validation rows as routed: the live monitor's baseline
        "core.models.evaluation",
    ),  # fmt: skip
    ("core.models.tiny",),  # the tiny transformer and the word tokenizer
    ("core.models.lstm",),  # reads with the tiny package's word tokenizer
    ("core.models.transformer",),  # fine-tuning, and the training that builds every backbone
    # assembly: saved models, the classify service, their cache and the training job
    (
        "core.models.serving",  # what routes: the serving graph or torch
        "core.models.torch_loading",  # a saved folder's members loaded into torch
        "core.models.registry",
        "core.models.classify",
        "core.models.cache",
        "core.models.training_job",
    ),  # fmt: skip
)


def rank_in(layers: tuple[tuple[str, ...], ...], module: str) -> int | None:
    """The index of the first layer of `layers` one of whose prefixes names `module`."""
    for rank, prefixes in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def layer_of(module: str) -> int | None:
    if module == "core":  # the package itself: a docstring, below everything
        return 0
    return rank_in(LAYERS, module)


def model_layer_of(module: str) -> int | None:
    """The level of a core.models module (None outside core.models)."""
    if module == "core.models":  # the package itself: a docstring, in the base
        return 0
    if not module.startswith("core.models."):
        return None
    return rank_in(MODEL_LAYERS, module)


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


def imports_above(module: str, source: str, level_of: Callable[[str], int | None]) -> list[str]:
    """The imports of `module` (its `source`) that reach a level above its own by `level_of`
    (none when `level_of` does not place `module`)."""
    here = level_of(module)
    if here is None:
        return []
    above = [name for name in imported(source) if (level_of(name) or 0) > here]
    return [f"{module} imports {name}" for name in sorted(above)]


def upward_imports(module: str, source: str) -> list[str]:
    """The imports of `module` that reach a layer above its own."""
    return imports_above(module, source, layer_of)


def upward_model_imports(module: str, source: str) -> list[str]:
    """The imports of a core.models `module` that reach a level of core.models above its own (a
    model's package from the base, another package above it); outside core.models, none."""
    return imports_above(module, source, model_layer_of)


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


def model_sources() -> list[Path]:
    return sorted((ROOT / "core" / "models").rglob("*.py"))


def test_every_model_module_has_a_level():
    """A new module of core.models is placed in MODEL_LAYERS on purpose."""
    unplaced = [module_name(p) for p in model_sources() if model_layer_of(module_name(p)) is None]
    assert unplaced == [], f"add these to MODEL_LAYERS in {Path(__file__).name}: {unplaced}"


def test_model_imports_never_go_up_a_level():
    upward = [
        line
        for path in model_sources()
        for line in upward_model_imports(module_name(path), path.read_text(encoding="utf-8"))
    ]
    assert upward == [], (
        "core.models imports one way: base < tiny < lstm < transformer < assembly "
        "(MODEL_LAYERS); move what both sides need down to the lower one:\n" + "\n".join(upward)
    )


def test_the_model_checker_sees_an_upward_import():
    """The base never reaches into a model's package (the import this change removed), and
    a package never reaches into one above it; assembly may import them all."""
    up = upward_model_imports
    helper_from_tiny = "from core.models.tiny.tokenizer import read_saved_json"
    assert up("core.models.scratch", helper_from_tiny) == [
        "core.models.scratch imports core.models.tiny.tokenizer",
        "core.models.scratch imports core.models.tiny.tokenizer.read_saved_json",
    ]
    assert up("core.models.tiny.model", "import core.models.lstm.model")
    assert up("core.models.lstm.model", "from core.models.transformer import head")
    assert up("core.models.transformer.training", "import core.models.registry")
    assert up("core.models.lstm.model", "from core.models.tiny import tokenizer") == []
    assert up("core.models.registry", "from core.models.lstm import model") == []
    assert up("core.analysis.explain", "from core.models import registry") == []
