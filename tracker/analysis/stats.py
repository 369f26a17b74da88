"""The few statistics the claims need, from scipy.special's distribution functions.

``import scipy.stats`` takes 1.3-1.5 s, most of a one-job report; ``scipy.special`` (0.35-0.4 s
with numpy) holds the distribution functions scipy.stats itself evaluates, so each function
here follows scipy.stats' own formulas with them. tests/test_stats.py checks every one against
scipy.stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np

Alternative = Literal["two-sided", "less", "greater"]


def _scipy_special() -> ModuleType:
    # Lazy on purpose: scipy.special costs ~0.35 s, a one-job report needs none of it (a test)
    import scipy.special

    return scipy.special


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval of the success probability, ``k`` successes in
    ``n >= 1`` trials: ``scipy.stats.binomtest(k, n).proportion_ci(level)``.

    With ``alpha = (1 - level) / 2`` and X ~ Binomial(n, p), the low end solves
    ``P(X >= k) = I_p(k, n - k + 1) = alpha`` (0 when k == 0) and the high end
    ``P(X <= k) = 1 - I_p(k + 1, n - k) = alpha`` (1 when k == n), I the regularized
    incomplete beta function: ``betaincinv`` and, for the upper tail without rounding
    ``1 - alpha``, ``betainccinv``. scipy finds the same roots with brentq (absolute
    tolerance 2e-12), so the two agree to about 1e-12, not to the bit.

    When k is 0 or n the open end has a closed form, ``P(X <= 0) = (1 - p)^n`` and
    ``P(X >= n) = p^n``: a report of one job, where every count is 0 of 1 or 1 of 1, needs
    no scipy (importing it is a sixth of that command's time).
    """
    alpha = (1 - level) / 2
    if k in (0, n):
        log_root = math.log(alpha) / n  # of alpha^(1/n); expm1 keeps 1 - it exact for large n
        return (0.0, -math.expm1(log_root)) if k == 0 else (math.exp(log_root), 1.0)
    special = _scipy_special()
    return (
        float(special.betaincinv(k, n - k + 1, alpha)),
        float(special.betainccinv(k + 1, n - k, alpha)),
    )


def normal_quantile(q: float) -> float:
    """The standard normal's quantile at ``q``: ``scipy.stats.norm.ppf(q)``, i.e.
    ``scipy.special.ndtri(q)`` (-inf at 0, inf at 1, NaN outside [0, 1])."""
    return float(_scipy_special().ndtri(q))


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile at ``0 < q < 1`` with ``df`` degrees of freedom:
    ``scipy.stats.t.ppf(q, df)``, i.e. ``scipy.special.stdtrit(df, q)`` (scipy.stats sets
    the ends 0 and 1 itself)."""
    return float(_scipy_special().stdtrit(df, q))


def chi2_quantile(q: float, df: float) -> float:
    """The chi-square quantile at ``0 < q < 1`` with ``df`` degrees of freedom:
    ``scipy.stats.chi2.ppf(q, df)``, i.e. ``scipy.special.chdtri(df, 1 - q)``."""
    return float(_scipy_special().chdtri(df, 1 - q))


def f_survival(x: float, dfn: float, dfd: float) -> float:
    """P(F > x) of the F distribution with ``dfn`` and ``dfd`` degrees of freedom:
    ``scipy.stats.f.sf(x, dfn, dfd)``, i.e. ``scipy.special.fdtrc(dfn, dfd, x)``."""
    return float(_scipy_special().fdtrc(dfn, dfd, x))


@dataclass(frozen=True)
class WelchTest:
    """Statistic, degrees of freedom and p-value of scipy's ``TtestResult``."""

    statistic: float
    df: float
    pvalue: float


