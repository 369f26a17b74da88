"""A job's runs as the runs table and the claims read them (``RunIndex``), one entry a run:
what its row, its loss curve's row, its summary and its notes say, and whether it stopped
early among its job's arms. Made from the rows as the store reads them (``RunRows``): once,
when a job's other derived rows are made, and kept (``tracker.store.run_index``), so that a
read across many jobs reads one small row a job, not every run's rows and their checksums;
made on the spot for a job without one. A pure layer: no database code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any, Protocol, TypedDict

from tracker.completeness import stopped_arms, summary_steps
from tracker.domain import LOSS
from tracker.jsonio import from_stored_json, to_stored_json
from tracker.notes import RunNote, notes_text


class RunRows(Protocol):
    """A run's rows as the driver read them (``tracker.store.run_rows.StoredRun``)."""

    id: int
    job_id: int
    columns: tuple[object, ...]  # arm, model, variant, seed, val_loss, final_loss, diverged, extra
    notes: list[tuple[object, ...]]  # position, kind, text, first step, last step, count
    by_metric: dict[str, tuple[object, ...]]  # metric -> its curve row's columns


class RunIndex(TypedDict):
    """One job's runs, a list a column, each in the order the runs were given."""

    id: list[int]
    arm: list[str]
    model: list[str]
    variant: list[str]
    seed: list[int | None]
    points: list[int]  # the loss curve's logged steps (0 without one)
    last_step: list[int | None]  # the loss curve's last step
    final_loss: list[float | None]
    min_loss: list[float | None]  # the loss curve's lowest finite value
    last_loss: list[float | None]  # the loss curve's last value, NaN or infinite as logged
    nonfinite: list[int]  # the loss curve's NaN and infinite points
    val_loss: list[float | None]
    diverged: list[bool | None]
    stopped: list[str | None]  # why it stopped early (``tracker.completeness``), else None
    notes: list[str]  # its notes in one line ("" without any)
    steps: list[int | None]  # its length: the summary's steps, else the loss's last step + 1
    hours: list[float | None]  # its logged wall time (``run_hours``)
    numbers: dict[str, list[float | None]]  # its summary's numbers, by name (None: not given)


def exact_float(value: Any) -> Any:
    """A float column's value as the driver gave it, SQLite's text 'NaN' as the float."""
    return float(value) if value.__class__ is str else value


def number(value: object) -> float | None:
    """A summary's number as a float; None for anything else (text, a flag, nothing)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_hours(
    extra: Mapping[str, object], steps: int | None, elapsed_s: Callable[[], float | None]
) -> float | None:
    """A run's logged time in hours: its summary's ``wall_time_s``, else ``train_time_ms``,
    else its elapsed-time curve's last value (``elapsed_s``, asked only then), else
    ``step_ms`` times its steps; None."""
    wall, train, step = (number(extra.get(k)) for k in ("wall_time_s", "train_time_ms", "step_ms"))
    if wall is not None:
        return wall / 3600
    if train is not None:
        return train / 3.6e6
    if (elapsed := elapsed_s()) is not None:
        return elapsed / 3600
    if step is not None and steps is not None:
        return step * steps / 3.6e6
    return None


def logged_elapsed(curves: Mapping[str, tuple[Any, ...]]) -> float | None:
    """The seconds a run's time column reached, where its curve rows (by metric) tell without
    reading the points: an elapsed time's last value, or a running average times the steps
    (``tracker.elapsed`` chooses the column; per-step durations need their sum: not here)."""
    # imported here: it imports numpy, which the driver rows' readers (``exact_float``) do not
    from tracker.elapsed import Shape, TimeKind, is_time_column, time_source

    shapes = {
        metric: Shape(n, exact_float(last), exact_float(low), exact_float(top))
        for metric, n, _first, _last_step, _first_value, last, low, top, _n in curves.values()
        if is_time_column(metric)
    }
    source = time_source(shapes)
    last = None if source is None else shapes[source.metric].last_value
    if source is None or last is None or not math.isfinite(last):
        return None
    if source.kind is TimeKind.ELAPSED:
        return last / source.per_second
    if source.kind is TimeKind.AVERAGE:
        steps_done = max(curves[source.metric][3], 1)
        return last * steps_done / source.per_second
    return None


# Both kept for what a process reads again (a server's pages): a summary's text is parsed
# once, and the jobs of a study mostly share their arms' ends, so one judging serves many.
@lru_cache(maxsize=100_000)
def stored_steps(extra: str) -> int | None:
    """The ``steps`` of a run summary's ``extra`` as stored (its JSON text, ``summary_steps``);
    parsed only when the text names them."""
    return summary_steps(from_stored_json(extra)) if '"steps"' in extra else None


@lru_cache(maxsize=10_000)
def _stopped_messages(
    ends: tuple[tuple[str, int | None, int | None], ...],
) -> dict[str, str]:
    """``stopped_arms`` of one job's ``(arm, last step, summary steps)``: arm -> message."""
    found = stopped_arms({arm: (last, steps) for arm, last, steps in ends})
    return {arm: c.message for arm, c in found.items()}


