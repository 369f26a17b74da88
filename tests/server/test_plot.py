"""``/plot`` and ``/api/plot``: several runs' curves on one figure, smoothed over the whole
curve and then windowed, raw within 2,000 steps, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from tests.conftest import Cli
from tracker.analysis.smoothing import smooth
from tracker.elapsed import TimeColumn, TimeKind
from tracker.queries.plot import MAX_RUNS
from tracker.queries.walltime import elapsed_seconds, times_at
from tracker.sample import write_sample_job
from tracker.server import schemas
from tracker.server.routers.plot import PlotJSON

STEPS = 3000
RUNS = "run=j1/ref_s0&run=j2/flash_s0&run=j1/ref_s1"
JOBS = {"j1": ({"seed": 0}, ["gpu=A10G"]), "j2": ({"seed": 1}, ["gpu=L4"])}


def raw(cli: Cli, job: str, arm: str, metric: str = "loss") -> list[dict[str, Any]]:
    args = ("query", "curve", "--job", job, "--arm", arm, "--metric", metric, "--format", "json")
    points: list[dict[str, Any]] = json.loads(cli(*args).stdout)
    return points


def number(value: Any) -> float:
    return float("nan") if value in (None, "NaN") else float(value)


def test_one_series_per_run_smoothed_like_smooth(client: TestClient, study: Cli) -> None:
    body = client.get(f"/api/plot?{RUNS}&smooth=0.9&y=log").json()
    assert [(s["job"], s["arm"]) for s in body["series"]] == [
        ("j1", "ref_s0"),
        ("j2", "flash_s0"),
        ("j1", "ref_s1"),
    ]
    assert body["y"] == "log" and body["smooth"] == 0.9
    assert schemas.Plot.model_validate(body).series[0].arm == "ref_s0"  # its response_model
    for series in body["series"]:
        points = raw(study, series["job"], series["arm"])
        steps = np.array([p["step"] for p in points])
        values = np.array([number(p["value"]) for p in points])
        expected = smooth(steps, values, 1 - 0.9)
        assert series["metric"] == "loss" and series["downsampled"] is True
        assert series["in_window"] == STEPS and len(series["steps"]) <= 2000
        at = np.searchsorted(steps, series["steps"])
        drawn = np.array([number(v) for v in series["smoothed"]])
        np.testing.assert_array_equal(drawn, expected[at])
        np.testing.assert_array_equal(np.array([number(v) for v in series["values"]]), values[at])


def test_a_window_is_every_raw_point_and_the_whole_smoothing_cut(
    client: TestClient, study: Cli
) -> None:
    body = client.get(f"/api/plot?{RUNS}&smooth=0.6&start=1000&end=2999").json()
    points = raw(study, "j2", "flash_s0")
    steps = np.array([p["step"] for p in points])
    values = np.array([number(p["value"]) for p in points])
    whole = smooth(steps, values, 0.4)
    series = body["series"][1]
    assert series["downsampled"] is False and series["in_window"] == 2000
    assert series["steps"] == list(range(1000, 3000))
    np.testing.assert_array_equal(np.array([number(v) for v in series["smoothed"]]), whole[1000:])
    wider = client.get(f"/api/plot?{RUNS}&start=500&end=2999").json()["series"][1]
    assert wider["downsampled"] is True and wider["in_window"] == 2500
    assert len(wider["steps"]) <= 2000
    kept = [number(v) for v in wider["values"]]
    finite = values[500:][np.isfinite(values[500:])]
    assert min(kept) == finite.min() and max(kept) == finite.max()  # min/max kept


def test_raw_only_and_any_metric(client: TestClient, study: Cli) -> None:
    body = client.get("/api/plot?run=j1/ref_s0&metric=lr&start=0&end=99").json()
    series = body["series"][0]
    assert series["smoothed"] is None and body["y"] == "linear"
    expected = raw(study, "j1", "ref_s0", "lr")[:100]
    assert series["values"] == [p["value"] for p in expected]


def test_csv_is_query_curve_for_those_runs(client: TestClient, study: Cli) -> None:
    answer = client.get(f"/api/plot.csv?{RUNS}&start=100&end=1999")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    expected = [
        (job, arm, "loss", p["step"], number(p["value"]))
        for job, arm in (("j1", "ref_s0"), ("j2", "flash_s0"), ("j1", "ref_s1"))
        for p in raw(study, job, arm)
        if 100 <= p["step"] <= 1999
    ]
    got = [(r["job"], r["arm"], r["metric"], int(r["step"]), float(r["value"])) for r in rows]
    assert len(got) == len(expected)
    assert all(
        g[:4] == e[:4] and (g[4] == e[4] or (np.isnan(g[4]) and np.isnan(e[4])))
        for g, e in zip(got, expected, strict=True)
    )
    assert {r["smoothed"] for r in rows} == {""}
    smoothed = client.get(f"/api/plot.csv?{RUNS}&start=100&end=1999&smooth=0.9").text
    rows = list(csv.DictReader(io.StringIO(smoothed)))
    args = ("query", "curve", "--job", "j2", "--arm", "flash_s0", "--ema", "0.1", "-f", "json")
    ema = [number(p["ema"]) for p in json.loads(study(*args).stdout)[100:2000]]
    drawn = [float(r["smoothed"]) for r in rows if (r["job"], r["arm"]) == ("j2", "flash_s0")]
    np.testing.assert_allclose(drawn, ema, rtol=1e-12)  # query curve --ema's numbers


def test_groups_mean_and_band(client: TestClient) -> None:
    body = client.get(
        "/api/plot?run=j1/ref_s0&run=j1/ref_s1&run=j2/flash_s0&smooth=0.5&group=variant&band=1"
        "&start=0&end=999"
    ).json()
    groups = {g["label"]: g for g in body["groups"]}
    assert set(groups) == {"ref", "flash"} and groups["ref"]["runs"] == ["j1/ref_s0", "j1/ref_s1"]
    runs = {
        (s["job"], s["arm"]): np.array([number(v) for v in s["smoothed"]]) for s in body["series"]
    }
    ref = np.array([runs["j1", "ref_s0"], runs["j1", "ref_s1"]])
    mean = np.array([number(v) for v in groups["ref"]["mean"]])
    np.testing.assert_allclose(mean, ref.mean(axis=0))
    np.testing.assert_array_equal(
        np.array([number(v) for v in groups["ref"]["low"]]), ref.min(axis=0)
    )
    coloured = client.get("/api/plot?run=j1/ref_s0&run=j2/ref_s0&color=gpu").json()
    assert [s["color"] for s in coloured["series"]] == ["A10G", "L4"]


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        (
            "run=j1/nope_s0",
            404,
            "job 'j1' has no arm 'nope_s0'; its arms: flash_s0, linear_s0, ref_s0, ref_s1",
        ),
        ("run=j9/ref_s0", 404, "no job named 'j9'; known jobs: j1, j2"),
        (
            "run=j1/ref_s0&metric=nope",
            422,
            "unknown metric 'nope'; choose one of: loss, lr, step_ms",
        ),
        ("run=j1", 422, "plot: run 'j1' is not JOB/ARM, e.g. job2/ref_s0"),
        ("", 422, "plot: choose at least one run: run=JOB/ARM"),
        ("run=j1/ref_s0&start=9&end=1", 422, "plot: start must not exceed end"),
        ("run=j1/ref_s0&smooth=1", 422, "bad parameter 'smooth': Input should be less than 1"),
        (
            "run=j1/ref_s0&y=sqrt",
            422,
            "bad parameter 'y': String should match pattern '^(linear|log)$'",
        ),
        (
            "run=j1/ref_s0&color=nope",
            422,
            "no job has metadata 'nope'; known keys: job, arm, model, variant, seed, gpu",
        ),
        (
            "&".join(["run=j1/ref_s0"] * (MAX_RUNS + 1)),
            422,
            f"plot: {MAX_RUNS + 1} runs asked, at most {MAX_RUNS} are drawn",
        ),
    ],
)
def test_errors(client: TestClient, query: str, status: int, message: str) -> None:
    answer = client.get(f"/api/plot?{query}")
    assert (answer.status_code, answer.json()) == (status, {"detail": message})


def test_values_from_the_database_stay_text(client: TestClient, study: Cli) -> None:
    evil = "<img src=x onerror=alert(1)>"
    study("meta", "j2", f"gpu={evil}")
    body = client.get("/api/plot?run=j2/ref_s0&color=gpu&group=gpu").json()
    assert body["series"][0]["color"] == evil and body["groups"][0]["label"] == evil
    html = client.get("/plot?run=j2/ref_s0").text
    assert "<img" not in html


def test_page_links_and_escaping(client: TestClient) -> None:
    html = client.get(f"/plot?{RUNS}&metric=lr").text
    assert '<script src="/static/plot.js"></script>' in html and "<script>" not in html
    assert '<option value="lr" selected>lr</option>' in html
    assert client.get("/plot?run=j1/nope_s0").status_code == 404
    job = client.get("/jobs/j1/").text
    plot = "/plot?run=j1/flash_s0&amp;run=j1/linear_s0&amp;run=j1/ref_s0&amp;run=j1/ref_s1&amp;"
    assert f'<a id="job-plot" href="{plot}smooth=0.9">Plot all 4 arms together</a>' in job
    compare = client.get("/compare?a=j1&b=j2").text
    runs = "run=j1/flash_s0&amp;run=j1/ref_s0&amp;run=j2/flash_s0&amp;run=j2/ref_s0&amp;"
    assert f'<a id="compare-plot" href="/plot?{runs}smooth=0.9">' in compare
    assert client.get("/static/plot.js").status_code == 200


class Arrays(BaseModel):
    a: schemas.Numbers
    b: list[schemas.Steps]
    c: str


def test_arrays_keep_the_api_policy_for_non_finite_numbers() -> None:
    nan, inf = float("nan"), float("inf")
    arrays = Arrays(a=np.array([1.5, nan, inf, -inf]), b=[np.array([3, 4])], c="array-0")
    text = PlotJSON(arrays.model_dump(mode="json")).body.decode()
    assert text == '{"a":[1.5,"NaN","Infinity","-Infinity"],"b":[[3,4]],"c":"array-0"}'


def seconds_of(cli: Cli, job: str, arm: str) -> tuple[np.ndarray, np.ndarray]:
    """An arm's steps and the cumulative sum of its step_ms, in seconds (logged every step)."""
    points = raw(cli, job, arm, "step_ms")
    return np.array([p["step"] for p in points]), np.cumsum([p["value"] for p in points]) / 1e3


