"""Ingesting job directories as real runs leave them (tests/data/, see its README): a resumed
arm, steps logged twice, a last line cut short, an out-of-memory probe that knows its size, a
header-only CSV and a summary without val_loss. What is stored, the exact ingest lines, and
``--strict-steps`` refusing with the old messages and storing nothing. Both backends."""

from __future__ import annotations

import csv
import hashlib
import itertools
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests import stored
from tests.conftest import Cli
from tracker.jobdir.logs import settle_steps
from tracker.models import Curve, CurveChunk, Job, Probe, Run
from tracker.services.ingest import ingest_job
from tracker.store.curves import load_curves
from tracker.store.transactions import in_write_transaction

DATA = Path(__file__).parent / "data"
HEADER = ("step", "loss", "lr", "step_ms")


def stored_curve(engine: Engine, arm: str, metric: str = "loss") -> dict[int, float | None]:
    """step -> value of one stored curve, in step order."""
    with Session(engine) as session:
        curve_id = session.scalars(
            select(Curve.id)
            .join(Run, Run.id == Curve.run_id)
            .where(Run.arm == arm, Curve.metric == metric)
        ).one()
        rows = load_curves(session, [curve_id])
    # NaN as None: what the point table held for it
    return {s: None if v != v else v for s, v in zip(rows["step"], rows["value"], strict=True)}


def last_values(path: Path, column: str) -> dict[int, float]:
    """step -> the value that must win: the last non-empty cell of ``column`` for the step
    (a resumed stretch's lines come later in the file)."""
    values: dict[int, float] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get(column):
                values[int(row["step"])] = float(row[column])
    return values


def row_counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return stored.row_counts(session, (Job, Probe, Run, Curve, CurveChunk))


