"""The claims of a study judged on every job's evidence together (docs/claims.md).

The registry of claim kinds: each kind's parameters are a pydantic model (``specs.SPECS``,
what a study file's ``[[claims]]`` picks) and its rows come from its judge function
(``JUDGES``); a study judges exactly the claims its file lists, in their order.

Pure statistics over polars frames; the statistics are scipy.stats': Welch's interval
(``ttest_ind(equal_var=False).confidence_interval``), the equivalence test as two one-sided
Welch tests, ``binomtest(k, n).proportion_ci`` and ``mannwhitneyu`` for the probability of
improvement, evaluated by tracker.analysis.stats with scipy.special's distribution functions
and checked against scipy.stats by tests/test_stats.py: importing scipy.stats alone takes
1.3-1.5 s, most of a one-job report. The bootstrap resamples within jobs, which scipy's does
not offer (see ``stratified_bootstrap``).

Inputs, one row per job and item, jobs already filtered and de-duplicated by the caller:

* ``verdicts``: ``job``, ``check``, ``subject``, ``measured``, ``expected``, ``tolerance``,
  ``status``, ``detail``: every job's own verdicts;
* ``numbers``: ``job``, ``ema_delta``, ``seed_noise``, ``diverged_at``;
* ``runs``: ``job``, ``arm``, ``variant``, ``val_loss``, ``diverged`` and, when known,
  ``steps`` (the run's length), ``stopped`` (why it stopped early, else null) and ``hours``
  (its logged wall time);
* ``meta``: ``job``, ``key``, ``value``: to say which metadata separates failing jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from tracker.analysis.claims.common import COLUMNS, Claim, Evidence
from tracker.analysis.claims.compare import judge_compared
from tracker.analysis.claims.rules import judge_memory
from tracker.analysis.claims.specs import (
    SPECS,
    ClaimSpec,
    Compared,
    DivergesClaim,
    EquivalenceClaim,
    MemoryClaim,
    NoninferiorityClaim,
    ThresholdClaim,
    TracksClaim,
)
from tracker.analysis.claims.stochastic import ablation_diverges, tracks_within_seed_noise
from tracker.analysis.claims.threshold import judge_threshold

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

__all__ = ["COLUMNS", "JUDGES", "judge_claims", "run_metrics"]


# what the runs may carry beyond the columns above: run length, why a run is cut short, hours
RUN_EXTRAS = {"steps": pl.Int64, "stopped": pl.String, "hours": pl.Float64}
# the kinds judged on the runs (the others on the jobs' verdicts): none without a run
ON_RUNS = (Compared, ThresholdClaim, TracksClaim, DivergesClaim)


def _with_roles(numbers: pl.DataFrame, runs: pl.DataFrame, exp: Expectations) -> pl.DataFrame:
    """``numbers`` with each job's baseline run length (``steps``) and, when a run of the
    tracking check's roles stopped early, why (``stopped``)."""
    t = exp.training
    roles = runs.filter(pl.col("arm").is_in([t.baseline, t.candidate, t.seed_twin]))
    per_job = roles.group_by("job").agg(
        steps=pl.col("steps").filter(pl.col("arm") == t.baseline).first(),
        stopped=pl.concat_str("arm", pl.col("stopped"), separator=" ").drop_nulls().str.join("; "),
    )
    per_job = per_job.with_columns(
        pl.when(pl.col("stopped") == "").then(None).otherwise(pl.col("stopped")).alias("stopped")
    )
    return numbers.join(per_job, on="job", how="left", maintain_order="left")


def run_metrics(exp: Expectations) -> set[str]:
    """The runs' final metrics the claims of ``exp`` judge (``val_loss`` is always there)."""
    return {spec.metric for spec in exp.claims if isinstance(spec, Compared | ThresholdClaim)}


def _tracks(spec: TracksClaim, evidence: Evidence, exp: Expectations) -> list[Claim]:
    return [tracks_within_seed_noise(_with_roles(evidence.numbers, evidence.runs, exp), spec, exp)]


def _diverges(spec: DivergesClaim, evidence: Evidence, exp: Expectations) -> list[Claim]:
    return [ablation_diverges(evidence.runs, evidence.numbers, spec, exp)]


# The registry of claim kinds: each kind's parameters (specs.SPECS) and its judge function,
# which gives the kind's rows over the jobs' evidence.
Judge = Callable[[Any, Evidence, "Expectations"], list[Claim]]
JUDGES: dict[type[ClaimSpec], Judge] = {
    MemoryClaim: judge_memory,
    EquivalenceClaim: judge_compared,
    NoninferiorityClaim: judge_compared,
    ThresholdClaim: judge_threshold,
    TracksClaim: _tracks,
    DivergesClaim: _diverges,
}
assert set(JUDGES) == set(SPECS.values()), "every kind has its judge"


def judge_claims(
    verdicts: pl.DataFrame,
    numbers: pl.DataFrame,
    runs: pl.DataFrame,
    meta: pl.DataFrame,
    exp: Expectations,
) -> pl.DataFrame:
    """Every claim the study lists (``exp.claims``, in its order) over the given jobs, as
    COLUMNS; the claims judged on runs only when the jobs have runs."""
    runs = runs.with_columns(
        pl.lit(None, dtype).alias(name)
        for name, dtype in RUN_EXTRAS.items()
        if name not in runs.columns
    )
    evidence = Evidence(verdicts, numbers, runs, meta)
    claims: list[Claim] = []
    for spec in exp.claims:
        if runs.height or not isinstance(spec, ON_RUNS):
            claims += JUDGES[type(spec)](spec, evidence, exp)
    rows = [{name: getattr(claim, name) for name in COLUMNS} for claim in claims]
    return pl.DataFrame(rows, schema=COLUMNS)
