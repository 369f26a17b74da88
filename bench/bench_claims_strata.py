"""Error rates and power of the comparing claims with jobs as strata, on data with real seed
spread, and whether their advice can be followed.

    python bench/bench_claims_strata.py [--sequences 2000] [--seed 40]

Seeded numpy simulation with the claims' own functions (tracker.analysis.strata and
tracker.analysis.claims.within_jobs, tracker.analysis.claims.next_runs), no database.
Final validation losses: seed sd 0.004 nats (real modded-nanogpt record logs,
tests/data/speedrun), each job at its own level (sd 0.05 between jobs, shared by both
variants of the job: another GPU, another data order), margin 0.01, level 0.90.

Printed, each as a share of sequences:

* **at the margin** (flash truly 0.01 worse): REPRODUCED at some look of 30 jobs (looked at
  after every job), for jobs of 2 flash + 2 ref runs, 1 + 1, and 1 flash + 4 ref with flash 3x
  noisier (sd 0.012); the rule that pools all runs unpaired (the old one) beside it;
* **equal, rounded to 2 decimals**: NOT_REPRODUCED at some look;
* **power** of an equal pair (REPRODUCED) after 3, 5 and 10 jobs of 2 + 2, stratified and
  pooled; the issue's example (6 jobs of the demo's level, 8 at +0.09, per-job difference
  +0.0022 with sd 0.0019);
* **planned designs** (one fixed-sample t test at N = 3, 5, 7, 10, 20 runs per arm, 1 + 1
  per job, the spread between jobs):
  power for an equal pair and false REPRODUCED at the margin, against the anytime rule read at
  the same N and looked at after every job;
* **advice**: of the inconclusive sequences after 2 jobs of 2 + 2 (and 3 jobs of 1 + 1),
  the share settled by running the advised runs once, for truly equal pairs, a 0.015
  degradation and a pair 0.0016 inside the margin; and the share given a count (not the
  too-near-the-margin line).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tracker.analysis.claims.next_runs import runs_to_settle
from tracker.analysis.claims.specs import MIN_RUNS, EquivalenceClaim
from tracker.analysis.claims.within_jobs import (
    REPRODUCES,
    Strata,
    decisions,
    judge_looks,
    looks,
)
from tracker.analysis.strata import cumulative, job_totals, rounding_floor

SD, LEVEL_SD, MARGIN, JOBS = 0.004, 0.05, 0.01, 30
SPEC = EquivalenceClaim(kind="equivalence", statement="bench", margin=MARGIN)


def draw(rng: np.random.Generator, shape: tuple[int, int], runs: tuple[int, int],
         truth: float, sds: tuple[float, float] = (SD, SD),
         rounding: float | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(sequences, jobs, runs) losses of each variant, each job at its own level."""
    level = 3.28 + LEVEL_SD * rng.standard_normal(shape)[..., None]
    x = level + truth + sds[0] * rng.standard_normal((*shape, runs[0]))
    y = level + sds[1] * rng.standard_normal((*shape, runs[1]))
    if rounding is not None:
        x, y = np.round(x / rounding) * rounding, np.round(y / rounding) * rounding
    return x, y


def stratified_looks(x: np.ndarray, y: np.ndarray, floor: float = 0.0, **kw: bool) -> np.ndarray:
    """Each look's decision code of the claim's rule (sequences x jobs); with ``anytime =
    False`` the fixed-sample t interval's at each look on its own."""
    nx, ny = np.full(x.shape[:2], float(x.shape[2])), np.full(y.shape[:2], float(y.shape[2]))
    mx, my = x.mean(axis=2), y.mean(axis=2)
    qx = ((x - mx[..., None]) ** 2).sum(axis=2)
    qy = ((y - my[..., None]) ** 2).sum(axis=2)
    totals = cumulative(job_totals(nx, mx, qx, ny, my, qy), axis=1)
    anytime = kw.get("anytime", True)
    seen = looks(totals, floor, SPEC, anytime=anytime)
    if anytime:
        return seen.codes
    return np.where(seen.usable, decisions(seen.low, seen.high, SPEC), 0)


