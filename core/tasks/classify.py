"""A whole file classified as a task of the server's queue. The classified table is written to
the asking session's scratch folder (core.jobs.JobQueue.session_folder) as Parquet and the task
keeps only its path and counts, so a finished task holds no table in memory and the file goes
with the session."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from core.access import Permission
from core.jobs import Job, JobQueue, Requester
from core.models.classifier import device_name
from core.models.classify import classify_table
from core.models.registry import LoadedModel
from core.models.transformer.inference import DEFAULT_BATCH_SIZE
from core.progress import ProgressCallback


@dataclass(frozen=True)
class ClassifiedFile:
    """A finished classification: where its table is and what the page shows at a glance."""

    path: Path  # Parquet: every input column, then the contract columns (core.models.classify)
    rows: int
    needs_review: int
    models_disagree: int  # rows where the transformer and the bag of words differ

    def read(self) -> pd.DataFrame:
        """The classified table, as `classify_table` returned it."""
        return pd.read_parquet(self.path)


def classify_in_background(
    loaded: LoadedModel,
    table: pd.DataFrame,
    *,
    text_col: str,
    review_threshold: float | None,
    queue: JobQueue,
    requester: Requester,
) -> Job[ClassifiedFile | None]:
    """`classify_table` as a task of `queue` (progress, cancel; see core.jobs), writing its table
    to the requester's scratch folder; reviewers and admins only: a whole file takes the shared
    CPUs."""
    scorer = loaded.scorer  # what routes: the serving graph or torch (core.models.serving)
    folder = queue.session_folder(requester.session_id)
    return queue.start(
        classify_to_file, loaded, table, text_col=text_col, review_threshold=review_threshold,
        folder=folder, requester=requester,
        title=f"Classify {len(table):,} rows with {loaded.path.name}", kind="classify",
        permission=Permission.RUN_JOBS, lane=queue.heavy_lane(device_name(scorer)),
        tokens_per_batch=DEFAULT_BATCH_SIZE * scorer.max_length,
    )  # fmt: skip


def classify_to_file(
    loaded: LoadedModel,
    table: pd.DataFrame,
    *,
    text_col: str,
    review_threshold: float | None,
    folder: Path,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ClassifiedFile | None:
    """`classify_table`, written to a new Parquet file in `folder`; None when cancelled."""
    result = classify_table(
        loaded, table, text_col=text_col, review_threshold=review_threshold,
        on_progress=on_progress, cancel=cancel,
    )  # fmt: skip
    if result is None:
        return None
    path = folder / f"classified-{uuid.uuid4().hex}.parquet"
    write_parquet(result, path)
    disagree = int((result["transformer_label"] != result["bow_label"]).sum())
    return ClassifiedFile(path, len(result), int(result["needs_review"].sum()), disagree)


def write_parquet(table: pd.DataFrame, path: Path) -> None:
    """Write `table` as Parquet. A spreadsheet column that mixes numbers and text (which Arrow
    cannot type) is written as text; every other column keeps its type."""
    try:
        table.to_parquet(path, index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        mixed = [c for c in table.columns if table[c].dtype == object]
        table.astype({c: "string" for c in mixed}).to_parquet(path, index=False)
