"""A run's row, its notes and its curve rows under one checksum (``tracker.store.run_rows``):
one of them altered, two arms' names swapped or a run moved to another job is refused by
every read of them with one line, and named by ``db check``; the reads across jobs that read
each job's run index instead (the runs table, the claims: ``tracker.store.run_index``) show
what was ingested, never the damage. A curve's numbers altered are rewritten from its points
by ``db check --repair``, its run's checksum with them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, select, text, update
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tests.templates import Templates
from tracker.models import Curve, Job, Run, RunNoteRow
from tracker.sample import write_sample_job
from tracker.store.run_rows import seal_runs

STEPS = 300
DAMAGED = "stored run job2/{} is damaged (checksum mismatch); re-ingest the job from its files"


@pytest.fixture
def two_jobs(db_url: str, templates: Templates) -> Cli:
    """job1 and job2 (seeds 0 and 1; each linear arm has a note), copied for each test."""

    def build(cli: Cli, root: Path) -> None:
        for name, seed in (("job1", 0), ("job2", 1)):
            cli("ingest", str(write_sample_job(root / name, seed=seed, steps=STEPS)))

    templates.copy_into(db_url, ("two jobs with notes", STEPS), build)
    return Cli(db_url)


def run_id(connection: Connection, job: str, arm: str) -> int:
    query = select(Run.id).join(Job, Job.id == Run.job_id).where(Job.name == job, Run.arm == arm)
    return int(connection.scalar(query))  # type: ignore[arg-type]


def loss_of(connection: Connection, job: str, arm: str) -> int:
    query = select(Curve.id).where(
        Curve.run_id == run_id(connection, job, arm), Curve.metric == "loss"
    )
    return int(connection.scalar(query))  # type: ignore[arg-type]


def val_loss_changed(connection: Connection) -> str:
    where = Run.id == run_id(connection, "job2", "ref_s1")
    connection.execute(update(Run).where(where).values(val_loss=Run.val_loss + 0.5))
    return "ref_s1"


def arm_names_swapped(connection: Connection) -> str:
    ref_s0, ref_s1 = run_id(connection, "job2", "ref_s0"), run_id(connection, "job2", "ref_s1")
    for run, arm in ((ref_s0, "swapping"), (ref_s1, "ref_s0"), (ref_s0, "ref_s1")):
        connection.execute(update(Run).where(Run.id == run).values(arm=arm))
    return "ref_s1"  # the first in id order: ref_s0's row, named ref_s1 now


def moved_from_another_job(connection: Connection) -> str:
    """job2's ref_s1 replaced by job1's (its curves and notes with it)."""
    replaced = run_id(connection, "job2", "ref_s1")
    connection.execute(Run.__table__.delete().where(Run.id == replaced))
    job2 = connection.scalar(select(Job.id).where(Job.name == "job2"))
    moved = Run.id == run_id(connection, "job1", "ref_s1")
    connection.execute(update(Run).where(moved).values(job_id=job2))
    return "ref_s1"


def note_deleted(connection: Connection) -> str:
    where = RunNoteRow.run_id == run_id(connection, "job2", "linear_s0")
    connection.execute(RunNoteRow.__table__.delete().where(where))
    return "linear_s0"


def note_text_changed(connection: Connection) -> str:
    where = RunNoteRow.run_id == run_id(connection, "job2", "linear_s0")
    connection.execute(update(RunNoteRow).where(where).values(text="nothing to see"))
    return "linear_s0"


def curve_number_changed(column: str) -> Callable[[Connection], str]:
    def change(connection: Connection) -> str:
        where = Curve.id == loss_of(connection, "job2", "ref_s1")
        connection.execute(update(Curve).where(where).values({column: 9.5}))
        return "ref_s1"

    change.__name__ = f"{column}_changed"
    return change


RUN_DAMAGE = [val_loss_changed, arm_names_swapped, moved_from_another_job]
NOTE_DAMAGE = [note_deleted, note_text_changed]
NUMBERS_DAMAGE = [curve_number_changed("last_value"), curve_number_changed("min_value")]


# what reads each job's run index, not its runs: the same answer after the damage as before
FROM_THE_INDEX = (("query", "runs", "--format", "csv"), ("claims", "--format", "json"))
PAGES_FROM_THE_INDEX = ("/runs", "/api/runs")


def answers_from_the_index(cli: Cli) -> list[str]:
    with client_for(cli.url) as client:
        pages = [client.get(path).text for path in PAGES_FROM_THE_INDEX]
    return [cli(*args).stdout for args in FROM_THE_INDEX] + pages


def refused_everywhere(cli: Cli, out: Path, line: str) -> None:
    """Every command and page that reads job2's runs says ``line`` and nothing else."""
    commands = [
        ("jobs",),
        ("show", "job2", "--part", "arms"),
        ("compare", "job1", "job2"),
        ("query", "curve", "--job", "job2", "--arm", "flash_s0"),  # an intact curve of job2
        ("report", "--out", str(out / "report")),
        ("export", str(out / "points")),
    ]
    for args in commands:
        result = cli(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n"), args
    with client_for(cli.url) as client:
        for path in ("/api/curve?job=job2&arm=flash_s0", "/jobs/job2/"):
            answer = client.get(path)
            assert answer.status_code == 500 and line in answer.text, path


@pytest.mark.parametrize("damage", RUN_DAMAGE + NOTE_DAMAGE, ids=lambda d: d.__name__)
def test_a_damaged_run_is_refused_everywhere_and_named_by_db_check(
    two_jobs: Cli, engine: Engine, tmp_path: Path, damage: Callable[[Connection], str]
) -> None:
    ingested = answers_from_the_index(two_jobs)
    with engine.begin() as connection:
        line = DAMAGED.format(damage(connection))
    refused_everywhere(two_jobs, tmp_path, line)
    assert answers_from_the_index(two_jobs) == ingested
    # a run moved away leaves its job without it, which that job's summary tells
    damaged = (
        "2 jobs damaged: job1, job2" if damage is moved_from_another_job else "1 jobs damaged: job2"
    )
    for args in (("db", "check"), ("db", "check", "--repair")):  # not derived: no repair
        checked = two_jobs(*args, ok=False)
        assert checked.exit_code == 1, args
        assert f"Error: {line}" in checked.stderr.splitlines(), args
        assert checked.stdout.endswith(f": {damaged}\n"), args


@pytest.mark.parametrize("damage", NUMBERS_DAMAGE, ids=lambda d: d.__name__)
def test_altered_curve_numbers_are_refused_and_rewritten_by_db_check_repair(
    two_jobs: Cli, engine: Engine, tmp_path: Path, damage: Callable[[Connection], str]
) -> None:
    with engine.begin() as connection:
        arm = damage(connection)
    refused_everywhere(two_jobs, tmp_path, DAMAGED.format(arm))
    checked = two_jobs("db", "check", ok=False)  # the curve's line alone: its points mend it
    assert checked.stderr.startswith(f"Error: stored curve job2/{arm} loss: its row's ")
    assert len(checked.stderr.splitlines()) == 1
    two_jobs("db", "check", "--repair")
    assert two_jobs("db", "check").stdout.endswith(": no damage found\n")
    two_jobs("query", "runs")


def test_repair_makes_afresh_a_checksum_made_of_numbers_the_points_do_not_give(
    two_jobs: Cli, engine: Engine
) -> None:
    """A curve row written wrong with its run's checksum made of it (as by an older ingest):
    the run reads as intact; ``--repair`` rewrites the numbers and the checksum with them."""
    with engine.begin() as connection:
        curve = loss_of(connection, "job2", "ref_s1")
        connection.execute(update(Curve).where(Curve.id == curve).values(last_value=9.5))
    with engine.begin() as connection, Session(bind=connection) as session:
        job2 = connection.scalar(select(Job.id).where(Job.name == "job2"))
        seal_runs(session, [job2], [run_id(connection, "job2", "ref_s1")])
    two_jobs("query", "runs")  # intact as far as its checksum tells
    checked = two_jobs("db", "check", ok=False)
    assert checked.stderr.startswith("Error: stored curve job2/ref_s1 loss: its row's last_value")
    two_jobs("db", "check", "--repair")
    assert two_jobs("db", "check").stdout.endswith(": no damage found\n")
    assert "job2" in two_jobs("query", "runs", "--format", "csv").stdout


def test_a_copy_refuses_a_damaged_run_and_carries_the_checksums(
    two_jobs: Cli, engine: Engine, tmp_path: Path
) -> None:
    target = Cli(f"sqlite:///{tmp_path / 'copy.db'}")
    two_jobs("db", "copy", two_jobs.url, target.url)
    assert target("db", "check").stdout.endswith(": no damage found\n")
    shown = ("query", "runs", "--format", "csv")
    assert target(*shown).stdout == two_jobs(*shown).stdout
    with engine.begin() as connection:
        line = DAMAGED.format(note_deleted(connection))
    again = Cli(f"sqlite:///{tmp_path / 'again.db'}")
    refused = two_jobs("db", "copy", two_jobs.url, again.url, ok=False)
    assert refused.exit_code == 1 and f"Error: {line}\n" in refused.stderr


def test_a_run_without_its_checksum_is_refused(two_jobs: Cli, engine: Engine) -> None:
    with engine.begin() as connection:
        where = Run.id == run_id(connection, "job2", "flash_s0")
        connection.execute(update(Run).where(where).values(checksum=None))
    line = "stored run job2/flash_s0 is damaged (no checksum); re-ingest the job from its files"
    for args in (("show", "job2", "--part", "arms"), ("db", "check")):
        result = two_jobs(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n"), args


def test_a_run_deleted_whole_is_named_by_db_check_and_not_repaired_away(
    two_jobs: Cli, engine: Engine
) -> None:
    """No checksum is left to fail, but the job's summary, made from every run, names it:
    rebuilding the summary from the runs left would forget the run, so ``--repair`` does not."""
    with engine.begin() as connection:  # its curves and notes go with it (ON DELETE CASCADE)
        connection.execute(
            text("DELETE FROM run WHERE id = :run"), {"run": run_id(connection, "job2", "flash_s0")}
        )
    line = (
        "stored run job2/flash_s0 is damaged (its row is gone; its summary names it);"
        " re-ingest the job from its files"
    )
    for args in (("db", "check"), ("db", "check", "--repair")):
        result = two_jobs(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n"), args
    assert result.stdout.endswith("1 jobs damaged: job2\n")
