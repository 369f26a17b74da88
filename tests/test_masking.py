"""No secret in a log or a message: the server's access line masks ``?token=``, and a URL's
credentials (``s3://KEY:SECRET@``, ``http://user:pass@``, ``?secret=``) are masked in every
error line and in the job's stored source."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.remote_jobs import put_in_memory
from tracker.masking import masked
from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.server.listen import mask_access_line


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("s3://AKIAKEY:se/cr+et@bucket/p", "s3://***@bucket/p"),
        (
            "see https://user:pass@host/x?secret=abc&job=1.",
            "see https://***@host/x?secret=***&job=1.",
        ),
        ("/login?token=abc", "/login?token=***"),
        ("gs://b/p?X-Goog-Signature=f00&a=1", "gs://b/p?X-Goog-Signature=***&a=1"),
        ("postgresql+psycopg://me@dbhost/tracker", "postgresql+psycopg://me@dbhost/tracker"),
        ("http://host:8080/path?job=a", "http://host:8080/path?job=a"),
    ],
)
def test_credentials_in_urls_are_masked(text: str, shown: str) -> None:
    assert masked(text) == shown


def test_the_access_line_never_carries_the_token() -> None:
    """The record exactly as uvicorn's access logger makes it."""
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:50000", "GET", "/login?token=s3cr3t-token&next=/runs", "1.1", 303), None,
    )  # fmt: skip
    assert mask_access_line(record)
    assert record.getMessage() == (
        '127.0.0.1:50000 - "GET /login?token=***&next=/runs HTTP/1.1" 303'
    )


def test_credentials_in_a_url_are_masked_in_the_error_line(cli: Cli) -> None:
    result = cli("ingest", "nosuch://AKIAKEY:TOPSECRET@bucket/job?secret=alsosecret", ok=False)
    assert result.exit_code == 1
    assert "TOPSECRET" not in result.stderr and "alsosecret" not in result.stderr
    assert result.stderr.startswith("Error: nosuch://***@bucket/job?secret=***: ")


def test_the_stored_source_keeps_no_credentials(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    url = put_in_memory(write_sample_job(tmp_path / "job1", steps=20))
    root, name = url.removeprefix("memory://").split("/")
    # memory:// takes what stands before @ as part of its path: the files go there too
    with_credentials = f"memory://user:hunter2@{root}/{name}"
    import fsspec

    fsspec.filesystem("memory").put(str(tmp_path / "job1"), with_credentials, recursive=True)
    cli("ingest", with_credentials)
    with Session(engine) as session:
        (source,) = session.scalars(select(Job.source_path)).all()
    assert source == f"memory://***@{root}/{name}"
