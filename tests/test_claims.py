"""Claims across jobs, on synthetic jobs of known truth from the sample generator.

Expected statistics are recomputed here with scipy from the jobs' own summary files, not
taken from the code under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import optimize, special, stats
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.test_cli import flat
from tracker import api
from tracker.analysis.expectations import Expectations, load_expectations
from tracker.queries.claims import claims
from tracker.queries.selection import JobSelection
from tracker.sample import write_sample_job

STEPS = 60
SEEDS = ("ref_s0", "ref_s1", "flash_s0", "flash_s1", "linear_s0")
COLUMNS = [
    "claim",
    "subject",
    "statement",
    "status",
    "n_jobs",
    "n_samples",
    "estimate",
    "ci_low",
    "ci_high",
    "interval",
    "expected",
    "tolerance",
    "jobs_failing",
    "detail",
    "next_runs",
    "known",
]


@pytest.fixture(scope="module")
def exp() -> Expectations:
    return load_expectations()


def make_jobs(
    cli: Cli, root: Path, count: int, *, first_seed: int = 0, meta: str = "0.1.0", **kwargs: Any
) -> list[Path]:
    """``count`` jobs j<seed> of identical distributions, ingested with flashoptim=meta."""
    made = []
    for seed in range(first_seed, first_seed + count):
        job = write_sample_job(root / f"j{seed}", seed=seed, steps=STEPS, **kwargs)
        cli("ingest", str(job), "--meta", f"flashoptim={meta}")
        made.append(job)
    return made


def summaries(jobs: list[Path], variant: str) -> np.ndarray:
    """Final validation losses of every ``variant`` arm, read from the files."""
    return np.array(
        [
            json.loads(path.read_text())["val_loss"]
            for job in jobs
            for path in sorted(job.glob(f"{variant}_s*.json"))
        ]
    )


def confidence_sequence(
    xs: list[np.ndarray], ys: list[np.ndarray], level: float, planned: float
) -> Any:
    """The asymptotic CS (Waudby-Smith et al. 2024, Theorem 2.2, normal mixture) of the
    difference within jobs (``xs[j]``, ``ys[j]``: job j's runs, at least two of each), written
    out with scipy: the job fixed-effects least-squares difference, each variant's variance
    pooled within jobs, Satterthwaite's degrees of freedom, the boundary
    sqrt((1 + a) log((1 + a) / (a alpha^2))), a = planned / (t k), widened by t / z."""
    alpha = 1 - level
    jobs = len(xs)
    values = np.concatenate([np.concatenate([x, y]) for x, y in zip(xs, ys, strict=True)])
    design = np.zeros((len(values), jobs + 1))
    at = 0
    for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
        design[at : at + len(x) + len(y), j] = 1
        design[at : at + len(x), jobs] = 1  # the candidate
        at += len(x) + len(y)
    d = np.linalg.lstsq(design, values, rcond=None)[0][jobs]
    w = np.array([len(x) * len(y) / (len(x) + len(y)) for x, y in zip(xs, ys, strict=True)])
    nx, ny = np.array([len(x) for x in xs]), np.array([len(y) for y in ys])
    vx = sum(((x - x.mean()) ** 2).sum() for x in xs) / (nx - 1).sum()
    vy = sum(((y - y.mean()) ** 2).sum() for y in ys) / (ny - 1).sum()
    a_x, a_y = vx * (w**2 / nx).sum() / w.sum() ** 2, vy * (w**2 / ny).sum() / w.sum() ** 2
    df = (a_x + a_y) ** 2 / (a_x**2 / (nx - 1).sum() + a_y**2 / (ny - 1).sum())
    t = 2 * w.sum()
    k = -2 * np.log(alpha) + np.log(1 - 2 * np.log(alpha))
    a = planned / (t * k)
    half = np.sqrt(a_x + a_y) * np.sqrt((1 + a) * np.log((1 + a) / (a * alpha**2)))
    half *= stats.t.ppf(1 - alpha / 2, df) / stats.norm.ppf(1 - alpha / 2)
    return d, d - half, d + half


def by_job(jobs: list[Path], variant: str) -> list[np.ndarray]:
    """Each job's final validation losses of ``variant``, read from the files."""
    return [summaries([job], variant) for job in jobs]


def row(frame: pl.DataFrame, claim: str, subject: str | None = None) -> dict[str, Any]:
    found = frame.filter(pl.col("claim") == claim)
    if subject is not None:
        found = found.filter(pl.col("subject") == subject)
    assert found.height == 1, found
    return found.row(0, named=True)


def judge(engine: Engine, exp: Expectations, **selection: Any) -> pl.DataFrame:
    with Session(engine) as session:
        return claims(session, JobSelection(**selection), exp)


def test_equal_distributions_over_many_jobs_and_seeds_are_reproduced(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    jobs = make_jobs(cli, tmp_path, 8, arms=SEEDS)
    frame = judge(engine, exp)
    assert frame.columns == COLUMNS
    equivalence = row(frame, "val_loss_equivalence", "flash vs ref")
    flash, ref = summaries(jobs, "flash"), summaries(jobs, "ref")
    assert equivalence["status"] == "REPRODUCED"
    d, low, high = confidence_sequence(by_job(jobs, "flash"), by_job(jobs, "ref"), 0.90, 20)
    assert equivalence["estimate"] == pytest.approx(d, rel=1e-9)
    assert equivalence["interval"] == "90% CS"  # a confidence sequence
    # the last look's own interval; the judged one is the running intersection, inside it
    assert f"at this look {low:+.4f} to {high:+.4f}" in equivalence["detail"]
    assert low - 1e-12 <= equivalence["ci_low"] < equivalence["ci_high"] <= high + 1e-12
    assert equivalence["statement"].endswith(
        f"(runs of {STEPS} steps; the paper's number is for 20,000)"
    )
    assert (equivalence["n_jobs"], equivalence["n_samples"]) == (8, 32)
    assert "TOST p = " in equivalence["detail"]
    # probability of improvement: the share of a job's (flash, ref) pairs where flash ends lower
    pairs = [
        (f < r) + 0.5 * (f == r)
        for x, y in zip(by_job(jobs, "flash"), by_job(jobs, "ref"), strict=True)
        for f in x
        for r in y
    ]
    assert f"probability of improvement within jobs {np.mean(pairs):.2f}" in equivalence["detail"]
    assert len(flash) == len(ref) == 16
    assert "bootstrap interval stratified by job" in equivalence["detail"]

    deterministic = frame.filter(pl.col("claim").is_in(["bpp_params", "bpp_state", "bpp_grads"]))
    assert deterministic.height > 0 and set(deterministic["status"]) == {"REPRODUCED"}
    assert row(frame, "bpp_state", "gpt-124m/flash")["n_jobs"] == 8
    assert row(frame, "probe_failures", "gpt-355m/ref")["status"] == "NOT_REPRODUCED"
    diverges = row(frame, "ablation_diverges", "linear_s0")
    assert (diverges["status"], diverges["n_jobs"], diverges["jobs_failing"]) == (
        "REPRODUCED",
        8,
        [],
    )


def test_the_tracking_share_has_scipys_binomial_interval(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 6)
    tracking = row(judge(engine, exp), "tracks_within_seed_noise")
    with Session(engine) as session:
        from tracker.analysis.job import analyze_job
        from tracker.store.jobdata import load_job_data

        verdicts = [
            v
            for job in (f"j{seed}" for seed in range(6))
            for v in analyze_job(load_job_data(session, job), exp).verdicts
            if v.check == "ema_delta_vs_seed_noise"
        ]
    # the claim counts a job within at noise_factor x its seed noise; the job's own verdict
    # allows job_noise_factor x (its limit, `expected`)
    t = exp.training
    within = sum(v.measured <= v.expected / t.job_noise_factor * t.noise_factor for v in verdicts)
    interval = stats.binomtest(within, 6).proportion_ci(0.95)
    assert tracking["estimate"] == within / 6
    # Robbins' beta-binomial mixture CS: the shares whose mixture likelihood ratio stays
    # below 1 / 0.05, roots found here with scipy's brentq
    k, n = within, 6

    def excess(p: float) -> float:
        log_ratio = special.betaln(k + 1, n - k + 1) - k * np.log(p) - (n - k) * np.log1p(-p)
        return float(log_ratio - np.log(20))

    low = 0.0 if k == 0 else optimize.brentq(excess, 1e-15, k / n)
    high = 1.0 if k == n else optimize.brentq(excess, k / n, 1 - 1e-15)
    assert (tracking["ci_low"], tracking["ci_high"]) == pytest.approx((low, high), abs=1e-9)
    assert tracking["interval"] == "95% CS"
    assert f"binomial interval {interval.low:.2f} to {interval.high:.2f}" in tracking["detail"]
    assert len(tracking["jobs_failing"]) == 6 - within


def test_a_shifted_candidate_is_not_reproduced(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 5, arms=SEEDS, flash_val_loss_shift=0.05)
    equivalence = row(judge(engine, exp), "val_loss_equivalence")
    assert equivalence["status"] == "NOT_REPRODUCED"
    assert equivalence["ci_low"] > 0.01
    assert equivalence["detail"].startswith(
        "not equivalent: the 90% running intersection of the confidence sequence lies entirely "
        "outside ±0.01 since j1: "  # j0 alone has two runs per variant, fewer than three
    )
    assert equivalence["jobs_failing"] == [f"j{i}" for i in range(5)]  # each job's own too


def test_one_seed_per_arm_is_inconclusive(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 1, arms=("ref_s0", "flash_s0"))
    frame = judge(engine, exp)
    equivalence = row(frame, "val_loss_equivalence")
    assert equivalence["status"] == "INCONCLUSIVE"
    assert equivalence["ci_low"] is None
    assert equivalence["detail"].endswith(
        "from 1 flash and 1 ref runs over 1 jobs: fewer than 3 runs of a variant in jobs with "
        "both: no decision from so few"
    )
    # each variant's cost at its own logged time
    assert re.fullmatch(
        r"run 2 more flash seeds and 2 more ref seeds in jobs with both variants \(flash about "
        r"[\d.e-]+ hours a run, ref about [\d.e-]+ hours a run: [\d.e-]+ hours in all\)",
        equivalence["next_runs"],
    )
    assert row(frame, "tracks_within_seed_noise")["status"] == "INCONCLUSIVE"


def test_between_the_margins_the_detail_says_how_many_seeds_would_decide(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(
        cli,
        tmp_path,
        2,
        arms=("ref_s0", "ref_s1", "flash_s0", "flash_s1"),
        flash_val_loss_shift=0.006,
    )
    equivalence = row(judge(engine, exp), "val_loss_equivalence")
    assert equivalence["status"] == "INCONCLUSIVE"
    assert equivalence["ci_low"] < 0.01 < equivalence["ci_high"]
    assert re.fullmatch(
        r"run \d+ more flash and \d+ more ref seeds \(flash about [\d.e-]+ hours a run, ref "
        r"about [\d.e-]+ hours a run: [\d.e-]+ hours in all\): they settle it with 80% "
        r"probability if the difference within jobs is \+0\.00\d\d and the spread as seen",
        equivalence["next_runs"],
    )


def test_one_job_in_ten_with_a_shifted_state_is_mixed_and_its_version_separates_it(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 9, arms=())
    make_jobs(cli, tmp_path, 1, first_seed=9, meta="0.1.5", arms=(), flash_state_shift=0.5)
    frame = judge(engine, exp)
    state = row(frame, "bpp_state", "gpt-124m/flash")
    assert (state["status"], state["jobs_failing"], state["n_jobs"]) == ("MIXED", ["j9"], 10)
    assert (
        "outside tolerance in 1 of 10 jobs: j9; every failing job has flashoptim=0.1.5 "
        "(the others: flashoptim=0.1.0)" in state["detail"]
    )
    assert row(frame, "table4_optim", "flash")["status"] == "MIXED"
    assert row(frame, "bpp_state", "gpt-124m/ref")["status"] == "REPRODUCED"
    assert "val_loss_equivalence" not in frame["claim"].to_list()  # no arms, no such claim

    grouped = judge(engine, exp, group_by=("flashoptim",))
    assert grouped.columns == ["group", *COLUMNS]
    by_group = {
        g: row(grouped.filter(pl.col("group") == g), "bpp_state", "gpt-124m/flash")
        for g in ("0.1.0", "0.1.5")
    }
    assert (by_group["0.1.0"]["status"], by_group["0.1.0"]["n_jobs"]) == ("REPRODUCED", 9)
    assert (by_group["0.1.5"]["status"], by_group["0.1.5"]["jobs_failing"]) == (
        "NOT_REPRODUCED",
        ["j9"],
    )
    assert by_group["0.1.5"]["n_jobs"] == 1


def test_identical_content_under_two_names_counts_once(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    (job,) = make_jobs(cli, tmp_path, 1)
    cli("ingest", str(job), "--job", "j0-copy")
    frame = judge(engine, exp)
    state = row(frame, "bpp_state", "gpt-124m/flash")
    assert state["n_jobs"] == 1
    assert state["detail"].endswith("; counted once: j0-copy (same content as j0)")


def test_claims_read_a_database_opened_read_only(
    cli: Cli, db_url: str, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 2)
    if db_url.startswith("sqlite"):
        path = db_url.removeprefix("sqlite:///")
        engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    else:
        engine = create_engine(db_url, execution_options={"postgresql_readonly": True})
    before = judge(api.connect(db_url), exp)
    with Session(engine) as session:
        read_only = claims(session, JobSelection(), exp)
    engine.dispose()
    assert read_only.equals(before)
    # other expectations than the stored ones: analysed from the points, still without writing
    custom = tmp_path / "custom.toml"
    text = (Path(__file__).parents[1] / "tracker/studies/flashoptim.toml").read_text()
    custom.write_text(text.replace("noise_factor = 1.0", "noise_factor = 100.0"))
    engine = create_engine(
        f"sqlite:///file:{db_url.removeprefix('sqlite:///')}?mode=ro&uri=true"
        if db_url.startswith("sqlite")
        else db_url,
        execution_options={} if db_url.startswith("sqlite") else {"postgresql_readonly": True},
    )
    with Session(engine) as session:
        loose = claims(session, JobSelection(), load_expectations(custom))
    engine.dispose()
    assert row(loose, "tracks_within_seed_noise")["estimate"] == 1.0


def test_api_claims_returns_the_library_rows(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    make_jobs(cli, tmp_path, 2, meta="0.1.0")
    assert api.claims(db_url).equals(judge(engine, exp))
    only = api.claims(db_url, job="j1", group_by="flashoptim")
    assert set(only["group"]) == {"0.1.0"}
    assert set(only["n_jobs"].filter(only["claim"] == "bpp_state")) == {1}


def test_cli_claims_formats_and_errors(cli: Cli, tmp_path: Path) -> None:
    make_jobs(cli, tmp_path, 2)
    rows = json.loads(cli("claims", "--format", "json").stdout)
    assert list(rows[0]) == COLUMNS
    state = next(r for r in rows if (r["claim"], r["subject"]) == ("bpp_state", "gpt-124m/flash"))
    assert state["status"] == "REPRODUCED" and state["jobs_failing"] == []
    table = cli("claims", "--where", "flashoptim=0.1.0").stdout.splitlines()
    assert table[0].startswith(f"{len(rows)} claims: ")  # the counts first
    assert table[1].split() == ["status", "claim", "subject", "estimate", "jobs"]
    assert cli("claims", "--wide").stdout.splitlines()[0].split() == COLUMNS
    unknown = cli("claims", "--where", "flashoptim=9", ok=False)
    assert (unknown.exit_code, unknown.stderr) == (
        1,
        "Error: no job has flashoptim=9; known values: 0.1.0\n",
    )
    missing = cli("claims", "--job", "nosuch", ok=False)
    assert (missing.exit_code, missing.stderr) == (
        1,
        "Error: no job named 'nosuch'; known jobs: j0, j1\n",
    )
    clash = cli("claims", "--group-by", "job", ok=False)
    assert (clash.exit_code, clash.stderr) == (
        1,
        "Error: cannot group by metadata 'job': the table already has a column of that name\n",
    )
    usage = cli("claims", "--where", "flashoptim", ok=False)
    assert usage.exit_code == 2
    words = " ".join(usage.stderr.replace("│", " ").split())
    assert "(OP one of = != < <= > >=), got 'flashoptim'" in words


def test_cli_claims_gate_filter_and_compact_table(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # a row per line and unwrapped lines, to parse
    make_jobs(cli, tmp_path, 2)
    cli("meta", "j0", "time=2026-10-01T00:00Z")
    cli("meta", "j1", "time=2026-11-01T00:00Z")
    rows = json.loads(cli("claims", "-f", "json").stdout)
    statuses = {r["status"] for r in rows}
    printed = cli("claims").stdout.splitlines()
    table = [t for t in printed if not t.startswith("to decide ")]
    assert len(table) == len(rows) + 3 and max(map(len, table)) <= 130  # run lengths named
    deciding = [f"to decide {r['claim']} ({r['subject']}): {r['next_runs']}" for r in rows]
    assert printed[len(table) :] == [
        d for d, r in zip(deciding, rows, strict=True) if r["next_runs"]
    ]
    state = next(r for r in rows if (r["claim"], r["subject"]) == ("bpp_state", "gpt-124m/ref"))
    line = next(t for t in table if t.split()[1:3] == ["bpp_state", "gpt-124m/ref"])
    assert line.split() == [
        state["status"],
        "bpp_state",
        "gpt-124m/ref",
        f"{state['estimate']:.4g}",
        f"({state['interval']}",
        f"{state['ci_low']:.4g}..{state['ci_high']:.4g})",
        "2",
    ]
    only = cli("claims", "--status", "reproduced", "-f", "json").stdout
    assert {r["status"] for r in json.loads(only)} == {"REPRODUCED"}
    absent = next(s for s in ("NOT_REPRODUCED", "MIXED", "INCONCLUSIVE") if s not in statuses)
    assert cli("claims", "--fail-on", absent).exit_code == 0
    gated = cli("claims", "--status", absent, "--fail-on", f"{absent},REPRODUCED", ok=False)
    reproduced = sum(r["status"] == "REPRODUCED" for r in rows)
    assert (gated.exit_code, gated.stderr) == (
        3,
        f"claims failing --fail-on: {reproduced} REPRODUCED\n",
    )  # the gate judges every claim, --status only chooses the rows shown
    assert gated.stdout.splitlines()[0] == "0 claims: none"
    assert gated.stdout.splitlines()[3:] == []
    late = json.loads(cli("claims", "--since", "2026-10-15", "-f", "json").stdout)
    assert {r["n_jobs"] for r in late if r["claim"] == "bpp_state"} == {1}
    bad = cli("claims", "--fail-on", "NOT_REPRODUCED,FAILED", ok=False)
    assert bad.exit_code == 2
    assert "no claim status 'FAILED'; known: REPRODUCED, NOT_REPRODUCED, MIXED," in flat(bad.stderr)


def test_the_demo_prints_its_claims_and_they_decide(cli: Cli, tmp_path: Path) -> None:
    result = cli(
        "demo", "--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "r"), "--steps", "60"
    )
    assert result.stdout.startswith("wrote 6 sample jobs under ")
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("claims: ")]
    assert line.endswith(" (see `tracker claims`)")
    for status in ("REPRODUCED", "MIXED", "NOT_REPRODUCED"):
        assert re.search(rf"\b\d+ {status}\b", line), line
    rows = json.loads(cli("claims", "-f", "json").stdout)
    decided = {
        r["claim"]: r["status"] for r in rows if r["subject"] in ("flash vs ref", "linear_s0")
    }
    assert decided == {"val_loss_equivalence": "REPRODUCED", "ablation_diverges": "REPRODUCED"}
    flash = next(r for r in rows if (r["claim"], r["subject"]) == ("table4_optim", "flash"))
    assert flash["status"] == "MIXED" and flash["jobs_failing"] == ["job3"]
    assert "every failing job has flashoptim=0.1.1" in flash["detail"]
    known = [r for r in rows if r["known"]]  # split_only's moments: a setup difference
    assert {r["status"] for r in known} == {"NOT_REPRODUCED"} and len(known) == 2
    assert not any(r["status"] == "NOT_REPRODUCED" and not r["known"] for r in rows)
    table = cli("claims").stdout.splitlines()
    assert table[0].startswith(f"{len(rows)} claims: ") and table[0].endswith(", 2 KNOWN")
    lines = [t.split() for t in table if "table4_optim" in t or "val_loss_equivalence" in t]
    assert ["KNOWN", "table4_optim", "split_only"] in [t[:3] for t in lines]
    assert ["flash", "vs", "ref", "(60", "steps;", "paper", "20,000)"] in [t[2:9] for t in lines]
    assert "KNOWN" not in cli("claims", "--status", "NOT_REPRODUCED").stdout.splitlines()[0]
    assert cli("claims", "--fail-on", "NOT_REPRODUCED").exit_code == 0  # the untouched demo
    gated = cli("claims", "--fail-on", "KNOWN", ok=False)
    assert (gated.exit_code, gated.stderr) == (3, "claims failing --fail-on: 2 KNOWN\n")


def test_the_stratified_bootstrap_agrees_with_scipys_on_strata_as_samples(
    exp: Expectations,
) -> None:
    from tracker.analysis.claims.stochastic import stratified_bootstrap

    candidate = {"a": np.array([1.0, 2.0, 4.0]), "b": np.array([3.0, 5.0]), "c": np.array([2.0])}
    baseline = {"a": np.array([0.5, 1.5]), "b": np.array([2.0, 2.5, 2.0, 7.0])}
    # the jobs' differences weighted by n_x n_y / (n_x + n_y); job c has no baseline run
    w_a, w_b = 3 * 2 / 5, 2 * 4 / 6

    def difference(x1: Any, x2: Any, y1: Any, y2: Any, axis: int = -1) -> Any:
        d_a = x1.mean(axis) - y1.mean(axis)
        d_b = x2.mean(axis) - y2.mean(axis)
        return (w_a * d_a + w_b * d_b) / (w_a + w_b)

    samples = (candidate["a"], candidate["b"], baseline["a"], baseline["b"])
    oracle = stats.bootstrap(
        samples,
        difference,
        n_resamples=20_000,
        confidence_level=0.90,
        method="percentile",
        rng=np.random.default_rng(1),
    ).confidence_interval
    spec = next(c for c in exp.claims if c.kind == "equivalence")
    low, high = stratified_bootstrap(candidate, baseline, spec)  # type: ignore[arg-type,misc]
    assert low == pytest.approx(oracle.low, abs=0.1)
    assert high == pytest.approx(oracle.high, abs=0.1)
    one = {"a": np.array([1.0])}, {"a": np.array([2.0])}
    assert stratified_bootstrap(*one, spec) is None  # type: ignore[arg-type]


def test_the_bootstrap_redrawn_a_slice_at_a_time_gives_the_interval_of_one_draw(
    exp: Expectations, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many jobs' resamples are drawn in slices, so memory does not grow with the jobs:
    the generator's draws, and so the interval, are those of one draw of them all."""
    from tracker.analysis.claims import stochastic

    rng = np.random.default_rng(7)
    candidate = {f"job{i}": rng.normal(3.0, 0.1, 1 + i % 3) for i in range(40)}
    baseline = {f"job{i}": rng.normal(3.0, 0.1, 2 + i % 2) for i in range(40)}
    spec = next(c for c in exp.claims if c.kind == "equivalence")
    whole = stochastic.stratified_bootstrap(candidate, baseline, spec)  # type: ignore[arg-type]
    monkeypatch.setattr(stochastic, "RESAMPLED_VALUES", 97)  # slices of a few resamples
    sliced = stochastic.stratified_bootstrap(candidate, baseline, spec)  # type: ignore[arg-type]
    assert whole is not None and sliced == whole


def test_separating_metadata_names_only_keys_that_split_failing_from_passing() -> None:
    from tracker.analysis.claims.rules import separating_metadata

    meta = pl.DataFrame(
        {
            "job": ["a", "b", "c", "a", "b", "c", "a", "b", "c"],
            "key": ["lib"] * 3 + ["gpu"] * 3 + ["time"] * 3,
            "value": ["0.1", "0.1", "0.2", "A", "B", "A", "t1", "t2", "t3"],
        }
    )
    assert separating_metadata(["c"], ["a", "b"], meta) == (
        "every failing job has lib=0.2 (the others: lib=0.1)"
    )
    assert separating_metadata(["b"], ["a", "c"], meta) == (
        "every failing job has gpu=B (the others: gpu=A)"
    )
    two = meta.filter(pl.col("job") != "c")  # with two jobs, any difference is the evidence
    assert (
        separating_metadata(["b"], ["a"], two) == "every failing job has gpu=B (the others: gpu=A)"
    )
    assert separating_metadata(["a", "b"], [], meta) == ""


def test_db_copy_carries_the_derived_rows(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    make_jobs(Cli(source), tmp_path / "jobs", 2)
    cli("db", "copy", source, db_url)

    def numbers(url_or_engine: Any) -> list[tuple[Any, ...]]:
        target = url_or_engine if isinstance(url_or_engine, Engine) else api.connect(url_or_engine)
        with target.connect() as connection:
            return [
                tuple(row)
                for row in connection.execute(
                    text(
                        "SELECT job.name, n.name, n.value FROM job_number n "
                        "JOIN job ON job.id = n.job_id ORDER BY 1, 2"
                    )
                )
            ]

    assert numbers(engine) == numbers(source) and len(numbers(source)) == 2 * 3
    assert judge(engine, exp).equals(judge(api.connect(source), exp))


def test_a_claim_no_job_could_measure_is_inconclusive(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    job = write_sample_job(tmp_path / "j0", steps=STEPS, arms=())
    sweep = job / "mem_sweep.json"
    sweep.write_text(
        json.dumps([r for r in json.loads(sweep.read_text()) if r["variant"] != "flash"])
    )
    cli("ingest", str(job))
    table4 = row(judge(engine, exp), "table4_optim", "flash")
    assert (table4["status"], table4["n_jobs"], table4["expected"]) == ("INCONCLUSIVE", 0, 23.4)
    assert table4["detail"] == (
        "no job measured it; 1 jobs have it N/A, e.g. j0: flash not measured on any gpt* model: "
        "no extrapolation"
    )


def test_the_bootstrap_with_small_groups_summed_beforehand_gives_the_same_interval(
    exp: Expectations, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups of up to SUMMED_AHEAD runs gather each redraw's sum, made beforehand: the same
    numbers as summing the runs redrawn, to the bit, whatever the groups' sizes."""
    from tracker.analysis.claims import stochastic

    rng = np.random.default_rng(11)
    candidate = {f"job{i}": rng.normal(3.0, 0.1, 1 + i % 5) for i in range(60)}
    baseline = {f"job{i}": rng.normal(3.0, 0.1, 1 + (i // 2) % 4) for i in range(60)}
    candidate["job0"][0] = -0.0  # a sign the sum must keep
    spec = next(c for c in exp.claims if c.kind == "equivalence")
    ahead = stochastic.stratified_bootstrap(candidate, baseline, spec)  # type: ignore[arg-type]
    monkeypatch.setattr(stochastic, "SUMMED_AHEAD", 0)  # every group's runs summed when drawn
    drawn = stochastic.stratified_bootstrap(candidate, baseline, spec)  # type: ignore[arg-type]
    assert ahead is not None and ahead == drawn
