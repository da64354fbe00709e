"""Hostile intake benchmark: peak memory and wall time of `python -m core validate FILE` on small
crafted files that claim far more than they hold, each next to an ordinary file of about the same
size (the named baseline), plus a 10 MB complaint tokenised by the tiny model's and the bundled
MiniLM's tokenizers next to a 2 KB one.

Each run is a grandchild process started by a small launcher (so its peak RSS is its own: Linux
keeps a peak across exec), under an address-space cap and a time limit. Run from the repo root:

    python -m bench.bench_hostile_inputs [--big-mb 150] [--json] [--force]

The load is recorded around the run (bench.machine; the child processes count as the bench's
own work). A busy start is refused and a busy run's figures withheld unless `--force` is given;
then every figure is marked as taken on a busy machine. `--json` puts `machine_load` in the
document (and the outcomes only when they count or were forced).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.machine import (
    LoadGuard,
    command_line,
    machine,
    print_load,
    refuse_busy_start,
    shows_figures,
)
from core.data.demo import DemoConfig, generate_demo_data

MB = 1024**2
HEADER_NAMES = ("text", "label")
TOKENISE = (
    "import sys; from core.models.tiny.tokenizer import TinyTokenizer; "
    "text = open(sys.argv[1], encoding='utf-8').read(); "
    "tokenizer = TinyTokenizer.build(['refund pending for my card'], max_length=256); "
    "ids = tokenizer([text]); print(tuple(ids['input_ids'].shape))"
)
# The bundled MiniLM's fast tokenizer through the project's own encode_batch (the finding: a
# 10 MB complaint took 10 s and 1.2 GB per call, tokenised whole before truncation).
TOKENISE_MINILM = (
    "import sys, torch; from transformers import AutoTokenizer; "
    "from core.models.transformer.backbone import resolve_backbone; "
    "from core.models.transformer.inference import encode_batch; "
    "text = open(sys.argv[1], encoding='utf-8').read(); "
    "tokenizer = AutoTokenizer.from_pretrained(resolve_backbone('minilm'), local_files_only=True); "
    "batch = encode_batch(tokenizer, [text], 256, torch.device('cpu')); "
    "print(tuple(batch['input_ids'].shape))"
)


@dataclass(frozen=True)
class Case:
    """One input: a file and the command that reads it."""

    name: str
    path: Path
    command: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """What a child process did: peak RSS, wall time and ok or its one-line refusal."""

    name: str
    file_bytes: int
    peak_mb: float
    seconds: float
    outcome: str


# ------------------------------------------------------------------------------ crafted files


def xlsx_xfd_gap(path: Path) -> Path:
    """One cell in column XFD, 400,000 rows below the header: 2 KB that openpyxl pads."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["text", "label"])
    sheet.append(["card blocked", "Card"])
    sheet.cell(row=400_000, column=16384, value="x")
    workbook.save(path)
    return path


def csv_wide(path: Path, columns: int) -> Path:
    """A header of `columns` names and a few short rows."""
    header = ",".join(f"c{i}" for i in range(columns))
    path.write_text(header + "\n" + ("x," * (columns - 1) + "y\n") * 3, encoding="utf-8")
    return path