def _welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of means, its standard error and the Welch-Satterthwaite degrees of freedom,
    with the operations of scipy's ``ttest_ind`` (``_var``, ``_unequal_var_ttest_denom``) so
    that the results agree to the bit."""
    n1, n2 = len(a), len(b)
    # scipy's variance: the mean squared deviation times n / (n - 1), not numpy's ddof=1 sum
    with np.errstate(divide="ignore", invalid="ignore"):
        v1 = np.mean((a - a.mean()) ** 2) * (n1 / np.float64(n1 - 1))
        v2 = np.mean((b - b.mean()) ** 2) * (n2 / np.float64(n2 - 1))
        vn1, vn2 = v1 / n1, v2 / n2
        df = (vn1 + vn2) ** 2 / (vn1**2 / (n1 - 1) + vn2**2 / (n2 - 1))
    # as scipy: zero variances leave df undefined, and then any df gives the same result
    df = 1.0 if np.isnan(df) else df
    return float(a.mean() - b.mean()), float(np.sqrt(vn1 + vn2)), float(df)


def welch_ttest(a: np.ndarray, b: np.ndarray, alternative: Alternative = "two-sided") -> WelchTest:
    """Welch's t test of equal means of two samples of finite floats:
    ``scipy.stats.ttest_ind(a, b, equal_var=False, alternative=alternative)``.

    ``t = (mean(a) - mean(b)) / sqrt(s_a²/n_a + s_b²/n_b)`` with Welch-Satterthwaite's
    ``df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a - 1) + (s_b²/n_b)²/(n_b - 1))``; the
    p-value is ``2 F(-|t|)`` (two-sided), ``F(t)`` (less) or ``F(-t)`` (greater), F the
    Student t distribution function of df degrees of freedom (``scipy.special.stdtr``). As
    scipy's: NaN for a sample of one, and t = ±inf or NaN when both variances are zero.
    """
    estimate, standard_error, df = _welch(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.float64(estimate) / np.float64(standard_error)
    return _t_test(t, df, alternative)


def _t_test(t: np.float64, df: float, alternative: Alternative) -> WelchTest:
    """The p-value of Student's t on ``df`` degrees of freedom for ``alternative``."""
    stdtr = _scipy_special().stdtr
    if alternative == "less":
        pvalue = stdtr(df, t)
    elif alternative == "greater":
        pvalue = stdtr(df, -t)
    else:
        pvalue = 2 * stdtr(df, -abs(t))
    return WelchTest(float(t), df, float(pvalue))


def welch_interval(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float]:
    """Two-sided confidence interval of ``mean(a) - mean(b)`` at ``level``:
    ``scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)``, i.e.
    ``d ± t_((1 + level)/2, df) sqrt(s_a²/n_a + s_b²/n_b)`` with the quantile from
    ``scipy.special.stdtrit`` and df as in ``welch_ttest``."""
    estimate, standard_error, df = _welch(a, b)
    tail = (1 - np.float64(level)) / 2
    low, high = _scipy_special().stdtrit(df, np.array([tail, 1 - tail]))
    return float(low * standard_error + estimate), float(high * standard_error + estimate)


def mann_whitney_u(a: np.ndarray, b: np.ndarray) -> float:
    """Mann-Whitney U statistic of ``a``: ``scipy.stats.mannwhitneyu(a, b).statistic``, the
    number of pairs with a_i > b_j plus half the pairs with a_i == b_j. Counted exactly by
    binary search in the sorted ``b``, so equal to scipy's rank sum ``R_a - n_a (n_a + 1)/2``
    (half-integers, exact in floats)."""
    ordered = np.sort(b)
    below = np.searchsorted(ordered, a, side="left").sum()
    not_above = np.searchsorted(ordered, a, side="right").sum()
    return float(below + not_above) / 2


def one_sample_ttest(x: np.ndarray, target: float, alternative: Alternative) -> WelchTest:
    """Student's one-sample t test of ``mean(x)`` against ``target``, two or more finite
    values: ``scipy.stats.ttest_1samp(x, target, alternative=alternative)``, ``t = (mean(x)
    - target) / (s / sqrt(n))`` on ``n - 1`` degrees of freedom; t = ±inf (p 0 or 1) when
    every value is the same and not the target."""
    n = len(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(np.mean((x - x.mean()) ** 2) * (n / np.float64(n - 1)))
        t = (np.float64(x.mean()) - np.float64(target)) / (sd / np.sqrt(np.float64(n)))
    return _t_test(t, float(n - 1), alternative)
