"""Derived rows (a job's kept summary, verdicts, numbers; a curve's numbers) checked against
what they derive from or by a checksum, on every read and by ``db check``, which rebuilds
them with ``--repair`` (``db rederive --force`` rebuilds every job's); SQLite's own
``integrity_check`` run by ``db check``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tests.migration_code import migration_module
from tracker.models import (
    Curve,
    Job,
    JobIndex,
    JobNumber,
    JobSummary,
    JobVerdicts,
    Run,
    RunIndex,
    VerdictKey,
)
from tracker.store import packed_verdicts
from tracker.store.run_index import run_index_checksum
from tracker.store.schema import downgrade, upgrade
from tracker.store.verdict_columns import VerdictColumns, VerdictRow
from tracker.summary.version import CODE_DIGEST

# the study fixture's jobs: two sample jobs, ingested once a session and copied to each test
JOBS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "job1": ({"seed": 0}, []),
    "job2": ({"seed": 1}, []),
}
STEPS = 300


def summary_of(engine: Engine, job: str) -> bytes:
    with Session(engine) as session:
        return bytes(
            session.scalars(
                select(JobSummary.data)
                .join(Job, Job.id == JobSummary.job_id)
                .where(Job.name == job)
            ).one()
        )


def set_summary(engine: Engine, job: str, data: bytes) -> None:
    with engine.begin() as connection:
        job_id = connection.scalar(select(Job.id).where(Job.name == job))
        connection.execute(update(JobSummary).where(JobSummary.job_id == job_id).values(data=data))


SUMMARY_DAMAGED = (
    "stored summary of job job2 is damaged (checksum mismatch); re-ingest the job from its files"
)


@pytest.mark.parametrize("at", [-1, 20, 9])  # the frame's end, its middle, its first byte
def test_a_flipped_bit_in_a_kept_summary_is_refused_and_repaired(
    study: Cli, client: TestClient, engine: Engine, tmp_path: Path, at: int
) -> None:
    intact = summary_of(engine, "job2")
    damaged = bytearray(intact)
    damaged[at] ^= 0x10
    set_summary(engine, "job2", bytes(damaged))
    for path in ("/jobs/job2/", "/api/jobs/job2"):
        answer = client.get(path)
        assert answer.status_code == 500 and SUMMARY_DAMAGED in answer.text, path
    assert client.get("/api/jobs/job1").status_code == 200
    assert client.get("/").status_code == 200  # the index reads the job's index row alone
    report = study("report", "--out", str(tmp_path / "report"), ok=False)
    assert (report.exit_code, report.stderr) == (1, f"Error: {SUMMARY_DAMAGED}\n")
    checked = study("db", "check", ok=False)
    assert (checked.exit_code, checked.stderr) == (1, f"Error: {SUMMARY_DAMAGED}\n")
    assert checked.stdout.endswith("summaries: 1 jobs damaged: job2\n")
    repaired = study("db", "check", "--repair")
    assert repaired.stdout.splitlines()[0] == "job2: rebuilt"
    assert repaired.stdout.endswith(
        "1 jobs damaged: job2; derived rows rebuilt from the points: job2\n"
    )
    assert summary_of(engine, "job2") == intact
    assert study("db", "check").stdout.endswith(": no damage found\n")
    assert client.get("/jobs/job2/").status_code == 200


def test_a_flipped_bit_in_a_jobs_index_row_is_refused_and_repaired(
    study: Cli, client: TestClient, engine: Engine
) -> None:
    with engine.begin() as connection:
        job_id = connection.scalar(select(Job.id).where(Job.name == "job2"))
        intact = bytes(
            connection.scalar(select(JobIndex.grid_curves).where(JobIndex.job_id == job_id))
        )
        damaged = bytearray(intact)
        damaged[-1] ^= 0x10
        where = JobIndex.job_id == job_id
        connection.execute(update(JobIndex).where(where).values(grid_curves=bytes(damaged)))
    answer = client.get("/")
    assert answer.status_code == 500 and SUMMARY_DAMAGED in answer.text
    with engine.begin() as connection:  # the curves intact, a count changed
        connection.execute(
            update(JobIndex).where(where).values(grid_curves=intact, failed=JobIndex.failed + 1)
        )
    counts_damaged = (
        "verdicts and numbers of job job2 are damaged (verdict counts' checksum mismatch)"
    )
    for path in ("/", "/api/runs"):
        answer = client.get(path)
        assert answer.status_code == 500 and counts_damaged in answer.text, path
    checked = study("db", "check", ok=False)
    assert checked.exit_code == 1 and counts_damaged in checked.stderr
    study("db", "check", "--repair")
    assert study("db", "check").stdout.endswith(": no damage found\n")
    assert client.get("/").status_code == 200


def run_index_line(reason: str) -> str:
    return (
        f"stored runs index of job job2 is damaged ({reason});"
        " rebuild it with `tracker db check --repair`"
    )


def test_a_flipped_bit_in_a_run_index_is_refused_and_repaired(
    study: Cli, client: TestClient, engine: Engine
) -> None:
    shown = ("query", "runs", "--format", "csv")
    intact_table = study(*shown).stdout
    with engine.begin() as connection:
        job_id = connection.scalar(select(Job.id).where(Job.name == "job2"))
        where = RunIndex.job_id == job_id
        damaged = bytearray(connection.scalar(select(RunIndex.runs).where(where)))
        damaged[len(damaged) // 2] ^= 0x01
        connection.execute(update(RunIndex).where(where).values(runs=bytes(damaged)))
    line = run_index_line("checksum mismatch")
    for args in (shown, ("claims",)):
        refused = study(*args, ok=False)
        assert (refused.exit_code, refused.stderr) == (1, f"Error: {line}\n"), args
    for path in ("/runs", "/api/runs"):
        answer = client.get(path)
        assert answer.status_code == 500 and line in answer.text, path
    checked = study("db", "check", ok=False)
    assert (checked.exit_code, checked.stderr) == (1, f"Error: {line}\n")
    assert study("db", "check", "--repair").stdout.splitlines()[0] == "job2: rebuilt"
    assert study("db", "check").stdout.endswith(": no damage found\n")
    assert study(*shown).stdout == intact_table


def test_a_run_index_that_is_not_its_runs_is_found_and_rebuilt(study: Cli, engine: Engine) -> None:
    """job1's index sealed as job2's: its checksum holds, ``db check`` compares it with the
    runs."""
    shown = ("query", "runs", "--format", "csv")
    intact_table = study(*shown).stdout
    with engine.begin() as connection:
        ids = {name: job_id for name, job_id in connection.execute(select(Job.name, Job.id))}
        runs = bytes(connection.scalar(select(RunIndex.runs).where(RunIndex.job_id == ids["job1"])))
        connection.execute(
            update(RunIndex)
            .where(RunIndex.job_id == ids["job2"])
            .values(runs=runs, checksum=run_index_checksum(ids["job2"], CODE_DIGEST, runs))
        )
    assert study(*shown).stdout != intact_table  # read as kept: only a check compares
    checked = study("db", "check", ok=False)
    line = run_index_line("it differs from its runs")
    assert (checked.exit_code, checked.stderr) == (1, f"Error: {line}\n")
    study("db", "check", "--repair")
    assert study("db", "check").stdout.endswith(": no damage found\n")
    assert study(*shown).stdout == intact_table


def test_a_summary_and_index_curves_moved_from_another_job_are_refused_and_repaired(
    study: Cli, client: TestClient, engine: Engine
) -> None:
    """Intact bytes of job1's, in job2's rows: their checksums are sealed for job1."""
    intact = summary_of(engine, "job2")
    set_summary(engine, "job2", summary_of(engine, "job1"))
    for path in ("/jobs/job2/", "/api/jobs/job2"):
        answer = client.get(path)
        assert answer.status_code == 500 and SUMMARY_DAMAGED in answer.text, path
    with engine.begin() as connection:
        ids = {name: job_id for name, job_id in connection.execute(select(Job.name, Job.id))}
        curves = select(JobIndex.grid_curves).where(JobIndex.job_id == ids["job1"])
        connection.execute(
            update(JobIndex)
            .where(JobIndex.job_id == ids["job2"])
            .values(grid_curves=connection.scalar(curves))
        )
    answer = client.get("/")
    assert answer.status_code == 500 and SUMMARY_DAMAGED in answer.text
    checked = study("db", "check", ok=False)
    assert (checked.exit_code, checked.stderr) == (1, f"Error: {SUMMARY_DAMAGED}\n")
    study("db", "check", "--repair")
    assert summary_of(engine, "job2") == intact
    assert study("db", "check").stdout.endswith(": no damage found\n")
    assert client.get("/").status_code == 200 and client.get("/jobs/job2/").status_code == 200


def test_db_check_does_not_repair_what_the_points_cannot_rebuild(
    study: Cli, engine: Engine
) -> None:
    damaged = bytearray(summary_of(engine, "job2"))
    damaged[-1] ^= 1
    set_summary(engine, "job2", bytes(damaged))
    with engine.begin() as connection:  # job2's points lost too: its files are needed
        connection.exec_driver_sql(
            "DELETE FROM curve_chunk WHERE curve_id IN (SELECT c.id FROM curve c JOIN run r"
            " ON r.id = c.run_id JOIN job j ON j.id = r.job_id WHERE j.name = 'job2')"
        )
    checked = study("db", "check", "--repair", ok=False)
    assert checked.exit_code == 1
    assert checked.stderr.splitlines()[-1] == f"Error: {SUMMARY_DAMAGED}"
    assert checked.stdout.endswith("summaries: 1 jobs damaged: job2\n")


def test_rederive_force_rebuilds_every_job(study: Cli, engine: Engine) -> None:
    damaged = bytearray(summary_of(engine, "job1"))
    damaged[-1] ^= 1
    set_summary(engine, "job1", bytes(damaged))
    assert study("db", "rederive").stdout == "0 jobs rederived, 2 already up to date\n"
    forced = study("db", "rederive", "--force")
    assert forced.stdout == (
        "job1: rederived\njob2: rederived\n2 jobs rederived, 0 already up to date\n"
    )
    assert study("db", "check").stdout.endswith(": no damage found\n")


def test_db_check_runs_sqlites_integrity_check(study: Cli, db_url: str) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("PostgreSQL has no built-in checker of its pages (amcheck is an extension)")
    path = db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:  # an index that disagrees with its table
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX ix_run_job_id ON run (seed)'"
            " WHERE name = 'ix_run_job_id'"
        )
    connection.close()
    checked = study("db", "check", ok=False)
    assert checked.exit_code == 1
    lines = checked.stderr.splitlines()
    assert lines and all(line.startswith("Error: SQLite's integrity_check: ") for line in lines), (
        lines
    )
    assert "missing from index ix_run_job_id" in lines[0]
    assert checked.stdout.endswith(
        f": no damage found; the database file is damaged ({len(lines)} problems found by"
        " SQLite's integrity_check)\n"
    )


def test_0013_adds_the_checksum_and_its_downgrade_takes_it_out(study: Cli, engine: Engine) -> None:
    intact = summary_of(engine, "job1")
    damaged = bytearray(summary_of(engine, "job2"))
    damaged[-1] ^= 1
    set_summary(engine, "job2", bytes(damaged))
    downgrade(engine, "0012")
    assert summary_of(engine, "job1") == b"\x01" + intact[9:]  # format 1, as 0008 wrote it
    with Session(engine) as session:  # a damaged one is not carried over as intact
        assert session.scalars(select(Job.name).join(JobSummary)).all() == ["job1"]
    upgrade(engine)
    assert summary_of(engine, "job1") == intact


@pytest.mark.parametrize(
    ("column", "value"),
    [("last_value", 9.5), ("min_value", -1.0), ("first_value", float("nan")), ("n_nonfinite", 7)],
)
def test_altered_curve_numbers_are_found_and_rewritten_from_the_points(
    study: Cli, engine: Engine, column: str, value: float
) -> None:
    with engine.begin() as connection:
        curve_id, kept = connection.execute(
            select(Curve.id, getattr(Curve, column))
            .join(Run, Run.id == Curve.run_id)
            .join(Job, Job.id == Run.job_id)
            .where(Job.name == "job2", Run.arm == "ref_s1", Curve.metric == "loss")
        ).one()
        connection.execute(update(Curve).where(Curve.id == curve_id).values({column: value}))
    line = (
        f"stored curve job2/ref_s1 loss: its row's {column} is {value}, its points give {kept};"
        " rebuild it with `tracker db check --repair`"
    )
    checked = study("db", "check", ok=False)
    assert (checked.exit_code, checked.stderr) == (1, f"Error: {line}\n")
    assert checked.stdout.endswith(": 1 jobs damaged: job2\n")
    repaired = study("db", "check", "--repair")
    assert repaired.stdout.endswith("derived rows rebuilt from the points: job2\n")
    with Session(engine) as session:
        assert repr(session.get(Curve, curve_id).__dict__[column]) == repr(kept)  # type: ignore[union-attr]
    assert study("db", "check").stdout.endswith(": no damage found\n")


def test_an_altered_verdict_or_number_is_found_and_rebuilt(
    study: Cli, engine: Engine, tmp_path: Path
) -> None:
    with engine.begin() as connection:
        job2 = connection.scalar(select(Job.id).where(Job.name == "job2"))
        measured = np.frombuffer(
            connection.scalar(select(JobVerdicts.measured).where(JobVerdicts.job_id == job2)),
            "<f8",
        ).copy()
        measured[0] += 1  # the first verdict's
        connection.execute(
            update(JobVerdicts)
            .where(JobVerdicts.job_id == job2)
            .values(measured=measured.astype("<f8").tobytes())
        )
        job1 = connection.scalar(select(Job.id).where(Job.name == "job1"))
        connection.execute(
            update(JobNumber)
            .where(JobNumber.job_id == job1, JobNumber.name == "ema_delta")
            .values(value=0.5)
        )
    damaged = (
        "stored verdicts and numbers of job {} are damaged (checksum mismatch); rebuild them"
        " with `tracker db check --repair`"
    )
    checked = study("db", "check", ok=False)
    assert checked.exit_code == 1
    assert checked.stderr.splitlines() == [
        f"Error: {damaged.format(job)}" for job in ("job1", "job2")
    ]
    # every read of them: claims, the report, compare; the home page and claims served (the
    # runs table reads the counts kept beside them, which have their own checksum)
    for args in (
        ("claims",),
        ("report", "--out", str(tmp_path / "report")),
        ("compare", "job1", "job2"),
    ):
        result = study(*args, ok=False)
        assert result.exit_code == 1, args
        assert result.stderr == f"Error: {damaged.format('job1')}\n", args
    with client_for(study.url) as client:
        for path in ("/", "/api/claims"):
            answer = client.get(path)
            assert answer.status_code == 500 and damaged.format("job1") in answer.text, path
    repaired = study("db", "check", "--repair")
    assert repaired.stdout.splitlines()[:2] == ["job1: rebuilt", "job2: rebuilt"]
    assert study("db", "check").stdout.endswith(": no damage found\n")


def test_an_altered_verdict_key_is_found_in_every_job_using_it_and_rebuilt(
    study: Cli, engine: Engine
) -> None:
    with engine.begin() as connection:  # a key both jobs share: its status flipped
        ids = [np.frombuffer(k, "<i4") for k in connection.scalars(select(JobVerdicts.keys))]
        key = int(ids[0][0])  # the first verdict's key
        assert [key in own for own in ids] == [True, True]
        status = connection.scalar(select(VerdictKey.status).where(VerdictKey.id == key))
        flipped = "FAIL" if status != "FAIL" else "PASS"
        connection.execute(update(VerdictKey).where(VerdictKey.id == key).values(status=flipped))
    damaged = (
        "Error: stored verdicts and numbers of job {} are damaged (checksum mismatch); rebuild"
        " them with `tracker db check --repair`"
    )
    checked = study("db", "check", ok=False)
    assert checked.stderr.splitlines() == [damaged.format(job) for job in ("job1", "job2")]
    assert study("claims", ok=False).stderr == damaged.format("job1") + "\n"
    repaired = study("db", "check", "--repair")
    assert repaired.stdout.splitlines()[:2] == ["job1: rebuilt", "job2: rebuilt"]
    assert study("db", "check").stdout.endswith(": no damage found\n")
    with engine.connect() as connection:
        assert connection.scalar(select(VerdictKey.status).where(VerdictKey.id == key)) == status


def _damage_keys(engine: Engine, how: str) -> None:
    """Damage job2's verdicts' keys: a key it uses deleted, or its ids cut by a byte."""
    with engine.begin() as connection:
        job2 = connection.scalar(select(Job.id).where(Job.name == "job2"))
        ids = connection.scalar(select(JobVerdicts.keys).where(JobVerdicts.job_id == job2))
        if how == "key deleted":  # job1's own EMA key: used by job1 alone
            own = set(np.frombuffer(ids, "<i4").tolist())
            others = connection.scalars(select(JobVerdicts.keys).where(JobVerdicts.job_id != job2))
            shared = set(np.concatenate([np.frombuffer(k, "<i4") for k in others]).tolist())
            alone = min(own - shared)
            connection.execute(delete(VerdictKey).where(VerdictKey.id == alone))
        else:
            cut = bytes(ids)[:-1]
            connection.execute(
                update(JobVerdicts).where(JobVerdicts.job_id == job2).values(keys=cut)
            )


@pytest.mark.parametrize("few_jobs", [200, 0])  # keys read after the verdicts, or all first
@pytest.mark.parametrize("how", ["key deleted", "ids cut by a byte"])
def test_a_missing_key_or_a_cut_id_is_found_whichever_way_the_keys_are_read(
    study: Cli, engine: Engine, monkeypatch: pytest.MonkeyPatch, how: str, few_jobs: int
) -> None:
    _damage_keys(engine, how)
    monkeypatch.setattr(packed_verdicts, "FEW_JOBS", few_jobs)
    damaged = (
        "Error: stored verdicts and numbers of job job2 are damaged (checksum mismatch); rebuild"
        " them with `tracker db check --repair`\n"
    )
    assert study("claims", ok=False).stderr == damaged
    study("db", "check", "--repair", ok=False)
    assert study("db", "check").stdout.endswith(": no damage found\n")


# verdicts of every kind a row holds: NaN, the infinities, -0.0, none, figures and none
EDGE_ROWS: list[VerdictRow] = [
    (7, "bpp_state", "gpt-124m/flash", 4.0, 4.0, 0.01, "PASS", "4.0 vs 4.0 \u00b1 0.01", None),
    (7, "val_loss", 'a "quoted"\\ arm\n', float("nan"), None, None, "N/A", "", "why \u2014"),
    (7, "x", "\u00e9\t", float("inf"), float("-inf"), -0.0, "FAIL", "\x1f 1.5", "known"),
    (7, "y", "z", None, 3.0, None, "KNOWN", "d 2.25 and 0.5", None),
    (9, "y", "z", -1.5e-300, -1.5e-300, 1e300, "PASS", "\U0001f600", None),
]


def test_packed_verdicts_read_back_as_written() -> None:
    columns = VerdictColumns.of_rows(EDGE_ROWS)
    back = list(columns.rows())
    assert [repr(row) for row in back] == [repr(row) for row in EDGE_ROWS]
    assert np.signbit(columns.tolerance[2])  # -0.0 kept as it is


def test_a_jobs_checksum_covers_every_byte_of_its_rows_and_the_migration_makes_the_same() -> None:
    packed = packed_verdicts.pack([3, 1, 2], [1.5, None, float("nan")], [None, 0.1, -0.0],
                                  [b"\x12", None, b""])  # fmt: skip
    stored = [packed[column] for column in packed_verdicts.PACKED]
    keys = bytes(range(48))
    numbers = {"seed_noise": 0.25, "ema_delta": None, "n": 2}
    checksum = packed_verdicts.rows_checksum(7, "digest", keys, stored, numbers)
    migration = migration_module("0020_packed_verdicts.py")
    assert migration.new_checksum(7, "digest", keys, stored, numbers) == checksum
    assert (
        migration.pack(
            [(3, 1.5, None, b"\x12"), (1, None, 0.1, None), (2, float("nan"), -0.0, b"")]
        )
        == stored
    )
    changed = [
        packed_verdicts.rows_checksum(8, "digest", keys, stored, numbers),
        packed_verdicts.rows_checksum(7, "digesT", keys, stored, numbers),
        packed_verdicts.rows_checksum(7, "digest", keys[::-1], stored, numbers),
        packed_verdicts.rows_checksum(7, "digest", keys, stored, {**numbers, "n": 3}),
        # a byte moved from one column to the next: each part is hashed after its length
        packed_verdicts.rows_checksum(
            7,
            "digest",
            keys,
            [stored[0], stored[1][:-1], stored[1][-1:] + stored[2], *stored[3:]],
            numbers,
        ),
    ]
    for at, part in enumerate(stored):  # the keys' ids (the first) by the keys' digests
        for i in range(len(part) if at else 0):
            flipped = bytearray(part)
            flipped[i] ^= 1
            changed.append(
                packed_verdicts.rows_checksum(
                    7, "digest", keys, [*stored[:at], bytes(flipped), *stored[at + 1 :]], numbers
                )
            )
    assert checksum not in changed
