"""How the training arms ended: the divergence verdicts and the final validation losses.

* ``diverged``: the divergent ablation must diverge, and no other arm may;
* ``val_loss`` (per seed of the candidate): the candidate's final validation loss minus the
  mean of the job's baseline seeds, FAIL only when its interval at ``[training.val_loss] level``,
  from the job's own seed spread, lies outside ``[training.val_loss] candidate_margin``; the
  job's own baseline is the reference, whatever the run's length;
* ``val_loss_paper`` (per arm of a variant the paper reports): the paper's number, only for
  a run of the paper's length (``paper_steps``); N/A elsewhere, saying why.

An arm whose CSV has no point, or whose summary has no validation loss, gives N/A checks
with the reason, never PASS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tracker.analysis.checks import Check
from tracker.analysis.expectations import Expectations
from tracker.analysis.stats import t_quantile
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict, within
from tracker.completeness import Completeness, stopped_arms, summary_steps
from tracker.domain import ArmName

__all__ = ["SeedSpread", "divergence_verdicts", "run_steps", "stopped_in", "val_loss_verdicts"]


def _no_points(curves: Mapping[str, pl.DataFrame], arm: str) -> bool:
    """The arm has a loss curve without any point (a header-only CSV)."""
    curve = curves.get(arm)
    return curve is not None and curve.height == 0


def _empty(arm: str) -> str:
    return f"{arm}.csv has no points"


def stopped_in(
    present: Mapping[str, Mapping[str, Any]], curves: Mapping[str, pl.DataFrame]
) -> dict[str, Completeness]:
    """The job's arms that stopped early, from their curves' last steps and summaries."""
    ends = {}
    for arm, run in present.items():
        curve = curves.get(arm)
        last = curve["step"].max() if curve is not None and curve.height else None
        ends[arm] = (None if last is None else int(last), summary_steps(run.get("extra")))  # type: ignore[arg-type]
    return stopped_arms(ends)


def run_steps(run: Mapping[str, Any], curve: pl.DataFrame | None) -> int | None:
    """How many steps the arm trained: its summary's ``steps`` when it has an integer one
    (what the run says it did), else its curve's last step + 1 (steps counted from 0, as the
    jobs log them); None when neither is known."""
    steps = summary_steps(run.get("extra"))
    if steps is not None:
        return steps
    if curve is None or curve.height == 0 or "step" not in curve.columns:
        return None
    last = curve["step"].max()
    return None if last is None else int(last) + 1  # type: ignore[arg-type]


def divergence_verdicts(
    exp: Expectations, present: Mapping[str, Mapping[str, Any]], curves: Mapping[str, pl.DataFrame]
) -> list[Verdict]:
    """The divergent arm diverged (PASS) or not (FAIL); every other arm that diverged: FAIL."""
    arm = exp.training.divergent
    verdicts = [_divergent_verdict(arm, present, curves)]
    for other, run in present.items():
        if other != arm and run["diverged"] is True:
            detail = f"diverged; only {arm} is expected to"
            verdicts.append(Verdict(Check.DIVERGED, other, True, False, None, FAIL, detail))
    return verdicts


def _divergent_verdict(
    arm: str, present: Mapping[str, Mapping[str, Any]], curves: Mapping[str, pl.DataFrame]
) -> Verdict:
    def na(detail: str) -> Verdict:
        return Verdict(Check.DIVERGED, arm, None, True, None, NA, detail)

    if arm not in present:
        return na(f"arm {arm} missing: divergence check not possible")
    if _no_points(curves, arm):
        return na(f"{_empty(arm)}: divergence check not possible")
    diverged = present[arm]["diverged"]
    if diverged is None:
        return na("the summary has no 'diverged' flag")
    status = PASS if diverged else FAIL
    detail = "diverged, as expected" if diverged else "did not diverge; it was expected to"
    return Verdict(Check.DIVERGED, arm, diverged, True, None, status, detail)


def _missing_val_loss(arm: str, run: Mapping[str, Any], curves: Mapping[str, pl.DataFrame]) -> str:
    """Why the arm's validation loss cannot be judged, or '' when it can."""
    if _no_points(curves, arm):
        return _empty(arm)
    if run["val_loss"] is None:
        why = " (it diverged)" if run["diverged"] else ""
        return f"no validation loss in {arm}'s summary{why}"
    return ""


