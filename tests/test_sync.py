"""`tracker sync PREFIX`: the finished jobs under a prefix ingested, the others told apart.

On local directories here (the same code reads S3 in ``test_remote_sync.py``): what a pass
finds, skips, waits for and picks up later; changed jobs; a job's own metadata file; a killed
sync resuming; two syncs at once; ``--watch`` until Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.remote_jobs import put_in_memory
from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.services.sync import SyncOptions, SyncStatus, sync_prefix

STEPS = 20
SAFETY_NET_S = 600  # a hung process fails the test instead of hanging it; never a verdict


def sample_jobs(root: Path, count: int) -> list[Path]:
    return [
        write_sample_job(root / f"run{i}" / f"job{i}", seed=i, steps=STEPS) for i in range(count)
    ]


def stored_names(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return list(session.scalars(select(Job.name).order_by(Job.name)))


def test_sync_ingests_new_jobs_skips_stored_ones_and_waits_for_unfinished(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    jobs = sample_jobs(tmp_path / "study", 3)
    (jobs[2] / "ref_s1.json").unlink()  # still training its last arm
    (tmp_path / "study" / "notes").mkdir()
    first = cli("sync", str(tmp_path / "study"))
    assert first.stdout.splitlines()[0].startswith("job0: ingested 25 probes")
    assert first.stdout.splitlines()[-2:] == [
        f"{jobs[2]}: waiting (ref_s1.csv has no summary ref_s1.json yet)",
        "3 found: 2 ingested, 0 unchanged, 1 waiting, 0 failed",
    ]
    assert stored_names(engine) == ["job0", "job1"]
    second = cli("sync", str(tmp_path / "study"))
    assert second.stdout == (
        f"{jobs[2]}: waiting (ref_s1.csv has no summary ref_s1.json yet)\n"
        "3 found: 0 ingested, 2 unchanged, 1 waiting, 0 failed\n"
    )
    write_sample_job(jobs[2], seed=2, steps=STEPS)  # the job finished
    third = cli("sync", str(tmp_path / "study"))
    assert third.stdout.startswith("job2: ingested 25 probes")
    assert third.stdout.endswith("3 found: 1 ingested, 2 unchanged, 0 failed\n")
    assert stored_names(engine) == ["job0", "job1", "job2"]


def test_a_job_without_mem_sweep_is_waiting(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "study" / "job0", steps=STEPS)
    (job / "mem_sweep.json").unlink()
    result = cli("sync", str(tmp_path / "study"))
    assert result.stdout == (
        f"{job}: waiting (no mem_sweep.json yet)\n"
        "1 found: 0 ingested, 0 unchanged, 1 waiting, 0 failed\n"
    )


def test_a_changed_job_is_left_alone_unless_replace(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    [job] = sample_jobs(tmp_path / "study", 1)
    cli("sync", str(tmp_path / "study"))
    os.utime(job / "ref_s0.json")  # touched, same content: read once, still unchanged
    touched = cli("sync", str(tmp_path / "study"))
    assert touched.stdout == "1 found: 0 ingested, 1 unchanged, 0 failed\n"
    write_sample_job(job, seed=9, steps=STEPS)  # rewritten with other numbers
    dry = cli("sync", str(tmp_path / "study"), "--dry-run")
    assert (
        dry.stdout
        == f"{job}: changed (dry run)\n1 found: 0 ingested, 0 unchanged, 1 changed, 0 failed\n"
    )
    changed = cli("sync", str(tmp_path / "study"))
    assert changed.stdout == (
        f"{job}: changed (files changed since ingest; --replace)\n"
        "1 found: 0 ingested, 0 unchanged, 1 changed, 0 failed\n"
    )
    replaced = cli("sync", str(tmp_path / "study"), "--replace")
    assert replaced.stdout.startswith("job0: replaced 25 probes")
    assert replaced.stdout.endswith("1 found: 0 ingested, 1 replaced, 0 unchanged, 0 failed\n")


def test_a_dry_run_stores_nothing(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    jobs = sample_jobs(tmp_path / "study", 2)
    result = cli("sync", str(tmp_path / "study"), "--dry-run")
    assert result.stdout == (
        f"{jobs[0]}: would ingest\n"
        f"{jobs[1]}: would ingest\n"
        "2 found: 2 would ingest, 0 unchanged, 0 failed\n"
    )
    assert stored_names(engine) == []
    (jobs[0] / "ref_s0.json").write_text("{")  # what a real sync refuses, a dry run lists
    refused = cli("sync", str(tmp_path / "study"), "--dry-run", ok=False)
    real = cli("sync", str(tmp_path / "study"), ok=False)
    failure = next(line for line in real.stderr.splitlines() if str(jobs[0]) in line)
    assert (refused.exit_code, refused.stderr) == (1, f"{failure}\n")
    assert refused.stdout == (
        f"{jobs[1]}: would ingest\n2 found: 1 would ingest, 0 unchanged, 1 failed ({jobs[0]})\n"
    )


def test_a_failed_job_is_listed_and_exits_1(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    jobs = sample_jobs(tmp_path / "study", 2)
    (jobs[0] / "ref_s0.json").write_text("{")
    result = cli("sync", str(tmp_path / "study"), ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {jobs[0]}: ref_s0.json: malformed JSON (line 1, column 2): "
        "Expecting property name enclosed in double quotes\n"
    )
    assert result.stdout.endswith(f"2 found: 1 ingested, 0 unchanged, 1 failed ({jobs[0]})\n")
    assert stored_names(engine) == ["job1"]


def test_two_directories_of_one_job_name_store_the_first(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    first = write_sample_job(tmp_path / "study" / "a" / "job0", steps=STEPS)
    second = write_sample_job(tmp_path / "study" / "b" / "job0", seed=3, steps=STEPS)
    result = cli("sync", str(tmp_path / "study"), ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {second}: the job name 'job0' is also that of {first}\n"
    assert result.stdout.startswith("job0: ingested")
    assert stored_names(engine) == ["job0"]


def test_a_missing_prefix_is_one_line(cli: Cli, tmp_path: Path) -> None:
    result = cli("sync", str(tmp_path / "nowhere"), ok=False)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"Error: {tmp_path / 'nowhere'}: no such directory\n"


def test_the_jobs_own_metadata_file_gives_metadata_and_meta_wins(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    jobs = sample_jobs(tmp_path / "study", 2)
    (jobs[0] / "job.json").write_text(json.dumps({"gpu": "H100", "flashoptim": "0.1.4", "n": 8}))
    (jobs[1] / "meta.json").write_text(json.dumps({"gpu": "A10G"}))
    cli("sync", str(tmp_path / "study"), "--meta", "gpu=L4")
    assert json.loads(cli("jobs", "--format", "json").stdout)[0]["meta"] == {
        "flashoptim": "0.1.4", "gpu": "L4", "n": "8",
    }  # fmt: skip
    shown = cli("query", "runs", "--where", "gpu=L4", "--format", "json").stdout
    assert {row["job"] for row in json.loads(shown)} == {"job0", "job1"}
    (jobs[1] / "job.json").write_text("{}")
    both = cli("ingest", str(jobs[1]), ok=False)
    assert both.stderr == (
        f"Error: {jobs[1]}: meta.json: job.json and meta.json both hold metadata: keep one\n"
    )
    (jobs[1] / "job.json").write_text('{"gpu": ["H100"]}')
    (jobs[1] / "meta.json").unlink()
    bad = cli("ingest", str(jobs[1]), "--job", "other", ok=False)
    assert bad.stderr == (
        f"Error: {jobs[1]}: job.json: gpu: a value is a string (printable, at most 1000 "
        "characters) or a finite number\n"
    )


def test_the_library_reports_each_job(engine: Engine, tmp_path: Path) -> None:
    sample_jobs(tmp_path / "study", 2)
    told: list[SyncStatus] = []
    report = sync_prefix(
        engine, tmp_path / "study", SyncOptions(), lambda job: told.append(job.status)
    )
    assert told == [SyncStatus.INGESTED, SyncStatus.INGESTED]
    assert report.outcome_line() == "2 found: 2 ingested, 0 unchanged, 0 failed"
    assert not report.failed


def start_sync(url: str, prefix: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tracker", "--db", url, "sync", str(prefix), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def without_lock_notices(err: str) -> str:
    return "".join(
        line for line in err.splitlines(keepends=True) if "waiting for another" not in line
    )


def test_two_syncs_at_once_ingest_each_job_once(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    sample_jobs(tmp_path / "study", 4)
    processes = [start_sync(db_url, tmp_path / "study") for _ in range(2)]
    outputs = [p.communicate(timeout=SAFETY_NET_S) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert [without_lock_notices(err) for _, err in outputs] == ["", ""]
    ingested = [line for out, _ in outputs for line in out.splitlines() if ": ingested " in line]
    assert sorted(line.split(":")[0] for line in ingested) == ["job0", "job1", "job2", "job3"]
    assert stored_names(engine) == ["job0", "job1", "job2", "job3"]


def test_a_killed_sync_resumes_where_it_stopped(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    sample_jobs(tmp_path / "study", 4)
    process = start_sync(db_url, tmp_path / "study")
    assert process.stdout is not None
    first = process.stdout.readline()  # told once its transaction committed
    assert first.startswith("job0: ingested")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=SAFETY_NET_S)
    stored = stored_names(engine)
    assert stored[0] == "job0"  # every job stored is whole: each is one transaction
    again = start_sync(db_url, tmp_path / "study")
    out, _ = again.communicate(timeout=SAFETY_NET_S)
    assert again.returncode == 0
    assert out.endswith(f"4 found: {4 - len(stored)} ingested, {len(stored)} unchanged, 0 failed\n")
    assert stored_names(engine) == ["job0", "job1", "job2", "job3"]


def test_watch_ingests_a_job_when_it_finishes_until_interrupted(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    [job] = sample_jobs(tmp_path / "study", 1)
    summary = (job / "ref_s1.json").read_bytes()
    (job / "ref_s1.json").unlink()
    process = start_sync(db_url, tmp_path / "study", "--watch", "0.05")
    assert process.stdout is not None
    lines = iter(process.stdout.readline, "")
    assert next(lines) == f"{job}: waiting (ref_s1.csv has no summary ref_s1.json yet)\n"
    assert next(lines) == "1 found: 0 ingested, 0 unchanged, 1 waiting, 0 failed\n"
    (job / "ref_s1.json").write_bytes(summary)
    ingested = next(line for line in lines if not line.startswith((f"{job}:", "1 found")))
    assert ingested.startswith("job0: ingested 25 probes")
    assert next(lines) == "1 found: 1 ingested, 0 unchanged, 0 failed\n"
    assert next(lines) == "1 found: 0 ingested, 1 unchanged, 0 failed\n"  # and so on
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 130
    assert err.endswith("interrupted: job0 stored\n")
    assert stored_names(engine) == ["job0"]


def test_sync_of_a_memory_url_walks_fsspecs_listing(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    sample_jobs(tmp_path / "study", 2)
    (tmp_path / "study" / "run1" / "job1" / "mem_sweep.json").unlink()
    url = put_in_memory(tmp_path / "study")
    result = cli("sync", url)
    assert result.stdout.startswith("job0: ingested 25 probes")
    assert result.stdout.endswith(
        f"{url}/run1/job1: waiting (no mem_sweep.json yet)\n"
        "2 found: 1 ingested, 0 unchanged, 1 waiting, 0 failed\n"
    )
    with Session(engine) as session:
        assert session.scalar(select(Job.source_path)) == f"{url}/run0/job0"


def test_db_copy_keeps_the_listed_versions(db_url: str, reader_url: str, tmp_path: Path) -> None:
    sample_jobs(tmp_path / "study", 1)
    local = Cli(f"sqlite:///{tmp_path / 'local.db'}")
    local("sync", str(tmp_path / "study"))
    local("db", "copy", local.url, db_url)
    query = "SELECT path, size, version FROM source_file ORDER BY path"
    assert local("sql", query).stdout == Cli(reader_url)("sql", query).stdout
    rows = local("sql", query, "--format", "csv").stdout.splitlines()[1:]
    assert len(rows) == 9
    assert all(row.split(",")[2] for row in rows)  # every file has its version
