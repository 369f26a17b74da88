"""Curve chunks read back bit for bit, on every backend, through the one reader."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tests.migration_code import migration_module
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.store import codec
from tracker.store.curves import load_curves
from tracker.store.points import CHUNK_POINTS, CurvePlace, write_points
from tracker.store.transactions import write_session

SPECIAL = [
    0.0,
    -0.0,
    float("inf"),
    float("-inf"),
    float("nan"),
    -float("nan"),
    5e-324,  # the smallest subnormal
    -2.2250738585072e-308,  # a subnormal
    1.7976931348623157e308,
    2.3456,
]
# any 64 bits as a float: every NaN payload, subnormals, both zeros
any_float = st.integers(min_value=0, max_value=2**64 - 1).map(
    lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0]
)
values = st.one_of(any_float, st.sampled_from(SPECIAL), st.floats(allow_nan=True))
decimal = st.integers(-(10**7), 10**7).flatmap(
    lambda n: st.integers(0, 8).map(lambda d: n / 10**d)
)  # what a log printing d decimals holds (at 8 decimals, below 2**53 as an integer)


def bits(array: np.ndarray) -> list[int]:
    return np.asarray(array, dtype=np.float64).view(np.uint64).tolist()


@st.composite
def curves(draw: st.DrawFn, elements: st.SearchStrategy[float] = values) -> tuple[list, list]:
    gaps = draw(st.lists(st.integers(1, 2**40), min_size=0, max_size=300))
    first = draw(st.integers(-(2**50), 2**50))
    steps = np.cumsum([first, *gaps]).tolist()
    return steps, draw(st.lists(elements, min_size=len(steps), max_size=len(steps)))


@given(curves(st.one_of(values, decimal)))
def test_a_chunk_decodes_to_the_same_bits(curve: tuple[list, list]) -> None:
    steps, vals = np.array(curve[0], dtype=np.int64), np.array(curve[1], dtype=np.float64)
    decoded_steps, decoded = codec.decode(codec.encode(steps, vals))
    assert decoded_steps.tolist() == steps.tolist()
    assert bits(decoded) == bits(vals)


@pytest.mark.parametrize("n", [codec.PLANE_AT_A_TIME - 1, codec.PLANE_AT_A_TIME, 4099])
def test_chunks_of_either_side_of_the_plane_at_a_time_size_decode_to_the_same_bits(n: int) -> None:
    rng = np.random.default_rng(n)
    steps = np.cumsum(rng.integers(1, 2**40, n)).astype(np.int64)
    vals = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)  # any bits, NaNs too
    decoded_steps, decoded = codec.decode(codec.encode(steps, vals))
    assert decoded_steps.tolist() == steps.tolist()
    assert bits(decoded) == bits(vals)


@given(curves(st.one_of(values, decimal)), st.integers(0, 2))
def test_a_chunk_decodes_into_arrays_of_its_length_only(curve: tuple[list, list], at: int) -> None:
    steps, vals = np.array(curve[0], dtype=np.int64), np.array(curve[1], dtype=np.float64)
    whole = np.zeros(len(steps) + 2, np.int64), np.zeros(len(steps) + 2, np.float64)
    into = whole[0][at : at + len(steps)], whole[1][at : at + len(steps)]
    decoded_steps, decoded = codec.decode(codec.encode(steps, vals), into)
    assert decoded_steps.tolist() == whole[0][at : at + len(steps)].tolist() == steps.tolist()
    assert bits(decoded) == bits(whole[1][at : at + len(steps)]) == bits(vals)
    longer = whole  # not its length: left as it was
    decoded_steps, decoded = codec.decode(codec.encode(steps, vals), longer)
    assert decoded_steps is not longer[0] and decoded_steps.tolist() == steps.tolist()


@given(curves(decimal))
def test_values_logged_with_a_few_decimals_are_stored_as_exact_integers(
    curve: tuple[list, list],
) -> None:
    vals = np.array(curve[1], dtype=np.float64)
    found = codec.scaled(vals)
    assert found is not None
    decimals, integers = found
    assert decimals <= 8
    assert bits(integers / 10.0**decimals) == bits(vals)


def test_a_value_that_no_decimal_exponent_gives_back_is_stored_as_it_is() -> None:
    assert codec.scaled(np.array([0.1, 1 / 3])) is None
    assert codec.scaled(np.array([1.0, -0.0])) is None  # -0.0 is no integer's quotient
    assert codec.scaled(np.array([1.0, float("nan")])) is None
    assert codec.scaled(np.array([2.5, 0.25])) == (2, pytest.approx(np.array([250, 25])))


def test_full_precision_and_decimal_curves_compress() -> None:
    steps = np.arange(CHUNK_POINTS, dtype=np.int64)
    loss = 2 + np.exp(-steps / 5000) + np.random.default_rng(0).normal(0, 0.05, CHUNK_POINTS)
    assert len(codec.encode(steps, loss)) / CHUNK_POINTS < 7.5
    assert len(codec.encode(steps, np.round(loss, 4))) / CHUNK_POINTS < 2.5


def test_a_chunk_of_a_newer_format_is_refused() -> None:
    data = codec.encode(np.arange(3), np.ones(3))
    with pytest.raises(codec.BadChunk, match="chunk format 2, this tracker reads 1"):
        codec.decode(bytes([2]) + data[1:])


@settings(max_examples=40)
@given(curves(st.one_of(values, decimal)))
def test_the_migration_writes_and_reads_format_1_as_the_codec_does(
    curve: tuple[list, list],
) -> None:
    migration = migration_module("0007_curve_chunks.py")
    steps, vals = np.array(curve[0], dtype=np.int64), np.array(curve[1], dtype=np.float64)
    assert migration.encode(steps, vals) == codec.encode(steps, vals)
    decoded_steps, decoded = migration.decode(codec.encode(steps, vals))
    assert (decoded_steps.tolist(), bits(decoded)) == (steps.tolist(), bits(vals))
    assert migration.CHUNK_POINTS == CHUNK_POINTS


def a_curve(session: Session) -> CurvePlace:
    job = Job(name="j", source_path="/j", content_digest="x", ingested_at=datetime.now(UTC))
    session.add(job)
    session.flush()
    run = Run(job_id=job.id, arm="ref_s0", model="m", variant="ref", seed=0, extra={})
    session.add(run)
    session.flush()
    curve = Curve(run_id=run.id, metric="loss", n_points=0, n_nonfinite=0)
    session.add(curve)
    session.flush()
    return (curve.id, job.name, run.arm, curve.metric)


@pytest.mark.parametrize("n", [0, 1, CHUNK_POINTS, 2 * CHUNK_POINTS + 5])
def test_stored_curves_read_back_bit_for_bit_in_any_step_range(engine: Engine, n: int) -> None:
    rng = np.random.default_rng(n)
    steps = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
    vals = rng.choice(np.array(SPECIAL), n) if n else np.array([], dtype=np.float64)
    with write_session(engine) as session, session.begin():
        place = a_curve(session)
        write_points(session.connection(), place, pl.DataFrame({"step": steps, "value": vals}))
        curve = session.get_one(Curve, place[0])  # its row says what its chunks hold
        curve.n_points = n
        curve.first_step, curve.last_step = (int(steps[0]), int(steps[-1])) if n else (None, None)
    curve_id = place[0]
    with Session(engine) as session:
        chunks = session.scalar(select(func.count()).select_from(CurveChunk))
        assert chunks == -(-n // CHUNK_POINTS)
        whole = load_curves(session, [curve_id])
        assert whole["step"].to_list() == steps.tolist()
        assert bits(whole["value"].to_numpy()) == bits(vals)
        for low, high in [
            (0, 0),
            (5, 40_000),
            (40_000, 50_000),
            (int(steps[-1]) if n else 0, 10**9),
            (-5, -1),
        ]:
            inside = (steps >= low) & (steps <= high)
            window = load_curves(session, [curve_id], (low, high))
            assert window["step"].to_list() == steps[inside].tolist()
            assert bits(window["value"].to_numpy()) == bits(vals[inside])
