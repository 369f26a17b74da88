"""Damaged curve chunks and summaries: every read refuses them with one line naming the job,
arm, metric and steps, never other numbers (seeded bit flips, truncation, swapped chunks);
``db check`` finds them all and ``db copy`` copies none of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xxhash
import zstandard
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tracker.errors import DamagedCurve
from tracker.models import Curve, CurveChunk, Job, JobSummary, Run
from tracker.sample import write_sample_job
from tracker.server import create_app
from tracker.store import codec
from tracker.store.curves import read_curve
from tracker.summary.model import STORED_FORMAT

STEPS = 20_000  # two chunks a curve


@pytest.fixture
def two_jobs(cli: Cli, tmp_path: Path) -> Cli:
    for name, seed in (("job1", 0), ("job2", 1)):
        job = write_sample_job(tmp_path / name, seed=seed, steps=STEPS, arms=("ref_s0",))
        cli("ingest", str(job))
    return cli


def chunk_of(session: Session, job: str, first: bool = False) -> CurveChunk:
    """The loss curve's second chunk of ``job``'s ref_s0 (its first with ``first``)."""
    chunks = session.scalars(
        select(CurveChunk)
        .join(Curve, Curve.id == CurveChunk.curve_id)
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Job.name == job, Curve.metric == "loss")
        .order_by(CurveChunk.first_step)
    ).all()
    return chunks[0 if first else 1]


def set_chunk(engine: Engine, chunk: CurveChunk, **values: object) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(CurveChunk)
            .where(CurveChunk.curve_id == chunk.curve_id, CurveChunk.first_step == chunk.first_step)
            .values(**values)
        )


def message(chunk: CurveChunk, job: str, reason: str) -> str:
    return (
        f"stored curve {job}/ref_s0 loss steps {chunk.first_step}-{chunk.last_step} is damaged"
        f" ({reason}); re-ingest the job from its files"
    )


def test_every_seeded_bit_flip_is_refused_never_read_as_other_numbers(
    two_jobs: Cli, engine: Engine
) -> None:
    rng = np.random.default_rng(33)
    with Session(engine) as session:
        chunk = chunk_of(session, "job2")
        curve_id, original = chunk.curve_id, bytes(chunk.data)
        session.expunge(chunk)
    for _ in range(60):
        damaged = bytearray(original)
        bit = int(rng.integers(len(damaged) * 8))
        damaged[bit // 8] ^= 1 << (bit % 8)
        set_chunk(engine, chunk, data=bytes(damaged))
        with Session(engine) as session, pytest.raises(DamagedCurve) as raised:
            read_curve(session, curve_id)
        assert str(raised.value) == message(chunk, "job2", "checksum mismatch")
    set_chunk(engine, chunk, data=original)
    result = two_jobs("query", "curve", "--job", "job2", "--arm", "ref_s0", "--format", "csv")
    assert result.stdout.count("\n") == STEPS + 1


def test_a_flip_in_the_cli_is_one_error_line(two_jobs: Cli, engine: Engine) -> None:
    with Session(engine) as session:
        chunk = chunk_of(session, "job2")
        session.expunge(chunk)
    set_chunk(
        engine, chunk, data=bytes([chunk.data[0]]) + bytes([chunk.data[1] ^ 4]) + chunk.data[2:]
    )
    result = two_jobs("query", "curve", "--job", "job2", "--arm", "ref_s0", ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {message(chunk, 'job2', 'checksum mismatch')}\n"
    assert two_jobs("query", "curve", "--job", "job1", "--arm", "ref_s0").exit_code == 0


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[: len(data) // 2], "truncated or undecodable"),
        (lambda data: b"", "empty chunk"),
        (lambda data: bytes([9]) + data[1:], "chunk format 9, this tracker reads 1"),
    ],
    ids=["truncated", "empty", "newer format"],
)
def test_truncated_and_unknown_chunks_are_one_line_even_with_a_matching_checksum(
    two_jobs: Cli, engine: Engine, damage: object, reason: str
) -> None:
    with Session(engine) as session:
        chunk = chunk_of(session, "job1")
        session.expunge(chunk)
    data = damage(bytes(chunk.data))  # type: ignore[operator]
    # first with its stored checksum, then as if written so (the checksum of the bad bytes)
    set_chunk(engine, chunk, data=data)
    result = two_jobs("query", "curve", "--job", "job1", "--arm", "ref_s0", ok=False)
    assert result.stderr == f"Error: {message(chunk, 'job1', 'checksum mismatch')}\n"
    seed = codec.curve_seed(chunk.curve_id, "job1", "ref_s0", "loss")
    set_chunk(engine, chunk, checksum=codec.checksum(data, seed))
    result = two_jobs("query", "curve", "--job", "job1", "--arm", "ref_s0", ok=False)
    assert (result.exit_code, result.stderr) == (1, f"Error: {message(chunk, 'job1', reason)}\n")


def swap(engine: Engine, a: CurveChunk, b: CurveChunk, columns: tuple[str, ...]) -> None:
    values_a = {name: getattr(a, name) for name in columns}
    values_b = {name: getattr(b, name) for name in columns}
    set_chunk(engine, a, **values_b)
    set_chunk(engine, b, **values_a)


@pytest.mark.parametrize(
    "columns",
    [("data",), ("data", "checksum"), ("data", "checksum", "n_points", "last_step")],
    ids=["data", "data and checksum", "whole rows"],
)
def test_chunks_swapped_between_jobs_are_refused(
    two_jobs: Cli, engine: Engine, columns: tuple[str, ...]
) -> None:
    with Session(engine) as session:
        one, two = chunk_of(session, "job1"), chunk_of(session, "job2")
        session.expunge_all()
    swap(engine, one, two, columns)
    for job, chunk in (("job1", one), ("job2", two)):
        with Session(engine) as session, pytest.raises(DamagedCurve) as raised:
            read_curve(session, chunk.curve_id)
        assert str(raised.value).startswith(f"stored curve {job}/ref_s0 loss steps")


def test_chunks_swapped_within_a_curve_are_refused(two_jobs: Cli, engine: Engine) -> None:
    with Session(engine) as session:
        first, second = chunk_of(session, "job1", first=True), chunk_of(session, "job1")
        session.expunge_all()
    swap(engine, first, second, ("data", "checksum"))
    with Session(engine) as session, pytest.raises(DamagedCurve, match="differ from its row"):
        read_curve(session, first.curve_id)


def test_db_check_reports_the_damaged_jobs(two_jobs: Cli, engine: Engine) -> None:
    clean = two_jobs("db", "check")
    assert clean.stdout.endswith("summaries: no damage found\n")
    with Session(engine) as session:
        chunk = chunk_of(session, "job2")
        session.expunge(chunk)
        job1 = session.scalar(select(Job.id).where(Job.name == "job1"))
    set_chunk(engine, chunk, data=chunk.data[:-3])
    frame = zstandard.compress(b'{"steps": 1}')  # not a summary, with a matching checksum
    sealed = xxhash.xxh3_64_digest(frame, seed=xxhash.xxh3_64_intdigest(b"job1"))
    with engine.begin() as connection:
        connection.execute(
            update(JobSummary)
            .where(JobSummary.job_id == job1)
            .values(data=bytes([STORED_FORMAT]) + sealed + frame)
        )
    result = two_jobs("db", "check", ok=False)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Error: {message(chunk, 'job2', 'checksum mismatch')}",
        "Error: stored summary of job job1 is damaged (KeyError reading it); re-ingest the"
        " job from its files",
    ]
    assert result.stdout.endswith("summaries: 2 jobs damaged: job1, job2\n")


def test_db_copy_verifies_before_it_writes(two_jobs: Cli, engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as session:
        chunk = chunk_of(session, "job2")
        session.expunge(chunk)
    set_chunk(engine, chunk, data=chunk.data[:-1] + bytes([chunk.data[-1] ^ 1]))
    destination = f"sqlite:///{tmp_path / 'copy.db'}"
    result = two_jobs("db", "copy", two_jobs.url, destination, ok=False)
    assert result.exit_code == 1
    assert result.stdout.startswith("job1: copied")
    assert result.stderr.endswith(f"Error: {message(chunk, 'job2', 'checksum mismatch')}\n")
    jobs = Cli(destination)("jobs", "--format", "csv").stdout
    assert "job1" in jobs and "job2" not in jobs


@pytest.fixture
def client(two_jobs: Cli) -> Iterator[TestClient]:
    app = create_app(two_jobs.url)
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as c:
        yield c


def test_the_server_answers_500_with_the_line_and_stays_up(
    client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        chunk = chunk_of(session, "job2")
        session.expunge(chunk)
    set_chunk(engine, chunk, checksum=chunk.checksum ^ 1)
    answer = client.get("/api/curve?job=job2&arm=ref_s0&start=16384&end=17000")
    assert answer.status_code == 500
    assert message(chunk, "job2", "checksum mismatch") in answer.text
    assert client.get("/api/curve?job=job1&arm=ref_s0&start=16384&end=17000").status_code == 200
    assert client.get("/api/curve?job=job2&arm=ref_s0&start=0&end=1000").status_code == 200


def test_a_browser_sees_the_damage_on_a_page_in_the_site_layout(
    client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        chunk = chunk_of(session, "job2", first=True)
        session.expunge(chunk)
    set_chunk(engine, chunk, checksum=chunk.checksum ^ 1)
    page = client.get("/jobs/job2", headers={"Accept": "text/html"})
    assert page.status_code == 500
    assert "<h1>500 Internal Server Error</h1>" in page.text
    assert message(chunk, "job2", "checksum mismatch") in page.text
    assert '<a href="/">all jobs</a>' in page.text
    assert client.get("/jobs/job1", headers={"Accept": "text/html"}).status_code == 200
