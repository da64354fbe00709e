"""Score a complaint archive: a file or a folder of CSV/Parquet parts through a saved model, in this
process (`engine="local"`) or on a Ray cluster (`engine="ray"`), with the same output.

Both engines read every part with the project's own intake (`load_table`: the same parsing, limits
and refusals as the app) and score it with the same `classification_columns`; only where the work
runs differs. Every part must be a regular file within the run's size limit, checked for all parts
before any is read and again as each is opened. On Ray, each part's path goes to a task that
reads and parses it with `load_table` and the run's limits, and `map_batches` runs an actor pool
whose actors load the model once each (from the folder's files, shipped through the object store;
the parts must be at the same path on every node, as for any Ray read of local files). Ray's own
`read_csv` and `read_binary_files` are not used: the first infers column types and drops blank
lines, so its table would differ from the app's, and neither checks a file before reading it all.

Row order: every parsed row carries its part and row number; Ray Data keeps the order
(`preserve_order`), and the writer checks it against those numbers before dropping them.
Output: one CSV or XLSX file through the formula-safe exporter, or a folder with one Parquet part
per input part; either appears whole at OUT or not at all.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.checks import check_choice, check_int
from core.data.columns import detect_text_column
from core.data.export import write_table
from core.data.intake import check_file, load_table
from core.data.limits import DEFAULT_LIMITS, DataError, IntakeLimits
from core.errors import UserError
from core.models.hardware import SERVING_PRECISIONS

ENGINES = ("local", "ray")
LOCAL_WINDOW = 8192  # rows the local engine sorts by length and scores at once (a few MB)
PART_SUFFIXES = (".csv", ".parquet")
FILE_OUTPUTS = (".csv", ".xlsx")
PART_COL, ROW_COL = "__part", "__row"  # where each row came from; dropped before writing
_PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Ray CPUs that reading and parsing a part ask for, and the share each actor leaves free: actors
# that claimed every CPU would starve the reads that feed them (a deadlock on a 2-core machine).
_READ_CPUS = 0.1
# Workers import `core` from this checkout (on a cluster: the same path on shared storage).
_RUNTIME_ENV = {"env_vars": {"PYTHONPATH": str(_PROJECT_ROOT)}}
# Columns that scoring adds (plus one prob_<label> per desk); an input that has them is refused.
_CONTRACT_COLUMNS = (
    "predicted_label", "confidence", "needs_review", "decided_by", "transformer_label",
    "transformer_confidence", "bow_label", "bow_confidence",
)  # fmt: skip


@dataclass(frozen=True)
class ScaleConfig:
    """One scoring run: what to read, which model, where to write, and where to compute."""

    model_dir: Path
    input: Path  # a .csv/.parquet file or a folder of them (all of one kind)
    out: Path  # .csv or .xlsx, or a folder (created) for Parquet parts
    text_col: str | None = None  # None: detected on the first part
    review_threshold: float | None = None  # None: each model's own review policy
    engine: str = "local"
    address: str | None = None  # Ray: a cluster's address; None starts a local instance
    workers: int = 1  # Ray: actors, each holding one copy of the model
    batch_size: int = 256  # Ray: texts per actor call (local: windows of LOCAL_WINDOW rows)
    gpus_per_worker: float = 0.0  # Ray: GPUs each actor asks for (bf16 autocast on CUDA)
    cpus_per_worker: int | None = None  # Ray: CPUs (torch threads) per actor; None: an even share
    precision: str = "auto"  # "auto", "fp32", "bf16" or "int8" (core.models.serving)
    # "auto" (CUDA when available), "cpu" or "cuda": where the model runs; on Ray, where each
    # actor runs it: an actor that asked for no GPU runs on its CPUs.
    device: str = "auto"
    # What a part may hold, as for an upload; the command line passes IntakeLimits.from_env()
    # so that GRIEVANCE_LENS_MAX_FILE_MB holds here as in the app. Ray tasks get this object:
    # a worker's environment may not hold the operator's settings.
    limits: IntakeLimits = DEFAULT_LIMITS

    def __post_init__(self) -> None:
        check_choice("engine", self.engine, ENGINES)
        if self.review_threshold is not None and not 0.0 <= self.review_threshold <= 1.0:
            raise UserError(f"review_threshold must lie in 0..1, got {self.review_threshold}")
        check_int("workers", self.workers, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        if self.cpus_per_worker is not None:
            check_int("cpus_per_worker", self.cpus_per_worker, minimum=1)
        if not 0 <= self.gpus_per_worker <= 8:
            raise UserError(f"gpus_per_worker must lie in 0..8, got {self.gpus_per_worker}")
        check_choice("precision", self.precision, SERVING_PRECISIONS)
        check_choice("device", self.device, ("auto", "cpu", "cuda"))
        if self.engine == "ray" and self.device == "cuda" and not self.gpus_per_worker:
            raise UserError("device 'cuda' on Ray needs GPUs for the actors; set gpus_per_worker")


@dataclass(frozen=True)
class ScaleResult:
    rows: int
    parts: int
    out: Path
    text_col: str
    seconds: float


def input_parts(path: Path, limits: IntakeLimits = DEFAULT_LIMITS) -> list[Path]:
    """The part files of `path`: the file itself, or a folder's .csv or .parquet files by name.

    Every part is checked without being opened (`check_file`): a regular file, links followed,
    within `limits.max_file_bytes`. A part that is not (a FIFO, a link to a device) is refused
    rather than skipped: its rows would be missing from the output.
    """
    if not os.path.lexists(path):
        raise DataError(f"no such file or folder: '{path}'; check the path")
    parts = _folder_parts(path) if path.is_dir() else [path]
    for part in parts:
        check_file(part, limits)
    return parts


def _folder_parts(path: Path) -> list[Path]:
    parts = sorted(p for p in path.iterdir() if p.suffix.lower() in PART_SUFFIXES)
    if not parts:
        raise DataError(f"'{path}' holds no .csv or .parquet parts; put the archive's parts there")
    kinds = {p.suffix.lower() for p in parts}
    if len(kinds) > 1:
        raise DataError(f"'{path}' mixes .csv and .parquet parts; keep one kind per folder")
    return parts


def check_output(out: Path) -> None:
    """A file output needs .csv or .xlsx and an existing folder; a folder output must be new."""
    if out.suffix:
        if out.suffix.lower() not in FILE_OUTPUTS:
            raise DataError(f"cannot write '{out.name}': use .csv, .xlsx or a folder (no suffix)")
        if not out.parent.is_dir():
            raise DataError(f"folder '{out.parent}' does not exist; create it first")
    elif out.exists():
        raise DataError(f"'{out}' already exists; choose a new folder for the parts")


def score_archive(
    config: ScaleConfig, *, on_rows: Callable[[int], None] | None = None
) -> ScaleResult:
    """Score every row of `config.input` and write the contract columns to `config.out`.

    `on_rows(n)` is called as each batch of n rows is written. Raises DataError (one line) for a
    bad part, a missing column or an unreachable cluster; nothing is left at `out` then.
    """
    started = time.perf_counter()
    parts = input_parts(config.input, config.limits)
    check_output(config.out)
    first = load_table(parts[0], limits=config.limits)
    text_col, columns = _first_part_columns(first, config.text_col)
    if config.engine == "ray":
        frames = _score_with_ray(config, parts, text_col, columns)
        rows = _write(frames, parts, columns, config.out, on_rows)
    else:  # reports rows as they are scored: a window takes minutes on a CPU
        frames = _score_locally(config, parts, text_col, columns, first, on_rows)
        rows = _write(frames, parts, columns, config.out, None)
    return ScaleResult(rows, len(parts), config.out, text_col, time.perf_counter() - started)


def _first_part_columns(table: pd.DataFrame, text_col: str | None) -> tuple[str, list[str]]:
    """The text column and the column names every part must have, from the first part's table."""
    chosen, _ = detect_text_column(table, text_col=text_col)
    columns = [str(c) for c in table.columns]
    clash = [c for c in columns if c in _CONTRACT_COLUMNS or c.startswith("prob_")]
    if clash:
        raise DataError(f"the input already has columns {clash}; rename them and run again")
    return chosen, columns