def _pairs(exp: Expectations, present: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(candidate arm, the baseline variant's arms) for every seed of the candidate's
    variant the job has (none: no check, as for any arm a job lacks; the tracking check says
    the candidate is missing); the candidate role's own pair when the roles are no arm names."""
    t = exp.training
    cand, base = ArmName.find(t.candidate), ArmName.find(t.baseline)
    if cand is None or base is None:
        return [(t.candidate, [t.baseline] if t.baseline in present else [])]
    names = {arm: a for arm in present if (a := ArmName.find(arm))}
    seeds = sorted((a.seed, arm) for arm, a in names.items() if a.variant == cand.variant)
    baselines = sorted((a.seed, arm) for arm, a in names.items() if a.variant == base.variant)
    return [(arm, [b for _, b in baselines]) for _, arm in seeds]


@dataclass(frozen=True)
class SeedSpread:
    """The job's own seed-to-seed spread of the final validation loss: the standard
    deviation pooled over the candidate's and the baseline's seeds, and its degrees of
    freedom (0: no variant has two usable seeds)."""

    sd: float
    df: int

    @staticmethod
    def of(groups: Sequence[Sequence[float]]) -> SeedSpread:
        squares = sum(float(((np.array(g) - np.mean(g)) ** 2).sum()) for g in groups if len(g) > 1)
        df = sum(len(g) - 1 for g in groups if len(g) > 1)
        return SeedSpread(math.sqrt(squares / df) if df else math.nan, df)


def _usable(
    arms: Sequence[str], present: Mapping[str, Any], stopped: Mapping[str, Completeness]
) -> list[str]:
    def finite(value: Any) -> bool:
        return value is not None and math.isfinite(value)

    return [a for a in arms if a not in stopped and finite(present[a]["val_loss"])]


def _candidate_verdict(
    exp: Expectations,
    cand: str,
    bases: Sequence[str],
    present: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, pl.DataFrame],
    stopped: Mapping[str, Completeness],
) -> Verdict:
    """The candidate seed's final validation loss minus the mean of the job's baseline
    seeds; FAIL only when its interval, from the job's own seed spread, lies outside the
    margin (a clean job fails at most (1 - confidence) / 2 of the time), so that two seeds
    differing by chance do not fail it. Without any seed spread: the bare margin."""
    margin = exp.training.val_loss.candidate_margin

    def na(detail: str) -> Verdict:
        return Verdict(Check.VAL_LOSS, cand, None, 0.0, margin, NA, detail)

    if cand not in present:
        return na(f"arm {cand} missing: candidate-vs-baseline comparison not possible")
    if not bases:
        return na(f"no baseline arm in the job: nothing to compare {cand}'s validation loss with")
    if cand in stopped:
        return na(
            f"{cand} {stopped[cand].message}: its final validation loss is not a finished run's"
        )
    why = _missing_val_loss(cand, present[cand], curves)
    kept = _usable(bases, present, stopped)
    if not why and not kept:
        why = _missing_val_loss(bases[0], present[bases[0]], curves) or (
            f"every baseline run stopped early ({_stopped_list(bases, stopped)})"
        )
    if why:
        return na(f"{why}: candidate-vs-baseline comparison not possible")
    c = float(present[cand]["val_loss"])
    base_losses = [float(present[b]["val_loss"]) for b in kept]
    b = float(np.mean(base_losses))
    diff = c - b
    against = f"{b:.4f} ({kept[0]})" if len(kept) == 1 else f"{b:.4f} (mean of {', '.join(kept)})"
    detail = f"final validation loss {c:.4f} ({cand}) - {against} = {diff:+.4f}; "
    left_out = [a for a in bases if a in stopped]
    note = f"; left out: {_stopped_list(left_out, stopped)}" if left_out else ""
    note += _lengths_differ([cand, *kept], present, curves)
    cands = _usable([a for a, _ in _pairs(exp, present)], present, stopped)
    spread = SeedSpread.of([[float(present[a]["val_loss"]) for a in cands], base_losses])
    if spread.df == 0 or not math.isfinite(diff):
        detail += f"no seed spread in the job: the bare margin ± {margin:g} expected{note}"
        return Verdict("val_loss", cand, diff, 0.0, margin, within(diff, 0.0, margin), detail)
    if abs(diff) <= margin:
        # inside the margin its interval cannot lie outside it: PASS without the t quantile
        # (scipy.special, which a clean one-job report never imports)
        detail += (
            f"within ± {margin:g} (the job's seed spread: sd {spread.sd:.4f}, {spread.df} df){note}"
        )
        return Verdict("val_loss", cand, diff, 0.0, margin, PASS, detail)
    level = exp.training.val_loss.level
    half = t_quantile(1 - (1 - level) / 2, spread.df) * spread.sd * math.sqrt(1 + 1 / len(kept))
    low, high = diff - half, diff + half
    status = FAIL if low > margin or high < -margin else PASS
    detail += (
        f"{level:.0%} interval {low:+.4f} to {high:+.4f} from the job's seed spread "
        f"(sd {spread.sd:.4f}, {spread.df} df); FAIL only outside ± {margin:g}{note}"
    )
    return Verdict(Check.VAL_LOSS, cand, diff, 0.0, margin, status, detail)


def _lengths_differ(
    arms: Sequence[str],
    present: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, pl.DataFrame],
) -> str:
    """'; run lengths differ: flash_s0 1,750 steps, ref_s0 2,000' when the compared arms
    trained for different numbers of steps (a final loss depends on it), else ''."""
    steps = {arm: run_steps(present[arm], curves.get(arm)) for arm in arms}
    if len(set(steps.values())) < 2:
        return ""
    shown = [f"{arm} {'?' if n is None else f'{n:,}'}" for arm, n in steps.items()]
    return f"; run lengths differ: {shown[0]} steps, {', '.join(shown[1:])}"