def test_wall_time_is_the_sum_of_step_ms(client: TestClient, study: Cli) -> None:
    body = client.get(f"/api/plot?{RUNS}&x=time&metric=lr&smooth=0.5&start=0&end=1499").json()
    assert body["x"] == "time" and schemas.Plot.model_validate(body).x == "time"
    for series in body["series"]:
        steps, seconds = seconds_of(study, series["job"], series["arm"])
        assert series["steps"] == steps[:1500].tolist() == list(range(1500))
        np.testing.assert_allclose(series["times"], seconds[:1500], rtol=1e-12)
    assert body["series"][0]["times"][0] == 7.5  # the first, compiling step: 7500 ms
    plain = client.get(f"/api/plot?{RUNS}").json()
    assert plain["x"] == "step" and plain["series"][0]["times"] is None


def test_a_time_window_keeps_each_runs_points_in_those_seconds(
    client: TestClient, study: Cli
) -> None:
    body = client.get(f"/api/plot?{RUNS}&x=time&start_s=20.5&end_s=30").json()
    assert (body["start_s"], body["end_s"]) == (20.5, 30.0)
    ranges = set()
    for series in body["series"]:
        steps, seconds = seconds_of(study, series["job"], series["arm"])
        inside = (seconds >= 20.5) & (seconds <= 30)
        assert series["steps"] == steps[inside].tolist() and series["downsampled"] is False
        assert min(series["times"]) >= 20.5 and max(series["times"]) <= 30
        ranges.add((series["steps"][0], series["steps"][-1]))
    assert len(ranges) > 1  # runs of different speed: other steps in the same seconds
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(f"/api/plot.csv?{RUNS}&x=time&start_s=20.5&end_s=30").text)
        )
    )
    assert list(rows[0]) == ["job", "arm", "metric", "step", "time", "value", "smoothed"]
    first = body["series"][0]
    assert [float(r["time"]) for r in rows[: len(first["steps"])]] == first["times"]
    grouped = client.get(f"/api/plot?{RUNS}&x=time&group=variant&start=0&end=99").json()
    ref = [s["times"] for s in grouped["series"] if s["variant"] == "ref"]
    (group,) = [g for g in grouped["groups"] if g["label"] == "ref"]
    np.testing.assert_allclose(group["times"], np.mean(ref, axis=0))


