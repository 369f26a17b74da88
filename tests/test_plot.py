"""``/plot`` and ``/api/plot``: several runs' curves on one figure, smoothed over the whole
curve and then windowed, raw within 2,000 steps, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tracker.analysis.smoothing import smooth
from tracker.jobdir.sample import write_sample_job
from tracker.queries.plot import MAX_RUNS
from tracker.server import create_app, schemas
from tracker.server.routers.plot import PlotJSON

STEPS = 3000
RUNS = "run=j1/ref_s0&run=j2/flash_s0&run=j1/ref_s1"


@pytest.fixture
def study(cli: Cli, tmp_path: Path) -> Cli:
    for seed, (name, gpu) in enumerate((("j1", "A10G"), ("j2", "L4"))):
        directory = write_sample_job(tmp_path / name, steps=STEPS, seed=seed)
        cli("ingest", str(directory), f"--meta=gpu={gpu}")
    return cli


@pytest.fixture
def client(study: Cli, db_url: str) -> Iterator[TestClient]:
    app = create_app(db_url)
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as c:
        yield c


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


def test_arrays_keep_the_api_policy_for_non_finite_numbers() -> None:
    nan, inf = float("nan"), float("inf")
    body = {"a": np.array([1.5, nan, inf, -inf]), "b": [np.array([3, 4])], "c": "array-0"}
    text = PlotJSON(body).body.decode()
    assert text == '{"a":[1.5,"NaN","Infinity","-Infinity"],"b":[[3,4]],"c":"array-0"}'
