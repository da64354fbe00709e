"""A whole file classified as a task (core.tasks.classify): the table goes to the session's
scratch file, the task keeps only its path and counts, and a spreadsheet column that mixes
numbers and text is kept as text rather than failing the write."""

from __future__ import annotations

import pandas as pd
import pytest

from core.jobs import JobStatus
from core.models.classify import classify_table
from core.models.registry import load_model
from core.tasks.classify import ClassifiedFile, classify_in_background, write_parquet
from tests.conftest import separable_rows


@pytest.fixture(scope="module")
def loaded(tiny_model_dir):
    return load_model(tiny_model_dir)


def test_the_task_writes_the_table_and_keeps_only_its_path(loaded, job_queue, requester):
    texts, _ = separable_rows(4)
    table = pd.DataFrame({"id": range(len(texts)), "complaint": texts, "mixed": [1, "a"] * 6})
    job = classify_in_background(
        loaded, table, text_col="complaint", review_threshold=0.6, queue=job_queue,
        requester=requester,
    )  # fmt: skip
    snapshot = job.wait(60)
    assert snapshot.status is JobStatus.DONE
    summary = snapshot.result
    assert isinstance(summary, ClassifiedFile) and summary.rows == len(texts)
    assert summary.path.parent == job_queue.session_folder(requester.session_id)
    read = summary.read()
    expected = classify_table(loaded, table, text_col="complaint", review_threshold=0.6)
    assert list(read.columns) == list(expected.columns) and len(read) == len(texts)
    assert read["predicted_label"].tolist() == expected["predicted_label"].tolist()
    assert summary.needs_review == int(expected["needs_review"].sum())
    assert read["mixed"].tolist() == ["1", "a"] * 6  # mixed types: kept as text
    assert read["id"].tolist() == list(range(len(texts)))  # the others keep their type


def test_write_parquet_keeps_types_when_arrow_can(tmp_path):
    table = pd.DataFrame({"n": [1, 2], "t": ["x", None]})
    write_parquet(table, tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert back["n"].tolist() == [1, 2] and back["n"].dtype == table["n"].dtype
    assert back["t"][0] == "x" and back["t"].isna().tolist() == [False, True]