# ------------------------------------------------------------------------------ both engines


def parse_part(path: Path, part: int, columns: list[str], limits: IntakeLimits) -> pd.DataFrame:
    """The part at `path` as `load_table` reads it within `limits`, numbered (see `numbered`)."""
    return numbered(load_table(path, limits=limits), path.name, part, columns)


def numbered(table: pd.DataFrame, name: str, part: int, columns: list[str]) -> pd.DataFrame:
    """`table` with its part and row numbers added; its columns must be the first part's."""
    if [str(c) for c in table.columns] != columns:
        raise DataError(
            f"part '{name}' has columns {[str(c) for c in table.columns]}, not those of the first "
            f"part {columns}; give every part the same columns"
        )
    return table.assign(**{PART_COL: part, ROW_COL: range(len(table))})


def score_frame(
    loaded: Any, frame: pd.DataFrame, text_col: str, threshold: float | None
) -> pd.DataFrame:
    """`frame` with the contract columns appended (`core.models.classify.classify_table`)."""
    from core.models.classify import classify_table

    return classify_table(loaded, frame, text_col=text_col, review_threshold=threshold)


def _score_locally(
    config: ScaleConfig,
    parts: list[Path],
    text_col: str,
    columns: list[str],
    first: pd.DataFrame,
    on_rows: Callable[[int], None] | None,
) -> Iterator[pd.DataFrame]:
    """Score part after part in this process; `first` is part 0's table, already read.

    Each part is scored in windows of LOCAL_WINDOW rows: the model sorts a window by length
    before batching it (`predict_in_batches`), and a wider window pads less. `config.batch_size`
    (a Ray batch) would sort only 256 rows at a time.
    """
    from core.models.classify import classify_table
    from core.models.registry import load_model

    loaded = load_model(config.model_dir, device=config.device, precision=config.precision)
    for number, path in enumerate(parts):
        frame = first if number == 0 else load_table(path, limits=config.limits)
        frame = numbered(frame, path.name, number, columns)
        for start in range(0, len(frame), LOCAL_WINDOW):
            yield classify_table(
                loaded, frame.iloc[start : start + LOCAL_WINDOW], text_col=text_col,
                review_threshold=config.review_threshold, on_progress=_new_rows(on_rows),
            )  # fmt: skip


