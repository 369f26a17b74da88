"""Cross-job queries through the real CLI, checked value by value against the sample files.

Four jobs with known differences, ingested in an order that is not their job order:
``j1`` (seed 0), ``j2`` (seed 1, no failed probe, a ``time`` with a +02:00 offset), ``j3``
(seed 2, flash optimizer state +0.5 B/param: a simulated library regression) and ``j4``
(seed 3, two ref arms, no ``time``: ordered by its ingest time).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import pick_model
from tests.templates import Templates
from tracker.analysis.expectations import load_expectations
from tracker.analysis.job import analyze_job
from tracker.figures.crossjob import choose_model
from tracker.queries import tables
from tracker.queries.compare import CHANGES
from tracker.queries.runs import run_table
from tracker.queries.selection import JobSelection, selected_jobs
from tracker.sample import write_sample_job
from tracker.store.jobdata import load_job_data
from tracker.summary.version import expectations_digest

WHERE_KEYS = (  # what a --where key may name besides metadata
    "run columns: seed, val_loss, final_loss, diverged, steps, last_step, min_loss, last_loss, "
    "nonfinite, notes"
)

STEPS = 40
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
SPECS: dict[str, dict[str, Any]] = {
    "j1": {"seed": 0},
    "j2": {"seed": 1, "failed_probe": None},
    "j3": {"seed": 2, "flash_state_shift": 0.5},
    "j4": {"seed": 3, "arms": ("ref_s0", "ref_s1")},
}
META: dict[str, dict[str, str]] = {
    "j1": {"time": "2026-10-01T00:00:00Z", "flashoptim": "0.1.0", "gpu": "A10G"},
    "j2": {"time": "2026-10-15T09:00:00+02:00", "flashoptim": "0.1.0", "gpu": "L4"},
    "j3": {"time": "2026-11-01T00:00:00Z", "flashoptim": "0.1.1", "gpu": "A10G"},
    "j4": {"gpu": "A10G"},  # no time: ordered by when it was ingested
}
SHOWN_TIME = {  # how the query tables show the ``time`` metadata: UTC, one format
    "j1": "2026-10-01T00:00:00Z",
    "j2": "2026-10-15T07:00:00Z",
    "j3": "2026-11-01T00:00:00Z",
}
INGEST_ORDER = ("j3", "j4", "j1", "j2")
PROBE_COLUMNS = [
    "job",
    "time",
    "model",
    "variant",
    "n_params",
    "bpp_params",
    "bpp_state",
    "bpp_grads",
    "bpp_params_state_grads",
    "peak_steady",
    "peak_bpp",
    "error",
]
# the runs table's (that of /api/runs too): the arm's, its job's verdict counts, its metadata
RUN_COLUMNS = ["job", "time", "arm", "model", "variant", "seed", "steps", "last_step", "stopped"]
RUN_COLUMNS += ["final_loss", "min_loss", "last_loss", "nonfinite", "val_loss", "diverged"]
RUN_COLUMNS += ["notes", "PASS", "FAIL", "KNOWN", "N/A", "flashoptim", "gpu", "meta.time"]
AGGREGATE_COLUMNS = [
    "job",
    "time",
    "model",
    "variant",
    "seeds",
    "val_loss_mean",
    "final_loss_mean",
    "min_loss_mean",
    "val_loss_std",
    "final_loss_std",
    "min_loss_std",
    "any_diverged",
]
METRICS = (
    "n_params, bpp_params, bpp_state, bpp_grads, bpp_params_state_grads, peak_steady, peak_bpp, "
    "val_loss, final_loss, min_loss, last_loss, steps"
)


# --- reading the sample files ourselves -------------------------------------------------


def js(value: Any) -> Any:
    """A value as the CLI's JSON shows it: non-finite numbers are strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def probe_records(directory: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((directory / "mem_sweep.json").read_text())
    return records


