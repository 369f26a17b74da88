"""The offline HTML report (tracker.report) and its figures (tracker.figures)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plotly.offline import get_plotlyjs
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import pick_model
from tracker.analysis.expectations import load_expectations
from tracker.analysis.job import analyze_job
from tracker.analysis.smoothing import smooth
from tracker.analysis.verdict import Verdict
from tracker.errors import JobNotFound
from tracker.figures import memory_scaling, table4
from tracker.figures.armloss import arm_across_jobs, outliers
from tracker.figures.crossjob import (
    MARKS_UP_TO,
    Job,
    bpp_across_jobs,
    val_loss_across_jobs,
)
from tracker.figures.trajectories import trajectories_figure
from tracker.queries.compare import compare_jobs
from tracker.queries.selection import JobSelection
from tracker.report import generate_report
from tracker.sample import DEMO_META, write_demo_jobs, write_sample_job
from tracker.store.jobdata import load_job_data
from tracker.store.schema import open_database
from tracker.summary.downsample import DEFAULT_MAX_POINTS, downsample, minmax_indices
from tracker.summary.grid import GRID_POINTS, grid_curve
from tracker.summary.trajectories import trajectory_drawing

STEPS = 300
JOB_FILES = (
    "index.html",
    "mem_analysis.json",
    "gpt_analysis.json",
    "verdicts.json",
    "mem_scaling.html",
    "gpt_trajectories.html",
    "table4.html",
)
EVIL = "<script>alert(1)</script>"
SCRIPT_SRC = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?([^\"' >]+)", re.IGNORECASE)


@pytest.fixture(scope="module")
def exp():  # type: ignore[no-untyped-def]
    return load_expectations()


def strict_json(text: str) -> object:
    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def html_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def report(engine: Engine, out: Path, exp, jobs=None, force=False):  # type: ignore[no-untyped-def]
    selection = JobSelection(jobs=tuple(jobs or ()))
    with Session(engine) as session:
        return generate_report(session, out, exp, selection, force=force)


def evil_job(directory: Path) -> Path:
    """A sample job whose model, variant and error texts are HTML/JS injections."""
    write_sample_job(directory, steps=100)
    path = directory / "mem_sweep.json"
    records = json.loads(path.read_text())
    for record in records:
        if record["model"] == "gpt-30m":
            record["model"] = f"gpt-{EVIL}\"'&"
        if record["model"] == "gpt-82m" and record["variant"] == "quant_only":
            record["variant"] = f"{EVIL}'\""
        if "error" in record:
            record["error"] = f'{EVIL} <img src=x onerror="alert(2)">'
    path.write_text(json.dumps(records))
    return directory


# -- downsampling ----------------------------------------------------------------------


def test_downsample_keeps_short_series_whole() -> None:
    y = np.array([3.0, 1.0, 2.0])
    assert minmax_indices(y, 10).tolist() == [0, 1, 2]
    x, ys = downsample(np.array([5, 6, 7]), y, 10)
    assert x.tolist() == [5, 6, 7] and ys.tolist() == [3.0, 1.0, 2.0]


def test_downsample_bound_extremes_ends_and_gaps() -> None:
    rng = np.random.default_rng(0)
    y = rng.standard_normal(100_000)
    y[123] = 50.0
    y[77_777] = -50.0
    y[40_000:40_010] = np.nan
    y[60_000] = np.inf
    original = y.copy()
    keep = minmax_indices(y, 2000)
    assert len(keep) <= 2000
    assert np.all(np.diff(keep) > 0)  # sorted, unique
    assert {0, 99_999, 123, 77_777, 40_000, 60_000} <= set(keep.tolist())
    np.testing.assert_array_equal(y, original)  # pure


def test_downsample_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError):
        downsample(np.arange(3), np.arange(4.0))
    with pytest.raises(ValueError):
        minmax_indices(np.arange(10.0), 2)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=0, max_size=400
    ),
    max_points=st.integers(min_value=5, max_value=60),
)
def test_downsample_properties(values: list[float], max_points: int) -> None:
    y = np.array(values, dtype=np.float64)
    keep = minmax_indices(y, max_points)
    assert len(keep) <= min(max_points, len(y))
    if len(y) == 0:
        return
    assert keep[0] == 0 and keep[-1] == len(y) - 1
    finite = np.isfinite(y)
    if finite.any():
        kept = y[keep][np.isfinite(y[keep])]
        assert kept.min() == y[finite].min() and kept.max() == y[finite].max()
    if (~finite).any():
        assert (~np.isfinite(y[keep])).any()  # a gap stays a gap


# -- figures ---------------------------------------------------------------------------


def test_figures_follow_the_script(cli: Cli, engine: Engine, tmp_path: Path, exp) -> None:  # type: ignore[no-untyped-def]
    cli("ingest", str(write_sample_job(tmp_path / "job2", steps=STEPS)))
    with Session(engine) as session:
        data = load_job_data(session, "job2")
    analysis = analyze_job(data, exp)

    mem = memory_scaling(data.probes, exp, gpu="A10G")
    names = [t["name"] for t in mem["data"]]
    assert names == ["ref", "flash", "flash_gr", "split_only", "quant_only"]
    assert [t["line"]["color"] for t in mem["data"]] == [
        "#2a78d6",
        "#008300",
        "#1baf7a",
        "#e87ba4",
        "#eda100",
    ]
    assert sorted(s["y0"] for s in mem["layout"]["shapes"]) == [5.125, 7.125, 16.0]
    assert mem["layout"]["xaxis"]["type"] == "log"
    assert "A10G" in mem["layout"]["title"]["text"]
    assert len(mem["data"][0]["x"]) == 3  # gpt-355m/ref failed: not drawn, listed under the plot
    assert any("failed probe" in a["text"] for a in mem["layout"]["annotations"])

    traj = trajectories_figure(trajectory_drawing(data.curves, exp), exp)
    traces = [(t["name"], t["xaxis"], t["showlegend"]) for t in traj["data"]]
    assert traces == [
        ("AdamW (ref, seed0)", "x", True),
        ("FlashAdamW (seed0)", "x", True),
        ("AdamW (ref, seed1)", "x", True),
        ("Linear-quant FlashAdamW", "x2", True),
        ("AdamW raw (ref)", "x2", False),
    ]
    # left: smooth() of the whole series; right: raw loss, non-finite values drawn as gaps
    ref = data.curves["ref_s0"]
    smoothed = smooth(ref["step"].to_numpy(), ref["value"].to_numpy(), exp.training.ema_alpha)
    np.testing.assert_allclose(np.asarray(traj["data"][0]["y"]), smoothed)
    raw = np.asarray(traj["data"][3]["y"], dtype=float)
    assert np.isnan(raw).any() and not np.isinf(raw).any()
    assert traj["layout"]["yaxis2"]["type"] == "log"
    notes = " ".join(a["text"] for a in traj["layout"]["annotations"])
    assert "all 1,500 curve points drawn" in notes

    t4 = table4(analysis.verdicts)
    bars = [t for t in t4["data"] if t["x"] != [None]]
    assert len(bars) == 4
    assert list(bars[0]["x"]) == ["ref", "flash", "split_only", "quant_only"]
    assert list(bars[1]["y"]) == [29.9, 15.0, 15.0, 29.9]


def test_figures_say_when_they_have_nothing(exp) -> None:  # type: ignore[no-untyped-def]
    empty_probes = pl.DataFrame(
        schema={"model": pl.String, "variant": pl.String, "n_params": pl.Int64}
    )
    for fig in (
        memory_scaling(empty_probes, exp),
        trajectories_figure(trajectory_drawing({}, exp), exp),
        table4([]),
    ):
        assert len(fig["data"]) == 0
        annotations = fig["layout"]["annotations"]
        assert annotations and annotations[0]["text"].startswith("no ")


def test_trajectories_without_divergence_arm_is_one_panel(exp) -> None:  # type: ignore[no-untyped-def]
    curve = pl.DataFrame({"step": np.arange(50), "value": np.linspace(5.0, 3.0, 50)})
    fig = trajectories_figure(
        trajectory_drawing({"ref_s0": curve, "quant_only_s2": curve}, exp), exp
    )
    names = [t["name"] for t in fig["data"]]
    assert names == ["AdamW (ref, seed0)", "Optimizer quant only (seed2)"]
    assert fig["data"][1]["line"]["dash"] == "dash"
    assert {t["xaxis"] for t in fig["data"]} == {"x"}


def test_trajectories_downsample_after_smoothing(exp) -> None:  # type: ignore[no-untyped-def]
    n = 50_000
    rng = np.random.default_rng(1)
    values = 3.0 + rng.standard_normal(n)
    curve = pl.DataFrame({"step": np.arange(n), "value": values})
    fig = trajectories_figure(trajectory_drawing({"ref_s0": curve, "linear_s0": curve}, exp), exp)
    full = smooth(curve["step"].to_numpy(), curve["value"].to_numpy(), exp.training.ema_alpha)
    for trace in fig["data"]:
        assert len(trace["x"]) <= DEFAULT_MAX_POINTS
    left = fig["data"][0]
    np.testing.assert_allclose(np.asarray(left["y"]), full[np.asarray(left["x"])])
    notes = " ".join(a["text"] for a in fig["layout"]["annotations"])
    assert "curve points drawn" in notes and "verdicts use every step" in notes


def test_trajectories_axis_starts_after_the_first_drop(exp) -> None:  # type: ignore[no-untyped-def]
    """The smoothed loss is not flattened by its first steps."""
    steps = np.arange(2000)
    curves = {
        arm: pl.DataFrame({"step": steps, "value": 3.0 + 8.0 * np.exp(-steps / 20) + shift})
        for arm, shift in (("ref_s0", 0.0), ("flash_s0", 0.01))
    }
    fig = trajectories_figure(trajectory_drawing(curves, exp), exp)
    low, high = fig["layout"]["yaxis"]["range"]
    late = []  # the smoothed loss from step 200 (10% of the steps) on, by smooth's loop
    for frame in curves.values():
        mean = weight = 0.0
        for step, value in frame.iter_rows():
            mean, weight = 0.98 * mean + 0.02 * value, 0.98 * weight + 0.02
            if step >= 200:
                late.append(mean / weight)
    spread = max(late) - min(late)
    assert low == pytest.approx(min(late) - 0.06 * spread, rel=1e-6)
    assert high == pytest.approx(max(late) + 0.06 * spread, rel=1e-6)
    assert high < 4  # the first steps' loss of 11 is off the axis
    notes = " ".join(a["text"] for a in fig["layout"]["annotations"])
    assert "left y axis from 10% of the steps on" in notes


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(10**6, 10**10), min_size=2, max_size=8, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_line_fit_is_scipy_linregress_to_the_bit(sizes: list[int], seed: int) -> None:
    """The memory fit avoids importing scipy.stats (it dominated a one-job report)."""
    from scipy.stats import linregress

    from tracker.analysis.scaling import line_fit

    x = 1.0 / np.array(sizes, dtype=float)
    y = np.random.default_rng(seed).normal(4.0, 0.5, x.size)
    fit = linregress(x, y)
    assert line_fit(x, y) == (float(fit.slope), float(fit.intercept))


def test_long_titles_wrap_and_table4_legend_is_neutral(exp) -> None:  # type: ignore[no-untyped-def]
    from tracker.figures.style import TITLE_WIDTH, wrap_title
    from tracker.figures.table4 import LEGEND_SWATCH

    title = "Measured CUDA bytes/param vs model size (A10G, one variant per process)"
    lines = wrap_title(title).split("<br>")
    assert len(lines) == 2 and all(len(line) <= TITLE_WIDTH for line in lines)
    assert " ".join(lines) == title
    verdicts = [
        Verdict("table4_params_gib", "ref", 30.1, 29.9, 1.0, "PASS", ""),
        Verdict("table4_params_gib", "flash", 15.2, 15.0, 1.0, "PASS", ""),
    ]
    fig = table4(verdicts)
    legend = [t for t in fig["data"] if t.get("showlegend", True)]
    assert [t["name"] for t in legend] == [
        "paper (tolerance as error bar)",
        "extrapolated from this job (coloured by variant)",
    ]
    assert legend[1]["marker"]["color"] == LEGEND_SWATCH
    paper = next(t for t in fig["data"] if t["name"].startswith("paper"))
    assert paper["insidetextanchor"] == "start"  # the label sits at the foot, off the error bar


# -- the report ------------------------------------------------------------------------


def test_report_writes_every_file_offline(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=STEPS)), "--meta", "gpu=A10G")
    cli(
        "ingest",
        str(write_sample_job(tmp_path / "job2", seed=5, steps=STEPS, flash_state_shift=0.5)),
    )
    out = tmp_path / "report"
    result = report(engine, out, exp)
    assert result.index == out / "index.html"
    assert [j.job for j in result.jobs] == ["job1", "job2"]  # ingest order

    for job in ("job1", "job2"):
        for name in JOB_FILES:
            assert (out / job / name).is_file(), f"{job}/{name}"
        for name in ("mem_analysis.json", "gpt_analysis.json", "verdicts.json"):
            text = (out / job / name).read_text()
            assert "NaN" not in text and "Infinity" not in text
            strict_json(text)
        verdicts = strict_json((out / job / "verdicts.json").read_text())
        assert isinstance(verdicts, list) and verdicts
        assert set(verdicts[0]) == {
            "check",
            "subject",
            "measured",
            "expected",
            "tolerance",
            "status",
            "detail",
        }
        counts = next(j.counts for j in result.jobs if j.job == job)
        assert counts == {
            s: sum(v["status"] == s for v in verdicts) for s in ("PASS", "FAIL", "KNOWN", "N/A")
        }
    gpt = strict_json((out / "job1" / "gpt_analysis.json").read_text())
    assert isinstance(gpt, dict) and gpt["linear_final_loss"] is None  # NaN -> null

    # plotly.js written once, at the top, and linked relatively by every page
    assert [p.relative_to(out) for p in out.rglob("plotly*.js")] == [Path("plotly.min.js")]
    assert (out / "plotly.min.js").read_text() == get_plotlyjs()
    pages = html_files(out)
    assert len(pages) == 1 + 2 * 4
    for page in pages:
        text = page.read_text()
        assert "cdn.plot.ly" not in text and "https://" not in text, page
        sources = SCRIPT_SRC.findall(text)
        expected = "plotly.min.js" if page.parent == out else "../plotly.min.js"
        assert sources == [expected], page
        assert (page.parent / expected).resolve() == (out / "plotly.min.js").resolve()
    index = (out / "index.html").read_text()
    assert 'href="job1/index.html"' in index and 'href="job2/index.html"' in index
    assert index.count('class="plot"') == 2 + 4  # across jobs only: bpp, val loss, 4 arms
    assert 'id="job-' not in index and "verdicts.json" not in index  # nothing of one job
    assert 'class="badge fail"' in index and 'class="badge pass"' in index  # the comparison
    assert "A10G" in (out / "job1" / "index.html").read_text()
    job_page = (out / "job2" / "index.html").read_text()
    statuses = re.findall(r'<tr class="(pass|fail|na)"><td><span class="badge', job_page)
    assert "fail" in statuses and statuses == sorted(statuses, key=["fail", "pass", "na"].index)

    # a report of job2 alone into the same folder: job1's pages stay (links to them keep
    # working, job1 is still stored), one plotly.min.js stays
    again = report(engine, out, exp, ["job2"])
    assert [j.job for j in again.jobs] == ["job2"] and again.removed == []
    assert (out / "job1" / "index.html").is_file()
    assert [p.relative_to(out) for p in out.rglob("plotly*.js")] == [Path("plotly.min.js")]


def test_report_escapes_database_text(cli: Cli, engine: Engine, tmp_path: Path, exp) -> None:  # type: ignore[no-untyped-def]
    cli(
        "ingest",
        str(evil_job(tmp_path / "evil")),
        "--meta",
        f"note={EVIL}\"'",
        "--meta",
        "gpu=<b>A10G</b>",
    )
    out = tmp_path / "report"
    report(engine, out, exp)
    pages = html_files(out)
    assert pages
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text.lower(), page
        assert "<img" not in text.lower() and "<b>A10G" not in text, page
    job_page = (out / "evil" / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;" in job_page  # the meta value
    assert "gpt-&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;" in job_page  # a subject
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in job_page  # the probe error
    # plotly labels: entities, which plotly.js draws as the literal text (see the browser test)
    assert '"name":"&lt;script&gt;alert(1)&lt;/script&gt;\'\\""' in job_page


def test_report_of_partial_jobs_renders_what_it_can(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "probes", steps=STEPS, arms=())))
    cli("ingest", str(write_sample_job(tmp_path / "arms", steps=STEPS, probes=False)))
    out = tmp_path / "report"
    report(engine, out, exp)
    for job in ("probes", "arms"):
        for name in JOB_FILES:
            assert (out / job / name).is_file()
    probes = (out / "probes" / "index.html").read_text()
    assert "no training arms in this job" in probes
    assert probes.count('class="plot"') == 2 and probes.count('class="empty"') == 1
    assert 'class="empty"' in (out / "probes" / "gpt_trajectories.html").read_text()
    assert strict_json((out / "probes" / "gpt_analysis.json").read_text()) == {}
    arms = (out / "arms" / "index.html").read_text()
    assert "no memory probes in this job" in arms
    assert arms.count('class="plot"') == 1 and arms.count('class="empty"') == 2
    assert strict_json((out / "arms" / "mem_analysis.json").read_text()) == {}
    index = (out / "index.html").read_text()
    assert index.count('class="plot"') == 2 and index.count('class="empty"') == 0
    # across jobs: bytes/param of one job, val loss of the other, no arm in both
    assert "No training arm appears in two or more of these jobs." in index


def test_report_of_an_empty_database(engine: Engine, tmp_path: Path, exp) -> None:  # type: ignore[no-untyped-def]
    result = report(engine, tmp_path / "report", exp)
    assert result.jobs == []
    assert "No jobs in the database" in result.index.read_text()


def test_unknown_job_raises_before_writing(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=50)))
    out = tmp_path / "report"
    with Session(engine) as session, pytest.raises(JobNotFound, match="'nope'"):
        generate_report(session, out, exp, JobSelection(jobs=("job1", "nope")))
    assert not out.exists()


def test_report_where_no_template_cache_can_be_kept(tmp_path: Path) -> None:
    """Jinja2 keeps compiled templates in a private folder of the temporary directory; where
    that name is taken by something else, the report is written all the same."""
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    open_database(url).dispose()
    Cli(url)("ingest", str(write_sample_job(tmp_path / "job1", steps=50)))
    temp = tmp_path / "temp"
    temp.mkdir()
    (temp / f"_jinja2-cache-{os.getuid()}").write_text("not a folder")
    out = tmp_path / "report"
    child = subprocess.run(
        [sys.executable, "-m", "tracker", "--db", url, "report", "--out", str(out)],
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
    )
    assert (child.returncode, child.stderr) == (0, "")
    assert child.stdout.startswith("1 job pages rendered, 0 up to date\n")
    assert (out / "job1" / "index.html").is_file()


def test_job_names_never_clobber_the_index(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    job = write_sample_job(tmp_path / "src", steps=50, arms=())
    cli("ingest", str(job), "--job", "index.html")
    cli("ingest", str(job), "--job", "plotly.min.js")
    out = tmp_path / "report"
    result = report(engine, out, exp)
    assert (out / "index.html").is_file() and (out / "plotly.min.js").is_file()
    assert [j.page.parent.name for j in result.jobs] == ["index.html+2", "plotly.min.js+2"]
    assert 'href="index.html%2B2/index.html"' in (out / "index.html").read_text()


def test_report_size_is_bounded_for_long_curves(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "long", steps=100_000)))
    out = tmp_path / "report"
    report(engine, out, exp)  # its speed is bench/bench_report.py's business, not a test's
    size = sum(p.stat().st_size for p in (out / "long").iterdir())
    assert size < 5 * 2**20, f"{size / 2**20:.1f} MB"
    page = (out / "long" / "gpt_trajectories.html").read_text()
    match = re.search(r"([\d,]+) of ([\d,]+) curve points drawn", page)
    assert match is not None
    drawn, total = (int(g.replace(",", "")) for g in match.groups())
    assert total == 5 * 100_000 and drawn <= 5 * DEFAULT_MAX_POINTS


# -- across jobs -----------------------------------------------------------------------

FIGURE_JSON = re.compile(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', re.S)


def ingest_demo(cli: Cli, root: Path, steps: int, order: tuple[str, ...]) -> None:
    """The three demo jobs, ingested in ``order`` with their metadata (``time`` orders them)."""
    directories = {d.name: d for d in write_demo_jobs(root, steps=steps)}
    for name in order:
        meta = [arg for k, v in DEMO_META[name].items() for arg in ("--meta", f"{k}={v}")]
        cli("ingest", str(directories[name]), *meta)


def cross_job_html(index: str) -> str:
    start = index.index('id="cross-job"')
    assert index.index('id="claims"') < index.index('id="jobs"') < start  # after the summary
    return index[start : index.index("</section>", start)]


def figures_of(html: str) -> dict[str, dict]:
    return {key: json.loads(text) for key, text in FIGURE_JSON.findall(html)}


def typed(array: object) -> np.ndarray:
    """A plotly.js typed array as written into the page (``dtype`` and base64 ``bdata``)."""
    assert isinstance(array, dict)
    return np.frombuffer(base64.b64decode(array["bdata"]), array["dtype"])


def test_cross_job_section_of_the_demo_jobs(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    # ingested out of order: job order follows the time metadata, not the ingest time
    ingest_demo(cli, tmp_path / "jobs", STEPS, ("job3", "job1", "job2"))
    out = tmp_path / "report"
    result = report(engine, out, exp)
    assert [j.job for j in result.jobs] == ["job1", "job2", "job3"]
    index = (out / "index.html").read_text()
    section = cross_job_html(index)
    assert "3 jobs in job order (time metadata, else ingest time), from job1 to job3." in section

    figures = figures_of(section)
    assert list(figures) == ["x-bpp", "x-val", "x-arm-1", "x-arm-2", "x-arm-3", "x-arm-4"]
    jobs = ["job1", "job2", "job3"]
    times = [DEMO_META[job]["time"] for job in jobs]

    bpp = figures["x-bpp"]
    assert "gpt-124m" in bpp["layout"]["title"]["text"]  # says which model
    assert bpp["layout"]["xaxis"]["type"] == "date"
    variants = [t for t in bpp["data"] if t["mode"] == "lines+markers"]
    assert [t["name"] for t in variants] == ["ref", "flash", "flash_gr", "split_only", "quant_only"]
    assert all(t["text"] == jobs for t in variants)  # hover names the job
    expected = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000 for t in times]
    for trace in variants:
        assert typed(trace["x"]).tolist() == expected  # ms since 1970, on a date axis
    flash = variants[1]["y"]
    assert flash[2] - flash[1] == pytest.approx(0.5, abs=0.02)  # the job3 regression
    rings = next(t for t in bpp["data"] if t["name"].startswith("off the analytic"))
    assert "job3: flash" in rings["text"]
    analytic = sorted(s["y0"] for s in bpp["layout"]["shapes"])
    assert analytic == [5.125, 7.125, 10.125, 16.0]
    # the table: per variant, its median over jobs and the newest job's value, marked
    assert '<table class="bpp">' in section
    assert f'<td class="num off">{flash[2]:.6g}</td>' in section

    val = figures["x-val"]
    assert [t["name"] for t in val["data"]] == ["ref", "flash"]  # linear diverged: none
    ref = val["data"][0]
    assert ref["text"] == jobs and all(e > 0 for e in ref["error_y"]["array"])  # two seeds
    assert val["data"][1]["error_y"]["array"] == [0.0, 0.0, 0.0]  # one seed
    assert "No validation loss: linear (diverged in job1, job2)" in json.dumps(val)

    arms = [figures[f"x-arm-{i}"] for i in range(1, 5)]
    titles = [f["layout"]["title"]["text"].split(":")[0] for f in arms]
    assert titles == ["ref_s0", "flash_s0", "ref_s1", "linear_s0"]
    # three jobs: one line per job (a band over three would pretend to be a distribution)
    assert [[t["name"] for t in f["data"]] for f in arms] == [jobs, jobs, jobs, jobs[:2]]
    assert arms[3]["layout"]["yaxis"]["type"] == "log"  # the divergence
    for figure in arms:
        notes = " ".join(a["text"] for a in figure["layout"]["annotations"])
        assert "EMA (alpha=0.02) over every step of each job" in notes

    # the comparison of the two most recent jobs: job2 -> job3
    with Session(engine) as session:
        comparison = compare_jobs(session, "job2", "job3", exp)
    compare = section[section.index('id="compare"') :]
    assert '<a href="job2/index.html">job2</a> &rarr; <a href="job3/index.html">job3</a>' in compare
    n = len(comparison.regressions)
    assert n >= 1 and f"<strong>{n} regressions</strong>" in compare
    assert "bpp_state gpt-124m/flash: PASS -&gt; FAIL" in compare
    rows = re.findall(r'<tr class="(\w+)"><td><span class="badge \1">', compare)
    assert len(rows) == comparison.table.height  # every row
    assert rows[:n] == ["regressed"] * n and "regressed" not in rows[n:]  # regressions first
    assert re.search(
        r'<tr class="regressed">.*?<td class="mono">bpp_<wbr>state</td><td>gpt-124m/<wbr>flash</td>'
        r'<td><span class="badge pass">PASS</span></td><td><span class="badge fail">FAIL</span>',
        compare,
    )
    assert "Latest comparison, job2 &rarr; job3:" in index  # in the summary too
    assert index.count('class="plot"') == 6


def test_cross_job_curves_are_smoothed_then_put_on_a_grid(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "a", steps=3000, arms=("ref_s0",))))
    cli("ingest", str(write_sample_job(tmp_path / "b", seed=1, steps=3000, arms=("ref_s0",))))
    out = tmp_path / "report"
    report(engine, out, exp)
    figure = figures_of(cross_job_html((out / "index.html").read_text()))["x-arm-1"]
    with Session(engine) as session:
        curve = load_job_data(session, "b").curves["ref_s0"]
    steps = curve.get_column("step").to_numpy()
    full = smooth(steps, curve.get_column("value").to_numpy(), exp.training.ema_alpha)
    trace = figure["data"][1]
    assert trace["name"] == "b"
    x, y = typed(trace["x"]), typed(trace["y"])
    assert len(x) == GRID_POINTS < 3000
    # the EMA of every step, read at the grid's steps (independently: numpy's interpolation)
    grid = np.linspace(steps[0], steps[-1], GRID_POINTS)
    np.testing.assert_allclose(y, np.interp(grid, steps, full), rtol=1e-5)
    kept = grid_curve(steps, full, curve.get_column("value").to_numpy())
    assert kept.points == 3000 and kept.values.size == GRID_POINTS and kept.first_bad is None


def test_arm_across_many_jobs_is_a_band_with_latest_and_outliers(exp) -> None:  # type: ignore[no-untyped-def]
    steps = np.arange(0, 1000, 10)
    curves = {}
    for i in range(40):
        level = 3.0 + 0.001 * ((i * 7) % 40)  # evenly spread: no outlier among them
        if i == 7:
            level = 3.5  # far above every other job
        values = level + np.exp(-steps / 100)
        curves[f"job{i:02d}"] = grid_curve(steps, values, values)
    fig = arm_across_jobs("ref_s0", curves, exp)
    names = [t.get("name") for t in fig["data"]]
    assert names[1] == "25th\u201375th percentile over 40 jobs" and names[2] == "median over jobs"
    assert fig["data"][1]["fill"] == "tonexty"
    assert names[3:] == ["job07 (outlier)", "job39 (latest)", "job38", "job37"]
    # the median at the last step, against numpy's median of the jobs' own last values
    finals = [float(c.values[-1]) for c in curves.values()]
    assert fig["data"][2]["y"][-1] == pytest.approx(np.median(finals), rel=1e-6)
    assert all("job" in t["hovertemplate"] for t in fig["data"][3:])  # hover names the job
    assert outliers({name: c.values[-1] for name, c in curves.items()}) == ["job07"]
    assert outliers({"a": 1.0, "b": 1.0, "c": 9.0}) == []  # too few jobs to judge


def test_single_job_report_has_a_cross_job_note(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=STEPS)))
    out = tmp_path / "report"
    report(engine, out, exp)
    index = (out / "index.html").read_text()
    notes = re.findall(r'<p class="muted crossjob-note" id="cross-job">([^<]*)</p>', index)
    assert notes == [
        "Across jobs: nothing to compare, this report covers 1 job (two or more needed)."
    ]
    assert 'id="x-' not in index and 'id="compare"' not in index
    assert index.count('class="plot"') == 0


def test_cross_job_section_escapes_database_text(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    evil = evil_job(tmp_path / "evil")
    cli("ingest", str(evil))
    cli("ingest", str(evil), "--job", "evil2", "--meta", f"note={EVIL}")
    out = tmp_path / "report"
    report(engine, out, exp)
    index = (out / "index.html").read_text()
    assert "<script>alert" not in index.lower() and "<img" not in index.lower()
    section = cross_job_html(index)
    # a subject of the comparison table (a line-break opportunity after each slash)
    subject = "<td>gpt-&lt;script&gt;alert(1)&lt;/<wbr>script&gt;&#34;&#39;&amp;/<wbr>flash</td>"
    assert subject in section
    # the metadata in the jobs table
    assert "note=&lt;script&gt;alert(1)&lt;/script&gt;" in index


def test_cross_job_figures_escape_database_text(exp) -> None:  # type: ignore[no-untyped-def]
    jobs = [Job("a", datetime(2026, 1, 1, tzinfo=UTC)), Job("b", datetime(2026, 2, 1, tzinfo=UTC))]
    probes = pl.DataFrame(
        {
            "job": ["a", "b"],
            "model": ["gpt-124m", "gpt-124m"],
            "variant": [EVIL, EVIL],
            "n_params": [10, 10],
            "bpp_params_state_grads": [3.0, 3.5],
            "error": [None, None],
        }
    )
    fig = bpp_across_jobs(probes, jobs, exp, pick_model(probes, "gpt"))
    assert [t["name"] for t in fig["data"]] == ["&lt;script&gt;alert(1)&lt;/script&gt;"]
    assert fig["data"][0]["text"] == ["a", "b"]


def test_lines_across_many_jobs_have_no_mark_per_job(exp) -> None:  # type: ignore[no-untyped-def]
    # past MARKS_UP_TO jobs, no marker or error bar per job (each one an SVG element):
    # plain lines, and the spread over seeds as one band of mean +- std
    n = MARKS_UP_TO + 1
    jobs = [
        Job(f"j{i:03d}", datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i)) for i in range(n)
    ]
    names = [job.name for job in jobs]
    probes = pl.DataFrame(
        {
            "job": names,
            "model": ["gpt-124m"] * n,
            "variant": ["flash"] * n,
            "n_params": [10] * n,
            "bpp_params_state_grads": [7.125 + 0.01 * (i % 3) for i in range(n)],
        }
    )
    bpp = bpp_across_jobs(probes, jobs, exp, pick_model(probes, "gpt"))
    assert [(t["mode"], "marker" in t) for t in bpp["data"]] == [("lines", False)]
    assert bpp["data"][0]["text"] == names  # hover still names each job

    means, std = [3.2 + 0.001 * i for i in range(n)], [0.002 * (i % 4) for i in range(n)]
    runs = pl.DataFrame(
        {
            "job": names,
            "model": ["gpt-124m"] * n,
            "variant": ["ref"] * n,
            "seeds": [2] * n,
            "val_loss_mean": means,
            "val_loss_std": std,
            "any_diverged": [False] * n,
        }
    )
    band, line = val_loss_across_jobs(runs, jobs, exp)["data"]
    assert line["mode"] == "lines" and "error_y" not in line and line["text"] == names
    assert band["fill"] == "toself" and band["legendgroup"] == line["legendgroup"]
    upper = [m + s for m, s in zip(means, std, strict=True)]
    lower = [m - s for m, s in zip(means, std, strict=True)]
    np.testing.assert_allclose(band["y"], upper + lower[::-1])
    np.testing.assert_array_equal(band["x"], np.concatenate([line["x"], line["x"][::-1]]))


def test_pick_model_prefers_a_model_measured_everywhere() -> None:
    def probes(rows: list[tuple[str, str, str, int | None]]) -> pl.DataFrame:
        return pl.DataFrame(rows, schema=["job", "model", "variant", "n_params"], orient="row")

    complete = probes(
        [
            ("a", "gpt-small", "ref", 10),
            ("a", "gpt-big", "ref", None),  # out of memory
            ("b", "gpt-small", "ref", 10),
            ("b", "gpt-big", "ref", 100),
            ("b", "resnet", "ref", 1000),
        ]
    )
    choice = pick_model(complete, "gpt")
    assert choice.model == "gpt-small" and "gpt-big: 1 failed probe" in choice.why
    assert pick_model(complete.filter(pl.col("model") != "gpt-small"), "gpt").model == "gpt-big"
    assert pick_model(complete, "llama").model is None


def test_cross_job_section_size_for_three_long_jobs(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp,  # type: ignore[no-untyped-def]
) -> None:
    ingest_demo(cli, tmp_path / "jobs", 2000, ("job1", "job2", "job3"))
    out = tmp_path / "report"
    report(engine, out, exp)
    section = cross_job_html((out / "index.html").read_text())
    assert len(section.encode()) < 300 * 2**10, f"{len(section) / 2**10:.0f} KB"
