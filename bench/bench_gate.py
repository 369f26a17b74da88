"""The regression gate's error rates, simulated: how often ``compare --fail-on-regression``
fires on two jobs drawn from the same distribution (a false alarm) and on a second job that
really shifted (a catch), one check at a time.

    python bench/bench_gate.py [--trials 4000] [--seed 20261203]

Each trial draws the comparable jobs and the two compared ones and judges the second with
``tracker.analysis.gate.judge_rise``, the function ``tracker compare`` calls, with the
packaged ``[gate]``. A pair fires when any of its rows of the check regresses; a false alarm
counts both directions of a same-distribution pair (a -> b and b -> a).

The validation loss as real jobs give it: 2 ref and 2 flash seeds a job, each seed's final
loss spread by ``sd`` (0.004 nats in real public GPT-2 record runs: a per-job difference
flash_s - mean(ref) of sd 0.0049), no spread between jobs beyond it unless a case says so;
the rows flash_s0 and flash_s1 share the level, the tolerance is the claims' 0.01 margin and
a row fails its own check as the per-job check decides (its interval at 90% with the job's
own seeds entirely beyond the margin). Bytes/param as gpt-124m/flash's optimizer state:
3.153 between identical jobs give or take 0.003 (allocator rounding), expected 3.125 with a
tolerance of 0.072; the split history is gpt-30m/flash's (3.22, tolerance 0.14) with one GPU's
jobs 0.08 B/param higher (a larger fixed overhead). A faulty job is one more comparable job
carrying a fault (+0.1 nats, +0.5 B/param). The false-split rate is how often
``find_split`` splits a same-distribution history by a key (``gpu``) given at random.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tracker.analysis.expectations import load_expectations
from tracker.analysis.gate import Rise, Yardstick, judge_rise
from tracker.analysis.gate_split import find_split, levels_of
from tracker.analysis.stats import t_quantile

SEED_SDS = (0.001, 0.003, 0.004)
MARGIN = 0.01  # [training.val_loss] candidate_margin: the validation loss's tolerance
CONFIDENCE = 0.90  # [claims] confidence: the per-job check's interval
BPP, BPP_SD, BPP_EXPECTED, BPP_TOL = 3.153, 0.003, 3.125, 0.072
SMALL, SMALL_TOL, SMALL_GAP = 3.22, 0.14, 0.08
GATE = load_expectations().gate


@dataclass(frozen=True)
class Job:
    values: list[float]  # one per row of the check
    failed: list[bool]
    seeds: tuple[float, int]
    gpu: str = "A100"


def loss_job(rng: np.random.Generator, sd: float, shift: float = 0.0, between: float = 0.0) -> Job:
    """A job's flash_s0 and flash_s1 rows: each flash seed minus the mean of 2 ref seeds."""
    level = rng.normal(0.0, between) if between else 0.0
    ref = rng.normal(0.0, sd, 2)
    flash = rng.normal(level + shift, sd, 2)
    values = [float(f - ref.mean()) for f in flash]
    ss = float(((ref - ref.mean()) ** 2).sum() + ((flash - flash.mean()) ** 2).sum())
    half = t_quantile(1 - (1 - CONFIDENCE) / 2, 2) * math.sqrt(ss / 2) * math.sqrt(1.5)
    return Job(values, [v - half > MARGIN for v in values], (ss, 2))


def bpp_job(
    rng: np.random.Generator, shift: float = 0.0, base: float = BPP, tol: float = BPP_TOL
) -> Job:
    value = float(rng.normal(base + shift, BPP_SD))
    return Job([value], [abs(value - BPP_EXPECTED) > tol], (0.0, 0))


@dataclass(frozen=True)
class Case:
    name: str
    draw: Callable[[np.random.Generator, float], tuple[list[Job], Job, Job]]  # others, a, b
    shift: bool  # b shifted: a catch; else both directions count
    tolerance: float
    seeds: bool = True
    keys: bool = True  # the jobs' gpu key looked at (a split detected)


def _judged(others: Sequence[Job], a: Job, b: Job, case: Case) -> bool:
    tolerance, seeds = case.tolerance, case.seeds
    levels = levels_of([{"gpu": job.gpu} for job in others]) if case.keys else {}
    names = np.array([""] * len(others), dtype=object)
    spread = np.array([job.seeds for job in others], dtype=np.float64)
    fired = False
    for row in range(len(b.values)):
        values = np.array([job.values[row] for job in others])
        stick = Yardstick(names, values, "", levels, spread)
        rise = Rise(
            a.values[row],
            b.values[row],
            tolerance,
            failed=b.failed[row],
            seed_factor=1.5 if seeds else None,
            rows=len(b.values),
            meta={"gpu": b.gpu},
        )
        judged = judge_rise(rise, stick, GATE)
        fired |= bool(judged and judged.rose)
    return fired


def rate(case: Case, sd: float, trials: int, rng: np.random.Generator) -> float:
    fired = judged = 0
    for _ in range(trials):
        others, a, b = case.draw(rng, sd)
        pairs = [(a, b)] if case.shift else [(a, b), (b, a)]
        for first, second in pairs:
            fired += _judged(others, first, second, case)
            judged += 1
    return fired / judged