def arm_names(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.csv"))


def summary(directory: Path, arm: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((directory / f"{arm}.json").read_text())
    return document


def column(directory: Path, arm: str, name: str = "loss") -> list[float]:
    with (directory / f"{arm}.csv").open(newline="") as fh:
        return [float(row[name]) for row in csv.DictReader(fh)]


def ema(values: list[float], alpha: float) -> list[float]:
    """``query curve --ema`` on steps 0, 1, 2, ...: the per-step EMA, debiased, NaN at a
    non-finite value without touching the state (the loop ``smooth`` is defined by)."""
    smoothed, mean, weight = [], 0.0, 0.0
    for x in values:
        if not math.isfinite(x):
            smoothed.append(math.nan)
            continue
        mean, weight = (1 - alpha) * mean + alpha * x, (1 - alpha) * weight + alpha
        smoothed.append(mean / weight)
    return smoothed


def close(got: list[Any], expected: list[float]) -> bool:
    """The same smoothed values within 1e-12 relative, NaN where NaN (JSON shows "NaN")."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if math.isnan(e):
            assert g == "NaN"
        else:
            assert g == pytest.approx(e, rel=1e-12)
    return True


def numbers(values: list[Any]) -> list[float]:
    """JSON values back to numbers; missing ones (null) left out."""
    return [float(v) for v in values if v is not None]


def mean_or_none(values: list[Any]) -> float | None:
    present = numbers(values)
    return statistics.mean(present) if present else None


def stdev_or_none(values: list[Any]) -> float | None:
    present = numbers(values)
    if len(present) < 2:
        return None
    return math.nan if any(map(math.isnan, present)) else statistics.stdev(present)


def approx(value: float | None) -> Any:
    """Close to ``value`` as the CLI's JSON shows it (NaN as "NaN")."""
    if value is None or math.isnan(value):
        return js(value)
    return pytest.approx(value, rel=1e-12)


# --- the study ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("query-jobs")
    return {
        name: write_sample_job(root / name, steps=STEPS, **spec) for name, spec in SPECS.items()
    }


@dataclass
class Study:
    cli: Cli
    dirs: dict[str, Path]
    order: list[str]  # expected job order
    times: dict[str, str]  # expected ``time`` column per job
    j4_ingested: tuple[datetime, datetime]  # bracket around j4's ingest

    def rows(self, *args: str) -> list[dict[str, Any]]:
        out = self.cli(*args, "--format", "json").stdout

        def refuse(token: str) -> None:
            raise AssertionError(f"non-standard JSON token {token}")

        parsed: list[dict[str, Any]] = json.loads(out, parse_constant=refuse)
        return parsed


def ingest_study(cli: Cli, sample_dirs: dict[str, Path]) -> tuple[datetime, datetime]:
    """Ingest the jobs in ``INGEST_ORDER``; returns the bracket around j4's ingest."""
    bracket = (datetime.now(UTC), datetime.now(UTC))
    for name in INGEST_ORDER:
        meta = [item for key, value in META[name].items() for item in ("--meta", f"{key}={value}")]
        before = datetime.now(UTC).replace(microsecond=0)
        cli("ingest", str(sample_dirs[name]), *meta)
        if name == "j4":
            bracket = (before, datetime.now(UTC) + timedelta(seconds=1))
    return bracket


@pytest.fixture
def study(db_url: str, templates: Templates, sample_dirs: dict[str, Path]) -> Study:
    bracket = templates.copy_into(
        db_url, "query-study", lambda cli, _: ingest_study(cli, sample_dirs)
    )
    moments = {
        name: datetime.strptime(t, TIME_FORMAT).replace(tzinfo=UTC)
        for name, t in SHOWN_TIME.items()
    }
    moments["j4"] = bracket[0]
    assert not any(bracket[0] <= moments[n] <= bracket[1] for n in SHOWN_TIME)
    order = sorted(moments, key=moments.__getitem__)
    assert order != list(INGEST_ORDER)  # the order is not the ingest order
    return Study(Cli(db_url), sample_dirs, order, dict(SHOWN_TIME), bracket)


def check_time(study: Study, job: str, shown: str) -> None:
    if job in study.times:
        assert shown == study.times[job]
    else:  # ingest time, in the same format
        moment = datetime.strptime(shown, TIME_FORMAT).replace(tzinfo=UTC)
        assert study.j4_ingested[0] <= moment <= study.j4_ingested[1]


def in_order(study: Study, jobs: list[str]) -> list[str]:
    return [job for job in study.order if job in jobs]


def unique(seq: list[str]) -> list[str]:
    return list(dict.fromkeys(seq))


# --- job order ---------------------------------------------------------------------------


def test_job_order_is_time_metadata_else_ingest_time(study: Study) -> None:
    probes = study.rows("query", "probes", "--model", "gpt-124m", "--variant", "ref")
    assert [r["job"] for r in probes] == study.order
    for row in probes:
        check_time(study, row["job"], row["time"])
    runs = study.rows("query", "runs", "--variant", "ref")
    assert unique([r["job"] for r in runs]) == study.order
    trend = study.rows("query", "trend", "--metric", "val_loss", "--variant", "ref")
    assert [r["job"] for r in trend] == study.order
    curve = study.rows("query", "curve", "--arm", "ref_s0", "--every", "1000")
    assert [r["job"] for r in curve] == [job for job in study.order for _ in range(2)]
    listed = study.rows("jobs")
    assert [r["job"] for r in listed] == study.order


# --- probes ------------------------------------------------------------------------------


def expected_probe(job: str, record: dict[str, Any], study: Study) -> dict[str, Any]:
    ok = "n_params" in record
    return {
        "job": job,
        "model": record["model"],
        "variant": record["variant"],
        "n_params": record.get("n_params"),
        "bpp_params": record.get("bpp_params"),
        "bpp_state": record.get("bpp_state"),
        "bpp_grads": record.get("bpp_grads"),
        "bpp_params_state_grads": record.get("bpp_params_state_grads"),
        "peak_steady": record.get("peak_steady"),
        "peak_bpp": record["peak_steady"] / record["n_params"] if ok else None,
        "error": record.get("error"),
    }


def test_probes_match_mem_sweep_value_by_value(study: Study) -> None:
    rows = study.rows("query", "probes")
    assert rows and all(list(r) == PROBE_COLUMNS for r in rows)
    expected = [
        expected_probe(job, record, study)
        for job in study.order
        for record in probe_records(study.dirs[job])
    ]
    for row in rows:
        check_time(study, row["job"], row.pop("time"))
    assert rows == expected
    j3_flash = next(
        r for r in rows if (r["job"], r["model"], r["variant"]) == ("j3", "gpt-124m", "flash")
    )
    j1_flash = next(
        r for r in rows if (r["job"], r["model"], r["variant"]) == ("j1", "gpt-124m", "flash")
    )
    assert j3_flash["bpp_state"] - j1_flash["bpp_state"] == pytest.approx(0.5, abs=0.01)
    assert j3_flash["bpp_params_state_grads"] == pytest.approx(
        j3_flash["bpp_params"] + j3_flash["bpp_state"] + j3_flash["bpp_grads"]
    )


def test_the_bytes_param_figures_model_counted_in_sql_is_the_one_the_probes_give(
    study: Study, engine: Engine
) -> None:
    """``probe_models`` (SQL) chooses as ``pick_model`` does over every probe read; a
    prefix matches by case, as ``str.starts_with``."""
    with Session(engine) as session:
        jobs = selected_jobs(session, JobSelection())
        probes = tables.probes(session, JobSelection(), jobs=jobs)
        ids = jobs["job_id"].to_list()
        for prefix in ("gpt", "gpt-1", "GPT", "resnet", "none"):
            counted = choose_model(*tables.probe_models(session, ids, prefix), prefix)
            assert counted == pick_model(probes, prefix), prefix
        assert choose_model(*tables.probe_models(session, ids, "gpt"), "gpt").model is not None


def test_probe_filters(study: Study) -> None:
    def keys(*args: str) -> list[tuple[str, str, str]]:
        return [(r["job"], r["model"], r["variant"]) for r in study.rows("query", "probes", *args)]

    all_keys = keys()
    assert len(all_keys) == 4 * 25
    assert keys("--job", "j3", "--job", "j1") == [k for k in all_keys if k[0] in ("j1", "j3")]
    assert keys("--model", "gpt-30m", "--model", "resnet50") == [
        k for k in all_keys if k[1] in ("gpt-30m", "resnet50")
    ]
    assert keys("--variant", "flash", "--variant", "flash_gr") == [
        k for k in all_keys if k[2] in ("flash", "flash_gr")
    ]
    assert keys("--job", "j2", "--model", "gpt-124m", "--variant", "ref") == [
        ("j2", "gpt-124m", "ref")
    ]
    failed = study.rows("query", "probes", "--failed")
    assert [(r["job"], r["model"], r["variant"]) for r in failed] == [
        (job, "gpt-355m", "ref") for job in study.order if job != "j2"
    ]
    for row in failed:
        assert (
            row["n_params"] is None
            and row["peak_bpp"] is None
            and row["bpp_params_state_grads"] is None
        )
        assert row["error"].startswith("CUDA out of memory")
    assert study.rows("query", "probes", "--failed", "--job", "j2") == []
    assert study.cli("query", "probes", "--failed", "--job", "j2").stdout == "(no rows)\n"


# --- runs --------------------------------------------------------------------------------


def expected_run(study: Study, job: str, arm: str) -> dict[str, Any]:
    directory = study.dirs[job]
    info = summary(directory, arm)
    losses = column(directory, arm)
    finite = [v for v in losses if math.isfinite(v)]
    variant, _, seed = arm.rpartition("_s")
    return {
        "job": job,
        "model": "gpt-124m",
        "variant": variant,
        "arm": arm,
        "seed": int(seed),
        "val_loss": js(info["val_loss"]),
        "final_loss": js(info["final_loss"]),
        "min_loss": min(finite),
        "last_loss": js(losses[-1]),
        "steps": STEPS,  # how many logged: the count the page shows
        "last_step": STEPS - 1,
        "nonfinite": len(losses) - len(finite),
        "diverged": info["diverged"],
        "stopped": None,
        "notes": nonfinite_notes(losses),
    }


def nonfinite_notes(losses: list[float]) -> str:
    """The notes ingest keeps on a loss curve's NaN or infinite stretches (steps from 0)."""
    stretches: list[list[int]] = []
    for step, value in enumerate(losses):
        if not math.isfinite(value):
            if stretches and stretches[-1][1] == step - 1:
                stretches[-1][1] = step
            else:
                stretches.append([step, step])
    return "; ".join(
        f"loss not finite at {f'step {a}' if a == b else f'steps {a}-{b}'} "
        f"({b - a + 1} point{'s' if b > a else ''})"
        for a, b in stretches
    )


def test_runs_match_summaries_and_curves(study: Study) -> None:
    table = study.rows("query", "runs")
    assert table and all(list(r) == RUN_COLUMNS for r in table)
    for row in table:
        meta = {key: row[key] for key in ("flashoptim", "gpu")}
        assert meta == {key: META[row["job"]].get(key) for key in meta}
        assert row["meta.time"] == (SHOWN_TIME[row["job"]] if "time" in META[row["job"]] else None)
    rows = [{k: v for k, v in r.items() if k in arm_columns(study)} for r in table]
    for row in rows:
        check_time(study, row["job"], row.pop("time"))
    expected = [
        expected_run(study, job, arm)
        for job in study.order
        for arm in sorted(arm_names(study.dirs[job]), key=lambda a: (a.rpartition("_s")[0], a))
    ]
    assert rows == expected
    linear = [r for r in rows if r["variant"] == "linear"]
    assert linear and all(r["diverged"] and r["final_loss"] == "NaN" for r in linear)
    (linear_j3,) = study.rows("query", "runs", "--variant", "linear", "--job", "j3")
    assert {k: v for k, v in linear_j3.items() if k in arm_columns(study)} == {
        **expected_run(study, "j3", "linear_s0"),
        "time": SHOWN_TIME["j3"],
    }


def arm_columns(study: Study) -> list[str]:
    """The runs table's columns of an arm's own (``expected_run``'s)."""
    return [*expected_run(study, "j1", "ref_s0"), "time"]


def expected_aggregates(keys: dict[str, Any], arms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The aggregated rows of ``arms`` (from ``expected_run``), one per variant, led by ``keys``."""
    rows = []
    for variant in sorted({a["variant"] for a in arms}):
        group = [a for a in arms if a["variant"] == variant]
        row: dict[str, Any] = {**keys, "model": "gpt-124m", "variant": variant}
        row["seeds"] = len(group)
        for metric in ("val_loss", "final_loss", "min_loss"):
            row[f"{metric}_mean"] = approx(mean_or_none([a[metric] for a in group]))
        for metric in ("val_loss", "final_loss", "min_loss"):
            row[f"{metric}_std"] = approx(stdev_or_none([a[metric] for a in group]))
        row["any_diverged"] = any(a["diverged"] for a in group)
        rows.append(row)
    return rows


def test_runs_aggregated_over_seeds(study: Study) -> None:
    rows = study.rows("query", "runs", "--aggregate-seeds")
    assert rows and all(list(r) == AGGREGATE_COLUMNS for r in rows)
    expected = []
    for job in study.order:
        arms = [expected_run(study, job, arm) for arm in arm_names(study.dirs[job])]
        expected += expected_aggregates({"job": job}, arms)
    for row in rows:
        check_time(study, row["job"], row.pop("time"))
    assert rows == expected
    ref_j1 = next(r for r in rows if (r["job"], r["variant"]) == ("j1", "ref"))
    assert ref_j1["seeds"] == 2 and ref_j1["val_loss_std"] is not None


# --- curves ------------------------------------------------------------------------------


def test_curve_points_ema_and_thinning(study: Study) -> None:
    j1 = study.dirs["j1"]
    losses = column(j1, "ref_s0")
    rows = study.rows("query", "curve", "--job", "j1", "--arm", "ref_s0")
    assert rows == [
        {"job": "j1", "arm": "ref_s0", "step": step, "value": value}
        for step, value in enumerate(losses)
    ]
    smoothed = ema(losses, 0.1)
    rows = study.rows("query", "curve", "--job", "j1", "--arm", "ref_s0", "--ema", "0.1")
    assert close([r["ema"] for r in rows], smoothed)  # the per-step recurrence
    assert [list(r) for r in rows[:1]] == [["job", "arm", "step", "value", "ema"]]
    thinned = study.rows(
        "query", "curve", "--job", "j1", "--arm", "ref_s0", "--ema", "0.1", "--every", "7"
    )
    kept = [*range(0, STEPS, 7), STEPS - 1]  # the last step always
    assert [r["step"] for r in thinned] == kept
    assert [r["value"] for r in thinned] == [losses[i] for i in kept]
    assert [r["ema"] for r in thinned] == [rows[i]["ema"] for i in kept]  # smoothed, then thinned
    exact = study.rows("query", "curve", "--job", "j1", "--arm", "ref_s0", "--every", "13")
    assert [r["step"] for r in exact] == [0, 13, 26, 39]  # the last is an N-th: not twice
    sparse = study.rows("query", "curve", "--job", "j1", "--arm", "ref_s0", "--every", "100000")
    assert [r["step"] for r in sparse] == [0, STEPS - 1]


def test_curve_of_several_arms_and_jobs(study: Study) -> None:
    rows = study.rows("query", "curve", "--arm", "linear_s0", "--arm", "ref_s1", "--ema", "0.5")
    jobs = [job for job in study.order if (study.dirs[job] / "linear_s0.csv").exists()]
    expected = []
    for job in study.order:
        for arm in ("linear_s0", "ref_s1"):
            if not (study.dirs[job] / f"{arm}.csv").exists():
                continue
            losses = column(study.dirs[job], arm)
            expected += [
                {"job": job, "arm": arm, "step": step, "value": js(value), "ema": smooth}
                for step, (value, smooth) in enumerate(zip(losses, ema(losses, 0.5), strict=True))
            ]
    assert [{**r, "ema": None} for r in rows] == [{**r, "ema": None} for r in expected]
    assert close([r["ema"] for r in rows], [r["ema"] for r in expected])
    linear = [r for r in rows if r["arm"] == "linear_s0"]
    assert len(jobs) == 3 and len(linear) == 3 * STEPS
    assert "Infinity" in [r["value"] for r in linear] and linear[-1]["value"] == "NaN"
    lr = study.rows("query", "curve", "--job", "j2", "--arm", "flash_s0", "--metric", "lr")
    assert [r["value"] for r in lr] == column(study.dirs["j2"], "flash_s0", "lr")


def test_curve_option_errors(study: Study) -> None:
    for args in (("--ema", "0"), ("--ema", "1.5"), ("--every", "0")):
        result = study.cli("query", "curve", "--arm", "ref_s0", *args, ok=False)
        assert result.exit_code == 2, args


def test_typos_are_errors_naming_the_known_names(study: Study) -> None:
    arms = "flash_s0, linear_s0, ref_s0, ref_s1"
    cases = [
        (
            ("query", "curve", "--arm", "nosuch_s0"),
            f"no arm 'nosuch_s0' in the selected jobs; known arms: {arms}",
        ),
        (
            ("query", "curve", "--job", "j4", "--arm", "flash_s0"),
            "no arm 'flash_s0' in the selected jobs; known arms: ref_s0, ref_s1",
        ),
        (
            ("query", "curve", "--arm", "ref_s0", "--metric", "nosuch"),
            "unknown metric 'nosuch'; choose one of: loss, lr, step_ms",
        ),
        (
            ("query", "runs", "--group-by", "nosuch"),
            "no job has metadata 'nosuch'; known keys: flashoptim, gpu, time",
        ),
        (
            ("query", "probes", "--where", "nosuch=x"),
            f"no run column or metadata key 'nosuch'; {WHERE_KEYS}; "
            "metadata: flashoptim, gpu, time",
        ),
        (
            ("query", "trend", "--metric", "val_loss", "--job", "j9"),
            "no job named 'j9'; known jobs: j1, j2, j3, j4",
        ),
        (("show", "j9"), "no job named 'j9'; known jobs: j1, j2, j3, j4"),
    ]
    for args, message in cases:
        result = study.cli(*args, ok=False)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")


# --- trend -------------------------------------------------------------------------------


def test_trend_of_a_probe_field_shows_the_regression(study: Study) -> None:
    rows = study.rows(
        "query", "trend", "--metric", "bpp_state", "--model", "gpt-124m", "--variant", "flash"
    )
    targets = ["expected", "tolerance_lower", "tolerance_upper"]
    assert rows and all(
        list(r) == ["job", "time", "model", "variant", "value", "change", *targets] for r in rows
    )
    # flash's analytic state, 3.125 B/param, within the study's 0.05
    assert all([r[t] for t in targets] == [3.125, 3.075, 3.175] for r in rows)
    values = {
        job: next(
            r["bpp_state"]
            for r in probe_records(study.dirs[job])
            if (r["model"], r["variant"]) == ("gpt-124m", "flash")
        )
        for job in study.order
    }
    assert [r["job"] for r in rows] == study.order
    previous = None
    for row in rows:
        check_time(study, row["job"], row["time"])
        assert (row["model"], row["variant"]) == ("gpt-124m", "flash")
        assert row["value"] == values[row["job"]]
        expected_change = None if previous is None else values[row["job"]] - previous
        assert row["change"] == expected_change
        previous = values[row["job"]]
    j3 = next(r for r in rows if r["job"] == "j3")
    assert j3["change"] == pytest.approx(0.5, abs=0.01)
    others = [r["change"] for r in rows if r["job"] != "j3" and r["change"] is not None]
    assert all(abs(c) < 0.01 or c == pytest.approx(-0.5, abs=0.01) for c in others)


def test_trend_of_a_probe_field_has_one_series_per_model_and_variant(study: Study) -> None:
    rows = study.rows("query", "trend", "--metric", "peak_bpp", "--model", "gpt-355m")
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault((row["model"], row["variant"]), []).append(row)
    # the study checks no peak bytes/param: nothing is expected of it
    assert {(r["expected"], r["tolerance_lower"], r["tolerance_upper"]) for r in rows} == {
        (None, None, None)
    }
    # the failed gpt-355m/ref probes (all jobs but j2) have no value: only j2 remains
    assert [r["job"] for r in series[("gpt-355m", "ref")]] == ["j2"]
    assert series[("gpt-355m", "ref")][0]["change"] is None
    for key, points in series.items():
        values = []
        for row in points:
            record = next(
                r
                for r in probe_records(study.dirs[row["job"]])
                if (r["model"], r["variant"]) == key
            )
            values.append(record["peak_steady"] / record["n_params"])
            assert row["value"] == values[-1]
        assert [r["change"] for r in points] == [None] + [b - a for a, b in pairwise(values)]


def test_trend_of_a_run_field_aggregates_seeds(study: Study) -> None:
    rows = study.rows("query", "trend", "--metric", "val_loss", "--variant", "ref")
    columns = ["job", "time", "model", "variant", "value", "std", "seeds", "change"]
    targets = ["expected", "tolerance_lower", "tolerance_upper"]
    assert rows and all(list(r) == [*columns, *targets] for r in rows)
    assert all([r[t] for t in targets] == pytest.approx([3.263, 3.213, 3.313]) for r in rows)
    expected_values = []
    for row, job in zip(rows, study.order, strict=True):
        check_time(study, job, row["time"])
        losses = [summary(study.dirs[job], arm)["val_loss"] for arm in ("ref_s0", "ref_s1")]
        expected_values.append(statistics.mean(losses))
        assert (row["job"], row["model"], row["variant"], row["seeds"]) == (
            job,
            "gpt-124m",
            "ref",
            2,
        )
        assert row["value"] == approx(statistics.mean(losses))
        assert row["std"] == approx(statistics.stdev(losses))
    changes = [r["change"] for r in rows]
    assert changes[0] is None
    assert changes[1:] == [
        pytest.approx(b - a, rel=1e-9, abs=1e-15) for a, b in pairwise(expected_values)
    ]


def test_unknown_trend_metric(study: Study) -> None:
    result = study.cli("query", "trend", "--metric", "nope", ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: unknown metric 'nope'; choose one of: {METRICS}\n"


# --- metadata filters and groups -----------------------------------------------------------


def test_where_filters_jobs_by_metadata(study: Study) -> None:
    rows = study.rows(
        "query", "probes", "--where", "gpu=A10G", "--model", "gpt-124m", "--variant", "ref"
    )
    assert [r["job"] for r in rows] == in_order(study, ["j1", "j3", "j4"])
    both = study.rows("query", "runs", "--where", "gpu=A10G", "--where", "flashoptim=0.1.0")
    assert unique([r["job"] for r in both]) == ["j1"]
    none = study.cli("query", "runs", "--where", "gpu=A10G", "--where", "flashoptim=9", ok=False)
    assert (none.exit_code, none.stderr) == (
        1,
        "Error: no job has flashoptim=9; known values: 0.1.0, 0.1.1\n",
    )
    trend = study.rows(
        "query", "trend", "--metric", "val_loss", "--variant", "ref", "--where", "gpu=A10G"
    )
    assert [r["job"] for r in trend] == in_order(study, ["j1", "j3", "j4"])
    means = [
        statistics.mean(summary(study.dirs[r["job"]], a)["val_loss"] for a in ("ref_s0", "ref_s1"))
        for r in trend
    ]
    assert trend[1]["change"] == pytest.approx(means[1] - means[0], rel=1e-9)
    bad = study.cli("query", "probes", "--where", "gpu", ok=False)
    words = " ".join(bad.stderr.replace("│", " ").split())
    assert bad.exit_code == 2 and "(OP one of = != < <= > >=), got 'gpu'" in words


def test_group_by_adds_a_metadata_column(study: Study) -> None:
    flashoptim = {"j1": "0.1.0", "j2": "0.1.0", "j3": "0.1.1", "j4": None}
    probes = study.rows("query", "probes", "--group-by", "flashoptim", "--model", "gpt-124m")
    assert list(probes[0]) == [*PROBE_COLUMNS[:2], "flashoptim", *PROBE_COLUMNS[2:]]
    assert all(r["flashoptim"] == flashoptim[r["job"]] for r in probes)
    plain = study.rows("query", "probes", "--model", "gpt-124m")
    assert [{k: v for k, v in r.items() if k != "flashoptim"} for r in probes] == plain
    runs = study.rows("query", "runs", "--group-by", "flashoptim", "--group-by", "gpu")
    assert list(runs[0]) == RUN_COLUMNS  # every metadata key is a column of the runs table
    gpus = {job: META[job]["gpu"] for job in META}
    assert all((r["flashoptim"], r["gpu"]) == (flashoptim[r["job"]], gpus[r["job"]]) for r in runs)
    trend = study.rows(
        "query",
        "trend",
        "--metric",
        "bpp_state",
        "--model",
        "gpt-124m",
        "--variant",
        "flash",
        "--group-by",
        "flashoptim",
    )
    assert list(trend[0])[:7] == [
        "job",
        "time",
        "flashoptim",
        "model",
        "variant",
        "value",
        "change",
    ]
    assert [r["flashoptim"] for r in trend] == [flashoptim[j] for j in study.order]


def test_group_by_pools_the_seeds_of_jobs_sharing_a_value(study: Study) -> None:
    rows = study.rows("query", "runs", "--aggregate-seeds", "--group-by", "flashoptim")
    assert list(rows[0]) == ["flashoptim", "model", "variant", "jobs", *AGGREGATE_COLUMNS[4:]]
    expected = []
    for version in ("0.1.0", "0.1.1", None):  # first seen in job order: j1, j3, j4
        jobs = [job for job in study.order if META[job].get("flashoptim") == version]
        arms = [expected_run(study, job, arm) for job in jobs for arm in arm_names(study.dirs[job])]
        for row in expected_aggregates({"flashoptim": version}, arms):
            pooled = {a["job"] for a in arms if a["variant"] == row["variant"]}
            expected.append({**row, "jobs": len(pooled)})
    assert sorted(rows, key=str) == sorted(expected, key=str)
    ref = next(r for r in rows if (r["flashoptim"], r["variant"]) == ("0.1.0", "ref"))
    assert (ref["jobs"], ref["seeds"]) == (2, 4)  # ref_s0 and ref_s1 of j1 and j2


def test_group_by_does_not_hide_the_change_between_jobs(study: Study) -> None:
    """``--group-by`` adds a column (its help says so): the change from the previous job, the
    one thing a trend is for, must stay the same; the jump at j3, where the library version
    changes, must not disappear because j3 is the first job of its version."""
    args = ("query", "trend", "--metric", "bpp_state", "--model", "gpt-124m", "--variant", "flash")
    plain = study.rows(*args)
    grouped = study.rows(*args, "--group-by", "flashoptim")
    assert [r["change"] for r in grouped] == [r["change"] for r in plain]
    j3 = next(r for r in grouped if r["job"] == "j3")
    assert j3["change"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("key", ["time", "job", "model", "job_id", "_order"])
def test_group_by_a_key_named_like_a_column_is_not_a_crash(study: Study, key: str) -> None:
    """Metadata keys are free (``--meta job=...`` is accepted at ingest): grouping by one that
    is also a column name must give a table or a one-line error, not a polars traceback."""
    result = study.cli("query", "probes", "--model", "gpt-124m", "--group-by", key, ok=False)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    if result.exit_code != 0:
        assert result.exit_code in (1, 2)
        assert "Traceback" not in result.output
        if result.exit_code == 1:
            assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


# --- output formats ----------------------------------------------------------------------


def parse_table(text: str) -> list[dict[str, str]]:
    header, dashes, *body = text.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", dashes)]
    names = [header[start:end].strip() for start, end in spans]
    rows = []
    for line in body:
        cells = [line[start:end] for start, end in spans[:-1]] + [line[spans[-1][0] :]]
        rows.append(dict(zip(names, (c.strip() for c in cells), strict=True)))
    return rows


def table_cell(csv_value: str) -> str:
    """How the table shows a value that CSV writes as ``csv_value``."""
    if csv_value in ("True", "False"):
        return "yes" if csv_value == "True" else "no"
    if re.fullmatch(r"-?\d+", csv_value):
        return csv_value
    try:
        return f"{float(csv_value):.6g}"
    except ValueError:
        return csv_value


def csv_matches_json(csv_value: str, json_value: Any) -> bool:
    if json_value is None:
        return csv_value == ""
    if json_value == "NaN":
        return csv_value == "nan"
    if isinstance(json_value, bool):
        return csv_value == str(json_value)
    if isinstance(json_value, float):
        return float(csv_value) == json_value
    if json_value in ("Infinity", "-Infinity"):
        return float(csv_value) == float(json_value.lower())
    return csv_value == str(json_value)


@pytest.mark.parametrize(
    "args",
    [
        ("query", "probes", "--group-by", "gpu"),
        ("query", "runs"),
        ("query", "runs", "--aggregate-seeds"),
        ("query", "trend", "--metric", "final_loss"),
        ("query", "curve", "--arm", "linear_s0", "--ema", "0.3", "--job", "j1"),
        ("compare", "j1", "j3"),
    ],
    ids=lambda args: " ".join(args[:3]),
)
def test_formats_parse_back(
    study: Study, args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # a row per line and unwrapped lines, to parse
    as_json = study.rows(*args)
    as_csv = list(csv.DictReader(io.StringIO(study.cli(*args, "--format", "csv").stdout)))
    table_text = study.cli(*args).stdout
    if args[0] == "compare":
        table_text = table_text.split("\n\n")[0]
    as_table = parse_table(table_text)
    assert len(as_json) == len(as_csv) == len(as_table) > 0
    for from_json, from_csv, from_table in zip(as_json, as_csv, as_table, strict=True):
        assert list(from_json) == list(from_csv) == list(from_table)
        for name, value in from_json.items():
            assert csv_matches_json(from_csv[name], value), (name, from_csv[name], value)
            assert from_table[name] == table_cell(from_csv[name]), name


def test_nan_and_missing_stay_apart_in_every_format(study: Study) -> None:
    args = ("query", "runs", "--job", "j1", "--variant", "linear")
    (row,) = study.rows(*args)
    assert (row["final_loss"], row["last_loss"], row["val_loss"]) == ("NaN", "NaN", None)
    (from_csv,) = csv.DictReader(io.StringIO(study.cli(*args, "-f", "csv").stdout))
    assert (from_csv["final_loss"], from_csv["last_loss"], from_csv["val_loss"]) == (
        "nan",
        "nan",
        "",
    )
    (from_table,) = parse_table(study.cli(*args).stdout)
    assert (from_table["final_loss"], from_table["val_loss"], from_table["diverged"]) == (
        "nan",
        "",
        "yes",
    )


# --- compare -----------------------------------------------------------------------------


def test_compare_lists_every_verdict_of_both_with_deltas(study: Study, engine: Engine) -> None:
    rows = study.rows("compare", "j1", "j3")
    exp = load_expectations()
    with Session(engine) as session:
        verdicts = [
            {(v.check, v.subject): v for v in analyze_job(load_job_data(session, j), exp).verdicts}
            for j in ("j1", "j3")
        ]
    in_jobs = list(dict.fromkeys([*verdicts[0], *verdicts[1]]))
    ranks = {change: i for i, change in enumerate(CHANGES)}  # what changed first, same last
    in_order = sorted(
        rows, key=lambda r: (ranks[r["change"]], in_jobs.index((r["check"], r["subject"])))
    )
    assert rows == in_order
    assert sorted((r["check"], r["subject"]) for r in rows) == sorted(in_jobs)

    def number(verdict: Any) -> Any:
        measured = None if verdict is None else verdict.measured
        if isinstance(measured, bool) or not isinstance(measured, int | float):
            return None
        return float(measured)

    for row in rows:
        a = verdicts[0].get((row["check"], row["subject"]))
        b = verdicts[1].get((row["check"], row["subject"]))
        assert row["status_a"] == (a.status if a else None)
        assert row["status_b"] == (b.status if b else None)
        before, after = number(a), number(b)
        assert row["measured_a"] == js(before) and row["measured_b"] == js(after)
        both = before is not None and after is not None
        assert row["delta"] == (js(after - before) if both else None)
    flash = next(r for r in rows if (r["check"], r["subject"]) == ("bpp_state", "gpt-124m/flash"))
    assert (flash["status_a"], flash["status_b"], flash["change"]) == ("PASS", "FAIL", "regressed")
    assert flash["delta"] == pytest.approx(0.5, abs=0.01)
    unshifted = [
        r for r in rows if r["check"] == "bpp_state" and not r["subject"].endswith("/flash")
    ]
    assert unshifted and all(r["change"] != "regressed" for r in unshifted)


def test_compare_fail_on_regression_names_the_flash_state_regression(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # a row per line and unwrapped lines, to parse
    plain = study.cli("compare", "j1", "j3")
    gated = study.cli("compare", "j1", "j3", "--fail-on-regression", ok=False)
    assert gated.exit_code == 3
    assert gated.stdout == plain.stdout
    tail = gated.stdout.split("\n\n")[-1].splitlines()
    assert re.fullmatch(
        r"\d+ regressions from j1 to j3 \(\d+ regressed, \d+ fixed, \d+ new, \d+ gone, "
        r"\d+ changed, \d+ noise, \d+ same\)",
        tail[0],
    )
    assert int(tail[0].split()[0]) == len(tail) - 1
    flash = [line for line in tail if line.startswith("  bpp_state gpt-124m/flash: ")]
    assert len(flash) == 1 and re.fullmatch(
        r"  bpp_state gpt-124m/flash: PASS -> FAIL \(delta \+0\.4\d*\); rise \+0\.4\d*, limit "
        r"the tolerance 0\.0\d+ B/param \(a FAIL\) \(2 comparable jobs \(steps=40\): j4, j2, "
        r"fewer than 3 to measure a spread between jobs\)",
        flash[0],
    )
    assert all("/flash" in line or " flash" in line for line in tail[1:])  # nothing else
    as_json = study.cli("compare", "j1", "j3", "--fail-on-regression", "-f", "json", ok=False)
    assert as_json.exit_code == 3 and json.loads(as_json.stdout)


def test_compare_a_probe_now_out_of_memory_is_a_regression(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # a row per line and unwrapped lines, to parse
    result = study.cli("compare", "j2", "j1", "--fail-on-regression", ok=False)
    assert result.exit_code == 3
    assert (
        "  probe_failed gpt-355m/ref: absent -> FAIL; "
        "status: a new FAIL of a subject that passed before\n"
    ) in result.stdout


def test_compare_identical_content_has_no_regression(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # a row per line and unwrapped lines, to parse
    study.cli("ingest", str(study.dirs["j1"]), "--job", "j1-again", "--meta", "gpu=A10G")
    result = study.cli("compare", "j1", "j1-again", "--fail-on-regression")
    assert result.exit_code == 0
    same = len(study.rows("compare", "j1", "j1-again"))
    assert result.stdout.endswith(
        f"\n0 regressions from j1 to j1-again (0 regressed, 0 fixed, 0 new, 0 gone, "
        f"0 changed, 0 noise, {same} same)\n"
    )
    rows = study.rows("compare", "j1", "j1-again")
    assert rows and all(r["change"] == "same" and r["status_a"] == r["status_b"] for r in rows)
    assert all(r["delta"] in (0.0, None) for r in rows)


@pytest.mark.parametrize("pair", [("j1", "nope"), ("nope", "j1")])
def test_compare_unknown_job(study: Study, pair: tuple[str, str]) -> None:
    result = study.cli("compare", *pair, ok=False)
    assert (result.exit_code, result.stdout, result.stderr) == (
        1,
        "",
        "Error: no job named 'nope'; known jobs: j1, j2, j3, j4\n",
    )


# --- summary queries never read curve points -----------------------------------------------


def test_probes_runs_and_trend_never_read_points(study: Study, engine: Engine) -> None:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with Session(engine) as session:
            everything = JobSelection(group_by=("gpu",), where=(("gpu", "A10G"),))
            assert tables.probes(session, everything).height > 0
            assert tables.probes(session, JobSelection(), failed=True).height > 0
            digest = expectations_digest(load_expectations())
            assert run_table(session, everything, digest).height > 0
            assert tables.seeds(session, everything).height > 0
            for metric in ("bpp_state", "peak_bpp", "val_loss", "min_loss", "last_loss", "steps"):
                assert tables.trend(session, everything, metric, load_expectations()).height > 0
        summary_statements = list(statements)
        with Session(engine) as session:
            assert tables.curve(session, JobSelection(), ("ref_s0",)).height > 0
    finally:
        event.remove(engine, "before_cursor_execute", record)
    point = re.compile(r"\bcurve_chunk\b", re.IGNORECASE)
    assert summary_statements
    assert not [s for s in summary_statements if point.search(s)]
    assert [s for s in statements[len(summary_statements) :] if point.search(s)]  # control
