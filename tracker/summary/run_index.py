"""A job's runs as the runs table and the claims read them, one entry a run: what its row,
its loss curve's row, its summary and its notes say, and whether it stopped early among its
job's arms. Made from the rows as the store reads them (``RunRows``): once, when a job's
other derived rows are made, and kept packed (``packed_index``; ``tracker.store.run_index``
keeps it), so that a read across many jobs reads one small row a job, not every run's rows
and their checksums; made on the spot for a job without one. ``index_frame`` reads many
jobs' at once. A pure layer: no database code.

The packed layout (little-endian): a head (format, runs, bytes of the texts), then a record a
run (``RECORD``: its numbers, a bit a ``NULLABLE`` column that is null, ``diverged`` as 1, 0
or -1 for null), then the runs' ``TEXTS`` as the items of a JSON list (five a run), then the
numbers of the runs' summaries as a JSON object (name -> a value a run, null where a summary
has none; absent when no summary has any). Records are fixed-size so that the records of many
jobs are one numpy array; the texts of many jobs one JSON list.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any, Protocol

import numpy as np
import polars as pl

from tracker.completeness import stopped_arms, summary_steps
from tracker.domain import LOSS
from tracker.elapsed import Shape, TimeKind, is_time_column, time_source
from tracker.jsonio import from_stored_json, to_stored_json
from tracker.notes import RunNote, notes_text

FORMAT = 1
HEAD = struct.Struct("<BII")  # format, runs, bytes of the texts
RECORD = np.dtype(
    [
        ("id", "<i8"),
        ("seed", "<i8"),
        ("points", "<i8"),  # the loss curve's logged steps (0 without one)
        ("last_step", "<i8"),  # the loss curve's last step
        ("nonfinite", "<i8"),  # the loss curve's NaN and infinite points
        ("steps", "<i8"),  # its length: the summary's steps, else the loss's last step + 1
        ("final_loss", "<f8"),
        ("min_loss", "<f8"),  # the loss curve's lowest finite value
        ("last_loss", "<f8"),  # the loss curve's last value, NaN or infinite as logged
        ("val_loss", "<f8"),
        ("hours", "<f8"),  # its logged wall time (``run_hours``)
        ("nulls", "<u2"),
        ("diverged", "i1"),
    ]
)
NULLABLE = (
    "seed",
    "last_step",
    "steps",
    "final_loss",
    "min_loss",
    "last_loss",
    "val_loss",
    "hours",
)
# why it stopped early (``tracker.completeness``, else null); its notes in one line
TEXTS = ("arm", "model", "variant", "stopped", "notes")
SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.Int64(),
    **{name: pl.Int64() for name in ("id", "seed", "points", "last_step", "nonfinite", "steps")},
    **{name: pl.Float64() for name in ("final_loss", "min_loss", "last_loss", "val_loss")},
    "hours": pl.Float64(),
    "diverged": pl.Boolean(),
    **{name: pl.String() for name in TEXTS},
}


class RunRows(Protocol):
    """A run's rows as the driver read them (``tracker.store.run_rows.StoredRun``)."""

    id: int
    job_id: int
    columns: tuple[object, ...]  # arm, model, variant, seed, val_loss, final_loss, diverged, extra
    notes: list[tuple[object, ...]]  # position, kind, text, first step, last step, count
    by_metric: dict[str, tuple[object, ...]]  # metric -> its curve row's columns


