"""The kept summary as compressed bytes: a short job's drawn lines are made from its points
when a page asks, a long job's are kept; revision 0008 converts stored summaries both ways."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.migration_code import migration_module
from tests.stored import kept_verdicts
from tracker.analysis.expectations import load_expectations
from tracker.models import Job, JobSummary
from tracker.queries.job_analysis import load_summary
from tracker.sample import write_sample_job
from tracker.services.rederive import rederive
from tracker.store.schema import downgrade, upgrade
from tracker.store.verdict_keys import PLACEHOLDER, detail, split_detail
from tracker.summary.model import DRAWN_KEPT_ABOVE, Summary, UnknownSummaryFormat
from tracker.summary.version import expectations_digest

LONG_STEPS = DRAWN_KEPT_ABOVE + 1  # one arm: its drawn lines are kept


@pytest.fixture
def short_and_long(cli: Cli, tmp_path: Path) -> Cli:
    cli("ingest", str(write_sample_job(tmp_path / "short", steps=3000)))  # downsampled lines
    long_job = write_sample_job(tmp_path / "long", steps=LONG_STEPS, arms=("ref_s0",))
    cli("ingest", str(long_job))
    return cli


def stored(engine: Engine) -> dict[str, bytes]:
    query = select(Job.name, JobSummary.data).join(JobSummary, JobSummary.job_id == Job.id)
    with Session(engine) as session:
        return {name: bytes(data) for name, data in session.execute(query)}


VERDICT = ("job_id", "position", "check", "subject", "measured", "expected", "tolerance")
VERDICT += ("status", "detail")


def verdict_rows(engine: Engine, *more: str) -> list[tuple[object, ...]]:
    with engine.connect() as connection:
        rows = kept_verdicts(connection)
    return [tuple(repr(row[column]) for column in (*VERDICT, *more)) for row in rows]


def verdict_ddl(engine: Engine) -> str:
    if engine.dialect.name != "sqlite":
        return ""
    with engine.connect() as connection:
        query = text("SELECT sql FROM sqlite_master WHERE name = 'job_verdict'")
        return str(connection.execute(query).scalar())


def json_text(data: bytes) -> str:
    """A stored summary's document (its format byte and checksum left out)."""
    return zstandard.ZstdDecompressor().decompress(data[9:]).decode("utf-8")


def summaries(engine: Engine) -> dict[str, Summary]:
    """Each job's summary as the pages read it, its drawn lines drawn."""
    exp = load_expectations()
    with Session(engine) as session:
        found = {}
        for job_id, name in session.execute(select(Job.id, Job.name)):
            found[name] = load_summary(session, job_id, exp, trajectories=True)
            assert found[name].trajectories.lines
        return found


def test_only_a_long_jobs_lines_are_kept_and_both_read_back_as_built(
    short_and_long: Cli, engine: Engine
) -> None:
    kept = {
        name: json.loads(json_text(data))["trajectories"] for name, data in stored(engine).items()
    }
    assert kept["short"] is None and kept["long"]["total"] == LONG_STEPS
    read = summaries(engine)
    with engine.begin() as connection:  # as for other expectations: made from the points
        assert connection.execute(text("DELETE FROM job_summary")).rowcount == 2
    for name, from_points in summaries(engine).items():
        assert read[name].trajectories.to_json() == from_points.trajectories.to_json()
        assert read[name].to_stored(name) == from_points.to_stored(name)


def test_a_short_jobs_lines_are_drawn_only_when_asked_for_with_the_summary(
    short_and_long: Cli, engine: Engine
) -> None:
    """Drawn in the caller's session as the summary is read: asked for later, when that
    session may have closed, they are refused instead of drawn in a transaction nobody
    ends; a long job's kept lines are there either way."""
    exp = load_expectations()
    with Session(engine) as session:
        ids = {name: job_id for name, job_id in session.execute(select(Job.name, Job.id))}
        short, long = (load_summary(session, ids[name], exp) for name in ("short", "long"))
        drawn = load_summary(session, ids["short"], exp, trajectories=True)
    assert drawn.trajectories.lines and long.trajectories.lines
    with pytest.raises(AssertionError, match=r"load_summary\(\.\.\., trajectories=True\)"):
        _ = short.trajectories


def test_a_summary_of_an_unknown_format_is_refused(short_and_long: Cli, engine: Engine) -> None:
    data = stored(engine)["short"]
    with pytest.raises(UnknownSummaryFormat, match="unknown format b'\\\\x04'"):
        Summary.from_stored(b"\x04" + data[1:], "short", lambda: pytest.fail("not drawn"))