def _stopped_list(arms: Sequence[str], stopped: Mapping[str, Completeness]) -> str:
    return ", ".join(f"{a} {stopped[a].message}" for a in arms if a in stopped)


def _paper_verdict(
    exp: Expectations,
    arm: str,
    run: Mapping[str, Any],
    curves: Mapping[str, pl.DataFrame],
    stopped: Mapping[str, Completeness],
) -> Verdict | None:
    t = exp.training
    paper = t.val_loss.paper(run["variant"])
    if paper is None:
        return None
    measured = run["val_loss"]
    why = _missing_val_loss(arm, run, curves)
    if not why and arm in stopped:
        why = f"{stopped[arm].message}: not a finished run"
    steps = run_steps(run, curves.get(arm))
    if not why and steps is None:
        why = "the run's length is unknown (no 'steps' in its summary, no points)"
    elif not why and steps != t.val_loss.paper_steps:
        why = f"run of {steps} steps; the paper's number is for {t.val_loss.paper_steps}"
    if why:
        return Verdict(Check.VAL_LOSS_PAPER, arm, measured, paper, None, NA, why)
    detail = (
        f"final validation loss {measured:.4f} after {steps} steps vs paper {paper:g} "
        f"± {t.val_loss.tolerance:g}"
    )
    status = within(measured, paper, t.val_loss.tolerance)
    return Verdict(Check.VAL_LOSS_PAPER, arm, measured, paper, t.val_loss.tolerance, status, detail)


def val_loss_verdicts(
    exp: Expectations, present: Mapping[str, Mapping[str, Any]], curves: Mapping[str, pl.DataFrame]
) -> list[Verdict]:
    """``val_loss`` per seed of the candidate, then ``val_loss_paper`` per arm; a run that
    stopped early (``tracker.completeness``) is left out of both, saying so."""
    stopped = stopped_in(present, curves)
    verdicts = [
        _candidate_verdict(exp, cand, bases, present, curves, stopped)
        for cand, bases in _pairs(exp, present)
    ]
    for arm, run in present.items():
        paper = _paper_verdict(exp, arm, run, curves, stopped)
        if paper is not None:
            verdicts.append(paper)
    return verdicts
