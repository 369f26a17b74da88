"""How the training arms ended: the divergence verdicts and the final validation losses.

* ``diverged``: the divergent ablation must diverge, and no other arm may;
* ``val_loss`` (per seed of the candidate): the candidate's final validation loss minus the
  baseline's of the same seed, within ``[training.val_loss] candidate_margin``; the job's
  own baseline is the reference, whatever the run's length;
* ``val_loss_paper`` (per arm of a variant the paper reports): the paper's number, only for
  a run of the paper's length (``paper_steps``); N/A elsewhere, saying why.

An arm whose CSV has no point, or whose summary has no validation loss, gives N/A checks
with the reason, never PASS.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from tracker.analysis.checks import Check
from tracker.analysis.expectations import Expectations
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict, within
from tracker.domain import ArmName

__all__ = ["divergence_verdicts", "run_steps", "val_loss_verdicts"]


def _no_points(curves: Mapping[str, pl.DataFrame], arm: str) -> bool:
    """The arm has a loss curve without any point (a header-only CSV)."""
    curve = curves.get(arm)
    return curve is not None and curve.height == 0


def _empty(arm: str) -> str:
    return f"{arm}.csv has no points"


def run_steps(run: Mapping[str, Any], curve: pl.DataFrame | None) -> int | None:
    """How many steps the arm trained: its summary's ``steps`` when it has an integer one
    (what the run says it did), else its curve's last step + 1 (steps counted from 0, as the
    jobs log them); None when neither is known."""
    steps = (run.get("extra") or {}).get("steps")
    if isinstance(steps, int) and not isinstance(steps, bool):
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


def _pairs(exp: Expectations, present: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(candidate arm, the baseline arm of the same seed or None) for every seed of the
    candidate's variant the job has (none: no check, as for any arm a job lacks; the tracking
    check says the candidate is missing); the candidate role's own pair when the roles are
    no arm names."""
    t = exp.training
    cand, base = ArmName.find(t.candidate), ArmName.find(t.baseline)
    if cand is None or base is None:
        return [(t.candidate, t.baseline if t.baseline in present else None)]
    by_name = {(a.variant, a.seed): arm for arm in present if (a := ArmName.find(arm))}
    seeds = sorted(seed for variant, seed in by_name if variant == cand.variant)
    return [(by_name[cand.variant, s], by_name.get((base.variant, s))) for s in seeds]


def _candidate_verdict(
    exp: Expectations,
    cand: str,
    base: str | None,
    present: Mapping[str, Mapping[str, Any]],
    curves: Mapping[str, pl.DataFrame],
) -> Verdict:
    margin = exp.training.val_loss.candidate_margin

    def na(detail: str) -> Verdict:
        return Verdict(Check.VAL_LOSS, cand, None, 0.0, margin, NA, detail)

    if cand not in present:
        return na(f"arm {cand} missing: candidate-vs-baseline comparison not possible")
    if base is None:
        return na(f"no baseline arm of {cand}'s seed: nothing to compare its validation loss with")
    why = _missing_val_loss(cand, present[cand], curves) or _missing_val_loss(
        base, present[base], curves
    )
    if why:
        return na(f"{why}: candidate-vs-baseline comparison not possible")
    c, b = present[cand]["val_loss"], present[base]["val_loss"]
    diff = c - b
    detail = (
        f"final validation loss {c:.4f} ({cand}) - {b:.4f} ({base}) = {diff:+.4f}; "
        f"the job's own baseline ± {margin:g} expected"
    )
    return Verdict(Check.VAL_LOSS, cand, diff, 0.0, margin, within(diff, 0.0, margin), detail)


def _paper_verdict(
    exp: Expectations, arm: str, run: Mapping[str, Any], curves: Mapping[str, pl.DataFrame]
) -> Verdict | None:
    t = exp.training
    paper = t.val_loss.paper(run["variant"])
    if paper is None:
        return None
    measured = run["val_loss"]
    why = _missing_val_loss(arm, run, curves)
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
    """``val_loss`` per seed of the candidate, then ``val_loss_paper`` per arm."""
    verdicts = [
        _candidate_verdict(exp, cand, base, present, curves) for cand, base in _pairs(exp, present)
    ]
    for arm, run in present.items():
        paper = _paper_verdict(exp, arm, run, curves)
        if paper is not None:
            verdicts.append(paper)
    return verdicts
