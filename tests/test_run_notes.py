"""What ingest settled in real logs, kept and shown: notes per arm in the database, ``show``,
``query runs``, the runs page and the API; ``--where`` with the order operators; elapsed time
that runs forwards. Job directories from tests/data/ (see its README)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.templates import Templates
from tracker import api
from tracker.analysis.smoothing import smooth, smooth_points
from tracker.conditions import Condition, parse_condition
from tracker.elapsed import Shape, TimeColumn, TimeKind, continued, in_seconds, time_source
from tracker.models import RunNoteRow
from tracker.server import create_app

DATA = Path(__file__).parent / "data"
RESTARTED = (
    "flash_s0: restarted from step 0 nine times: the last run kept, 252 earlier steps dropped"
)
TIMER = "train_time_ms went backwards at step 11 ({} s to {} s): drawn continued from where it was"
NAN_NOTES = (
    "loss not finite at steps 140-146 (7 points); loss not finite at steps 200-203 (4 points)"
)
OPERATORS = "expected KEY=VALUE or KEY OP VALUE (OP one of = != < <= > >=), got 'val_loss<'"


def ingest_logs(cli: Cli, _: Path) -> None:
    for name in ("resumed", "restarted", "modded_nanogpt"):
        cli("ingest", str(DATA / name), "--meta", f"lr={'0.002' if name == 'resumed' else '1e-3'}")


@pytest.fixture
def logs(db_url: str, templates: Templates) -> Cli:
    templates.copy_into(db_url, "real-logs", ingest_logs)
    return Cli(db_url)


def unboxed(text: str) -> str:
    """A usage error's words, without the box and line breaks of a terminal's panel."""
    return " ".join(text.replace("│", " ").split())


def runs_csv(cli: Cli, *args: str) -> list[dict[str, str]]:
    result = cli("query", "runs", "--format", "csv", *args)
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_restarts_are_one_line_and_a_timer_reset_is_noted(cli: Cli) -> None:
    restarted = cli("ingest", str(DATA / "restarted"))
    assert restarted.stdout.splitlines() == [
        "restarted: ingested 25 probes (1 failed), 2 arms, 1800 points",
        f"  warning: {RESTARTED}",
    ]
    modded = cli("ingest", str(DATA / "modded_nanogpt"))
    assert modded.stdout.splitlines()[1:] == [  # the NaN stretches are notes, not warnings
        "  warning: flash_s0: " + TIMER.format("10.37", "0.298"),
        "  warning: ref_s0: " + TIMER.format("10.63", "0.302"),
    ]


def test_notes_are_kept_per_arm_and_shown(logs: Cli, engine: Engine) -> None:
    with Session(engine) as session:
        kinds = sorted(session.scalars(select(RunNoteRow.kind)))
    assert kinds == [
        "nonfinite",
        "nonfinite",
        "restarted",
        "resumed",
        "time_backwards",
        "time_backwards",
    ]
    shown = logs("show", "restarted", "--part", "arms").stdout
    assert RESTARTED.removeprefix("flash_s0: ") in shown
    rows = {(r["job"], r["arm"]): r for r in runs_csv(logs)}
    assert rows["resumed", "flash_s0"]["notes"] == "resumed at step 1500, 200 steps replaced"
    assert rows["modded_nanogpt", "flash_s0"]["notes"] == (
        NAN_NOTES + "; " + TIMER.format("10.37", "0.298")
    )
    assert rows["modded_nanogpt", "flash_s0"]["nonfinite"] == "11"
    assert rows["resumed", "ref_s0"]["notes"] == ""
    frame = api.runs(logs.url, where=["notes=nonfinite"])
    assert frame.select("job", "arm", "notes").rows() == [
        ("modded_nanogpt", "flash_s0", NAN_NOTES + "; " + TIMER.format("10.37", "0.298"))
    ]


def test_notes_survive_a_re_ingest_and_a_copy(logs: Cli, tmp_path: Path) -> None:
    logs("ingest", str(DATA / "restarted"), "--replace")
    other = Cli(f"sqlite:///{tmp_path / 'copy.db'}")
    logs("db", "copy", logs.url, other.url)
    for cli in (logs, other):
        noted = runs_csv(cli, "--where", "notes=restarted")
        assert [(r["job"], r["arm"]) for r in noted] == [("restarted", "flash_s0")]
        assert noted[0]["notes"] == RESTARTED.removeprefix("flash_s0: ")


def test_where_compares_numbers_and_run_columns(logs: Cli) -> None:
    def arms(*where: str) -> list[str]:
        args = [item for condition in where for item in ("--where", condition)]
        return [f"{r['job']}/{r['arm']}" for r in runs_csv(logs, *args)]

    assert arms("nonfinite>0") == ["modded_nanogpt/flash_s0"]
    assert arms("lr<0.0015", "notes!=time_backwards") == ["restarted/flash_s0", "restarted/ref_s0"]
    assert arms("lr>=2e-3") == ["resumed/flash_s0", "resumed/ref_s0"]  # 0.002 as a number
    assert arms("notes=resumed", "steps>=1999", "val_loss<=3.3") == ["resumed/flash_s0"]
    jobs = logs("jobs", "--where", "nonfinite>0", "--format", "csv").stdout
    assert [line.split(",")[0] for line in jobs.splitlines()[1:]] == ["modded_nanogpt"]
    bad = logs("query", "runs", "--where", "val_loss<", ok=False)
    assert bad.exit_code == 2 and OPERATORS in unboxed(bad.stderr)


def test_the_runs_page_and_api_filter_and_show_notes(logs: Cli, db_url: str) -> None:
    with TestClient(create_app(db_url), base_url="http://127.0.0.1:8765") as client:
        body = client.get("/api/runs?where=notes=resumed").json()
        assert [(r["job"], r["arm"], r["notes"]) for r in body["rows"]] == [
            ("resumed", "flash_s0", "resumed at step 1500, 200 steps replaced")
        ]
        assert client.get("/api/runs?where=val_loss>3.2&where=notes=restarted").json()["total"] == 1
        bad = client.get("/api/runs?where=val_loss<")
        assert bad.status_code == 422 and bad.json()["detail"] == f"where: {OPERATORS}"
        arms = {a["arm"]: a["notes"] for a in client.get("/api/jobs/restarted").json()["arms"]}
        assert arms == {"flash_s0": RESTARTED.removeprefix("flash_s0: "), "ref_s0": ""}
        page = client.get("/runs?where=notes%3Dresumed").text
        assert (
            '<span class="note-badge"' in page
            and "resumed at step 1500, 200 steps replaced" in page
        )
        job = client.get("/jobs/modded_nanogpt").text
        assert "flash_s0: loss not finite at steps 140-146 (7 points)" in job
        timed = client.get("/api/plot?run=modded_nanogpt/ref_s0&x=time&smooth=0").json()
        times = timed["series"][0]["times"]
        assert times[:12] == pytest.approx(
            [7.5, 7.949, 8.247, 8.542, 8.842, 9.135, 9.436, 9.738, 10.041, 10.336, 10.63, 10.932]
        )
        assert np.all(np.diff(times) > 0)  # never drawn backwards
        plot = "/api/plot?run=modded_nanogpt/ref_s0&metric=val_loss&smooth=0.9"
        sparse = client.get(f"{plot}&smooth_by=point").json()["series"][0]
        assert sparse["steps"] == [0, 125, 250]
        values = np.array(sparse["values"])
        np.testing.assert_allclose(sparse["smoothed"], smooth_points(values, 0.1), rtol=1e-12)
        per_step = client.get(plot).json()["series"][0]["smoothed"]
        np.testing.assert_allclose(per_step, smooth(np.array([0, 125, 250]), values, 0.1))


def test_conditions_follow_their_operators() -> None:
    assert parse_condition("gpu=A10G ") == Condition("gpu", "A10G ")  # = keeps the value
    assert parse_condition("val_loss <= 3.3") == Condition("val_loss", "3.3", "<=")
    assert Condition("lr", "1e-3", "<").holds("0.0005")
    assert not Condition("lr", "1e-3", "<").holds("5e-3")
    assert Condition("gpu", "H100", "<").holds("A10G")  # text: compared as text
    assert not Condition("val_loss", "3", "<").holds(float("nan"))
    assert Condition("val_loss", "3", "!=").holds(None)


def test_elapsed_time_runs_forwards_and_milliseconds_are_time() -> None:
    grows = Shape(3, 9.0, 0.0, 9.0)

    def source(*names: str) -> str | None:
        found = time_source(dict.fromkeys(names, grows))
        return None if found is None else found.metric

    assert source("loss", "train_time_ms", "step_ms") == "train_time_ms"
    assert source("loss", "elapsed", "train_time_ms") == "elapsed"
    values = np.array([5.0, 10.0, 1.0, np.nan, 3.0, 0.5, 2.0])
    np.testing.assert_array_equal(continued(values), [5, 10, 11, np.nan, 13, 13.5, 15])
    np.testing.assert_array_equal(
        in_seconds(TimeColumn("train_time_ms", TimeKind.ELAPSED), np.array([1000.0, 500.0])),
        [1, 1.5],
    )


def test_a_url_without_its_colon_is_no_local_path(cli: Cli) -> None:
    result = cli("ingest", "s3//bucket/job1", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: s3//bucket/job1: not a local path but a misspelt URL; "
        "did you mean s3://bucket/job1?\n",
    )
