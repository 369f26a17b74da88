"""`tracker sync s3://...` against moto's S3 server on loopback: unchanged jobs are decided from
the listing, with no object downloaded (the server's GETs are counted), and a job that
finishes later is picked up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tests.conftest import Cli
from tests.remote_jobs import job_rows
from tracker.sample import write_sample_job

STEPS = 20


def test_sync_from_s3_downloads_nothing_of_unchanged_jobs(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any
) -> None:
    bucket = s3.new_bucket()
    for i in range(3):
        s3.upload(write_sample_job(tmp_path / f"job{i}", seed=i, steps=STEPS), bucket, f"p/job{i}")
    s3.client().delete_object(Bucket=bucket, Key="p/job2/ref_s1.json")  # still running
    prefix = f"s3://{bucket}/p/"
    first = cli("sync", prefix)
    assert first.stdout.endswith(
        f"s3://{bucket}/p/job2: waiting (ref_s1.csv has no summary ref_s1.json yet)\n"
        "3 found: 2 ingested, 0 unchanged, 1 waiting, 0 failed\n"
    )
    assert s3.traffic.object_gets() == 2 * 9  # each file of the two finished jobs, once
    cli("ingest", str(tmp_path / "job0"), "--job", "local0")
    assert job_rows(engine, "job0") == job_rows(engine, "local0")

    s3.traffic.reset()
    second = cli("sync", prefix)
    assert second.stdout.endswith("3 found: 0 ingested, 2 unchanged, 1 waiting, 0 failed\n")
    assert s3.traffic.object_gets() == 0  # decided from the listing alone

    s3.upload(tmp_path / "job2", bucket, "p/job2")  # the job finished
    s3.traffic.reset()
    third = cli("sync", prefix)
    assert third.stdout.startswith("job2: ingested 25 probes")
    assert third.stdout.endswith("3 found: 1 ingested, 2 unchanged, 0 failed\n")
    gets = {path for method, path, _ in s3.traffic.requests if method == "GET" and "." in path}
    assert all(path.startswith(f"/{bucket}/p/job2/") for path in gets)


def test_a_rewritten_object_is_a_changed_job(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any
) -> None:
    bucket = s3.new_bucket()
    s3.upload(write_sample_job(tmp_path / "job0", steps=STEPS), bucket, "p/job0")
    cli("sync", f"s3://{bucket}/p")
    s3.upload(write_sample_job(tmp_path / "job0", seed=4, steps=STEPS), bucket, "p/job0")
    result = cli("sync", f"s3://{bucket}/p")
    assert result.stdout == (
        f"s3://{bucket}/p/job0: changed (files changed since ingest; --replace)\n"
        "1 found: 0 ingested, 0 unchanged, 1 changed, 0 failed\n"
    )


def test_sync_of_a_missing_bucket_is_one_line(cli: Cli, s3: Any) -> None:
    result = cli("sync", "s3://no-such-bucket-here/p/", ok=False)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: s3://no-such-bucket-here/p/: The specified bucket does not exist; "
        "nothing was stored\n"
    )
