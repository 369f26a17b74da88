"""A curve's rows tied to its chunks and to where it belongs: a chunk lost, a curve row
altered or moved to another run, is refused on every read path with one line, and
``db check`` finds it (``tests/test_integrity.py``: damage inside a chunk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tracker.errors import DamagedCurve
from tracker.jobdir.sample import write_sample_job
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.store.curves import arm_points, read_curve

STEPS = 40_000  # three chunks a curve: 16,384 + 16,384 + 7,232 points


@pytest.fixture
def two_jobs(cli: Cli, tmp_path: Path) -> Cli:
    for name, seed in (("job1", 0), ("job2", 1)):
        job = write_sample_job(tmp_path / name, seed=seed, steps=STEPS, arms=("ref_s0", "ref_s1"))
        cli("ingest", str(job))
    return cli


@pytest.fixture
def client(two_jobs: Cli) -> Iterator[TestClient]:
    with client_for(two_jobs.url) as client:
        yield client


def loss_curve(session: Session, job: str, arm: str = "ref_s0") -> Curve:
    return session.scalars(
        select(Curve)
        .join(Run, Run.id == Curve.run_id)
        .join(Job, Job.id == Run.job_id)
        .where(Job.name == job, Run.arm == arm, Curve.metric == "loss")
    ).one()


def refused_everywhere(cli: Cli, client: TestClient, engine: Engine, line: str) -> None:
    """Every read of job2/ref_s0's loss, whole or a window of an intact chunk, is ``line``;
    job1 reads as before."""
    with Session(engine) as session:
        curve = loss_curve(session, "job2")
        for steps in (None, (0, 100)):
            with pytest.raises(DamagedCurve) as raised:
                read_curve(session, curve.id, steps)
            assert str(raised.value) == line
        with pytest.raises(DamagedCurve) as raised:
            arm_points(session, curve.run.job_id)
        assert str(raised.value) == line
    for args in (
        ("query", "curve", "--job", "job2", "--arm", "ref_s0"),
        ("query", "curve", "--job", "job2", "--arm", "ref_s0", "--start", "0", "--end", "100"),
        ("export", str(Path(cli.url.split("///")[-1]).parent / "out"), "--job", "job2"),
    ):
        result = cli(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n"), args
    for path in (
        "/api/curve?job=job2&arm=ref_s0&start=0&end=100",
        "/api/plot?run=job2/ref_s0&start=0&end=100",
    ):
        answer = client.get(path)
        assert answer.status_code == 500 and line in answer.text, path
    assert client.get("/api/curve?job=job1&arm=ref_s0&start=0&end=100").status_code == 200
    checked = cli("db", "check", ok=False)
    assert checked.exit_code == 1
    assert checked.stderr == f"Error: {line}\n"
    assert checked.stdout.endswith(": 1 jobs damaged: job2\n")


def test_a_missing_chunk_is_refused_never_read_as_a_shorter_curve(
    two_jobs: Cli, client: TestClient, engine: Engine
) -> None:
    with engine.begin() as connection, Session(bind=connection) as session:
        curve = loss_curve(session, "job2")
        connection.execute(
            delete(CurveChunk).where(
                CurveChunk.curve_id == curve.id, CurveChunk.first_step == 16_384
            )
        )
    line = (
        f"stored curve job2/ref_s0 loss steps 0-{STEPS - 1} is damaged (its chunks hold 23616"
        f" points, steps 0-{STEPS - 1}; its row says 40000, steps 0-{STEPS - 1}); re-ingest the"
        " job from its files"
    )
    refused_everywhere(two_jobs, client, engine, line)


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [("n_points", 39_999, "39999, steps 0-39999"), ("last_step", 40_000, "40000, steps 0-40000")],
)
def test_a_curve_row_that_disagrees_with_its_chunks_is_refused(
    two_jobs: Cli, client: TestClient, engine: Engine, column: str, value: int, says: str
) -> None:
    with engine.begin() as connection, Session(bind=connection) as session:
        curve = loss_curve(session, "job2")
        connection.execute(update(Curve).where(Curve.id == curve.id).values({column: value}))
        last = session.scalar(select(Curve.last_step).where(Curve.id == curve.id))
    line = (
        f"stored curve job2/ref_s0 loss steps 0-{last} is damaged (its chunks hold 40000"
        f" points, steps 0-{STEPS - 1}; its row says {says}); re-ingest the job from its files"
    )
    refused_everywhere(two_jobs, client, engine, line)
