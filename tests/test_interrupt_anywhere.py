"""A Ctrl-C may land between any two steps of Python: the tests put one at each of them.

Python runs a signal's handler between two bytecodes of the main thread, in whatever code
runs there: the tracker's, a library's, or a Python function a library calls back. Wherever
it lands, it must come out as a KeyboardInterrupt (and, from ``ingest``, as ``Interrupted``
naming what is stored), never as another error a library raised for it: pydantic wraps one
raised in its serializer callbacks, SQLAlchemy asserts when one lands while a transaction
closes. Here a trace function raises the KeyboardInterrupt at a chosen step, so that every
step is reached by construction, not by sending a signal at some moment.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from tracker.errors import Interrupted
from tracker.jobdir.records import parse_arm_summary, parse_probe_record
from tracker.models import Curve, CurveChunk, Job, Run
from tracker.sample import write_sample_job
from tracker.services.ingest import IngestOptions, IngestReport, ingest_directories
from tracker.store.catalog import delete_job
from tracker.store.schema import open_database

from .stored import stored_points

PROBE = {
    "model": "gpt2_124m",
    "variant": "flash",
    "n_params": 124_439_808,
    "bpp_params": 2.0,
    "bpp_state": 5.0,
    "bpp_grads": 2.0,
    "bpp_params_state_grads": 9.0,
    "peak_steady": 3_500_000_000,
    "gpu": "A10G",
}
SAFETY_NET_S = 120  # only for a lock an interrupted run left held: no verdict depends on it
SUMMARY = {"model": "gpt2_124m", "seed": 0, "val_loss": 3.3, "final_loss": 3.2, "extra": 1}
Trace = Callable[[FrameType, str, Any], Any]


class Landed:
    """Where the KeyboardInterrupt was raised, and whether Python swallowed it there (in a
    ``__del__`` or weakref callback, as it would swallow a signal's)."""

    def __init__(self) -> None:
        self.fired = False
        self.swallowed = False


@contextmanager
def traced(trace: Trace) -> Iterator[None]:
    sys.settrace(trace)
    yield


@contextmanager
def interrupt_at(
    hit: Callable[[FrameType, str], bool],
    *,
    lines: bool = False,
    tracing: Callable[[Trace], AbstractContextManager[None]] = traced,
) -> Iterator[Landed]:
    """A KeyboardInterrupt raised at the first trace event ``hit`` accepts: calls only, or
    (``lines``) each line too; ``tracing`` sets the trace function (at once, by default)."""
    landed = Landed()

    def trace(frame: FrameType, event: str, _arg: Any) -> Any:
        if not landed.fired and hit(frame, event):
            landed.fired = True
            sys.settrace(None)
            raise KeyboardInterrupt
        return trace if lines else None

    def unraisable(report: Any) -> None:
        landed.swallowed = landed.swallowed or report.exc_type is KeyboardInterrupt

    before = sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        with tracing(trace):
            yield landed
    finally:
        sys.settrace(None)
        sys.unraisablehook = before


def at_step(n: int) -> Callable[[FrameType, str], bool]:
    """The ``n``-th call or line event from now (1-based)."""
    seen = [0]

    def hit(_frame: FrameType, event: str) -> bool:
        seen[0] += event in ("call", "line")
        return seen[0] == n

    return hit


def every_step_interrupts(work: Callable[[], object]) -> int:
    """``work`` run once per step it takes, interrupted at that step; each must raise a
    KeyboardInterrupt. Returns the number of steps."""
    n = 0
    gc.collect()  # no finalizer of an earlier test's objects runs among the steps
    while True:
        n += 1
        try:
            with interrupt_at(at_step(n), lines=True) as landed:
                work()
        except KeyboardInterrupt:
            continue
        if not landed.fired:  # past its last step
            return n - 1
        assert landed.swallowed, f"step {n}: the interrupt vanished"


def test_a_probe_record_interrupted_at_any_step_raises_keyboard_interrupt() -> None:
    steps = every_step_interrupts(lambda: parse_probe_record(dict(PROBE), "mem_sweep.json"))
    assert steps > 100, steps  # validation and the record built from it, all reached


def test_an_arm_summary_interrupted_at_any_step_raises_keyboard_interrupt() -> None:
    steps = every_step_interrupts(lambda: parse_arm_summary(dict(SUMMARY), "ref_s0.json", 0))
    assert steps > 30, steps


SHARDS = 3  # the sweep split so that several workers share its minute of CPU


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_function_of_an_ingest_interrupted_at_its_first_call_leaves_whole_jobs(
    db_url: str, tmp_path: Path, shard: int
) -> None:
    """An ingest of one job, once per function it calls, interrupted at that function's first
    call: the job is stored whole or not at all, and ``Interrupted`` says which. Each shard
    takes every SHARDS-th function (on PostgreSQL, of those from the database's first use).

    In a process of its own: an interrupt inside the standard library can leave a lock of
    the process held (logging's), as it would in the command, which then exits."""
    engine = open_database(db_url, may_create_file=True)
    engine.dispose()
    done = subprocess.run(
        [sys.executable, "-m", __name__, db_url, str(tmp_path), str(shard)],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET_S * 10,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reached, swept, functions = map(int, done.stdout.split())
    assert functions > 500 and reached > 0.9 * swept, done.stdout


def sweep_ingest(url: str, root: Path, shard: int) -> tuple[int, int, int]:
    """The sweep of the test above, in this process, over one shard of the functions:
    (functions reached, functions swept, functions)."""
    engine = open_database(url)
    if engine.dialect.name == "postgresql":  # a lock left held fails the test, never hangs it
        event.listen(engine, "connect", _lock_timeout)
    # two arms of two probed variants call what four arms of five do (1,519 functions of 1,522;
    # four small helpers apart, one more), at two thirds of the cost of each of its ingests
    directory = write_sample_job(
        root / "job", steps=20, arms=("ref_s0", "flash_s0"), variants=("ref", "flash")
    )
    ingest = partial(ingest_directories, engine, [directory], IngestOptions())
    ingest()
    whole = _decoded(engine)
    assert _stored(engine) == whole
    _delete(engine)
    functions, first_contact = _functions_called(ingest, engine)
    _delete(engine)
    gc.freeze()  # each run's collection looks at what the runs made, not at every module
    # on PostgreSQL, the functions from the database's first use on: before it, an interrupt
    # meets what it meets on SQLite (reading the job's files), which sweeps them all
    first = first_contact if engine.dialect.name == "postgresql" else 0
    swept = list(functions)[first:][shard::SHARDS]
    reached = sum(
        _interrupted_at_first_call(code, functions[code], ingest, engine, whole) for code in swept
    )
    return reached, len(swept), len(functions)


def _interrupted_at_first_call(
    code: CodeType,
    statements: int,
    ingest: Callable[[], IngestReport],
    engine: Engine,
    whole: dict[str, int],
) -> bool:
    """One ingest interrupted at the first call of ``code``, which came after ``statements``
    statements had begun, checked; whether it was reached."""
    told: list[str] | None = None  # what the interrupt said is stored
    hit = partial(_is_code, code)
    try:
        with interrupt_at(hit, tracing=partial(_traced_from, engine, statements)) as landed:
            report = ingest()
    except KeyboardInterrupt as interrupt:
        # before the job's name is known, plain: "interrupted", nothing stored
        told = interrupt.stored if isinstance(interrupt, Interrupted) else []
    _release(engine)  # past the except block: its traceback no longer holds them
    if told is None:
        assert not report.failed, code
        assert not landed.fired or landed.swallowed, f"{code}: the interrupt vanished"
        held = whole
    else:
        held = _stored(engine)
        assert held in ({}, whole), code
        assert told == (["job"] if held else []), (code, told)
    if held:  # most runs store nothing: no statement to delete it
        _delete(engine)
    return landed.fired


def _is_code(code: CodeType, frame: FrameType, _event: str) -> bool:
    return frame.f_code is code


@contextmanager
def _traced_from(engine: Engine, statements: int, trace: Trace) -> Iterator[None]:
    """``trace`` set as ``engine`` begins its ``statements``-th statement (at once for none):
    tracing makes every step of Python half again as dear, and an ingest takes the same steps
    as the one that counted them up to there."""
    begun = 0

    def statement(*_args: Any) -> None:
        nonlocal begun
        begun += 1
        if begun == statements:
            sys.settrace(trace)

    if not statements:
        sys.settrace(trace)
    event.listen(engine, "before_cursor_execute", statement)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", statement)


def _lock_timeout(connection: Any, _record: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = '{SAFETY_NET_S}s'")
    connection.commit()


def _functions_called(
    work: Callable[[], object], engine: Engine
) -> tuple[dict[CodeType, int], int]:
    """Every function ``work`` calls, in the order of their first calls, each with how many
    statements of ``engine``'s had begun before it; and how many of them came before ``work``
    first took a connection of ``engine``'s."""
    called: dict[CodeType, int] = {}
    first_contact: list[int] = []
    begun = 0

    def trace(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            called.setdefault(frame.f_code, begun)

    def checkout(*_args: Any) -> None:
        first_contact.append(len(called))

    def statement(*_args: Any) -> None:
        nonlocal begun
        begun += 1

    event.listen(engine, "checkout", checkout)
    event.listen(engine, "before_cursor_execute", statement)
    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
        event.remove(engine, "checkout", checkout)
        event.remove(engine, "before_cursor_execute", statement)
    return called, first_contact[0]


def _stored(engine: Engine) -> dict[str, int]:
    """The stored jobs, each with the points its chunks say they hold (one statement: the
    sweep asks it about a thousand times; the first answer, ``whole``, decodes them)."""
    with Session(engine) as session:
        rows = session.execute(
            select(Job.name, func.coalesce(func.sum(CurveChunk.n_points), 0))
            .outerjoin(Run, Run.job_id == Job.id)
            .outerjoin(Curve, Curve.run_id == Run.id)
            .outerjoin(CurveChunk, CurveChunk.curve_id == Curve.id)
            .group_by(Job.name)
        ).all()
    return {name: int(points) for name, points in rows}


def _decoded(engine: Engine) -> dict[str, int]:
    """The stored jobs, each with its points, decoded."""
    with Session(engine) as session:
        points = stored_points(session)
        names = session.scalars(select(Job.name)).all()
    return {name: points.filter(job=name).height for name in names}


def _release(engine: Engine) -> None:
    """The connections an interrupt left checked out closed, as the process's exit would:
    else the next run waits for the write lock one of them holds. The pool's own (rolled
    back when returned) stay open: a new connection a run cost a fifth of the sweep."""
    gc.collect()  # their finalizers roll them back (fast: what came before is frozen)
    if engine.pool.checkedout():
        engine.dispose()


def _delete(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        if session.scalar(select(Job.id).where(Job.name == "job")) is not None:
            delete_job(session, "job")


if __name__ == "__main__":
    print(*sweep_ingest(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
