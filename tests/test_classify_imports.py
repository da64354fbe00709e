"""What `python -m core classify` imports: only what routing a CSV needs (issue #25, "Speed").

Every module a process imports is read from its `-X importtime` report (one line per module, the
nesting in its indentation), so nothing in core has to cooperate. scikit-learn (and the SciPy it
brings), Streamlit, Altair, openpyxl for a CSV, captum and Ray cost seconds of every start and
route nothing; the bag-of-words model predicts with numpy alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NEVER_ON_CLASSIFY = ("sklearn", "streamlit", "altair", "openpyxl", "captum", "ray", "matplotlib")
# transformers' modeling_utils imports its object-detection losses, and they import
# scipy.optimize when SciPy is installed: allowed from there, from nowhere else.
SCIPY_ONLY_FROM = "transformers."


def imported(stderr: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module, the modules that imported it, innermost first) for every line of an
    `-X importtime` report, in the order the imports finished."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.rstrip().endswith("| imported package"):
            continue
        name = line.split("|", 2)[2][1:]
        rows.append(((len(name) - len(name.lstrip())) // 2, name.strip()))
    found = []
    for i, (depth, module) in enumerate(rows):
        parents, level = [], depth
        for later_depth, later in rows[i + 1 :]:  # a parent finishes after its children
            if level == 0:
                break
            if later_depth < level:
                parents.append(later)
                level = later_depth
        found.append((module, tuple(parents)))
    return found


def top_packages(found: list[tuple[str, tuple[str, ...]]]) -> set[str]:
    return {module.split(".")[0] for module, _ in found}


def run_with_importtime(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "core", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_report_parser_finds_each_module_and_its_importers():
    report = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:        10 |         10 |     c",
        "import time:        10 |         20 |   b",
        "import time:        10 |         10 |   d",
        "import time:        10 |         50 | a",
    ])  # fmt: skip
    assert imported(report) == [("c", ("b", "a")), ("b", ("a",)), ("d", ("a",)), ("a", ())]


def test_building_the_command_line_imports_no_data_or_model_library():
    run = run_with_importtime("classify", "--help")
    assert run.returncode == 0, run.stderr
    loaded = top_packages(imported(run.stderr))
    assert not loaded & {"pandas", "numpy", "torch", "transformers", "openpyxl", "pyarrow"}


@pytest.fixture(scope="module")
def classified(tiny_bert_cls_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """One `classify` of a three-row CSV with a saved Hugging Face model: (process, output)."""
    folder = tmp_path_factory.mktemp("classify-imports")
    source, out = folder / "in.csv", folder / "out.csv"
    texts = ["card blocked", "loan emi query", "upi failed"]
    pd.DataFrame({"text": texts}).to_csv(source, index=False)
    run = run_with_importtime(
        "classify", "--model", str(tiny_bert_cls_model_dir), str(source), "--out", str(out),
        "--device", "cpu",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return run, out


def test_classify_imports_neither_sklearn_nor_ui_nor_xlsx_libraries(classified):
    run, out = classified
    found = imported(run.stderr)
    assert top_packages(found) & set(NEVER_ON_CLASSIFY) == set()
    assert {"onnxruntime", "tokenizers", "pandas"} <= top_packages(found)  # the report is whole
    assert len(pd.read_csv(out)) == 3


def test_the_serving_graph_routes_without_torch_or_transformers(classified):
    """Importing torch and transformers' model classes was 2.5 s of a 7 s run (issue #39)."""
    run, out = classified
    assert top_packages(imported(run.stderr)) & {"torch", "transformers", "scipy"} == set()
    assert len(pd.read_csv(out)) == 3


def test_a_model_routed_by_torch_brings_scipy_only_through_transformers(
    tiny_bert_cls_model_dir: Path, tmp_path: Path
):
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    pd.DataFrame({"text": ["card blocked"]}).to_csv(source, index=False)
    run = run_with_importtime(
        "classify", "--model", str(tiny_bert_cls_model_dir), str(source), "--out", str(out),
        "--device", "cpu", "--precision", "bf16",  # bf16 means torch (core.models.serving)
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    found = imported(run.stderr)
    assert {"torch", "transformers"} <= top_packages(found)
    entries = {  # the module that imported each scipy module from outside SciPy
        parents[0] if parents else "(the script)"
        for module, parents in found
        if module.split(".")[0] == "scipy" and not (parents and parents[0].startswith("scipy"))
    }
    assert all(entry.startswith(SCIPY_ONLY_FROM) for entry in entries), entries