def files_digest(directory: Path) -> str:
    """The job's content digest, computed from the files as they are on disk."""
    names = sorted(p.name for p in directory.iterdir() if p.suffix in (".csv", ".json"))
    lines = [
        f"{name}\t{hashlib.sha256((directory / name).read_bytes()).hexdigest()}" for name in names
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def assert_strict_refuses(cli: Cli, engine: Engine, name: str, message: str) -> None:
    result = cli("ingest", "--strict-steps", str(DATA / name), ok=False)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"Error: {DATA / name}: {message}\n"
    assert all(n == 0 for n in row_counts(engine).values())


def test_a_resumed_arm_keeps_the_later_values_from_the_resumed_step_on(
    cli: Cli, engine: Engine
) -> None:
    assert_strict_refuses(
        cli,
        engine,
        "resumed",
        "flash_s0.csv line 1702: step '1500' is lower than the step before it",
    )
    result = cli("ingest", str(DATA / "resumed"))
    assert result.stdout == (
        "resumed: ingested 25 probes (1 failed), 2 arms, 12000 points\n"
        "  warning: flash_s0: resumed at step 1500, 200 steps replaced\n"
    )
    loss = stored_curve(engine, "flash_s0")
    assert list(loss) == list(range(2000))  # one value per step, increasing
    expected = last_values(DATA / "resumed" / "flash_s0.csv", "loss")
    assert loss == expected
    with (DATA / "resumed" / "flash_s0.csv").open() as handle:
        first_1500 = float(handle.readlines()[1501].split(",")[1])
    assert loss[1500] == pytest.approx(first_1500 + 0.0125, abs=1e-9)  # the restart's value
    assert stored_curve(engine, "flash_s0", "step_ms")[1500] == 7480.0
    with Session(engine) as session:
        job = session.scalars(select(Job)).one()
        assert job.content_digest == files_digest(DATA / "resumed")


def test_steps_logged_twice_are_one_step_with_the_last_value_of_each_column(
    cli: Cli, engine: Engine
) -> None:
    assert_strict_refuses(
        cli, engine, "duplicate_steps", "ref_s0.csv line 128: step '125' is a duplicate"
    )
    result = cli("ingest", str(DATA / "duplicate_steps"))
    assert result.stdout == (
        "duplicate_steps: ingested 25 probes (1 failed), 2 arms, 1802 points\n"
        "  warning: ref_s0: 2 duplicate steps, last value kept\n"
    )
    path = DATA / "duplicate_steps" / "ref_s0.csv"
    loss, lr = stored_curve(engine, "ref_s0"), stored_curve(engine, "ref_s0", "lr")
    assert list(loss) == list(range(300)) and list(lr) == list(range(300))
    assert loss == last_values(path, "loss") and lr == last_values(path, "lr")
    assert loss[125] == 3.62755  # the validation line's empty cell erased nothing
    assert loss[250] == 3.51234  # its own loss came later: it wins
    assert stored_curve(engine, "ref_s0", "val_loss") == {125: 3.9821, 250: 3.6547}


def test_an_incomplete_last_line_is_dropped(cli: Cli, engine: Engine) -> None:
    assert_strict_refuses(
        cli, engine, "truncated_last_line", "ref_s0.csv line 301: 1 fields, but the header has 4"
    )
    result = cli("ingest", str(DATA / "truncated_last_line"))
    assert result.stdout == (
        "truncated_last_line: ingested 25 probes (1 failed), 2 arms, 1797 points\n"
        "  warning: ref_s0: incomplete last line 301 (step 299) dropped\n"
    )
    loss = stored_curve(engine, "ref_s0")
    assert list(loss) == list(range(299))
    assert loss == last_values(DATA / "truncated_last_line" / "ref_s0.csv", "loss")


def test_an_out_of_memory_record_with_n_params_is_a_failed_probe(cli: Cli, engine: Engine) -> None:
    result = cli("ingest", str(DATA / "oom_probe"))
    assert result.stdout == "oom_probe: ingested 25 probes (1 failed), 4 arms, 600 points\n"
    with Session(engine) as session:
        probe = session.scalars(
            select(Probe).where(Probe.model == "gpt-355m", Probe.variant == "ref")
        ).one()
        assert (
            probe.error == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB"
        )
        assert probe.n_params is None  # a failed probe's measurements are not measurements
        assert probe.extra == {"n_params": 354823168}
        assert probe.bpp_params is None


@pytest.mark.parametrize(
    ("name", "warning", "points"),
    [
        ("header_only", "ref_s1: no data rows", 450),
        ("no_val_loss", "ref_s1: summary has no val_loss", 600),
    ],
)
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_an_arm_without_data_is_stored_with_a_warning(
    cli: Cli, engine: Engine, name: str, warning: str, points: int, strict: bool
) -> None:
    args = ["--strict-steps"] if strict else []
    result = cli("ingest", *args, str(DATA / name))
    assert result.stdout == (
        f"{name}: ingested 25 probes (1 failed), 4 arms, {points} points\n  warning: {warning}\n"
    )
    with Session(engine) as session:
        run = session.scalars(select(Run).where(Run.arm == "ref_s1")).one()
        query = select(Curve.metric, Curve.n_points).where(Curve.run_id == run.id)
        counts = {metric: n for metric, n in session.execute(query)}
    if name == "header_only":
        assert counts == {"loss": 0, "lr": 0, "step_ms": 0}
        assert run.val_loss is not None  # the summary is intact
    else:
        assert counts == {"loss": 50, "lr": 50, "step_ms": 50}
        assert run.val_loss is None


def test_the_warnings_are_kept_on_the_result(engine: Engine) -> None:
    results: list[Any] = [
        in_write_transaction(engine, partial(ingest_job, directory=DATA / name))
        for name in ("resumed", "duplicate_steps", "truncated_last_line", "oom_probe")
    ]
    assert [result.warnings for result in results] == [
        ["flash_s0: resumed at step 1500, 200 steps replaced"],
        ["ref_s0: 2 duplicate steps, last value kept"],
        ["ref_s0: incomplete last line 301 (step 299) dropped"],
        [],
    ]


def settled_line_by_line(rows: list[tuple[int, float | None]]) -> dict[int, float | None]:
    """The rule, read line by line: a lower step drops what was kept from it on; the same step
    again keeps its last value that is there."""
    kept: dict[int, float | None] = {}
    for step, value in rows:
        last = next(reversed(kept), None)
        if last is not None and step < last:
            kept = {s: v for s, v in kept.items() if s < step}
        if step in kept:
            kept[step] = kept[step] if value is None else value
        else:
            kept[step] = value
    return kept


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 12), st.none() | st.floats(allow_nan=False)), max_size=40))
def test_settled_steps_follow_the_rule_line_by_line(rows: list[tuple[int, float | None]]) -> None:
    frame = pl.DataFrame(
        {"step": [s for s, _ in rows], "loss": [v for _, v in rows]},
        schema={"step": pl.Int64, "loss": pl.Float64},
    )
    settled, notes = settle_steps(frame)
    assert dict(zip(settled["step"], settled["loss"], strict=True)) == settled_line_by_line(rows)
    assert settled["step"].diff().drop_nulls().gt(0).all()
    steps = [s for s, _ in rows]
    resumes, restarts, lowest = 0, 0, steps[0] if steps else 0
    for a, b in itertools.pairwise(steps):
        if b < a and b <= lowest:  # nothing logged before is kept: the run started again
            restarts, lowest = restarts + 1, b
        elif b < a:
            resumes += 1
    assert sum(note.kind == "resumed" for note in notes) == resumes
    restarted = [note for note in notes if note.kind == "restarted"]
    assert len(restarted) == (restarts > 0)
    if restarts > 1:
        assert f"from step {lowest} " in restarted[0].text
