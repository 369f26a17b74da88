"""The series of the plot page: chosen runs' curves of one metric, smoothed, windowed and
downsampled, and optionally their group means with a min-max band.

A request's memory is bounded by runs x points, not by the curves' length: at most
``MAX_RUNS`` runs, each read a chunk at a time and min/max-downsampled to at most ``points``
as it is read (``tracker.queries.plot_stream``). Without smoothing only the window's chunks
are read. Smoothing is the whole curve's, then cut: its state runs on from the curve's first
step through the chunks before the window, so a zoomed view shows the values of the whole
smoothed curve at its edges too (a window smoothed alone would restart the EMA there).
Without groups, each run's downsampled series is kept in the server's cache, keyed by its
job's content and the query, so the same view asked again reads no chunk.

The x-axis is the step, or with ``x="time"`` the wall time where every chosen run's metrics
give it (the rule: ``tracker.queries.walltime``), summed up from the time source's chunks
read one at a time; a time window (``start_s``/``end_s``) then keeps, per run, the points
whose time is in it, since runs of different speed reach a given second at different steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from tracker.analysis.smoothing import Smoother
from tracker.elapsed import Shape, TimeColumn, is_time_column
from tracker.errors import BadPlot, RunNotFound, UnknownMetaKey, UnknownMetric, known_names
from tracker.models import Curve, Job, JobMeta, Run
from tracker.notes import NoteKind, RunNote
from tracker.queries.plot_stream import Kept, Piece, drain, group_mean
from tracker.queries.walltime import TIME_SOURCES, TimeCursor, time_source
from tracker.store.catalog import get_job
from tracker.store.curves import curve_chunks
from tracker.store.run_rows import checked_runs

MAX_RUNS = 50  # runs per plot: each a trace drawn and a chunk read at a time
MAX_POINTS = 2000  # points per series in an answer: a window of at most this many is raw
RUN_FIELDS = ("job", "arm", "model", "variant", "seed")  # colour/group keys besides metadata
X_AXES = ("step", "time")
SMOOTH_BY = ("step", "point")  # per step (gaps weigh), or per logged point as TensorBoard
T = TypeVar("T")


@dataclass(frozen=True)
class PlotQuery:
    """What the plot shows: ``runs`` as (job, arm), ``smooth`` the TensorBoard/W&B weight
    in [0, 1) (EMA alpha = 1 - smooth; 0 draws raw values only), ``start``/``end`` the
    visible steps, ``color``/``group`` a run field or metadata key, ``x`` the axis (step or
    time), ``start_s``/``end_s`` the visible seconds (with ``x="time"``)."""

    runs: tuple[tuple[str, str], ...]
    metric: str
    smooth: float = 0.0
    start: int | None = None
    end: int | None = None
    color: str | None = None
    group: str | None = None
    band: bool = False
    points: int = MAX_POINTS
    x: str = "step"
    start_s: float | None = None
    end_s: float | None = None
    smooth_by: str = "step"  # "point": TensorBoard's EMA per logged point (smooth_points)


def parse_run(text: str) -> tuple[str, str]:
    """``JOB/ARM`` as (job, arm): job names hold no '/'."""
    job, sep, arm = text.partition("/")
    if not sep or not job or not arm:
        raise BadPlot(problem=f"run {text!r} is not JOB/ARM, e.g. job2/ref_s0")
    return job, arm


def _check(query: PlotQuery) -> None:
    if not query.runs:
        raise BadPlot(problem="choose at least one run: run=JOB/ARM")
    if len(query.runs) > MAX_RUNS:
        raise BadPlot(problem=f"{len(query.runs)} runs asked, at most {MAX_RUNS} are drawn")
    if query.start is not None and query.end is not None and query.start > query.end:
        raise BadPlot(problem="start must not exceed end")
    if query.x not in X_AXES:
        raise BadPlot(problem=f"x {query.x!r} is not one of: {', '.join(X_AXES)}")
    low, high = query.start_s, query.end_s
    if query.x != "time" and (low, high) != (None, None):
        raise BadPlot(problem="start_s and end_s are seconds of wall time: they need x=time")
    if low is not None and high is not None and low > high:
        raise BadPlot(problem="start_s must not exceed end_s")
    if not 0.0 <= query.smooth < 1.0:
        raise BadPlot(problem=f"smooth {query.smooth} is not in [0, 1)")
    if query.smooth_by not in SMOOTH_BY:
        raise BadPlot(problem=f"smooth_by {query.smooth_by!r} is not one of: step, point")


Found = tuple[Run, Job, dict[str, Curve]]  # a chosen run, its job, its curves by metric


def _runs(session: Session, runs: Sequence[tuple[str, str]]) -> list[Found]:
    """Each chosen run with its job and curves; an unknown name is an error that lists the
    known ones."""
    found = []
    for job_name, arm in dict.fromkeys(runs):
        job = get_job(session, job_name)
        arms = {run.arm: run for run in session.scalars(select(Run).where(Run.job_id == job.id))}
        if arm not in arms:
            raise RunNotFound(job=job_name, arm=arm, known=known_names(arms, near=arm))
        curves = session.scalars(select(Curve).where(Curve.run_id == arms[arm].id))
        found.append((arms[arm], job, {curve.metric: curve for curve in curves}))
    return found


def _curves(session: Session, query: PlotQuery) -> list[tuple[Run, Job, Curve]]:
    """The chosen runs' curves of the metric in one query; when one is missing, the checks
    one run at a time say which and list the known names."""
    chosen = list(dict.fromkeys(query.runs))
    rows = session.execute(
        select(Run, Job, Curve)
        .join(Job, Job.id == Run.job_id)
        .join(Curve, Curve.run_id == Run.id)
        .where(tuple_(Job.name, Run.arm).in_(chosen), Curve.metric == query.metric)
    ).all()
    by_run = {(job.name, run.arm): (run, job, curve) for run, job, curve in rows}
    if len(by_run) < len(chosen):
        for found in _runs(session, chosen):
            _curve(found, query.metric)
    return [by_run[run] for run in chosen]


def _curve(found: Found, metric: str) -> Curve:
    if metric not in found[2]:
        raise UnknownMetric(metric=metric, known=known_names(found[2], near=metric))
    return found[2][metric]


def _labels(
    session: Session, found: Sequence[tuple[Run, Job, Any]], keys: set[str]
) -> list[dict[str, Any]]:
    job_ids = {job.id for _, job, _ in found}
    meta: dict[int, dict[str, str]] = {}
    for item in session.scalars(select(JobMeta).where(JobMeta.job_id.in_(job_ids))):
        meta.setdefault(item.job_id, {})[item.key] = item.value
    known = {key for values in meta.values() for key in values}
    unknown = sorted(keys - set(RUN_FIELDS) - known)
    if unknown:
        raise UnknownMetaKey(key=unknown[0], known=", ".join((*RUN_FIELDS, *sorted(known))))
    labels = []
    for run, job, _ in found:
        own = {"job": job.name, "arm": run.arm, "model": run.model, "variant": run.variant}
        own["seed"] = str(run.seed)
        labels.append({key: own.get(key, meta.get(job.id, {}).get(key, "(none)")) for key in keys})
    return labels


def _label(labels: dict[str, Any], key: str | None) -> str | None:
    return None if key is None else str(labels[key])


def _time_column(curves: dict[str, Curve]) -> TimeColumn | None:
    """How a run's curves give its wall time, judged by the names and kept shapes."""
    shapes = {
        metric: Shape(c.n_points, c.last_value, c.min_value, c.max_value)
        for metric, c in curves.items()
        if is_time_column(metric)
    }
    return time_source(shapes)


