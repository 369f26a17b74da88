"""The series of the plot page: chosen runs' curves of one metric, smoothed, windowed and
downsampled, and optionally their group means with a min-max band.

Smoothing runs over the whole curve and only then is the window cut out, so a zoomed view
shows exactly the values of the whole smoothed curve (a window smoothed alone would restart
the EMA at its first step). Whole curves and their smoothings are kept in a cache keyed by
the job's content digest, so a zoom reads nothing from the database but the runs' rows.

The x-axis is the step, or with ``x="time"`` the wall time where every chosen run's metrics
give it (the rule: ``tracker.queries.walltime``); a time window (``start_s``/``end_s``) then
keeps, per run, the points whose time is in it, since runs of different speed reach a given
second at different steps.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from tracker.analysis.smoothing import smooth, smooth_points
from tracker.elapsed import ELAPSED_METRICS, MS_SUFFIX, STEP_MS
from tracker.errors import BadPlot, RunNotFound, UnknownMetaKey, UnknownMetric, known_names
from tracker.models import Curve, Job, JobMeta, Run
from tracker.queries.walltime import TIME_SOURCES, elapsed_seconds, time_source, times_at
from tracker.store.catalog import get_job
from tracker.store.curves import load_curves
from tracker.summary.downsample import minmax_indices

MAX_RUNS = 50  # runs per plot: each is a whole curve held in memory and a trace drawn
MAX_POINTS = 2000  # points per series in an answer: a window of at most this many is raw
RUN_FIELDS = ("job", "arm", "model", "variant", "seed")  # colour/group keys besides metadata
X_AXES = ("step", "time")
SMOOTH_BY = ("step", "point")  # per step (gaps weigh), or per logged point as TensorBoard
T = TypeVar("T")


class Cache(Protocol):
    def get(self, key: Hashable, compute: Callable[[], T]) -> T: ...


class NoCache:
    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        return compute()


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


@dataclass
class Whole:
    """One run's whole curve, smoothed or not, with its wall time at each step."""

    labels: dict[str, Any]
    steps: np.ndarray
    values: np.ndarray
    smoothed: np.ndarray | None
    times: np.ndarray | None
    cut: slice | np.ndarray  # the window's points


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


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)  # shared by every request that the cache answers
    return array


def _points(
    session: Session, cache: Cache, job: Job, run: Run, curve: Curve
) -> tuple[np.ndarray, np.ndarray]:
    """A whole curve's steps and values, read once per job content."""

    def read() -> tuple[np.ndarray, np.ndarray]:
        frame = load_curves(session, [curve.id])
        return _frozen(frame["step"].to_numpy()), _frozen(frame["value"].to_numpy())

    return cache.get(("plot", job.content_digest, run.arm, curve.metric), read)


