"""The regression gate's error rates, simulated: how often ``compare --fail-on-regression``
fires on two jobs drawn from the same distribution (a false alarm) and on a second job that
really shifted (a catch), for one check at a time.

    python bench/bench_gate.py [--trials 4000] [--seed 20261201]

Each trial draws the values of the comparable jobs (``n`` jobs, plus ``faulty`` jobs carrying
a planted fault and ``unlike`` jobs of another configuration where the case says so) and of
the two compared jobs, and judges the rise with ``tracker.analysis.gate.judge_rise``: the
function ``tracker compare`` calls, with the packaged ``[gate]``. A false alarm counts both
directions of a pair (a -> b and b -> a). "unfiltered" cases put the unlike jobs into the
yardstick, as a gate without the configuration keys would. The last column is the gate
this one replaced: mean and 5 standard deviations of all other jobs, the new value above all
of theirs, and floors of 0.1 B/param and 0.05 nats with fewer than 5 other jobs.

Noise as the study's jobs show it: bytes/param of one model and variant varies by about
0.003 B/param between identical jobs (allocator rounding; the sample probes' jitter), with a
tolerance of 0.069 (the verdicts' 0.05 plus the fitted fixed overhead of gpt-124m). The
validation-loss check is flash minus ref of one seed: real GPT-2 124M seeds spread by 0.001
each (Table 3), so 0.0014 per job, with the claims' 0.01 margin; "noisy" triples that.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracker.analysis.expectations import load_expectations
from tracker.analysis.gate import Yardstick, judge_rise

BPP_SD, BPP_TOL = 0.003, 0.069
LOSS_SD, LOSS_TOL = math.sqrt(2) * 0.001, 0.01


@dataclass(frozen=True)
class Case:
    name: str
    sd: float
    tolerance: float
    shift: float  # of the second job; 0: a false-alarm case
    n: int  # comparable jobs drawn like the compared ones
    faulty: float = 0.0  # one more comparable job carrying this fault
    unlike: int = 0  # jobs of another configuration, ``unlike_gap`` off
    unlike_gap: float = 0.0
    unfiltered: bool = False  # the unlike jobs in the yardstick


CASES = [
    Case("bytes/param, same distribution", BPP_SD, BPP_TOL, 0.0, 2),
    Case("bytes/param, same distribution", BPP_SD, BPP_TOL, 0.0, 5),
    Case("bytes/param, same distribution, a faulty job", BPP_SD, BPP_TOL, 0.0, 5, faulty=0.5),
    Case("bytes/param +0.5, a faulty job", BPP_SD, BPP_TOL, 0.5, 5, faulty=0.5),
    Case("bytes/param +0.5, a faulty job", BPP_SD, BPP_TOL, 0.5, 40, faulty=0.5),
    Case("bytes/param +0.1", BPP_SD, BPP_TOL, 0.1, 5),
    Case("val loss, same distribution", LOSS_SD, LOSS_TOL, 0.0, 2),
    Case("val loss, same distribution", LOSS_SD, LOSS_TOL, 0.0, 5),
    Case("val loss, same distribution, 10 unlike jobs unfiltered", LOSS_SD, LOSS_TOL, 0.0, 5,
         unlike=10, unlike_gap=0.065, unfiltered=True),
    Case("val loss, same distribution (noisy: sd x3)", 3 * LOSS_SD, LOSS_TOL, 0.0, 2),
    Case("val loss, same distribution (noisy: sd x3)", 3 * LOSS_SD, LOSS_TOL, 0.0, 5),
    Case("val loss, same distribution (noisy: sd x3)", 3 * LOSS_SD, LOSS_TOL, 0.0, 40),
    Case("val loss +0.015", LOSS_SD, LOSS_TOL, 0.015, 2),
    Case("val loss +0.015", LOSS_SD, LOSS_TOL, 0.015, 5),
    Case("val loss +0.015, a faulty job", LOSS_SD, LOSS_TOL, 0.015, 5, faulty=0.1),
    Case("val loss +0.015, 10 unlike jobs filtered out", LOSS_SD, LOSS_TOL, 0.015, 5,
         unlike=10, unlike_gap=0.065),
    Case("val loss +0.015, 10 unlike jobs unfiltered", LOSS_SD, LOSS_TOL, 0.015, 5, unlike=10,
         unlike_gap=0.065, unfiltered=True),
]  # fmt: skip


def old_gate(before: float, after: float, floor: float, values: Sequence[float]) -> bool:
    """The replaced rule: 5 sd of all other jobs and above all of them, else the floor."""
    if len(values) >= 5 and (sd := statistics.stdev(values)) > 0:
        return after - before > 5 * sd and after > max(values)
    return after - before > floor


def rates(case: Case, trials: int, rng: np.random.Generator) -> tuple[float, float]:
    """Share of judgements that fire: this gate's, the old one's."""
    gate = load_expectations().gate
    floor = 0.1 if case.tolerance == BPP_TOL else 0.05
    fired = old = judged = 0
    for _ in range(trials):
        like = rng.normal(0.0, case.sd, case.n + 2)
        others = list(like[2:]) + ([case.faulty] if case.faulty else [])
        unlike = list(rng.normal(case.unlike_gap, case.sd, case.unlike))
        every = others + unlike  # what the old gate took: every other job
        stick = Yardstick([""] * len(others), others)
        if case.unfiltered:
            stick = Yardstick([""] * len(every), every)
        pairs = [(like[0], like[1] + case.shift)]
        if not case.shift:
            pairs.append((like[1], like[0]))
        for before, after in pairs:
            judged_rise = judge_rise(before, after, case.tolerance, "", stick, gate)
            fired += bool(judged_rise and judged_rise.rose)
            old += old_gate(before, after, floor, every)
            judged += 1
    return fired / judged, old / judged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print("| case | comparable jobs | fires (this gate) | fires (the old gate) |")
    print("|---|---|---|---|")
    for case in CASES:
        new, old = rates(case, args.trials, rng)
        jobs = f"{case.n}" + (" + 1 faulty" if case.faulty else "")
        print(f"| {case.name} | {jobs} | {new:.2%} | {old:.2%} |")
    print(f"\n{args.trials} trials per case, seed {args.seed}, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