def _new_rows(on_rows: Callable[[int], None] | None) -> Callable[[Any], None]:
    """An `on_progress` callback of one `classify_table` call that passes each chunk's rows on."""
    scored = 0

    def on_progress(progress: Any) -> None:
        nonlocal scored
        if on_rows is not None:
            on_rows(progress.done - scored)
        scored = progress.done

    return on_progress


# -------------------------------------------------------------------------------------- Ray


def _parse_parts(
    files: pd.DataFrame, columns: list[str], limits: IntakeLimits
) -> Iterator[pd.DataFrame]:
    """Ray task body: parts (path, part number) into their parsed rows, each read here through
    intake's checks (a regular file within `limits`, checked before it is opened)."""
    for path, part in zip(files["path"], files["part"], strict=True):
        yield parse_part(Path(path), int(part), columns, limits)


class _Scorer:
    """Ray actor: loads the model once (from its files, which Ray passes through its object store
    because they are large), scores batches."""

    def __init__(
        self,
        files: dict[str, bytes],
        text_col: str,
        threshold: float | None,
        device: str,
        precision: str,
        threads: int,
    ) -> None:
        from core.models.registry import load_model

        folder = Path(tempfile.mkdtemp(prefix="grievance-lens-model-")) / "model"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        try:  # the one runtime rule (core.models.device.Runtime), on this actor's hardware
            self.loaded = load_model(folder, device=device, precision=precision, threads=threads)
        finally:  # everything is in memory now (safetensors maps survive the unlink on Linux)
            shutil.rmtree(folder.parent, ignore_errors=True)
        if self.loaded.routing["runtime"] == "torch":
            import torch

            torch.set_num_threads(threads)  # this actor's own process: its share of the CPUs
        self.text_col, self.threshold = text_col, threshold

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        return score_frame(self.loaded, batch, self.text_col, self.threshold)