def stopped_of(runs: Sequence[RunRows]) -> dict[str, str]:
    """The message of each arm of one job's runs that stopped early, by arm, judged among
    all of the job's arms."""
    ends = []
    for run in runs:
        loss = run.by_metric.get(LOSS)
        last = None if loss is None else loss[3]
        ends.append((str(run.columns[0]), last, stored_steps(str(run.columns[-1]))))
    return _stopped_messages(tuple(ends))  # type: ignore[arg-type]


def run_index(runs: Sequence[RunRows]) -> RunIndex:
    """One job's ``RunIndex``, its runs in the order given."""
    index: RunIndex = {
        "id": [],
        "arm": [],
        "model": [],
        "variant": [],
        "seed": [],
        "points": [],
        "last_step": [],
        "final_loss": [],
        "min_loss": [],
        "last_loss": [],
        "nonfinite": [],
        "val_loss": [],
        "diverged": [],
        "stopped": [],
        "notes": [],
        "steps": [],
        "hours": [],
        "numbers": {},
    }
    stopped = stopped_of(runs)
    for position, run in enumerate(runs):
        arm, model, variant, seed, val_loss, final_loss, diverged, text = run.columns
        extra = from_stored_json(text) if isinstance(text, str) else None
        extra = extra if isinstance(extra, dict) else {}
        loss = run.by_metric.get(LOSS)
        _, points, _, last_step, _, last, low, _, nonfinite = loss or (None,) * 9
        steps = summary_steps(extra)
        if steps is None and last_step is not None:
            steps = int(last_step) + 1  # type: ignore[call-overload]
        hours = run_hours(extra, steps, partial(logged_elapsed, run.by_metric))
        for name, value in (
            ("id", run.id),
            ("arm", str(arm)),
            ("model", model),
            ("variant", variant),
            ("seed", seed),
            ("points", points or 0),
            ("last_step", last_step),
            ("final_loss", exact_float(final_loss)),
            ("min_loss", exact_float(low)),
            ("last_loss", exact_float(last)),
            ("nonfinite", nonfinite or 0),
            ("val_loss", exact_float(val_loss)),
            ("diverged", None if diverged is None else bool(diverged)),
            ("stopped", stopped.get(str(arm))),
            ("notes", notes_text(RunNote(*note[1:]) for note in run.notes)),  # type: ignore[arg-type]
            ("steps", steps),
            ("hours", hours),
        ):
            index[name].append(value)  # type: ignore[literal-required]
        for name, value in extra.items():
            if (found := number(value)) is not None:
                index["numbers"].setdefault(name, [None] * len(runs))[position] = found
    return index


def packed_index(index: RunIndex) -> bytes:
    """The index as kept: JSON whose non-finite numbers read back as they were."""
    return to_stored_json(index).encode("utf-8")


def unpacked_index(data: bytes) -> RunIndex:
    """What ``packed_index`` kept."""
    index: RunIndex = from_stored_json(data.decode("utf-8"))
    return index
