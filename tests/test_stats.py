"""tracker.analysis.stats against the scipy.stats calls each function stands for.

Exact equality (``np.testing.assert_array_equal``, NaN equal to NaN) where the module
performs scipy's own floating-point operations with the same scipy.special function: the
normal quantile (``ndtri``), Welch's test and interval (scipy's ``_var``,
``_unequal_var_ttest_denom``, ``stdtr``, ``stdtrit``) and the Mann-Whitney U (a count of
half-integers, exact either way). The Clopper-Pearson bounds are beta quantiles here but
brentq roots in scipy, found to an absolute tolerance of 2e-12: they agree to that, not to
the bit, and where they differ the beta quantile is the exact root. With 0 or n successes
the open end is a closed form, which agrees with scipy to brentq's tolerance too.

The last tests check the point of the module: a process judging claims imports no
scipy.stats, and the report of one job, where every count is 0 or 1 of 1, no scipy at all.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import stats

from tests.conftest import Cli
from tracker.analysis.stats import (
    Alternative,
    chi2_quantile,
    clopper_pearson,
    f_survival,
    mann_whitney_u,
    normal_quantile,
    t_quantile,
    welch_interval,
    welch_ttest,
)
from tracker.sample import write_sample_job
from tracker.store.schema import open_database

BRENTQ_XTOL = 2e-12  # scipy.optimize.brentq's default, which binomtest's proportion_ci uses
ALTERNATIVES: tuple[Alternative, ...] = ("two-sided", "less", "greater")

# Samples of finite floats: arbitrary ones at scales from 1e-9 to 1e9, and small integers,
# which give ties, equal samples and, for equal values, zero variance.
values = st.one_of(
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False),
    st.integers(-3, 3).map(float),
)
scales = st.sampled_from([1e-9, 1e-3, 1.0, 1e3, 1e9])


def samples(min_size: int) -> st.SearchStrategy[np.ndarray]:
    return st.builds(
        lambda items, scale: np.array(items) * scale,
        st.lists(values, min_size=min_size, max_size=40),
        scales,
    )


@st.composite
def trials(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.one_of(st.integers(1, 50), st.integers(1, 100_000)))
    return draw(st.one_of(st.sampled_from([0, n]), st.integers(0, n))), n


levels = st.one_of(st.sampled_from([0.9, 0.95]), st.floats(min_value=0.5, max_value=0.999))


def ours_and_scipys(a: np.ndarray, b: np.ndarray, alternative: Alternative) -> tuple[tuple, tuple]:
    """Statistic, degrees of freedom and p-value of the Welch test, ours and scipy's."""
    ours = welch_ttest(a, b, alternative)
    theirs = stats.ttest_ind(a, b, equal_var=False, alternative=alternative)
    return (ours.statistic, ours.df, ours.pvalue), (theirs.statistic, theirs.df, theirs.pvalue)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # scipy's, on zero variance
@given(samples(1), samples(1))
@example(np.array([1.0, 2.0]), np.array([3.0, 5.0]))  # n = 2
@example(np.array([3.0]), np.array([1.0, 2.0]))  # a sample of one: NaN
@example(np.array([2.5, 2.5, 2.5]), np.array([2.5, 2.5]))  # zero variances, equal: NaN
@example(np.array([2.5, 2.5, 2.5]), np.array([1.0, 1.0]))  # zero variances, apart: t = inf
@example(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))  # equal samples: t = 0
def test_welch_is_scipys_ttest_ind_to_the_bit(a: np.ndarray, b: np.ndarray) -> None:
    for alternative in ALTERNATIVES:
        np.testing.assert_array_equal(*ours_and_scipys(a, b, alternative))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(samples(1), samples(1), levels)
@example(np.array([2.5, 2.5]), np.array([1.0, 1.0]), 0.9)  # zero variances: a point
def test_welch_interval_is_scipys_to_the_bit(a: np.ndarray, b: np.ndarray, level: float) -> None:
    theirs = stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)
    np.testing.assert_array_equal(welch_interval(a, b, level), (theirs.low, theirs.high))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(samples(1), samples(1))
@example(np.array([1.0, 1.0]), np.array([1.0, 1.0, 1.0]))  # all tied
def test_mann_whitney_u_is_scipys_to_the_bit(a: np.ndarray, b: np.ndarray) -> None:
    assert mann_whitney_u(a, b) == stats.mannwhitneyu(a, b).statistic


def test_large_samples_to_the_bit() -> None:
    rng = np.random.default_rng(11)
    a = np.round(rng.normal(3.26, 0.002, 10_000), 4)  # rounded: many ties
    b = rng.normal(3.27, 0.004, 3_000)
    for alternative in ALTERNATIVES:
        np.testing.assert_array_equal(*ours_and_scipys(a, b, alternative))
    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
    assert welch_interval(a, b, 0.9) == (interval.low, interval.high)
    assert mann_whitney_u(a, b) == stats.mannwhitneyu(a, b).statistic


