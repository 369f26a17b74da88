"""The deterministic claims: bytes/param and GiB figures judged job by job, and probes that
failed in some jobs; for a claim that holds in some jobs only, the metadata that separates
the failing jobs from the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from tracker.analysis.checks import BPP, CLAIM_OF, GPT2_124M, TABLE4, Check
from tracker.analysis.claims.common import (
    INCONCLUSIVE,
    MIXED,
    NOT_REPRODUCED,
    RANGE,
    REPRODUCED,
    Claim,
    Evidence,
    finite_float,
    num,
    some_jobs,
)
from tracker.analysis.claims.specs import MemoryClaim
from tracker.analysis.stats import clopper_pearson
from tracker.analysis.verdict import FAIL, KNOWN, PASS

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

# Per-job verdict checks judged job by job, and the claim each one feeds.
DETERMINISTIC = CLAIM_OF
COMPONENT_WORDS = {
    "params": "parameters take",
    "state": "optimizer state takes",
    "grads": "gradients take",
}
UNSET = "(unset)"
TIME_KEY = "time"  # tracker.store.catalog.TIME_KEY; not imported, this module reads no database


def separating_metadata(failing: Sequence[str], passing: Sequence[str], meta: pl.DataFrame) -> str:
    """'every failing job has k=v (the others: k=w)' for each metadata key whose values
    among the failing jobs are disjoint from those among the passing ones; '' if none.
    The ``time`` key is left out, and so, among three or more jobs, is a key with a different
    value for every job: it tells the jobs apart, not the failing ones from the others."""
    if not failing or not passing:
        return ""
    values: dict[str, dict[str, str]] = {}
    for job, key, value in meta.select("job", "key", "value").iter_rows():
        values.setdefault(key, {})[job] = value
    found = []
    jobs = len(failing) + len(passing)
    for key in sorted(values):
        if key == TIME_KEY or (jobs > 2 and len(set(values[key].values())) == jobs):
            continue
        bad = {values[key].get(job, UNSET) for job in failing}
        good = {values[key].get(job, UNSET) for job in passing}
        if not bad & good:
            found.append(
                f"every failing job has {key}={'/'.join(sorted(bad))} "
                f"(the others: {key}={'/'.join(sorted(good))})"
            )
    return "; ".join(found)


def _statement(claim: str, subject: str, expected: float | None, tolerance: float | None) -> str:
    exp, tol = num(expected), num(tolerance, 2)
    if claim.startswith("bpp_"):
        what = COMPONENT_WORDS[claim.removeprefix("bpp_")]
        return (
            f"{subject}: its {what} {exp} bytes per parameter "
            f"(± {tol}, with the fixed overhead fitted over model sizes)"
        )
    part = "parameters take" if claim.endswith("params") else "optimizer state takes"
    if claim.startswith("table4_"):
        return (
            f"Extrapolated to the paper's Table 4 model, {subject}'s {part} {exp} GiB (± {tol} GiB)"
        )
    return f"{subject}: its {part} {exp} GiB as in the paper's appendix (± {tol} GiB)"


def _text(words: Sequence[str]) -> list[str]:
    """Checks or statuses as plain text: polars finds text, not a Python enum, among the
    categories a frame of many jobs' verdicts keeps them as."""
    return [str(word) for word in words]


def _deterministic_groups(verdicts: pl.DataFrame, checks: list[Check]) -> pl.DataFrame:
    """One row per deterministic check of ``checks`` and subject, in the order they first
    appear: how many jobs judged it, how many passed and which failed, the spread of the
    measured values and the expected value."""
    rows = verdicts.with_row_index("row")
    # a check at a time: a copy of thousands of jobs' verdicts at once is tens of MB; a
    # verdict without an expected value has nothing to reproduce (no analytic bytes/param)
    groups = [
        _aggregated(rows.filter((pl.col("check") == check) & pl.col("expected").is_not_null()))
        for check in dict.fromkeys(_text(checks))
    ]
    found = pl.concat(groups) if groups else _aggregated(rows.clear())
    return found.sort("first_row").drop("first_row")


def _aggregated(checked: pl.DataFrame) -> pl.DataFrame:
    """``_deterministic_groups`` of the verdicts of one check."""
    # one aggregation for all of its subjects: a filter per claim costs more than judging it
    # KNOWN: outside tolerance for a reason the expectations file names; the paper's number is
    # still not reproduced, so it counts against the claim, and the claim says why
    judged = pl.col("status").is_in(_text([PASS, FAIL, KNOWN]))
    measured = pl.col("measured").filter(
        judged & pl.col("measured").is_not_null() & pl.col("measured").is_not_nan()
    )
    return checked.group_by("check", "subject", maintain_order=True).agg(
        n=judged.sum(),
        passed=(pl.col("status") == PASS).sum(),
        failing=pl.col("job").filter(pl.col("status").is_in(_text([FAIL, KNOWN]))),
        known=(pl.col("status") == KNOWN).sum(),
        known_reason=pl.col("known").filter(pl.col("status") == KNOWN).first(),
        median=measured.median(),
        low=measured.min(),
        high=measured.max(),
        expected=pl.col("expected").filter(judged).median(),
        expected_unjudged=pl.col("expected").median(),
        tolerance=pl.col("tolerance").filter(judged).median(),
        jobs=pl.len(),
        first_job=pl.col("job").first(),
        first_detail=pl.col("detail").first(),
        first_row=pl.col("row").first(),
    )


