"""Whether a training run finished: a curve that ends before its summary's ``steps``, or well
before the seed siblings of its variant in the same job, is a run that stopped early (a
crash, a preempted node), and its final numbers are not those of a finished run.

One pure function of plain numbers, so that ingest (its warnings), the job's verdicts, the
runs table and the claims all say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from tracker.domain import ArmName

__all__ = ["Completeness", "completeness", "stopped_arms", "summary_steps"]

# A curve logged every k steps ends up to k - 1 steps before the run's length: up to 1% of
# the steps (and at least one) short still counts as finished.
SLACK = 0.01


@dataclass(frozen=True)
class Completeness:
    stopped: bool
    last_step: int | None  # the last logged step
    planned: int | None  # the steps it should have reached: its summary's, else its siblings'
    message: str  # "stopped at step 2765 of 3000"; "" for a finished run

    @property
    def short_by(self) -> int | None:
        if self.last_step is None or self.planned is None:
            return None
        return self.planned - (self.last_step + 1)


def _short(last_step: int, planned: int) -> bool:
    return last_step + 1 < planned - max(1, int(SLACK * planned))


def completeness(
    last_step: int | None, steps: int | None, sibling_last_steps: Iterable[int | None] = ()
) -> Completeness:
    """Whether a run whose curve's last logged step is ``last_step`` (steps counted from 0)
    stopped early: before its summary's ``steps``, or, among runs of its variant in the
    job, before the longest sibling's last step + 1 (the same slack each way)."""
    if last_step is None:
        return Completeness(False, None, steps, "")
    if steps is not None and _short(last_step, steps):
        return Completeness(True, last_step, steps, f"stopped at step {last_step} of {steps}")
    siblings = [s for s in sibling_last_steps if s is not None]
    if siblings and _short(last_step, max(siblings) + 1):
        planned = max(siblings) + 1
        message = f"stopped at step {last_step}; its seed siblings reached {planned}"
        return Completeness(True, last_step, planned, message)
    return Completeness(False, last_step, steps, "")


@cache  # a study has a few arm names, each in every job
def _variant(arm: str) -> str:
    name = ArmName.find(arm)
    return name.variant if name else arm


def stopped_arms(arms: Mapping[str, tuple[int | None, int | None]]) -> dict[str, Completeness]:
    """Per arm of one job, given ``arm -> (last logged step, summary steps)``: the arms
    that stopped early (siblings: the job's other arms of the same variant)."""
    variant = {arm: _variant(arm) for arm in arms}
    found = {}
    for arm, (last, steps) in arms.items():
        siblings = [arms[o][0] for o in arms if o != arm and variant[o] == variant[arm]]
        result = completeness(last, steps, siblings)
        if result.stopped:
            found[arm] = result
    return found


def summary_steps(extra: Mapping[str, object] | None) -> int | None:
    """The summary's ``steps`` when it is an integer, else None."""
    steps = (extra or {}).get("steps")
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None