def pooled_looks(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The old rule: every run pooled, unpaired, as one job (levels in the spread)."""
    r = x.shape[0]
    flat_x, flat_y = x.reshape(r, -1), y.reshape(r, -1)
    kx, ky = x.shape[2], y.shape[2]
    codes = np.zeros(x.shape[:2], dtype=np.int64)
    for j in range(x.shape[1]):
        a, b = flat_x[:, : (j + 1) * kx], flat_y[:, : (j + 1) * ky]
        nx, ny = np.full((r, 1), float(a.shape[1])), np.full((r, 1), float(b.shape[1]))
        mx, my = a.mean(axis=1, keepdims=True), b.mean(axis=1, keepdims=True)
        qx, qy = (
            ((a - mx) ** 2).sum(axis=1, keepdims=True),
            ((b - my) ** 2).sum(axis=1, keepdims=True),
        )
        one = looks(job_totals(nx, mx, qx, ny, my, qy), 0.0, SPEC, anytime=True)
        codes[:, j] = one.codes[:, 0]
    # the pooled rule kept no intersection: a look decides on its own
    return codes


def ever(codes: np.ndarray, code: int) -> float:
    return float((codes == code).any(axis=1).mean())


def at(codes: np.ndarray, look: int, code: int) -> float:
    return float((codes[:, look - 1] == code).mean())


def _groups(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each job's runs, mean and sum of squares about it."""
    means = np.array([g.mean() for g in groups])
    q = np.array([((g - m) ** 2).sum() for g, m in zip(groups, means, strict=True)])
    return np.array([len(g) for g in groups], dtype=np.float64), means, q


def strata_of(xs: list[np.ndarray], ys: list[np.ndarray]) -> Strata:
    """One sequence's jobs (each job's runs of each variant) as the claims see them."""
    nx, mx, qx = _groups(xs)
    ny, my, qy = _groups(ys)
    floor = rounding_floor(np.concatenate(xs + ys))
    return Strata([f"job{j + 1}" for j in range(len(xs))], nx, mx, qx, ny, my, qy, floor)


def follow_advice(rng: np.random.Generator, cases: int, truth: float,
                  start: tuple[int, tuple[int, int]]) -> tuple[float, float, int]:  # fmt: skip
    """Inconclusive sequences at ``start`` (jobs, runs per variant per job): the share the
    advised runs settle (run once, as advised: one job of m + m, or m jobs of 1 + 1 where the
    spread is between jobs), the share given a count, and how many were inconclusive."""
    jobs, runs = start
    settled = advised = inconclusive = 0
    x, y = draw(rng, (cases, jobs), runs, truth)
    for i in range(cases):
        data = strata_of(list(x[i]), list(y[i]))
        judged = judge_looks(data, SPEC, anytime=True)
        if judged.decision or min(data.nx.sum(), data.ny.sum()) < MIN_RUNS:
            continue
        inconclusive += 1
        more = runs_to_settle(data, judged, SPEC, anytime=True)
        if more is None:
            continue
        advised += 1
        if runs[0] > 1 and runs[1] > 1:  # one more job of `more` runs per variant
            nx, ny = draw(rng, (1, 1), (more, more), truth)
        else:  # `more` jobs of one run per variant
            nx, ny = draw(rng, (1, more), (1, 1), truth)
        after = strata_of(list(x[i]) + list(nx[0]), list(y[i]) + list(ny[0]))
        settled += judge_looks(after, SPEC, anytime=True).decision != 0
    return settled / max(inconclusive, 1), advised / max(inconclusive, 1), inconclusive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    rng, r = np.random.default_rng(args.seed), args.sequences
    start = time.process_time()
    print(f"{r} sequences, seed {args.seed}, seed sd {SD}, job level sd {LEVEL_SD}")
    print("\n| at the margin (0.01 worse), 30 looks | REPRODUCED at some look | pooled rule |")
    for label, runs, sds in (
        ("2 flash + 2 ref a job", (2, 2), (SD, SD)),
        ("1 flash + 1 ref a job", (1, 1), (SD, SD)),
        ("1 flash (sd 0.012) + 4 ref a job", (1, 4), (3 * SD, SD)),
    ):
        x, y = draw(rng, (r, JOBS), runs, MARGIN, sds)
        print(f"| {label} | {ever(stratified_looks(x, y), REPRODUCES):.3f} | "
              f"{ever(pooled_looks(x, y), REPRODUCES):.3f} |")  # fmt: skip
    x, y = draw(rng, (r, JOBS), (2, 2), 0.0, rounding=0.01)
    floor = 0.01**2 / 12
    print(f"| equal, rounded to 0.01: NOT_REPRODUCED at some look | "
          f"{ever(stratified_looks(x, y, floor), -1):.3f} | |")  # fmt: skip
    x, y = draw(rng, (r, 10), (2, 2), 0.0)
    codes, pooled = stratified_looks(x, y), pooled_looks(x, y)
    print("\n| equal pair, 2 + 2 a job | after 3 jobs | 5 jobs | 10 jobs |")
    for name, c in (("stratified", codes), ("pooled", pooled)):
        print(f"| {name} | " + " | ".join(f"{at(c, k, REPRODUCES):.3f}" for k in (3, 5, 10)) + " |")
    # the example: 6 jobs near 3.26, 8 more at +0.09, per-job difference +0.0022
    demo_x, demo_y = draw(rng, (r, 6), (2, 2), 0.0022, (0.0013, 0.0013))
    more_x, more_y = draw(rng, (r, 8), (2, 2), 0.0022, (0.0013, 0.0013))
    x = np.concatenate([demo_x, more_x + 0.09], axis=1)
    y = np.concatenate([demo_y, more_y + 0.09], axis=1)
    print(f"| 6 jobs + 8 at +0.09, difference +0.0022: REPRODUCED at the last look | "
          f"stratified {at(stratified_looks(x, y), 14, REPRODUCES):.3f} | "
          f"pooled {at(pooled_looks(x, y), 14, REPRODUCES):.3f} | |")  # fmt: skip
    print(
        "\n| runs per arm (1 + 1 a job) | planned: power | planned: false REPRODUCED | "
        "anytime at N: power | anytime, every look to N: false REPRODUCED |"
    )
    for n in (3, 5, 7, 10, 20):
        eq_x, eq_y = draw(rng, (r, n), (1, 1), 0.0)
        m_x, m_y = draw(rng, (r, n), (1, 1), MARGIN)
        fixed_eq = stratified_looks(eq_x, eq_y, anytime=False)[:, -1]
        fixed_m = stratified_looks(m_x, m_y, anytime=False)[:, -1]
        any_eq, any_m = stratified_looks(eq_x, eq_y), stratified_looks(m_x, m_y)
        print(f"| {n} | {(fixed_eq == REPRODUCES).mean():.3f} | "
              f"{(fixed_m == REPRODUCES).mean():.3f} | {at(any_eq, n, REPRODUCES):.3f} | "
              f"{ever(any_m, REPRODUCES):.3f} |")  # fmt: skip
    print("\n| inconclusive at | truth | settled by the advice | given a count | cases |")
    for begin in ((2, (2, 2)), (3, (1, 1))):
        for truth, label in ((0.0, "equal"), (0.015, "0.015 worse"), (0.0084, "0.0016 inside")):
            share, counted, cases = follow_advice(rng, r // 4, truth, begin)
            print(f"| {begin[0]} jobs of {begin[1][0]} + {begin[1][1]} | {label} | "
                  f"{share:.3f} | {counted:.3f} | {cases} |")  # fmt: skip
    print(f"\n{time.process_time() - start:.0f} s of CPU")


if __name__ == "__main__":
    main()