def test_the_migrations_copy_of_the_format_writes_the_same_bytes(
    short_and_long: Cli, engine: Engine
) -> None:
    step = migration_module("0008_compact_job_summary.py")
    for name, summary in summaries(engine).items():
        doc = json.loads(json_text(summary.to_stored(name)))
        doc["trajectories"] = summary.trajectories.to_json()  # as 0007's document held them
        # format 1, which 0008 wrote: today's (3) without its checksum
        assert step.compact(json.dumps(doc)) == b"\x01" + stored(engine)[name][9:], name


def test_0008_converts_summaries_and_its_downgrade_restores_them(
    short_and_long: Cli, engine: Engine
) -> None:
    at_head, verdicts = stored(engine), verdict_rows(engine)
    drawn = {name: s.trajectories.to_json() for name, s in summaries(engine).items()}
    downgrade(engine, "0008")  # 0008 kept them without a rowid, until 0020 packed them
    assert engine.dialect.name != "sqlite" or "WITHOUT ROWID" in verdict_ddl(engine)
    downgrade(engine, "0007")
    digest = expectations_digest(load_expectations())
    assert verdict_rows(engine, "expectations") == [(*row, repr(digest)) for row in verdicts]
    assert "WITHOUT ROWID" not in verdict_ddl(engine)
    with engine.connect() as connection:
        documents = dict(
            connection.execute(
                text("SELECT j.name, s.document FROM job_summary s JOIN job j ON j.id = s.job_id")
            ).all()
        )
    # the long job's document as 0007 wrote it; the short one's lines need the analysis:
    # its row is gone, and the tracker of 0007 summarises that job from its points
    assert documents == {"long": json_text(at_head["long"])}
    old = json.loads(json_text(at_head["short"]))
    old["trajectories"] = drawn["short"]  # a short job's document as 0007 wrote it
    with engine.begin() as connection:
        job_id = connection.execute(text("SELECT id FROM job WHERE name = 'short'")).scalar()
        connection.execute(
            text("INSERT INTO job_summary (job_id, expectations, document) VALUES (:j, :e, :d)"),
            {"j": job_id, "e": digest, "d": json.dumps(old)},
        )
    # 0008 converts both; 0011 (each job's study) then drops every kept row, which
    # `tracker db upgrade` refills by today's analysis: the same bytes as at ingest
    upgrade(engine)
    assert stored(engine) == {}
    assert sorted(rederive(engine).refilled) == ["long", "short"]
    assert stored(engine) == at_head and verdict_rows(engine) == verdicts
    assert rederive(engine).refilled == []


def keys_used(engine: Engine) -> tuple[int, int]:
    """The verdict keys stored, and those some verdict uses."""
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT count(*) FROM verdict_key")).scalar_one()
        ids = connection.execute(text("SELECT keys FROM job_verdicts")).scalars()
        used = set(np.concatenate([np.frombuffer(own, "<i4") for own in ids]).tolist())
        return stored, len(used)


def test_the_jobs_share_their_verdicts_keys_and_unused_keys_are_deleted(
    short_and_long: Cli, engine: Engine, tmp_path: Path
) -> None:
    both, verdicts = keys_used(engine), len(verdict_rows(engine))
    assert both[0] == both[1] < verdicts
    short_and_long("delete", "long", "--yes")  # the keys of the long job's verdicts alone go
    alone = keys_used(engine)
    assert alone[0] == alone[1] < both[0]
    short_and_long("ingest", str(write_sample_job(tmp_path / "next", steps=500)))
    other = write_sample_job(tmp_path / "other", seed=1, steps=300)
    short_and_long("ingest", "--replace", str(other), "--job", "next")
    assert keys_used(engine)[0] > keys_used(engine)[1]  # the replaced job's: left until ...
    assert short_and_long("db", "rederive", "--force").exit_code == 0
    assert keys_used(engine)[0] == keys_used(engine)[1]  # ... a rederive, or a delete


@given(st.text(alphabet=st.sampled_from("0123456789.,- ab\x1f±٣"), max_size=60))
def test_a_detail_comes_back_from_its_key_and_figures_byte_for_byte(text_: str) -> None:
    template, figures = split_detail(text_)
    assert detail(template, figures) == text_
    assert figures is None or PLACEHOLDER in template