@given(st.floats(min_value=0, max_value=1))
@example(0.0)
@example(1.0)
@example(0.5)
@example(5e-324)
def test_normal_quantile_is_norm_ppf_to_the_bit(q: float) -> None:
    np.testing.assert_array_equal(normal_quantile(q), stats.norm.ppf(q))


@given(st.floats(0, 1, exclude_min=True, exclude_max=True), st.integers(1, 10_000))
@example(0.95, 1)
@example(0.5, 3)
def test_t_quantile_is_t_ppf_to_the_bit(q: float, df: int) -> None:
    np.testing.assert_array_equal(t_quantile(q, df), stats.t.ppf(q, df))


@given(st.floats(0.001, 0.999), st.integers(1, 1_000))
@example(0.99, 1)
def test_chi2_quantile_is_chi2_ppf(q: float, df: int) -> None:
    np.testing.assert_allclose(chi2_quantile(q, df), stats.chi2.ppf(q, df), rtol=1e-12)


@given(st.floats(0, 1e6), st.integers(1, 20), st.integers(1, 200))
@example(0.0, 1, 1)
def test_f_survival_is_f_sf(x: float, dfn: int, dfd: int) -> None:
    np.testing.assert_allclose(f_survival(x, dfn, dfd), stats.f.sf(x, dfn, dfd), rtol=1e-12)


@given(trials(), levels)
@example((0, 1), 0.95)
@example((1, 1), 0.95)
@example((0, 100_000), 0.95)
@example((100_000, 100_000), 0.95)
def test_clopper_pearson_is_binomtests_interval_to_brentqs_tolerance(
    trial: tuple[int, int], level: float
) -> None:
    k, n = trial
    theirs = stats.binomtest(k, n).proportion_ci(level)
    low, high = clopper_pearson(k, n, level)
    assert (low, high) == pytest.approx((theirs.low, theirs.high), rel=0, abs=BRENTQ_XTOL)
    # the ends scipy sets rather than solves for are the same numbers
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)


def test_a_tiny_clopper_pearson_bound_is_the_exact_root() -> None:
    """1 success in 100,000 trials at 99.9999%: the low end solves P(X >= 1) = 1 - (1 - p)^n
    = alpha; scipy's brentq root is 1.3e-13 away, 2.5% of the bound."""
    k, n, level = 1, 100_000, 0.999999
    alpha = (1 - level) / 2
    low, _ = clopper_pearson(k, n, level)
    at_least_one = -math.expm1(n * math.log1p(-low))
    assert at_least_one == pytest.approx(alpha, rel=1e-12)
    assert stats.binomtest(k, n).proportion_ci(level).low == pytest.approx(low, rel=0.03)


CLAIMS_IN_A_FRESH_PROCESS = """
import json, sys
from sqlalchemy.orm import Session
from tracker.analysis.expectations import load_expectations
from tracker.queries.claims import claims
from tracker.queries.selection import JobSelection
from tracker.store.schema import open_database

with Session(open_database(sys.argv[1])) as session:
    frame = claims(session, JobSelection(), load_expectations())
found = {"claims": sorted(set(frame["claim"])), "scipy.stats": "scipy.stats" in sys.modules}
print(json.dumps(found))
"""


def test_judging_claims_imports_no_scipy_stats(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    open_database(url).dispose()
    job = write_sample_job(
        tmp_path / "job1", steps=60, arms=("ref_s0", "ref_s1", "flash_s0", "flash_s1")
    )
    Cli(url)("ingest", str(job))
    child = subprocess.run(
        [sys.executable, "-c", CLAIMS_IN_A_FRESH_PROCESS, url],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(child.stdout)
    # the statistics ran: a binomial interval, Welch's test and the Mann-Whitney U
    assert {"probe_failures", "tracks_within_seed_noise", "val_loss_equivalence"} <= set(
        found["claims"]
    )
    assert found["scipy.stats"] is False


REPORT_IN_A_FRESH_PROCESS = """
import json, sys
from tracker.cli import app

try:
    app(sys.argv[1:])
except SystemExit as exit:
    print(json.dumps({"exit": exit.code, "scipy": "scipy" in sys.modules}))
"""


def test_the_report_of_one_job_imports_no_scipy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    open_database(url).dispose()
    Cli(url)("ingest", str(write_sample_job(tmp_path / "job1", steps=60)))
    out = tmp_path / "report"
    child = subprocess.run(
        [sys.executable, "-c", REPORT_IN_A_FRESH_PROCESS, "--db", url, "report", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(child.stdout.splitlines()[-1]) == {"exit": 0, "scipy": False}
    # the sample job's failed probe, judged with the closed form: 1 failure in 1 job
    claims = json.loads((out / "claims.json").read_text())
    failures = next(row for row in claims if row["claim"] == "probe_failures")
    assert (failures["n_jobs"], failures["estimate"]) == (1, 1.0)
    assert (failures["ci_low"], failures["ci_high"]) == (pytest.approx(0.025, rel=1e-15), 1.0)