@pytest.fixture
def timed(study: Cli, tmp_path: Path) -> Cli:
    """j3: ref_s0 logs wall_time every 10th step (and step_ms), flash_s0 neither."""
    directory = write_sample_job(tmp_path / "j3", steps=200, seed=3, arms=("ref_s0", "flash_s0"))
    ref = pl.read_csv(directory / "ref_s0.csv")
    wall = pl.when(pl.col("step") % 10 == 0).then(100.0 + pl.col("step") * 0.25)
    ref.with_columns(wall_time=wall).write_csv(directory / "ref_s0.csv")
    flash = pl.read_csv(directory / "flash_s0.csv")
    flash.drop("step_ms").write_csv(directory / "flash_s0.csv")
    study("ingest", str(directory))
    return study


def test_a_logged_elapsed_time_comes_first_and_is_interpolated(
    client: TestClient, timed: Cli
) -> None:
    series = client.get("/api/plot?run=j3/ref_s0&x=time&start=0&end=199").json()["series"][0]
    expected = [100.0 + step * 0.25 if step <= 190 else "NaN" for step in range(200)]
    assert series["times"] == expected  # past its last logged step: no time


def test_x_time_needs_every_run_to_have_a_wall_time(client: TestClient, timed: Cli) -> None:
    answer = client.get("/api/plot?run=j1/ref_s0&run=j3/flash_s0&x=time")
    assert (answer.status_code, answer.json()["detail"]) == (
        422,
        "plot: x=time needs an elapsed time (wall_time, elapsed, time, train_time_ms), "
        "per-step durations (dt_ms, step_ms) or a running average (step_avg_ms); "
        "j3/flash_s0 logs none of them",
    )
    assert client.get("/api/plot?run=j3/flash_s0").status_code == 200
    assert 'id="plot-x"' not in client.get("/plot?run=j1/ref_s0&run=j3/flash_s0").text
    offered = client.get("/plot?run=j1/ref_s0&run=j3/ref_s0").text
    assert '<option value="time">wall time</option>' in offered


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("start_s=1", "plot: start_s and end_s are seconds of wall time: they need x=time"),
        ("x=time&start_s=9&end_s=1", "plot: start_s must not exceed end_s"),
        ("x=wall", "bad parameter 'x': String should match pattern '^(step|time)$'"),
    ],
)
def test_time_errors(client: TestClient, query: str, message: str) -> None:
    answer = client.get(f"/api/plot?run=j1/ref_s0&{query}")
    assert (answer.status_code, answer.json()) == (422, {"detail": message})


def test_step_ms_logged_sparsely_fills_the_steps_between_at_the_lower() -> None:
    steps = np.array([0, 10, 20, 30])
    seconds = elapsed_seconds(
        TimeColumn("step_ms", TimeKind.PER_STEP), steps, np.array([1000.0, 500.0, np.nan, 200.0])
    )
    # steps 1-9 at the lower of 1000 and 500; NaN: none, its neighbours fill the steps around
    np.testing.assert_array_equal(seconds, [1.0, 6.0, 10.5, 12.5])
    at = times_at(steps, seconds, np.array([-1, 0, 5, 30, 31]))
    np.testing.assert_array_equal(at, [np.nan, 1.0, 3.5, 12.5, np.nan])
    logged = elapsed_seconds(
        TimeColumn("elapsed", TimeKind.ELAPSED), steps, np.array([0.5, np.inf, 2.0, 3.0])
    )
    np.testing.assert_array_equal(times_at(steps, logged, np.array([10])), [1.25])
