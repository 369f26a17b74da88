"""A job's kept summary and its codec: the stored JSON document, read back by ``from_json``."""

from __future__ import annotations

from dataclasses import dataclass

from tracker.analysis.job import JobAnalysis
from tracker.analysis.verdict import Verdict
from tracker.jsonio import from_stored_json, to_stored_json
from tracker.summary.grid import GridCurve
from tracker.summary.trajectories import TrajectoryDrawing

# The tracking check's numbers (``tracker.analysis.tracking``: ``smooth``, finite steps only)
EMA_DELTA = "ema_delta"  # mean |EMA(candidate) - EMA(baseline)| over the 2nd half
SEED_NOISE = "seed_noise"  # mean |EMA(seed twin) - EMA(baseline)| over the 2nd half
DIVERGED_AT = "diverged_at"  # first step whose loss is not finite, of the divergent arm
NUMBERS = (EMA_DELTA, SEED_NOISE, DIVERGED_AT)


@dataclass(frozen=True)
class Derived:
    """A job's verdicts and the numbers behind them, as claims and the gate read them."""

    verdicts: list[Verdict]
    numbers: dict[str, float | None]  # NUMBERS, None when not computable


@dataclass(frozen=True)
class Summary:
    """What a job's pages show that takes every point to make."""

    analysis: JobAnalysis
    trajectories: TrajectoryDrawing  # the trajectories figure's lines, downsampled
    curves: dict[str, GridCurve]  # arm -> smoothed loss on a grid, for the figures across jobs
    steps: int  # loss values, all arms together

    def to_json(self) -> str:
        """JSON with NaN and +-inf as bare tokens: read back by ``from_json`` only."""
        analysis = self.analysis
        return to_stored_json(
            {
                "analysis": {
                    "mem": analysis.mem,
                    "gpt": analysis.gpt,
                    "verdicts": [v.as_dict() for v in analysis.verdicts],
                    "notes": analysis.notes,
                    "tracking": analysis.tracking,
                },
                "trajectories": self.trajectories.to_json(),
                "curves": {arm: curve.to_json() for arm, curve in self.curves.items()},
                "steps": self.steps,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Summary:
        doc = from_stored_json(text)
        analysis = doc["analysis"]
        verdicts = [Verdict(**v) for v in analysis["verdicts"]]
        return cls(
            JobAnalysis(
                analysis["mem"], analysis["gpt"], verdicts, analysis["notes"], analysis["tracking"]
            ),
            TrajectoryDrawing.from_json(doc["trajectories"]),
            {arm: GridCurve.from_json(curve) for arm, curve in doc["curves"].items()},
            doc["steps"],
        )