def _unjudged_claim(name: str, subject: str, group: dict[str, Any]) -> Claim:
    """A claim no job measured: every job has it N/A."""
    expected = finite_float(group["expected_unjudged"])
    return Claim(
        name,
        subject,
        _statement(name, subject, expected, None),
        INCONCLUSIVE,
        0,
        0,
        expected=expected,
        detail=f"no job measured it; {group['jobs']} jobs have it N/A, e.g. "
        f"{group['first_job']}: {group['first_detail']}",
    )


def _judged_claim(
    name: str, subject: str, group: dict[str, Any], passing: list[str], meta: pl.DataFrame
) -> Claim:
    """A claim some jobs measured: reproduced when none failed, not when none passed
    (``passing``: the jobs that passed, where some failed)."""
    failing = group["failing"]
    expected, tolerance = finite_float(group["expected"]), finite_float(group["tolerance"])
    n = group["n"]
    if not failing:
        status, why = REPRODUCED, f"within tolerance in all {n} jobs"
    elif not group["passed"]:
        status, why = NOT_REPRODUCED, f"outside tolerance in all {n} jobs"
    else:
        status = MIXED
        why = f"outside tolerance in {len(failing)} of {n} jobs: {some_jobs(failing)}"
        separated = separating_metadata(failing, passing, meta)
        why += f"; {separated}" if separated else "; no metadata key separates them"
    if group["known"]:
        why += f"; a known difference (KNOWN) in {group['known']} of them: {group['known_reason']}"
    median, low, high = (finite_float(group[key]) for key in ("median", "low", "high"))
    detail = f"{why}; median {num(median)}, range {num(low)} to {num(high)}"
    return Claim(
        name,
        subject,
        _statement(name, subject, expected, tolerance),
        status,
        n,
        n,
        median,
        low,
        high,
        expected,
        tolerance,
        failing,
        detail,
        interval=RANGE,
        known=group["known"] == n,
    )


# The deterministic checks of each part of the ``memory`` claim kind.
MEMORY_CHECKS = {
    "bytes_per_param": list(BPP.values()),
    "table4": list(TABLE4.values()),
    "gpt2_124m": list(GPT2_124M.values()),
}


def judge_memory(spec: MemoryClaim, evidence: Evidence, exp: Expectations) -> list[Claim]:
    """The per-job memory checks ``spec`` lists, judged job by job, then failed probes."""
    checks = [check for part in spec.checks for check in MEMORY_CHECKS.get(part, [])]
    claims = deterministic_claims(evidence.verdicts, evidence.meta, checks)
    if "probe_failures" in spec.checks:
        claims += probe_failure_claims(evidence.verdicts, evidence.meta)
    return claims


def deterministic_claims(
    verdicts: pl.DataFrame, meta: pl.DataFrame, checks: list[Check] | None = None
) -> list[Claim]:
    """One claim per deterministic check (of ``checks``, else all) and subject, judged job
    by job."""
    claims = []
    chosen = list(DETERMINISTIC) if checks is None else checks
    for group in _deterministic_groups(verdicts, chosen).iter_rows(named=True):
        name, subject = DETERMINISTIC[group["check"]], group["subject"]
        if group["n"] == 0:
            claims.append(_unjudged_claim(name, subject, group))
        else:
            passing = _passing(verdicts, group) if group["failing"] and group["passed"] else []
            claims.append(_judged_claim(name, subject, group, passing, meta))
    return claims


def _passing(verdicts: pl.DataFrame, group: dict[str, Any]) -> list[str]:
    """The jobs that passed a group's check and subject, in job order: asked only where
    some failed, as every group's would be a list of thousands of names."""
    found = verdicts.filter(
        (pl.col("check") == group["check"])
        & (pl.col("subject") == group["subject"])
        & pl.col("expected").is_not_null()
        & (pl.col("status") == PASS)
    )
    return found["job"].to_list()


def probe_failure_claims(verdicts: pl.DataFrame, meta: pl.DataFrame) -> list[Claim]:
    """Per (model, variant) whose probe failed in some job: in how many of the jobs that
    probed it (a success shows as its bytes/param verdicts)."""
    # the three columns it reads: a copy of thousands of jobs' verdicts is tens of MB
    probed = (
        verdicts.select("job", "check", "subject")
        .filter(pl.col("check").is_in(_text([Check.BPP_PARAMS, Check.PROBE_FAILED])))
        .unique(["job", "subject"], keep="last", maintain_order=True)
    )
    failed_subjects = probed.filter(pl.col("check") == Check.PROBE_FAILED)["subject"].unique(
        maintain_order=True
    )
    claims = []
    for subject in failed_subjects.to_list():
        rows = probed.filter(pl.col("subject") == subject)
        failing = rows.filter(pl.col("check") == Check.PROBE_FAILED)["job"].to_list()
        passing = rows.filter(pl.col("check") != Check.PROBE_FAILED)["job"].to_list()
        n, k = rows.height, len(failing)
        low, high = clopper_pearson(k, n, 0.95)
        status = MIXED if passing else NOT_REPRODUCED
        detail = f"the probe failed in {k} of the {n} jobs that probed it: {some_jobs(failing)}"
        separated = separating_metadata(failing, passing, meta)
        if separated:
            detail += f"; {separated}"
        claims.append(
            Claim(
                "probe_failures",
                subject,
                f"{subject} fits in the probe's GPU memory",
                status,
                n,
                n,
                k / n,
                low,
                high,
                0.0,
                None,
                failing,
                detail + "; estimate: the share of jobs where it failed (95% binomial interval)",
                interval="95% binomial",
            )
        )
    return claims
