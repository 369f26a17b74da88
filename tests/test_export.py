"""``tracker export``: every selected point as a Parquet dataset partitioned by job."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import stored_points
from tracker import api
from tracker.sample import write_sample_job

STEPS = 60


@pytest.fixture
def two_jobs(cli: Cli, tmp_path: Path) -> Cli:
    first = write_sample_job(tmp_path / "j1", steps=STEPS)
    cli("ingest", str(first), "--meta", "gpu=A10G", "--meta", "time=2026-11-01T10:00Z")
    second = write_sample_job(tmp_path / "j2", seed=1, steps=STEPS, arms=("ref_s0", "linear_s0"))
    cli("ingest", str(second), "--meta", "gpu=H100", "--meta", "step=odd", "--study", "adam8bit")
    return cli


def read_dataset(directory: Path) -> pl.DataFrame:
    return pl.scan_parquet(f"{directory}/**/*.parquet", hive_partitioning=True).collect()


def test_every_point_is_exported_with_its_job_and_metadata(
    two_jobs: Cli, engine: Engine, tmp_path: Path
) -> None:
    out = tmp_path / "points"
    result = two_jobs("export", str(out))
    assert result.stdout == (
        f"j1: 12 curves, {12 * STEPS} points -> {out}/job=j1/curves.parquet\n"
        f"j2: 6 curves, {6 * STEPS} points -> {out}/job=j2/curves.parquet\n"
        f"2 jobs, {18 * STEPS} points written to {out} (Parquet)\n"
    )
    dataset = read_dataset(out)
    # a metadata key named like a point column keeps its name behind "meta."
    assert dataset.columns == [
        *("arm", "model", "variant", "seed", "metric", "step", "value", "study"),
        *("gpu", "meta.step", "time", "job"),
    ]
    assert dataset.schema["study"] == pl.String
    assert dataset.schema["time"] == pl.Datetime("us", "UTC")  # a timestamp, not text
    assert dataset.filter(job="j1")["time"].unique().to_list() == [
        datetime(2026, 11, 1, 10, tzinfo=UTC)
    ]
    runs = dataset.select("job", "arm", "model", "variant", "seed").unique().sort("job", "arm")
    assert runs.rows()[:2] == [
        ("j1", "flash_s0", "gpt-124m", "flash", 0),
        ("j1", "linear_s0", "gpt-124m", "linear", 0),
    ]
    with Session(engine) as session:
        stored = stored_points(session)
    assert dataset.height == stored.height == 18 * STEPS
    linear = dataset.filter(job="j2", arm="linear_s0", metric="loss").sort("step")
    expected = api.curve(engine, "linear_s0", job="j2")
    assert linear["step"].to_list() == expected["step"].to_list()
    values = linear["value"].to_numpy()
    assert values.view(np.uint64).tolist() == expected["value"].to_numpy().view(np.uint64).tolist()
    assert np.isnan(values).any() and np.isinf(values).any()  # the diverged arm, as stored
    by_job = dataset.group_by("job").agg(
        pl.col("gpu").unique(), pl.col("meta.step").unique(), pl.col("study").unique()
    )
    assert sorted(by_job.rows()) == [
        ("j1", ["A10G"], [None], ["flashoptim"]),
        ("j2", ["H100"], ["odd"], ["adam8bit"]),
    ]


def test_a_selection_exports_its_jobs_and_a_job_exported_again_replaces_its_file(
    two_jobs: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "points"
    two_jobs("export", str(out), "--where", "gpu=H100")
    assert sorted(p.name for p in out.iterdir()) == ["job=j2"]
    two_jobs("export", str(out), "--job", "j2")
    assert read_dataset(out).height == 6 * STEPS
    assert [p.name for p in (out / "job=j2").iterdir()] == ["curves.parquet"]


def test_an_unknown_job_or_value_is_an_error_and_writes_nothing(
    two_jobs: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "points"
    for args, message in [
        (("--job", "j9"), "no job named 'j9'; known jobs: j1, j2"),
        (("--where", "gpu=T4"), "no job has gpu=T4; known values: A10G, H100"),
    ]:
        result = two_jobs("export", str(out), *args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n")
    assert not out.exists()


def test_a_metadata_key_named_study_keeps_its_name_behind_meta(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "j1", steps=STEPS, probes=False, arms=("ref_s0",))
    cli("ingest", str(job), "--meta", "study=ablation-3", "--study", "adam8bit")
    out = tmp_path / "points"
    cli("export", str(out))
    dataset = read_dataset(out)
    assert dataset.select("study", "meta.study").unique().rows() == [("adam8bit", "ablation-3")]


def test_duckdb_reads_the_dataset(two_jobs: Cli, tmp_path: Path) -> None:
    out = tmp_path / "points"
    two_jobs("export", str(out))
    rows = duckdb.sql(
        f"SELECT job, metric, count(*) FROM read_parquet('{out}/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert rows == [
        *(("j1", m, 4 * STEPS) for m in ("loss", "lr", "step_ms")),
        *(("j2", m, 2 * STEPS) for m in ("loss", "lr", "step_ms")),
    ]
    studies = duckdb.sql(
        f"SELECT study, count(DISTINCT job) FROM read_parquet('{out}/*/*.parquet', "
        "hive_partitioning = true) WHERE metric = 'loss' GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert studies == [("adam8bit", 1), ("flashoptim", 1)]