Source = tuple[Curve, TimeColumn]  # a run's time curve and how it is read


def _time_sources(session: Session, found: Sequence[tuple[Run, Job, Curve]]) -> list[Source]:
    """Each run's curve its wall time is read from; a run without one is an error that names
    every such run."""
    rows = session.scalars(select(Curve).where(Curve.run_id.in_({run.id for run, _, _ in found})))
    by_run: dict[int, dict[str, Curve]] = {}
    for curve in rows:
        by_run.setdefault(curve.run_id, {})[curve.metric] = curve
    sources = {}
    for run_id, curves in by_run.items():
        column = _time_column(curves)
        if column is not None:
            sources[run_id] = (curves[column.metric], column)
    missing = [f"{job.name}/{run.arm}" for run, job, _ in found if run.id not in sources]
    if missing:
        raise BadPlot(
            problem=f"x=time needs {', '.join(TIME_SOURCES[:-1])} or {TIME_SOURCES[-1]}; "
            f"{', '.join(missing)} log{'s' if len(missing) == 1 else ''} none of them"
        )
    return [sources[run.id] for run, _, _ in found]


def _pieces(
    session: Session, curve: Curve, source: Source | None, query: PlotQuery
) -> Iterator[Piece]:
    """The run's points in the window, a chunk at a time: steps, values, with smoothing
    the smoothed values, with ``x="time"`` the times (and only the points in ``start_s`` to
    ``end_s``). Smoothing starts at the curve's first step, so the chunks before the window
    are read (one at a time) and only carry the EMA's state to it."""
    if curve.first_step is None or curve.last_step is None:
        return
    low = curve.first_step if query.start is None else query.start
    high = curve.last_step if query.end is None else query.end
    by_point = query.smooth_by == "point"  # TensorBoard's smoothing
    smoother = Smoother(1.0 - query.smooth, by_point) if query.smooth > 0 else None
    cursor = None
    if source is not None:
        cursor = TimeCursor(source[1], curve_chunks(session, source[0].id))
    span = (curve.first_step if smoother else low, high)
    for steps, values in curve_chunks(session, curve.id, span):
        smoothed = None if smoother is None else smoother(steps, values)
        inside = slice(np.searchsorted(steps, low, "left"), np.searchsorted(steps, high, "right"))
        piece = {"steps": steps[inside], "values": values[inside]}
        if smoothed is not None:
            piece["smoothed"] = smoothed[inside]
        if cursor is not None:
            piece["times"] = times = cursor.at(piece["steps"])
            if (query.start_s, query.end_s) != (None, None):
                within = np.isfinite(times)  # a point without a time is not in a time window
                if query.start_s is not None:
                    within &= times >= query.start_s
                if query.end_s is not None:
                    within &= times <= query.end_s
                piece = {name: column[within] for name, column in piece.items()}
        yield piece