def _score_with_ray(
    config: ScaleConfig, parts: list[Path], text_col: str, columns: list[str]
) -> Iterator[pd.DataFrame]:
    _connect(config.address)
    import ray
    import ray.data

    # The operator's GRIEVANCE_LENS_PRECISION is read here, on the driver: the actors run
    # where the variable may not be set.
    from core.models.hardware import operator_precision

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # rows leave in the order they came
    paths = [str(p.absolute()) for p in parts]  # the names a local run sees, links kept
    cpus = config.cpus_per_worker or _cpus_per_worker(ray, config)
    files = ray.data.from_items(
        [{"path": path, "part": i} for i, path in enumerate(paths)], override_num_blocks=len(paths)
    )
    rows = files.map_batches(
        _parse_parts, fn_args=(columns, config.limits),
        batch_size=1, batch_format="pandas", num_cpus=_READ_CPUS,
    )  # fmt: skip
    scored = rows.map_batches(
        _Scorer,
        fn_constructor_args=(
            _model_files(config.model_dir), text_col, config.review_threshold,
            _actor_device(config), operator_precision(config.precision), int(cpus),
        ),
        batch_size=config.batch_size, batch_format="pandas",
        compute=ray.data.ActorPoolStrategy(size=config.workers),
        num_cpus=cpus * (1 - _READ_CPUS), num_gpus=config.gpus_per_worker or None,
    )  # fmt: skip
    try:
        # Arrow batches through pyarrow's own pandas conversion: the dtypes of a local run
        # (Ray's pandas batches hold ArrowDtype columns, which Parquet would keep).
        for batch in scored.iter_batches(batch_format="pyarrow", batch_size=None):
            yield batch.to_pandas()
    except Exception as exc:  # a task's DataError arrives wrapped in Ray's error types
        raise DataError(_ray_failure(exc)) from exc


def _connect(address: str | None) -> None:
    """Initialise Ray: the cluster at `address`, or a local instance on this machine."""
    import ray

    if address:
        _check_reachable(address)
    if ray.is_initialized():
        return
    if not address:
        start_local_ray()
        return
    try:
        ray.init(address=address, runtime_env=_RUNTIME_ENV, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"cannot reach the Ray cluster at '{address}': {first}") from exc


def start_local_ray(num_cpus: int | None = None) -> None:
    """A Ray instance on this machine (all its CPUs unless `num_cpus`), no dashboard; worker logs
    stay in Ray's session folder so that a failed part is reported in one line."""
    import ray

    ray.init(
        num_cpus=num_cpus, runtime_env=_RUNTIME_ENV, include_dashboard=False,
        logging_level="warning", log_to_driver=False,
    )  # fmt: skip


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, not minutes: ray.init retries an unreachable address for a long time."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise DataError(f"--address must look like HOST:PORT or ray://HOST:PORT, got '{address}'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise DataError(
            f"cannot reach the Ray cluster at '{address}' ({exc.strerror or exc}); start it with "
            "`ray start --head` there, or leave out --address to run on this machine"
        ) from exc