def loss_case(
    n: int, shift: float = 0.0, faulty: bool = False, unlike: int = 0, between: float = 0.0
) -> Callable[[np.random.Generator, float], tuple[list[Job], Job, Job]]:
    def draw(rng: np.random.Generator, sd: float) -> tuple[list[Job], Job, Job]:
        others = [loss_job(rng, sd, between=between) for _ in range(n)]
        others += [loss_job(rng, sd, 0.1)] if faulty else []
        others += [loss_job(rng, sd, 0.01) for _ in range(unlike)]  # another run length
        return others, loss_job(rng, sd, between=between), loss_job(rng, sd, shift, between)

    return draw


def bpp_case(
    n: int, shift: float = 0.0, faulty: bool = False, split: bool = False
) -> Callable[[np.random.Generator, float], tuple[list[Job], Job, Job]]:
    base, tol = (SMALL, SMALL_TOL) if split else (BPP, BPP_TOL)

    def job(rng: np.random.Generator, shift: float = 0.0, gpu: str = "A100") -> Job:
        gap = SMALL_GAP if gpu == "H100" else 0.0
        drawn = bpp_job(rng, shift + gap, base, tol)
        return Job(drawn.values, drawn.failed, drawn.seeds, gpu)

    def draw(rng: np.random.Generator, sd: float) -> tuple[list[Job], Job, Job]:
        others = [job(rng) for _ in range(n)]
        others += [job(rng, gpu="H100") for _ in range(n + 1)] if split else []
        others += [job(rng, 0.5)] if faulty else []
        return others, job(rng), job(rng, shift)

    return draw


LOSS_CASES = [
    *(Case("same distribution", loss_case(n), False, MARGIN) for n in (2, 3, 5, 10)),
    Case("same distribution, a faulty job", loss_case(5, faulty=True), False, MARGIN),
    Case("same distribution, sd 0.003 between jobs", loss_case(5, between=0.003), False, MARGIN),
    Case("same distribution, sd 0.003 between jobs", loss_case(10, between=0.003), False, MARGIN),
    *(Case("+0.015", loss_case(n, 0.015), True, MARGIN) for n in (2, 3, 5, 10)),
    Case("+0.015, a faulty job", loss_case(5, 0.015, faulty=True), True, MARGIN),
    Case("+0.015, 5 jobs of another length unfiltered", loss_case(5, 0.015, unlike=5), True,
         MARGIN),
]  # fmt: skip
BPP_CASES = [
    *(Case("same distribution", bpp_case(n), False, BPP_TOL, False) for n in (2, 3, 5, 10)),
    Case("same distribution, a faulty job", bpp_case(5, faulty=True), False, BPP_TOL, False),
    *(Case("+0.1", bpp_case(n, 0.1), True, BPP_TOL, False) for n in (2, 3, 5, 10)),
    *(Case("+0.5", bpp_case(n, 0.5), True, BPP_TOL, False) for n in (2, 5)),
    Case("+0.5, a faulty job", bpp_case(5, 0.5, faulty=True), True, BPP_TOL, False),
    Case("same distribution, split history", bpp_case(5, split=True), False, SMALL_TOL, False),
    Case("+0.1, split history", bpp_case(5, 0.1, split=True), True, SMALL_TOL, False),
    Case("+0.1, split history, gpu not looked at", bpp_case(5, 0.1, split=True), True,
         SMALL_TOL, False, keys=False),
    Case("+0.5, split history", bpp_case(5, 0.5, split=True), True, SMALL_TOL, False),
]  # fmt: skip


def jobs_of(case: Case) -> str:
    """'5 + 1 faulty', '5 A100 + 6 H100' from the case's own draw."""
    others, _, _ = case.draw(np.random.default_rng(0), 0.004)
    n = len(others)
    if "faulty" in case.name:
        return f"{n - 1} + 1 faulty"
    if "split" in case.name:
        gpus = [j.gpu for j in others]
        return f"{gpus.count('A100')} A100 + {gpus.count('H100')} H100"
    if "another length" in case.name:
        return f"{n // 2} + {n // 2}"
    return str(n)


def false_splits(n: int, sd: float, trials: int, rng: np.random.Generator) -> float:
    """Share of same-distribution histories of ``n`` jobs that a random gpu key splits."""
    split = 0
    for _ in range(trials):
        values = np.array([loss_job(rng, sd).values[0] for _ in range(n)])
        meta = [{"gpu": str(rng.choice(["A100", "H100"]))} for _ in range(n)]
        split += find_split(values, levels_of(meta), {"gpu": "A100"}) is not None
    return split / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.process_time()
    sds = " | ".join(f"seed sd {sd}" for sd in SEED_SDS)
    print(f"| validation loss | comparable jobs | {sds} |\n|---|---|---|---|---|")
    for case in LOSS_CASES:
        rates = " | ".join(f"{rate(case, sd, args.trials, rng):.2%}" for sd in SEED_SDS)
        print(f"| {case.name} | {jobs_of(case)} | {rates} |")
    print("\n| bytes/param | comparable jobs | fires |\n|---|---|---|")
    for case in BPP_CASES:
        print(f"| {case.name} | {jobs_of(case)} | {rate(case, 0.0, args.trials, rng):.2%} |")
    print("\n| false splits (random gpu key) | comparable jobs | share of histories split |")
    print("|---|---|---|")
    for n in (4, 5, 10, 20):
        split = false_splits(n, 0.004, args.trials, rng)
        print(f"| validation loss, seed sd 0.004 | {n} | {split:.2%} |")
    cpu = time.process_time() - start
    print(f"\n{args.trials} trials per case, seed {args.seed}, {cpu:.0f} s of CPU")


if __name__ == "__main__":
    main()
