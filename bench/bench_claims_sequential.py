"""Error rates of the equivalence claim when the group looks after every job.

    python bench/bench_claims_sequential.py [--sequences 4000] [--seed 7]

Seeded numpy simulation, no database: each job adds 1 candidate (flash) and 2 baseline (ref)
runs, final validation losses normal with seed sd 0.003, margin 0.01, confidence 0.90, a
look after each of 30 jobs. Rules compared, each judged at every look with two or more runs
per arm:

* ``fixed``: the 90% Welch interval inside ±margin (TOST at 0.05 each side), outside it;
* ``sequence``: the 90% confidence sequence (tracker.analysis.sequential) inside, outside.

Printed: how often some look of a sequence says REPRODUCED when flash is truly 0.010 worse
(at the margin: a false claim), how often some look says NOT_REPRODUCED when the two are
truly equal, and the power (REPRODUCED when equal, NOT_REPRODUCED when 0.02 worse) after
10, 20 and 40 runs per arm (balanced jobs of one run each; seed sd 0.003 and 0.006), for
both rules. The figures are
in docs/claims.md.
"""

from __future__ import annotations

import argparse

import numpy as np

from tracker.analysis.sequential import boundary_factor, small_sample_factor
from tracker.analysis.stats import _scipy_special

SD, MARGIN, LEVEL, LOOKS, PLANNED = 0.003, 0.01, 0.90, 30, 20.0


def _running(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running mean and sample variance (ddof 1) along axis 1."""
    n = np.arange(1, values.shape[1] + 1)
    total, squares = values.cumsum(axis=1), (values**2).cumsum(axis=1)
    mean = total / n
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (squares - n * mean**2) / (n - 1)
    return mean, var


def halfwidths(
    x: np.ndarray, y: np.ndarray, per_look: tuple[int, int], planned: float = PLANNED
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Difference of means and the fixed and sequential half-widths at every look (sequences
    x looks): ``per_look`` runs of x and of y are added at each look."""
    kx, ky = per_look
    alpha = 1 - LEVEL
    mx, vx = _running(x)
    my, vy = _running(y)
    looks = np.arange(1, x.shape[1] // kx + 1)
    nx, ny = looks * kx, looks * ky
    mx, vx, my, vy = mx[:, nx - 1], vx[:, nx - 1], my[:, ny - 1], vy[:, ny - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ex, ey = vx / nx, vy / ny
        se = np.sqrt(ex + ey)
        df = (ex + ey) ** 2 / (ex**2 / (nx - 1) + ey**2 / (ny - 1))
        fixed = se * _scipy_special().stdtrit(df, 1 - alpha / 2)
        t = 2 / (1 / nx + 1 / ny)
        sequence = se * boundary_factor(t, alpha, planned) * small_sample_factor(df, alpha)
    return mx - my, fixed, sequence


def ever(diff: np.ndarray, half: np.ndarray, decide: str) -> float:
    """Share of sequences where some look with a spread decides ``decide``."""
    judged = np.isfinite(half)
    if decide == "REPRODUCED":
        hit = (diff + half < MARGIN) & (diff - half > -MARGIN)
    else:
        hit = (diff - half > MARGIN) | (diff + half < -MARGIN)
    return float((hit & judged).any(axis=1).mean())


def at_look(diff: np.ndarray, half: np.ndarray, look: int, decide: str) -> float:
    """Share of sequences deciding ``decide`` at look ``look`` (1-based)."""
    return ever(diff[:, look - 1 : look], half[:, look - 1 : look], decide)


def simulate(sequences: int, seed: int) -> dict[str, float]:
    """Every figure of the table, keyed by row and rule."""
    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    for truth, decide, label in (
        (MARGIN, "REPRODUCED", "at margin"),
        (MARGIN, "NOT", "at margin"),
        (0.0, "NOT", "equal"),
    ):
        x = truth + SD * rng.standard_normal((sequences, LOOKS))
        y = SD * rng.standard_normal((sequences, 2 * LOOKS))
        diff, fixed, sequence = halfwidths(x, y, (1, 2))
        for rule, half in (("fixed", fixed), ("sequence", sequence)):
            out[f"ever {decide} {label} {rule}"] = ever(diff, half, decide)
            out[f"last {decide} {label} {rule}"] = at_look(diff, half, LOOKS, decide)
    cases = ((0.0, "REPRODUCED", "equal"), (0.02, "NOT", "0.02 worse"))
    for sd in (SD, 2 * SD):
        for truth, decide, label in cases:
            x = truth + sd * rng.standard_normal((sequences, 40))
            y = sd * rng.standard_normal((sequences, 40))
            diff, fixed, sequence = halfwidths(x, y, (1, 1))
            for n in (10, 20, 40):
                for rule, half in (("fixed", fixed), ("sequence", sequence)):
                    key = f"power {decide} {label} sd {sd:g} n={n:02d} {rule}"
                    out[key] = at_look(diff, half, n, decide)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    figures = simulate(args.sequences, args.seed)
    print(f"{args.sequences} sequences, seed {args.seed}; fixed = 90% Welch, sequence = 90% CS")
    for key in sorted({k.rsplit(" ", 1)[0] for k in figures}):
        fixed, sequence = figures[key + " fixed"], figures[key + " sequence"]
        print(f"{key:42s} fixed {fixed:.3f}  sequence {sequence:.3f}")


if __name__ == "__main__":
    main()