def _as_float(value: Any) -> Any:
    """A float column's value as read: SQLite's text 'NaN' as the float (the store's
    ``exact_float``, which this pure layer does not import)."""
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
    shapes = {
        metric: Shape(n, _as_float(last), _as_float(low), _as_float(top))
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


def packed_index(runs: Sequence[RunRows]) -> bytes:
    """One job's runs packed (the module's layout), in the order given."""
    stopped = stopped_of(runs)
    records = np.zeros(len(runs), RECORD)
    texts: list[str | None] = []
    numbers: dict[str, list[float | None]] = {}
    for position, run in enumerate(runs):
        arm, model, variant, seed, val_loss, final_loss, diverged, text = run.columns
        extra = from_stored_json(text) if isinstance(text, str) else None
        extra = extra if isinstance(extra, dict) else {}
        loss = run.by_metric.get(LOSS)
        _, points, _, last_step, _, last, low, _, nonfinite = loss or (None,) * 9
        steps = summary_steps(extra)
        if steps is None and last_step is not None:
            steps = int(last_step) + 1  # type: ignore[call-overload]
        values: dict[str, Any] = {
            "id": run.id,
            "seed": seed,
            "points": points or 0,
            "last_step": last_step,
            "nonfinite": nonfinite or 0,
            "steps": steps,
            "final_loss": _as_float(final_loss),
            "min_loss": _as_float(low),
            "last_loss": _as_float(last),
            "val_loss": _as_float(val_loss),
            "hours": run_hours(extra, steps, partial(logged_elapsed, run.by_metric)),
        }
        nulls = sum(1 << bit for bit, name in enumerate(NULLABLE) if values[name] is None)
        flag = -1 if diverged is None else int(bool(diverged))
        records[position] = (*(0 if v is None else v for v in values.values()), nulls, flag)
        notes = notes_text(RunNote(*note[1:]) for note in run.notes)  # type: ignore[arg-type]
        texts += [str(arm), model, variant, stopped.get(str(arm)), notes]  # type: ignore[list-item]
        for name, value in extra.items():
            if (found := number(value)) is not None:
                numbers.setdefault(name, [None] * len(runs))[position] = found
    text = to_stored_json(texts)[1:-1].encode("utf-8")  # the items alone: many join as one list
    tail = to_stored_json(numbers).encode("utf-8") if numbers else b""
    return HEAD.pack(FORMAT, len(runs), len(text)) + records.tobytes() + text + tail


def index_frame(packed: Sequence[tuple[int, bytes]], numbers: Collection[str] = ()) -> pl.DataFrame:
    """The runs of many jobs' packed indexes (``(job id, packed)``), a row a run in the order
    given, ``SCHEMA``'s columns then one a name of ``numbers`` (their summaries' numbers, null
    where a summary has none)."""
    records, texts, counts, tails = [], [], [], []
    for _job_id, data in packed:
        form, runs, text_size = HEAD.unpack_from(data)
        if form != FORMAT:
            raise ValueError(f"a run index of format {form}, not {FORMAT}")
        start = HEAD.size + runs * RECORD.itemsize
        records.append(data[HEAD.size : start])
        if text_size:
            texts.append(data[start : start + text_size])
        counts.append(runs)
        tails.append(data[start + text_size :] if numbers else b"")
    array = np.frombuffer(b"".join(records), RECORD)
    strings: list[str | None] = from_stored_json("[" + b",".join(texts).decode("utf-8") + "]")
    ids = np.array([job_id for job_id, _ in packed], dtype=np.int64)
    columns: dict[str, Any] = {"job_id": np.repeat(ids, counts)}
    columns |= {
        name: array[name] for name in RECORD.names or () if name not in ("nulls", "diverged")
    }
    columns["diverged"] = array["diverged"] == 1
    columns |= {name: strings[i :: len(TEXTS)] for i, name in enumerate(TEXTS)}
    frame = pl.DataFrame(columns, schema=SCHEMA)
    unset = {name: np.flatnonzero(array["nulls"] & (1 << bit)) for bit, name in enumerate(NULLABLE)}
    unset["diverged"] = np.flatnonzero(array["diverged"] < 0)
    frame = frame.with_columns(
        frame[name].scatter(positions, None) for name, positions in unset.items() if positions.size
    )
    if numbers:
        found = _numbers(tails, counts, sorted(numbers))
        frame = frame.with_columns(
            pl.Series(name, values, pl.Float64) for name, values in found.items()
        )
    return frame


def _numbers(
    tails: Sequence[bytes], counts: Sequence[int], names: Sequence[str]
) -> dict[str, list[float | None]]:
    """The values of ``names`` of each job's runs (``tails``: the jobs' numbers, ``counts``:
    their runs), one list a name in the frame's order."""
    found: dict[str, list[float | None]] = {name: [] for name in names}
    for tail, runs in zip(tails, counts, strict=True):
        own = from_stored_json(tail.decode("utf-8")) if tail else {}
        for name in names:
            found[name] += own.get(name) or [None] * runs
    return found