def _marks(notes: Sequence[RunNote]) -> list[dict[str, Any]]:
    """The steps a run's notes put a mark at on its curves: where it resumed."""
    return [
        {"step": note.first_step, "text": note.text}
        for note in notes
        if note.kind == NoteKind.RESUMED and note.first_step is not None
    ]


def _series(
    labels: dict[str, Any], kept: Kept, query: PlotQuery, notes: Sequence[RunNote]
) -> dict[str, Any]:
    points = kept.result()
    empty = np.empty(0, np.float64)
    steps = points.get("steps", np.empty(0, np.int64))
    smoothed = None if query.smooth == 0 else points.get("smoothed", empty)
    return {
        "job": labels["job"],
        "arm": labels["arm"],
        "metric": query.metric,
        "variant": labels["variant"],
        "color": _label(labels, query.color),
        "group": _label(labels, query.group),
        "steps": steps,
        "values": points.get("values", empty),
        "smoothed": smoothed,
        "times": None if query.x != "time" else points.get("times", empty),
        "in_window": kept.seen,
        "downsampled": bool(steps.size < kept.seen),
        "marks": _marks(notes),
    }


def _group(label: str, runs: list[str], kept: Kept, timed: bool, band: bool) -> dict[str, Any]:
    points = kept.result()
    empty = np.empty(0, np.float64)
    steps = points.get("steps", np.empty(0, np.int64))
    group: dict[str, Any] = {"label": label, "runs": runs, "steps": steps}
    group |= {"mean": points.get("mean", empty), "times": None, "low": None, "high": None}
    if timed:
        group["times"] = points.get("times", empty)
    if band:
        group |= {"low": points.get("low", empty), "high": points.get("high", empty)}
    return group | {"downsampled": bool(steps.size < kept.seen)}


class Cache(Protocol):
    def get(self, key: Hashable, compute: Callable[[], T]) -> T: ...


def _drained(cache: Cache | None, key: Hashable, pieces: Iterator[Piece], kept: Kept) -> Kept:
    """``kept`` given every piece, or (with a cache) the one kept before under ``key``."""

    def compute() -> Kept:
        drain(pieces, kept)
        return kept

    return compute() if cache is None else cache.get(key, compute)