def _whole(
    session: Session,
    cache: Cache,
    run: Run,
    job: Job,
    curve: Curve,
    alpha: float | None,
    by_point: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    steps, values = _points(session, cache, job, run, curve)
    if alpha is None:
        return steps, values, None
    key = ("plot", job.content_digest, run.arm, curve.metric, alpha, by_point)
    method = smooth_points if by_point else partial(smooth, steps)  # per point, or per step
    return steps, values, cache.get(key, lambda: _frozen(method(values, alpha)))


def _time_sources(session: Session, found: Sequence[tuple[Run, Job, Curve]]) -> list[Curve]:
    """Each run's curve its wall time is read from; a run without one is an error that names
    every such run."""
    rows = session.scalars(
        select(Curve).where(
            Curve.run_id.in_({run.id for run, _, _ in found}),
            Curve.metric.in_((*ELAPSED_METRICS, STEP_MS)) | Curve.metric.endswith(MS_SUFFIX),
        )
    )
    by_run: dict[int, dict[str, Curve]] = {}
    for curve in rows:
        by_run.setdefault(curve.run_id, {})[curve.metric] = curve
    sources = {}
    for run_id, curves in by_run.items():
        metric = time_source(curves)
        if metric is not None:
            sources[run_id] = curves[metric]
    missing = [f"{job.name}/{run.arm}" for run, job, _ in found if run.id not in sources]
    if missing:
        raise BadPlot(
            problem=f"x=time needs a metric of {', '.join(TIME_SOURCES)}; "
            f"{', '.join(missing)} log{'s' if len(missing) == 1 else ''} none of them"
        )
    return [sources[run.id] for run, _, _ in found]


def _times(
    session: Session, cache: Cache, run: Run, job: Job, curve: Curve, source: Curve
) -> np.ndarray:
    """The wall time at each step of ``curve``."""

    def compute() -> np.ndarray:
        steps, _ = _points(session, cache, job, run, curve)
        source_steps, values = _points(session, cache, job, run, source)
        seconds = elapsed_seconds(source.metric, source_steps, values)
        return _frozen(times_at(source_steps, seconds, steps))

    return cache.get(("plot-time", job.content_digest, run.arm, curve.metric), compute)


def _window(steps: np.ndarray, times: np.ndarray | None, query: PlotQuery) -> slice | np.ndarray:
    """The points in the steps asked for, and with ``start_s``/``end_s`` in those seconds."""
    low = 0 if query.start is None else int(np.searchsorted(steps, query.start, "left"))
    high = steps.size if query.end is None else int(np.searchsorted(steps, query.end, "right"))
    if times is None or (query.start_s is None and query.end_s is None):
        return slice(low, high)
    within = np.isfinite(times[low:high])  # a point without a time is not in a time window
    if query.start_s is not None:
        within &= times[low:high] >= query.start_s
    if query.end_s is not None:
        within &= times[low:high] <= query.end_s
    return low + np.flatnonzero(within)


def _kept(values: np.ndarray, smoothed: np.ndarray | None, points: int) -> np.ndarray:
    """Indices of at most ``points`` points keeping the envelope of both lines drawn: half
    the budget each for the raw and the smoothed one when there are two."""
    if smoothed is None or values.size <= points:
        return minmax_indices(values, points)
    return np.union1d(minmax_indices(values, points // 2), minmax_indices(smoothed, points // 2))


def _series(whole: Whole, query: PlotQuery) -> dict[str, Any]:
    steps, values = whole.steps[whole.cut], whole.values[whole.cut]
    smoothed = None if whole.smoothed is None else whole.smoothed[whole.cut]
    times = None if whole.times is None else whole.times[whole.cut]
    keep = _kept(values, smoothed, query.points)
    return {
        "job": whole.labels["job"],
        "arm": whole.labels["arm"],
        "metric": query.metric,
        "variant": whole.labels["variant"],
        "color": _label(whole.labels, query.color),
        "group": _label(whole.labels, query.group),
        "steps": steps[keep],
        "values": values[keep],
        "smoothed": None if smoothed is None else smoothed[keep],
        "times": None if times is None else times[keep],
        "in_window": int(steps.size),
        "downsampled": bool(keep.size < steps.size),
    }


def _groups(wholes: Sequence[Whole], key: str, band: bool, points: int) -> list[dict[str, Any]]:
    """Per group: the mean of its runs' (smoothed) curves on the steps all of them have,
    with the min and max over them as a band; with wall time, at the mean of their times."""
    members: dict[str, list[Whole]] = {}
    for whole in wholes:
        members.setdefault(str(whole.labels[key]), []).append(whole)
    groups = []
    for label, runs in members.items():
        common = runs[0].steps[runs[0].cut]
        for other in runs[1:]:
            common = np.intersect1d(common, other.steps[other.cut], assume_unique=True)
        stack = np.array([_at(w, common) for w in runs]).reshape(len(runs), common.size)
        with np.errstate(all="ignore"):
            mean = stack.mean(axis=0)
        keep = minmax_indices(mean, points)
        group: dict[str, Any] = {"label": label}
        group["runs"] = [f"{w.labels['job']}/{w.labels['arm']}" for w in runs]
        group |= {"steps": common[keep], "mean": mean[keep], "times": None}
        if runs[0].times is not None:
            times = np.array([_at(w, common, w.times) for w in runs]).reshape(stack.shape)
            with np.errstate(all="ignore"):
                group["times"] = times.mean(axis=0)[keep]
        group |= {"low": None, "high": None, "downsampled": bool(keep.size < common.size)}
        if band:
            with np.errstate(all="ignore"):
                group |= {
                    "low": stack.min(axis=0)[keep],
                    "high": stack.max(axis=0)[keep],
                }
        groups.append(group)
    return groups


def _at(whole: Whole, steps: np.ndarray, of: np.ndarray | None = None) -> np.ndarray:
    """``of`` (default: the drawn line's values) at ``steps``, which the curve has."""
    if of is None:
        of = whole.values if whole.smoothed is None else whole.smoothed
    return of[np.searchsorted(whole.steps, steps)]


def plot_series(session: Session, query: PlotQuery, cache: Cache | None = None) -> dict[str, Any]:
    """One series per chosen run (its labels, steps, raw and smoothed values in the window
    as numpy arrays, downsampled beyond ``points``) and, with ``group``, the groups' means
    (NaN at a step where a run of the group is NaN)."""
    _check(query)
    cache = NoCache() if cache is None else cache  # an empty cache is falsy (its len)
    alpha = 1.0 - query.smooth if query.smooth > 0 else None
    found = _curves(session, query)
    keys = {"job", "arm", "variant", *(k for k in (query.color, query.group) if k)}
    sources: list[Curve | None] = [None] * len(found)
    if query.x == "time":
        sources = list(_time_sources(session, found))
    wholes = []
    labelled = zip(found, _labels(session, found, keys), sources, strict=True)
    for (run, job, curve), labels, source in labelled:
        by_point = query.smooth_by == "point"  # TensorBoard's smoothing
        steps, values, smoothed = _whole(session, cache, run, job, curve, alpha, by_point)
        times = None if source is None else _times(session, cache, run, job, curve, source)
        cut = _window(steps, times, query)
        wholes.append(Whole(labels, steps, values, smoothed, times, cut))
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
        "series": [_series(whole, query) for whole in wholes],
        "groups": _groups(wholes, query.group, query.band, query.points) if query.group else [],
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
    timed = all(time_source(curves) for _, _, curves in found)
    x = list(X_AXES) if timed else ["step"]
    return {"metrics": sorted(metrics), "keys": [*RUN_FIELDS, *sorted(keys)], "x": x}
