"""A curve's rows tied to its chunks and to where it belongs: a chunk lost, a curve row
altered or moved to another run, is refused on every read path with one line, and
``db check`` finds it (``tests/test_integrity.py``: damage inside a chunk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, select, text, update
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tests.migration_code import migration_module
from tracker.errors import DamagedCurve
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.sample import write_sample_job
from tracker.store import codec
from tracker.store.curves import arm_points, read_curve
from tracker.store.schema import downgrade, upgrade

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


def refused_everywhere(
    cli: Cli,
    client: TestClient,
    engine: Engine,
    out: Path,
    line: str,
    checked: list[str] | None = None,
    damaged: str = "job2",
    runs: tuple[str, ...] = (),
) -> None:
    """Every read of job2/ref_s0's loss, whole or a window of an intact chunk, is ``line``;
    ``db check`` says ``checked`` (by default ``line``) of the ``damaged`` jobs, then that the
    ``runs`` (``JOB/ARM``) their rows belong to are damaged; job1 reads as before unless it
    is one of them."""
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
    ):
        result = cli(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n"), args
    # an export checks the runs first, then goes by curve id: its line is one of db check's
    said = [*(checked or [line]), *(RUN_DAMAGED.format(run) for run in runs)]
    result = cli("export", str(out), "--job", "job2", ok=False)
    assert result.exit_code == 1
    assert result.stderr in [f"Error: {each}\n" for each in said]
    for path in (
        "/api/curve?job=job2&arm=ref_s0&start=0&end=100",
        "/api/plot?run=job2/ref_s0&start=0&end=100",
    ):
        answer = client.get(path)
        assert answer.status_code == 500 and line in answer.text, path
    if "job1" not in damaged:
        assert client.get("/api/curve?job=job1&arm=ref_s0&start=0&end=100").status_code == 200
    found = cli("db", "check", ok=False)
    assert found.exit_code == 1
    assert found.stderr.splitlines() == [f"Error: {each}" for each in said]
    jobs = damaged.split(", ")
    assert found.stdout.endswith(f": {len(jobs)} jobs damaged: {damaged}\n")


RUN_DAMAGED = "stored run {} is damaged (checksum mismatch); re-ingest the job from its files"


def test_a_missing_chunk_is_refused_never_read_as_a_shorter_curve(
    two_jobs: Cli, client: TestClient, engine: Engine, tmp_path: Path
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
    refused_everywhere(two_jobs, client, engine, tmp_path / "out", line)


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [("n_points", 39_999, "39999, steps 0-39999"), ("last_step", 40_000, "40000, steps 0-40000")],
)
def test_a_curve_row_that_disagrees_with_its_chunks_is_refused(
    two_jobs: Cli,
    client: TestClient,
    engine: Engine,
    tmp_path: Path,
    column: str,
    value: int,
    says: str,
) -> None:
    with engine.begin() as connection, Session(bind=connection) as session:
        curve = loss_curve(session, "job2")
        connection.execute(update(Curve).where(Curve.id == curve.id).values({column: value}))
        last = session.scalar(select(Curve.last_step).where(Curve.id == curve.id))
    line = (
        f"stored curve job2/ref_s0 loss steps 0-{last} is damaged (its chunks hold 40000"
        f" points, steps 0-{STEPS - 1}; its row says {says}); re-ingest the job from its files"
    )
    refused_everywhere(two_jobs, client, engine, tmp_path / "out", line, runs=("job2/ref_s0",))


def first_chunk_damaged(job: str, arm: str = "ref_s0") -> str:
    return (
        f"stored curve {job}/{arm} loss steps 0-16383 is damaged (checksum mismatch); re-ingest"
        " the job from its files"
    )


def test_curve_rows_swapped_between_jobs_are_refused(
    two_jobs: Cli, client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    """job1's and job2's ref_s0 loss curves moved to each other's run: neither reads as the
    other's (the chunks' checksums are seeded with the curve's job, arm and metric)."""
    with engine.begin() as connection, Session(bind=connection) as session:
        one, two = loss_curve(session, "job1"), loss_curve(session, "job2")
        runs = (one.run_id, two.run_id)
        connection.execute(update(Curve).where(Curve.id == one.id).values(metric="moved"))
        connection.execute(update(Curve).where(Curve.id == two.id).values(run_id=runs[0]))
        connection.execute(
            update(Curve).where(Curve.id == one.id).values(run_id=runs[1], metric="loss")
        )
    lines = [first_chunk_damaged("job1"), first_chunk_damaged("job2")]
    refused_everywhere(
        two_jobs,
        client,
        engine,
        tmp_path / "out",
        lines[1],
        lines,
        "job1, job2",
        ("job1/ref_s0", "job2/ref_s0"),
    )


def test_arm_names_swapped_are_refused(
    two_jobs: Cli, client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    with engine.begin() as connection:
        job2 = connection.scalar(select(Job.id).where(Job.name == "job2"))
        for old, new in (("ref_s0", "swapping"), ("ref_s1", "ref_s0"), ("swapping", "ref_s1")):
            connection.execute(
                update(Run).where(Run.job_id == job2, Run.arm == old).values(arm=new)
            )
        metrics = connection.execute(
            select(Curve.metric).distinct().join(Run).where(Run.job_id == job2)
        ).scalars()
        order = sorted(metrics)  # as db check goes: by curve id, so ref_s0's metrics first
    checked = [
        first_chunk_damaged("job2", arm).replace(" loss ", f" {metric} ")
        for arm in ("ref_s1", "ref_s0")
        for metric in order
    ]
    line = first_chunk_damaged("job2")
    runs = ("job2/ref_s1", "job2/ref_s0")  # in id order: ref_s0's row is named ref_s1 now
    refused_everywhere(two_jobs, client, engine, tmp_path / "out", line, checked, "job2", runs)


def checksums(engine: Engine) -> list[tuple[int, int, int]]:
    with engine.connect() as connection:
        query = "SELECT curve_id, first_step, checksum FROM curve_chunk ORDER BY 1, 2"
        return [tuple(row) for row in connection.execute(text(query))]  # type: ignore[misc]


def test_the_migration_reseeds_every_checksum_and_keeps_damage_damaged(
    two_jobs: Cli, engine: Engine
) -> None:
    migration = migration_module("0012_chunk_checksum_place.py")
    assert migration.place_seed(7, "job", "arm", "loss") == codec.curve_seed(
        7, "job", "arm", "loss"
    )
    with Session(engine) as session:
        damaged = loss_curve(session, "job2")
    at_head = checksums(engine)
    with engine.begin() as connection:
        connection.execute(
            update(CurveChunk)
            .where(CurveChunk.curve_id == damaged.id, CurveChunk.first_step == 0)
            .values(checksum=CurveChunk.checksum + 1)
        )
    downgrade(engine, "0011")
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT curve_id, first_step, data, checksum FROM curve_chunk")
        )
        for curve_id, first_step, data, stored in rows:
            by_id = codec.checksum(bytes(data), curve_id)  # what 0010 and 0011 read
            assert (stored == by_id) != ((curve_id, first_step) == (damaged.id, 0))
    upgrade(engine)
    again = checksums(engine)
    assert [row for row in again if row[:2] != (damaged.id, 0)] == [
        row for row in at_head if row[:2] != (damaged.id, 0)
    ]
    with Session(engine) as session, pytest.raises(DamagedCurve, match="checksum mismatch"):
        read_curve(session, damaged.id)
