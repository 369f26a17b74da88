"""``tracker db copy``: a local SQLite history into another database (PostgreSQL in CI)."""

from __future__ import annotations

from pathlib import Path

from polars.testing import assert_frame_equal

from tests.conftest import Cli
from tracker import api
from tracker.sample import write_sample_job


def test_copy_every_job_then_nothing_the_second_time(db_url: str, tmp_path: Path) -> None:
    local = Cli(f"sqlite:///{tmp_path / 'local.db'}")
    local("ingest", str(write_sample_job(tmp_path / "j1", steps=60)), "--meta", "gpu=A10G")
    local("ingest", str(write_sample_job(tmp_path / "j2", seed=3, steps=30, arms=("ref_s0",))))
    first = local("db", "copy", local.url, db_url)
    assert first.stdout.splitlines() == [
        "j1: copied, 720 points",
        "j2: copied, 90 points",
        "2 jobs copied",
    ]
    again = local("db", "copy", local.url, db_url)
    assert again.stdout.splitlines()[-1] == "0 jobs copied"
    local("meta", "j2", "note=rerun on H100", "gpu=H100")
    Cli(db_url)("meta", "j2", "owner=team")  # the destination's own key stays
    edited = local("db", "copy", local.url, db_url)
    assert edited.stdout.splitlines() == [
        "j1: already in the destination",
        "j2: already in the destination; metadata updated: gpu=H100 note=rerun on H100; "
        "only the destination has owner=team (--meta-as-source removes it)",
        "0 jobs copied, 1 with metadata updated",
    ]
    assert Cli(db_url)("meta", "j2").stdout == "j2: gpu=H100 note=rerun on H100 owner=team\n"
    local("meta", "j2", "--unset", "note")  # after the copy: carried by --meta-as-source
    unset = local("db", "copy", local.url, db_url, "--meta-as-source")
    assert unset.stdout.splitlines() == [
        "j1: already in the destination",
        "j2: already in the destination; metadata updated: -note -owner",
        "0 jobs copied, 1 with metadata updated",
    ]
    assert Cli(db_url)("meta", "j2").stdout == "j2: gpu=H100\n"
    local("meta", "j2", "note=rerun on H100")
    local("db", "copy", local.url, db_url)
    for query in (api.jobs, api.probes, api.runs):
        assert_frame_equal(
            query(local.url).drop("ingested_at", "source", strict=False),
            query(db_url).drop("ingested_at", "source", strict=False),
        )
    for arm in ("ref_s0", "linear_s0"):
        assert_frame_equal(api.curve(local.url, arm), api.curve(db_url, arm))  # NaN, inf too


def test_copy_back_and_conflicting_names(db_url: str, tmp_path: Path) -> None:
    shared = Cli(db_url)
    shared("ingest", str(write_sample_job(tmp_path / "j1", steps=20)))
    local = Cli(f"sqlite:///{tmp_path / 'local.db'}")
    local("ingest", str(write_sample_job(tmp_path / "other" / "j1", seed=9, steps=20)))
    shared("ingest", str(write_sample_job(tmp_path / "j2", seed=2, steps=20)))
    result = local("db", "copy", db_url, local.url, ok=False)
    assert (result.exit_code, result.stdout, result.stderr) == (
        1,
        "j2: copied, 240 points\n1 jobs copied, 1 not: j1\n",
        "Error: j1: not copied, the destination has another job of this name; to copy this "
        "one, delete that one first (tracker --db DST_URL delete j1)\n",
    )
    local("delete", "j1", "--yes")  # as the error says
    again = local("db", "copy", db_url, local.url)
    assert again.stdout == "j1: copied, 240 points\nj2: already in the destination\n1 jobs copied\n"