def parquet_dictionary(path: Path) -> Path:
    """500,000 rows of one 4 KB string: dictionary encoding makes it a few dozen KB."""
    rows = 500_000
    table = pa.table({"text": ["refund " * 585] * rows, "label": ["A", "B"] * (rows // 2)})
    pq.write_table(table, path, use_dictionary=True, compression="zstd")
    return path


def parquet_nested(path: Path) -> Path:
    """A list column of 100,000 rows of 20 items each."""
    rows = 100_000
    table = pa.table({"text": ["t"] * rows, "label": ["A"] * rows, "tags": [["x"] * 20] * rows})
    pq.write_table(table, path, compression="zstd")
    return path


def csv_one_cell(path: Path, megabytes: int) -> Path:
    """One cell of `megabytes` MB of words, then two ordinary rows."""
    with path.open("wb") as out:
        out.write(b"text,label\n")
        chunk = b"refund pending " * (MB // 15)
        for _ in range(megabytes):
            out.write(chunk)
        out.write(b",A\nshort one,B\nanother one,B\n")
    return path


def complaint(path: Path, megabytes: float) -> Path:
    path.write_text("refund pending for my card " * int(megabytes * MB / 27), encoding="utf-8")
    return path


# ----------------------------------------------------------------------- ordinary counterparts


def ordinary_rows(size: int) -> pd.DataFrame:
    """Demo complaints, five to a row (about 500 bytes a row), enough for `size` bytes."""
    demo = generate_demo_data(DemoConfig(rows=3000, seed=7))
    texts, desks = demo["text"].tolist(), demo["desk"].tolist()
    n = max(20, size // 500)
    rows = [
        (" ".join(texts[(5 * i + k) % len(texts)] for k in range(5)), desks[5 * i % len(desks)])
        for i in range(n)
    ]
    return pd.DataFrame(rows, columns=list(HEADER_NAMES))


def ordinary_csv(path: Path, size: int) -> Path:
    frame = ordinary_rows(size)
    data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    path.write_bytes(data[: data.rindex(b"\n", 0, max(size, 2000)) + 1])
    return path


def ordinary_xlsx(path: Path, size: int) -> Path:
    frame = ordinary_rows(size // 4)  # text compresses about 4 times in a workbook
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(list(HEADER_NAMES))
    for row in frame.itertuples(index=False):
        sheet.append(list(row))
    workbook.save(path)
    return path


def ordinary_parquet(path: Path, size: int) -> Path:
    frame = ordinary_rows(size * 3)  # text compresses about 3 times in Parquet
    frame.to_parquet(path, compression="zstd")
    return path


# ------------------------------------------------------------------------------------ running


def validate_command(path: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "core", "validate", str(path))


def build_cases(folder: Path, big_mb: int) -> list[Case]:
    """Each hostile file followed by its ordinary counterpart of about the same size."""
    hostile: list[tuple[str, Path, Callable[[Path, int], Path]]] = [
        ("xlsx XFD cell + 400k-row gap", xlsx_xfd_gap(folder / "gap.xlsx"), ordinary_xlsx),
        ("csv 10,000 columns", csv_wide(folder / "wide10k.csv", 10_000), ordinary_csv),
        ("csv 1,000,000 columns", csv_wide(folder / "wide1m.csv", 1_000_000), ordinary_csv),
        ("parquet dictionary, 4 KB strings", parquet_dictionary(folder / "dict.parquet"),
         ordinary_parquet),
        ("parquet nested list column", parquet_nested(folder / "nested.parquet"),
         ordinary_parquet),
        (f"csv one {big_mb} MB cell", csv_one_cell(folder / "cell.csv", big_mb), ordinary_csv),
    ]  # fmt: skip
    cases = []
    for name, path, ordinary in hostile:
        twin = ordinary(folder / f"ordinary-{path.name}", path.stat().st_size)
        cases.append(Case(name, path, validate_command(path)))
        cases.append(
            Case(f"  ordinary, same size ({path.suffix[1:]})", twin, validate_command(twin))
        )
    for model, script in (("tiny", TOKENISE), ("MiniLM", TOKENISE_MINILM)):
        for name, megabytes in (
            (f"tokenise a 10 MB complaint ({model})", 10),
            ("  ordinary 2 KB", 0.002),
        ):
            path = complaint(folder / f"complaint-{megabytes}.txt", megabytes)
            cases.append(Case(name, path, (sys.executable, "-c", script, str(path))))
    return cases


# Linux keeps a process's peak RSS across exec, so a child forked from this process (which has
# just written 150 MB files) would report our peak, not its own. A freshly exec'd launcher
# (small) runs the command as its own child and reports that grandchild's peak alone.
LAUNCHER = """
import os, resource, subprocess, sys
cap, timeout = int(sys.argv[1]), float(sys.argv[2])
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
child = subprocess.Popen(sys.argv[3:], preexec_fn=limit)
try:
    child.wait(timeout)
    status = child.returncode
except subprocess.TimeoutExpired:
    child.kill(); child.wait(); status = "timeout"
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"@@peak_kb={peak_kb} status={status}", file=sys.stderr)
"""


def run_case(case: Case, *, timeout_s: float, max_gb: float) -> Outcome:
    """Run the case's command in a grandchild process capped at `max_gb` of address space."""
    cap = int(max_gb * 1024**3)
    launcher = (sys.executable, "-c", LAUNCHER, str(cap), str(timeout_s), *case.command)
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        subprocess.run(launcher, stdout=out, stderr=out, check=False)
        seconds = time.perf_counter() - started
        out.seek(0)
        lines = out.read().decode("utf-8", errors="replace").strip().splitlines()
    report = lines.pop()  # the launcher's last line
    peak_kb, status = (field.split("=", 1)[1] for field in report.removeprefix("@@").split())
    code = None if status == "timeout" else int(status)
    return Outcome(
        case.name, case.path.stat().st_size, int(peak_kb) / 1024, seconds, _describe(code, lines)
    )


def _describe(status: int | None, lines: list[str]) -> str:
    if status is None:
        return "timed out"
    if status == 0:
        return "ok"
    errors = [line for line in lines if line.startswith("error:")]
    last = errors[-1] if errors else (lines[-1] if lines else "")
    return f"exit {status}: {last[:160]}"


# ---------------------------------------------------------------------------------- reporting


def print_table(outcomes: list[Outcome], busy: bool) -> None:
    mark = " (busy machine)" if busy else ""
    print(f"{'input':<36} {'file':>10} {'peak RSS':>10} {'wall':>8}  outcome{mark}")
    for o in outcomes:
        size = (
            f"{o.file_bytes / MB:.2f} MB" if o.file_bytes >= MB else f"{o.file_bytes / 1024:.0f} KB"
        )
        print(f"{o.name:<36} {size:>10} {o.peak_mb:>7.0f} MB {o.seconds:>7.1f}s  {o.outcome}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big-mb", type=int, default=150, help="size of the one-cell CSV")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per child process")
    parser.add_argument("--max-gb", type=float, default=8, help="address-space cap per child")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--force", action="store_true", help="report even on a busy machine")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    command = command_line("bench.bench_hostile_inputs")
    guard = LoadGuard.start(force=args.force)
    if refuse_busy_start(guard):
        return 1
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        cases = build_cases(Path(folder), args.big_mb)
        outcomes = [run_case(c, timeout_s=args.timeout, max_gb=args.max_gb) for c in cases]
    load = guard.finish()
    if args.json:
        document = {"command": command, "machine": machine(), "machine_load": load.to_json()}
        if shows_figures(load):
            document["outcomes"] = [asdict(o) for o in outcomes]
        json.dump(document, sys.stdout, indent=2)
        print()
        print_load(load, file=sys.stderr)
        return 0
    print(f"command: {command}")
    print(f"machine: {machine()}")
    if shows_figures(load):
        print_table(outcomes, busy=not load.quiet)
    print_load(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
