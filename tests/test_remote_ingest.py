"""`tracker ingest URL`: job directories behind fsspec URLs, read as from disk.

S3 is moto's real S3 API server on loopback (``s3`` fixture, ``tests/s3_server.py``), with
credentials checked; ``memory://`` covers the fsspec path without a server; ``hf://`` is
checked as far as it can be offline. Every store either lands whole or leaves nothing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tests.conftest import Cli, require
from tests.remote_jobs import job_rows, put_in_memory, stored_text
from tracker.models import Job
from tracker.sample import write_sample_job

STEPS = 30


def job_count(engine: Engine) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(Job)) or 0


def in_s3(s3: Any, directory: Path) -> str:
    bucket = s3.new_bucket()
    s3.upload(directory, bucket, f"study/{directory.name}")
    return f"s3://{bucket}/study/{directory.name}"


def put_at(where: str, job: Path, request: pytest.FixtureRequest) -> str:
    if where == "file":
        return f"file://{job.resolve()}"
    if where == "memory":
        return put_in_memory(job)
    return in_s3(request.getfixturevalue("s3"), job)


@pytest.mark.parametrize("where", ["memory", "file", "s3"])
def test_a_remote_job_is_stored_as_the_same_job_from_disk(
    cli: Cli, engine: Engine, tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    job = write_sample_job(tmp_path / "job1", steps=STEPS)
    (job / "notes.txt").write_text("skipped\n")
    url = put_at(where, job, request)
    local = cli("ingest", str(job), "--job", "local")
    remote = cli("ingest", url, "--job", "remote")
    assert remote.stdout == local.stdout.replace("local:", "remote:")
    assert remote.stdout.startswith("remote: ingested 25 probes (1 failed), 4 arms, 360 points")
    assert job_rows(engine, "remote") == job_rows(engine, "local")  # digest, rows, verdicts
    with Session(engine) as session:
        sources = {name: path for name, path in session.execute(select(Job.name, Job.source_path))}
    assert sources == {"local": str(job.resolve()), "remote": url}
    again = cli("ingest", url, "--job", "local")  # the same content, from the other place
    assert again.stdout == (
        "local: unchanged, already ingested with identical content\n  skipped: notes.txt\n"
    )


def test_bad_remote_input_names_the_url_and_the_file(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    job = write_sample_job(tmp_path / "job1", steps=STEPS)
    csv = job / "ref_s0.csv"
    csv.write_text(csv.read_text().replace("\n3,", "\nthree,", 1))
    url = put_in_memory(job)
    result = cli("ingest", url, ok=False)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"Error: {url}: ref_s0.csv line 5: step 'three' is not an integer\n"
    assert job_count(engine) == 0
    missing = cli("ingest", url + "-gone", ok=False)
    assert missing.stderr == f"Error: {url}-gone: no such directory\n"
    slash = cli("ingest", url + "-gone/", ok=False)  # named once, as given
    assert slash.stderr == f"Error: {url}-gone/: no such directory\n"


def test_a_truncated_remote_file_is_refused_and_nothing_stored(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any
) -> None:
    url = in_s3(s3, write_sample_job(tmp_path / "job1", steps=STEPS))
    s3.traffic.short.add(url.removeprefix("s3://") + "/ref_s0.csv")  # half its bytes arrive
    result = cli("ingest", url, ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {url}: ref_s0.csv: cannot be read (")
    assert result.stderr.count("\n") == 1
    assert job_count(engine) == 0


def test_a_server_that_stops_mid_transfer_is_one_line_and_nothing_stored(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any
) -> None:
    url = in_s3(s3, write_sample_job(tmp_path / "job1", steps=STEPS))
    s3.traffic.dropped.add(url.removeprefix("s3://") + "/flash_s0.csv")
    result = cli("ingest", url, ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {url}: flash_s0.csv: cannot be read (")
    assert "Not enough data" in result.stderr
    assert result.stderr.count("\n") == 1
    assert job_count(engine) == 0


def test_a_missing_bucket_is_one_line(cli: Cli, engine: Engine, s3: Any) -> None:
    result = cli("ingest", "s3://no-such-bucket-here/study/job1", ok=False)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: s3://no-such-bucket-here/study/job1: The specified bucket does not exist; "
        "nothing was stored\n"
    )
    assert job_count(engine) == 0


def test_wrong_credentials_are_one_line_that_shows_no_secret(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any
) -> None:
    url = in_s3(s3, write_sample_job(tmp_path / "job1", steps=STEPS))
    secret = "wrong-secret-5e1f0a"
    result = cli(
        "ingest", url, "--storage-option", "key=AKIAWRONGKEY0000", "--storage-option",
        f"secret={secret}", ok=False,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {url}: access denied (The AWS Access Key Id you provided does not exist in "
        "our records.); nothing was stored\n"
    )
    assert secret not in result.output + result.stderr
    assert job_count(engine) == 0


def test_a_denied_access_is_one_line(cli: Cli, engine: Engine, tmp_path: Path, s3: Any) -> None:
    url = in_s3(s3, write_sample_job(tmp_path / "job1", steps=STEPS))
    key, secret = s3.new_user(s3.key, s3.secret, allowed=False)
    result = cli(
        "ingest", url, "--storage-option", f"key={key}", "--storage-option", f"secret={secret}",
        ok=False,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == f"Error: {url}: access denied (Access Denied); nothing was stored\n"
    assert job_count(engine) == 0


def test_an_unknown_protocol_is_one_line(cli: Cli) -> None:
    result = cli("ingest", "nosuch://bucket/job1", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: nosuch://bucket/job1: no URL scheme 'nosuch'; known: s3, gs, gcs, hf, az, abfs, "
        "http, https, file, memory, or a local path\n"
    )


def test_credentials_given_as_storage_options_are_never_stored_or_shown(
    cli: Cli, engine: Engine, tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = in_s3(s3, write_sample_job(tmp_path / "job1", steps=STEPS))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # only the options hold them now
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = cli(
        "ingest", url, "--storage-option", f"key={s3.key}", "--storage-option",
        f"secret={s3.secret}", "--meta", "gpu=H100",
    )  # fmt: skip
    assert result.stdout.startswith("job1: ingested 25 probes")
    assert s3.secret not in result.output + result.stderr
    assert s3.secret not in stored_text(engine)
    assert url in stored_text(engine)  # the search does find what is stored


def test_an_unreachable_endpoint_is_one_line(cli: Cli, engine: Engine) -> None:
    result = cli(
        "ingest", "s3://bucket/study/job1", "--storage-option", "endpoint_url=http://127.0.0.1:9",
        "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}', ok=False,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.startswith(
        'Error: s3://bucket/study/job1: Could not connect to the endpoint URL: "http://127.0.0.1:9/'
    )
    assert result.stderr.endswith("; nothing was stored\n")
    assert job_count(engine) == 0


def test_an_hf_bucket_url_is_read_by_huggingface_hubs_filesystem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require(importlib.util.find_spec("huggingface_hub") is not None, "tracker[hf] not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import HfFileSystem

    from tracker.jobdir.source import RemoteSource, open_source

    source = open_source("hf://buckets/ORG/flashoptim-repro/job7/")
    assert isinstance(source, RemoteSource)
    assert isinstance(source.fs, HfFileSystem)
    assert (source.name, source.stored_location) == (
        "job7",
        "hf://buckets/ORG/flashoptim-repro/job7",
    )


@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [
        ("hf://buckets/ORG/flashoptim-repro/job7", "huggingface_hub", "hf"),
        ("gs://bucket/study/job7", "gcsfs", "gcs"),
        ("s3://bucket/study/job7", "s3fs", "s3"),
    ],
)
def test_a_url_whose_extra_is_missing_names_the_extra(
    tmp_path: Path, url: str, package: str, extra: str
) -> None:
    # the package removed from the process, as on a machine without the extra
    script = (
        f"import sys; sys.modules[{package!r}] = None; sys.argv = ['tracker', *sys.argv[1:]]; "
        "from tracker.cli import main; main()"
    )
    db = f"sqlite:///{tmp_path / 't.db'}"
    result = subprocess.run(
        [sys.executable, "-c", script, "--db", db, "ingest", url],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert (result.returncode, result.stdout) == (1, "")
    protocol = url.split(":")[0]
    assert result.stderr == (
        f"Error: {url}: reading {protocol}:// needs {package}: pip install 'tracker[{extra}]'\n"
    )


def test_help_does_not_import_fsspec() -> None:
    code = "import sys; from tracker.cli import app; print('fsspec' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout == "False\n"


def test_a_storage_option_without_a_value_is_a_usage_error(cli: Cli) -> None:
    result = cli("ingest", "memory://x/job1", "--storage-option", "anon", ok=False)
    assert result.exit_code == 2
    assert "expected KEY=VALUE, got 'anon'=..." in result.stderr