def plot_series(session: Session, query: PlotQuery, cache: Cache | None = None) -> dict[str, Any]:
    """One series per chosen run (its labels, steps, raw and smoothed values in the window
    as numpy arrays, downsampled beyond ``points``) and, with ``group``, the groups' means
    (NaN at a step where a run of the group is NaN). Each run is read a chunk at a time
    (``tracker.queries.plot_stream``): memory grows with runs x points, not the curves.
    Without ``group``, a ``cache`` keeps each run's downsampled series, keyed by its job's
    content and the query: at most ``points`` points each."""
    _check(query)
    found = _curves(session, query)
    keys = {"job", "arm", "variant", *(k for k in (query.color, query.group) if k)}
    sources: list[Source | None] = [None] * len(found)
    if query.x == "time":
        sources = list(_time_sources(session, found))
    labels = _labels(session, found, keys)
    lines = ("values",) if query.smooth == 0 else ("values", "smoothed")
    kepts = [Kept(query.points, lines) for _ in found]
    pieces = [
        _pieces(session, curve, source, query)
        for (_, _, curve), source in zip(found, sources, strict=True)
    ]
    groups = []
    if query.group is None:
        shape = dataclasses.replace(query, runs=(), color=None)
        for i, ((run, job, curve), source) in enumerate(zip(found, sources, strict=True)):
            key = ("plot", job.content_digest, run.arm, curve.metric, source and source[1])
            kepts[i] = _drained(cache, (*key, shape), pieces[i], kepts[i])
    else:
        members: dict[str, list[int]] = {}
        for i, run_labels in enumerate(labels):
            members.setdefault(str(run_labels[query.group]), []).append(i)
        line = "values" if query.smooth == 0 else "smoothed"
        for label, indices in members.items():
            runs = [f"{labels[i]['job']}/{labels[i]['arm']}" for i in indices]
            chosen = [pieces[i] for i in indices]
            kept, timed = group_mean(chosen, [kepts[i] for i in indices], line, query.points)
            groups.append(_group(label, runs, kept, timed, query.band))
    # after the points: a damaged curve is named by its own line, more precise than its run's
    notes = checked_runs(session, {run.job_id for run, _, _ in found})
    return {
        "metric": query.metric,
        "x": query.x,
        "smooth": query.smooth,
        "smooth_by": query.smooth_by,
        "start": query.start,
        "end": query.end,
        "start_s": query.start_s,
        "end_s": query.end_s,
        "color": query.color,
        "group": query.group,
        "band": query.band,
        "series": [
            _series(lab, kept, query, notes.get(run.id, []))
            for lab, kept, (run, _, _) in zip(labels, kepts, found, strict=True)
        ],
        "groups": groups,
    }


def plot_rows(plot: dict[str, Any]) -> list[dict[str, Any]]:
    """What a plot draws, one row per point: job, arm, metric, step, (with x=time) time,
    value, smoothed."""
    rows = []
    for series in plot["series"]:
        steps = series["steps"].tolist()
        nothing = [None] * len(steps)
        smoothed = nothing if series["smoothed"] is None else series["smoothed"].tolist()
        times = None if series["times"] is None else series["times"].tolist()
        for i, (step, value) in enumerate(zip(steps, series["values"].tolist(), strict=True)):
            row = {"job": series["job"], "arm": series["arm"], "metric": series["metric"]}
            row["step"] = step
            if times is not None:
                row["time"] = times[i]
            rows.append(row | {"value": value, "smoothed": smoothed[i]})
    return rows


def plot_choices(session: Session, runs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """What the chosen runs can be plotted by: their metrics, the colour/group keys and the
    x-axes (time only when every run has a wall time)."""
    found = _runs(session, runs)
    keys = session.scalars(
        select(JobMeta.key).distinct().where(JobMeta.job_id.in_({job.id for _, job, _ in found}))
    )
    metrics = {metric for _, _, curves in found for metric in curves}
    timed = all(_time_column(curves) for _, _, curves in found)
    x = list(X_AXES) if timed else ["step"]
    return {"metrics": sorted(metrics), "keys": [*RUN_FIELDS, *sorted(keys)], "x": x}
