"""A job's run index (``tracker.summary.run_index``): packed at ingest from the runs' rows as
the driver reads them, read back for many jobs at once with every value as it was (NaN,
infinities and -0.0 by their bits, null apart from NaN, any text), and the same tables
whether a job's index is kept or made from its runs on the spot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Engine, delete, func, select, true

from tests.conftest import Cli
from tracker.models import RunIndex
from tracker.queries import run_indexes
from tracker.summary.run_index import SCHEMA, index_frame, packed_index


@dataclass
class Rows:
    """A run's rows as the driver reads them (``RunRows``)."""

    id: int
    job_id: int
    columns: tuple[object, ...]
    notes: list[tuple[object, ...]] = field(default_factory=list)
    by_metric: dict[str, tuple[object, ...]] = field(default_factory=dict)


def loss(n: int, last_step: int | None, last: object, low: object, nonfinite: int) -> tuple:
    return ("loss", n, 0, last_step, 1.0, last, low, 9.0, nonfinite)


def bits(value: object) -> object:
    return value if not isinstance(value, float) else (repr(value), math.copysign(1, value))


def test_every_value_reads_back_as_it_was() -> None:
    job1 = [
        Rows(
            7,
            1,
            ("ref_s0", "gpt-124m", "ref", 0, "NaN", -0.0, 1, '{"steps": 10, "tok/s": 5e5}'),
            [(0, "resumed", 'at step 5: "quoted", ü, \x00', 5, 5, 1), (1, "x", "two", 1, 2, 3)],
            {"loss": loss(10, 9, float("inf"), -0.0, 1)},
        ),
        Rows(3, 1, ("lin_s1", None, "lin", None, None, None, None, None)),
    ]
    job2 = [Rows(12, 2, ("ref_s0", "m", "ref", 2**40, 1e-310, 3.5, 0, '{"x": true}'))]
    frame = index_frame([(1, packed_index(job1)), (5, packed_index([])), (2, packed_index(job2))])
    assert frame.schema == SCHEMA
    rows = [{k: bits(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]
    assert rows == [
        {
            "job_id": 1, "id": 7, "seed": 0, "points": 10, "last_step": 9, "nonfinite": 1,
            "steps": 10, "final_loss": bits(-0.0), "min_loss": bits(-0.0),
            "last_loss": bits(float("inf")), "val_loss": bits(float("nan")), "hours": None,
            "diverged": True, "arm": "ref_s0", "model": "gpt-124m", "variant": "ref",
            "stopped": None, "notes": 'at step 5: "quoted", ü, \x00; two',
        },
        {
            "job_id": 1, "id": 3, "seed": None, "points": 0, "last_step": None, "nonfinite": 0,
            "steps": None, "final_loss": None, "min_loss": None, "last_loss": None,
            "val_loss": None, "hours": None, "diverged": None, "arm": "lin_s1", "model": None,
            "variant": "lin", "stopped": None, "notes": "",
        },
        {
            "job_id": 2, "id": 12, "seed": 2**40, "points": 0, "last_step": None,
            "nonfinite": 0, "steps": None, "final_loss": bits(3.5), "min_loss": None,
            "last_loss": None, "val_loss": bits(1e-310), "hours": None, "diverged": False,
            "arm": "ref_s0", "model": "m", "variant": "ref", "stopped": None, "notes": "",
        },
    ]  # fmt: skip
    numbers = index_frame([(1, packed_index(job1)), (2, packed_index(job2))], ["tok/s", "x"])
    assert numbers.select("tok/s", "x").rows() == [(5e5, None), (None, None), (None, None)]


@pytest.mark.parametrize("dropped", ["every job's", "the first job's"])
def test_the_tables_are_the_same_from_the_kept_index_and_from_the_runs(
    study: Cli, engine: Engine, monkeypatch: pytest.MonkeyPatch, dropped: str
) -> None:
    """Kept indexes, indexes made from the runs, or both mixed: the same tables, whatever
    number of jobs is decoded at once."""
    shown = [("query", "runs", "--format", "csv"), ("claims", "--format", "json")]
    shown.append(("query", "runs", "--aggregate-seeds", "--format", "csv"))
    kept = [study(*args).stdout for args in shown]
    with engine.begin() as connection:
        first = connection.scalar(select(func.min(RunIndex.job_id)))
        which = RunIndex.job_id == first if dropped == "the first job's" else true()
        connection.execute(delete(RunIndex).where(which))
    assert [study(*args).stdout for args in shown] == kept
    monkeypatch.setattr(run_indexes, "DECODED_JOBS", 1)
    assert [study(*args).stdout for args in shown] == kept
