"""A bucket anyone can write to never stops `tracker sync`: a key too long for the local disk,
an object that cannot be read, names with control characters: each is that job's one line,
the pass goes on to its summary; a storage that stops answering ends the pass after a few
jobs in a row, with one line. Against moto's S3 server on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.conftest import Cli
from tests.s3_server import S3Server
from tracker.errors import BadInput
from tracker.jobdir.source import open_source
from tracker.sample import write_sample_job
from tracker.services.sync import SyncedJob, SyncOptions, SyncStatus, sync_prefix

STEPS = 20


def jobs_in(s3: Any, tmp_path: Path, names: list[str]) -> str:
    bucket = s3.new_bucket()
    for i, name in enumerate(names):
        s3.upload(write_sample_job(tmp_path / f"j{i}", seed=i, steps=STEPS), bucket, f"p/{name}")
    return bucket


def test_a_key_longer_than_a_local_file_name_is_read_all_the_same(
    cli: Cli, tmp_path: Path, s3: Any
) -> None:
    bucket = jobs_in(s3, tmp_path, ["job0", "job1", "job2"])
    long_name = "probes-" + "x" * 300 + ".jsonl"  # 313 bytes: past any local file system's 255
    s3.client().put_object(Bucket=bucket, Key=f"p/job1/{long_name}", Body=b"")
    result = cli("sync", f"s3://{bucket}/p/")
    assert result.stdout.endswith("3 found: 3 ingested, 0 unchanged, 0 failed\n")


def test_an_unreadable_object_fails_its_job_and_the_sync_goes_on(
    cli: Cli, tmp_path: Path, s3: Any
) -> None:
    bucket = jobs_in(s3, tmp_path, ["job0", "job1", "job2"])
    s3.traffic.dropped.add(f"{bucket}/p/job1/ref_s0.csv")
    result = cli("sync", f"s3://{bucket}/p/", ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: s3://{bucket}/p/job1: ref_s0.csv: cannot be read (")
    assert result.stderr.count("\n") == 1
    assert result.stdout.endswith(
        f"3 found: 2 ingested, 0 unchanged, 1 failed (s3://{bucket}/p/job1)\n"
    )


def test_names_with_control_characters_are_shown_escaped(cli: Cli, tmp_path: Path, s3: Any) -> None:
    bucket = jobs_in(s3, tmp_path, ["job0", "evil\x1b[2J\u202ejob"])
    result = cli("sync", f"s3://{bucket}/p/", ok=False)
    assert result.exit_code == 1
    for shown in (result.stdout, result.stderr):
        assert "\x1b" not in shown and "\u202e" not in shown
    assert result.stderr == (
        f"Error: s3://{bucket}/p/evil\\x1b[2J\\u202ejob: invalid job name 'evil\\x1b[2J\\u202ejob':"
        " use letters, digits, '.', '_' or '-', starting with a letter or digit, at most 100"
        " characters (the directory's name: name the job with --job)\n"
    )
    assert result.stdout.endswith(
        f"2 found: 1 ingested, 0 unchanged, 1 failed (s3://{bucket}/p/evil\\x1b[2J\\u202ejob)\n"
    )


class SecondServer(S3Server):
    """Another endpoint onto the same moto backends (they are the process's), with the
    session server's credentials: one a test may stop."""

    def __init__(self, keys: tuple[str, str]) -> None:
        self.keys = keys
        super().__init__()

    def _iam_user(self) -> tuple[str, str]:
        return self.keys


def test_a_storage_that_stops_answering_ends_the_pass_after_three_jobs(
    engine: Engine, tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = SecondServer((s3.key, s3.secret))  # stopped halfway through the pass
    for name, value in own.environment().items():
        monkeypatch.setenv(name, value)
    bucket = jobs_in(own, tmp_path, [f"job{i}" for i in range(7)])
    told: list[SyncedJob] = []

    def stop_after_the_first(job: SyncedJob) -> None:
        told.append(job)
        if len(told) == 1:
            own.stop()

    # fewer retries of each request than botocore's default: the same outcome, sooner
    quick = {"config_kwargs": {"retries": {"max_attempts": 1}}}
    options = SyncOptions(storage_options=quick)
    report = sync_prefix(engine, f"s3://{bucket}/p/", options, stop_after_the_first)
    assert [job.status for job in report.jobs] == [SyncStatus.INGESTED] + 3 * [SyncStatus.FAILED]
    assert all(job.unreachable for job in report.jobs[1:])
    assert report.outcome_line() == (
        f"4 found: 1 ingested, 0 unchanged, 3 failed (s3://{bucket}/p/job1, "
        f"s3://{bucket}/p/job2, s3://{bucket}/p/job3); stopped: the storage gave no files "
        "for 3 jobs in a row, 3 jobs not tried"
    )


def test_a_download_stops_once_more_bytes_arrive_than_listed(tmp_path: Path, s3: Any) -> None:
    bucket = jobs_in(s3, tmp_path, ["job0"])
    (directory,) = [d for d in open_source(f"s3://{bucket}/p/").walk() if d.name == "job0"]
    (listed,) = [f for f in directory.listing().files if f.name == "ref_s0.csv"]
    # rewritten after the listing: 8 MiB where the listing (checked by --max-file-size) said less
    s3.client().put_object(Bucket=bucket, Key="p/job0/ref_s0.csv", Body=b"1" * (8 << 20))
    s3.traffic.reset()
    with pytest.raises(BadInput) as refused:
        listed.open()
    assert str(refused.value) == (
        f"ref_s0.csv: more than the {listed.size} bytes listed arrived (rewritten while read?)"
    )
    assert s3.traffic.object_gets() == 1  # one ranged GET of the listed size, not eight