def _cpus_per_worker(ray: Any, config: ScaleConfig) -> int:
    """The cluster's CPUs shared between the actors (each actor's torch threads)."""
    cpus = ray.cluster_resources().get("CPU", 1.0)
    return max(1, int(cpus // config.workers))


def _actor_device(config: ScaleConfig) -> str:
    """The device each actor resolves its runtime with: the run's, when the actors asked Ray
    for GPUs; else "cpu", since a GPU the actor was not given belongs to another task."""
    return config.device if config.gpus_per_worker > 0 else "cpu"


def _model_files(folder: Path) -> dict[str, bytes]:
    """The files of a model folder, checked as the loader checks them, by name."""
    from core.models.card import check_loadable, read_card

    read_card(folder)
    check_loadable(folder)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _ray_failure(exc: BaseException) -> str:
    """The one line to show for a failed Ray run: the DataError a task raised, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        cause = getattr(seen, "cause", None)  # a RayTaskError's original exception
        if isinstance(cause, DataError):
            return str(cause)
        if isinstance(seen, DataError) and cause is None:
            return str(seen)
        seen = seen.__cause__ or (cause if isinstance(cause, BaseException) else None)
    text = str(exc).strip().splitlines()
    return f"the Ray run failed: {text[-1] if text else type(exc).__name__}"


# ---------------------------------------------------------------------------------- writing


def _write(
    frames: Iterator[pd.DataFrame],
    parts: list[Path],
    columns: list[str],
    out: Path,
    on_rows: Callable[[int], None] | None,
) -> int:
    """Write scored frames, in order, to `out` atomically; returns the number of rows."""
    order = _OrderCheck()
    if out.suffix:
        kept = []
        for frame in frames:
            kept.append(order.checked(frame))
            if on_rows is not None:
                on_rows(len(frame))
        table = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()
        write_table(table.drop(columns=[PART_COL, ROW_COL], errors="ignore"), out)
        return len(table)
    staging = out.with_name(f".{out.name}.writing-{uuid.uuid4().hex[:8]}")
    staging.mkdir(parents=True)
    try:
        rows = _write_parts(frames, parts, staging, order, on_rows)
        os.rename(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return rows


def _write_parts(
    frames: Iterator[pd.DataFrame],
    parts: list[Path],
    folder: Path,
    order: _OrderCheck,
    on_rows: Callable[[int], None] | None,
) -> int:
    """One Parquet part per input part, named after it, rows streamed in order."""
    writer: pq.ParquetWriter | None = None
    current, rows = -1, 0
    try:
        for frame in frames:
            frame = order.checked(frame)
            for part, piece in frame.groupby(PART_COL, sort=False):
                if part != current:
                    if writer is not None:
                        writer.close()
                    current = int(part)
                    table = _arrow(piece)
                    path = folder / f"{parts[current].stem}.parquet"
                    writer = pq.ParquetWriter(path, table.schema)
                    writer.write_table(table)
                else:
                    writer.write_table(_arrow(piece).cast(writer.schema))
            rows += len(frame)
            if on_rows is not None:
                on_rows(len(frame))
    finally:
        if writer is not None:
            writer.close()
    return rows


def _arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame.drop(columns=[PART_COL, ROW_COL]), preserve_index=False)


class _OrderCheck:
    """Rows must arrive as (part, row) = (0, 0), (0, 1), ..., (1, 0), ...: the input order."""

    def __init__(self) -> None:
        self.last = (-1, -1)

    def checked(self, frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return frame
        part = np.concatenate([[self.last[0]], frame[PART_COL].to_numpy(dtype=np.int64)])
        row = np.concatenate([[self.last[1]], frame[ROW_COL].to_numpy(dtype=np.int64)])
        same_part = (part[1:] == part[:-1]) & (row[1:] == row[:-1] + 1)
        next_part = (part[1:] > part[:-1]) & (row[1:] == 0)
        if not (same_part | next_part).all():
            bad = int(np.argmin(same_part | next_part))
            raise RuntimeError(
                f"rows arrived out of order at part {part[bad + 1]}, row {row[bad + 1]}"
            )
        self.last = (int(part[-1]), int(row[-1]))
        return frame
