"""Archive scoring (core.scale): `--engine ray` on a local Ray instance with 2 CPUs gives the same
rows, labels and probabilities as `--engine local`, for CSV and Parquet, a file and a folder of
parts; a bad part is one line and leaves nothing at OUT."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.data.demo import DemoConfig, generate_demo_data
from core.data.limits import DataError, IntakeLimits
from core.scale import PART_COL, ScaleConfig, input_parts, score_archive
from tests.helpers import run_cli

# A few hundred rows: a Ray run's cost is its actors starting (torch imports), not the rows.
ROWS, PARTS = 400, 4
CONTRACT = ["predicted_label", "confidence", "needs_review", "bow_label", "bow_confidence"]

pytestmark = pytest.mark.slow  # a Ray instance: about 10 s to start, seconds per run


@pytest.fixture(scope="module")
def ray_instance():
    ray = pytest.importorskip("ray")
    from core.scale import start_local_ray

    start_local_ray(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> dict[str, Path]:
    """400 demo rows as one CSV, one Parquet file, and folders of four parts of each."""
    folder = tmp_path_factory.mktemp("archive")
    demo = generate_demo_data(DemoConfig(rows=ROWS, seed=1))
    demo.insert(0, "ticket", [f"T{i:05d}" for i in range(ROWS)])  # a column to keep in order
    paths = {"csv file": folder / "all.csv", "parquet file": folder / "all.parquet"}
    demo.to_csv(paths["csv file"], index=False)
    demo.to_parquet(paths["parquet file"], index=False)
    for kind in ("csv", "parquet"):
        parts = folder / f"{kind}-parts"
        parts.mkdir()
        for i in range(PARTS):
            piece = demo.iloc[i * ROWS // PARTS : (i + 1) * ROWS // PARTS]
            target = parts / f"part-{i:03d}.{kind}"
            piece.to_csv(target, index=False) if kind == "csv" else piece.to_parquet(target)
        paths[f"{kind} parts"] = parts
    return paths


def read_output(path: Path) -> pd.DataFrame:
    if path.is_dir():
        parts = sorted(path.iterdir())
        return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    return pd.read_csv(path, dtype={"ticket": str})


def assert_same_scores(ray_out: pd.DataFrame, local_out: pd.DataFrame) -> None:
    assert list(ray_out.columns) == list(local_out.columns)
    assert len(ray_out) == len(local_out) == ROWS
    assert ray_out["ticket"].tolist() == [f"T{i:05d}" for i in range(ROWS)]  # input order
    for column in ("ticket", "text", "desk", "predicted_label", "needs_review", "bow_label"):
        assert ray_out[column].astype(str).tolist() == local_out[column].astype(str).tolist()
    numbers = ["confidence", "bow_confidence", *(c for c in local_out if c.startswith("prob_"))]
    np.testing.assert_allclose(ray_out[numbers], local_out[numbers], rtol=0, atol=1e-6)


# Two of the four inputs: each Ray run starts two actors that import torch (about 25 s here);
# CSV parts go through Ray in the command-line test below, and each part is read by the same
# intake either way (test_the_ray_task_reads_each_part_through_intake_with_the_runs_limits).
@pytest.mark.parametrize(
    ("source", "out_name"),
    [
        ("csv file", "routed.csv"),
        ("parquet parts", "routed"),
    ],
)
def test_ray_scores_exactly_as_local(
    ray_instance, archive, tiny_model_dir, tmp_path, source, out_name
):
    outputs = {}
    workers = 2 if out_name == "routed" else 1  # one part keeps one actor busy: start one
    for engine in ("local", "ray"):
        out = tmp_path / engine / out_name
        out.parent.mkdir()
        config = ScaleConfig(
            tiny_model_dir, archive[source], out, engine=engine, workers=workers, precision="fp32"
        )
        result = score_archive(config)
        assert (result.rows, result.text_col) == (ROWS, "text")
        outputs[engine] = read_output(out)
    assert_same_scores(outputs["ray"], outputs["local"])
    if out_name == "routed":  # one Parquet part per input part, named after it
        names = sorted(p.name for p in (tmp_path / "ray" / out_name).iterdir())
        assert names == [f"{p.stem}.parquet" for p in input_parts(archive[source])]


def test_the_command_line_runs_ray_and_reports_json(
    ray_instance, archive, tiny_model_dir, tmp_path
):
    out = tmp_path / "routed.xlsx"
    result = run_cli(
        "classify", "--model", str(tiny_model_dir), str(archive["csv parts"]), "--out", str(out),
        "--engine", "ray", "--workers", "2", "--batch-size", "128", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["rows"], document["parts"], document["engine"]) == (ROWS, PARTS, "ray")
    routed = pd.read_excel(out, dtype={"ticket": str})
    assert routed["ticket"].tolist() == [f"T{i:05d}" for i in range(ROWS)]
    assert set(CONTRACT) <= set(routed.columns)


def test_a_bad_part_is_one_line_and_leaves_no_output(
    ray_instance, archive, tiny_model_dir, tmp_path
):
    parts = tmp_path / "parts"
    parts.mkdir()
    for part in input_parts(archive["parquet parts"])[:2]:
        (parts / part.name).write_bytes(part.read_bytes())
    (parts / "part-999.parquet").write_bytes(b"PAR1 this is not a parquet file")
    out = tmp_path / "routed"
    config = ScaleConfig(tiny_model_dir, parts, out, engine="ray", workers=1, precision="fp32")
    with pytest.raises(DataError) as failed:
        score_archive(config)
    message = str(failed.value)
    assert "\n" not in message and message.startswith("'part-999.parquet' could not be read")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["parts"]  # no staging folder left either
    result = run_cli(
        "classify", "--model", str(tiny_model_dir), str(parts), "--out", str(out),
        "--engine", "ray",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: 'part-999.parquet'")


def test_parts_must_share_their_columns(archive, tiny_model_dir, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    first, second = input_parts(archive["csv parts"])[:2]
    (parts / first.name).write_bytes(first.read_bytes())
    pd.read_csv(second).drop(columns=["ticket"]).to_csv(parts / second.name, index=False)
    with pytest.raises(DataError, match=r"^part 'part-001.csv' has columns .* not those of"):
        score_archive(ScaleConfig(tiny_model_dir, parts, tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()


def test_an_unreachable_cluster_is_one_line_in_seconds(archive, tiny_model_dir, tmp_path):
    result = run_cli(
        "classify", "--model", str(tiny_model_dir), str(archive["csv file"]),
        "--out", str(tmp_path / "out.csv"), "--engine", "ray", "--address", "127.0.0.1:1",
    )  # fmt: skip
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot reach the Ray cluster at '127.0.0.1:1'")
    assert not (tmp_path / "out.csv").exists()


def test_the_writer_refuses_rows_out_of_their_input_order():
    from core.scale import PART_COL, ROW_COL, _OrderCheck

    check = _OrderCheck()
    check.checked(pd.DataFrame({PART_COL: [0, 0, 0], ROW_COL: [0, 1, 2]}))
    check.checked(pd.DataFrame({PART_COL: [0, 1], ROW_COL: [3, 0]}))  # part 1 starts at row 0
    with pytest.raises(RuntimeError, match="out of order at part 1, row 2"):
        check.checked(pd.DataFrame({PART_COL: [1, 1], ROW_COL: [2, 3]}))  # row 1 is missing


# ------------------------------------------------------------------ files the archive reads


def _refuse_reading(monkeypatch) -> None:
    import core.scale

    def no_reading(*args, **kwargs):
        raise AssertionError("a part was read")

    monkeypatch.setattr(core.scale, "load_table", no_reading)


def test_a_part_that_is_not_a_regular_file_is_refused_before_reading(tmp_path, monkeypatch):
    _refuse_reading(monkeypatch)
    link = tmp_path / "x.csv"
    link.symlink_to("/dev/zero")
    with pytest.raises(DataError, match=rf"^'{link}' is a device, not a regular file;"):
        score_archive(ScaleConfig(tmp_path / "model", link, tmp_path / "out.csv"))
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-000.csv").write_text("text\nrefund pending\n")
    os.mkfifo(parts / "part-001.csv")  # skipped silently, its rows would be missing from OUT
    with pytest.raises(DataError, match=r"part-001.csv' is a named pipe \(FIFO\), not a regular"):
        score_archive(ScaleConfig(tmp_path / "model", parts, tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()


def test_every_part_is_held_to_the_size_limit_before_any_is_read(tmp_path, monkeypatch):
    _refuse_reading(monkeypatch)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-000.csv").write_text("text\nrefund pending\n")
    (parts / "part-001.csv").write_text("text\n" + "card blocked abroad\n" * 100)
    limits = IntakeLimits(max_file_bytes=1000)
    config = ScaleConfig(tmp_path / "model", parts, tmp_path / "out.csv", limits=limits)
    with pytest.raises(DataError, match=r"^'part-001.csv' is 0.0 MB, above the .* MB limit;"):
        score_archive(config)


def test_the_ray_task_reads_each_part_through_intake_with_the_runs_limits(tmp_path):
    # A Ray worker reads the part itself, with the driver's limits (the worker's environment may
    # not hold the operator's GRIEVANCE_LENS_MAX_FILE_MB): same checks as a local run.
    from core.scale import _parse_parts

    small, big = tmp_path / "part-000.csv", tmp_path / "part-001.csv"
    small.write_text("text\nrefund pending\n")
    big.write_text("text\n" + "card blocked abroad\n" * 100)
    files = pd.DataFrame({"path": [str(small), str(big)], "part": [0, 1]})
    parsed = _parse_parts(files, ["text"], IntakeLimits(max_file_bytes=1000))
    first = next(parsed)
    assert first["text"].tolist() == ["refund pending"] and first[PART_COL].tolist() == [0]
    with pytest.raises(DataError, match=r"^'part-001.csv' is 0.0 MB, above the .* MB limit;"):
        next(parsed)
