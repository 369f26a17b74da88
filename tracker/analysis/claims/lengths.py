"""Which runs a comparing claim compares by their length: with ``lengths = "matched"`` one
group per length both variants ran (runs of a length only one variant ran are named, not
compared), with ``"own"`` each variant at its own full length."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracker.analysis.claims.specs import MIN_RUNS, Lengths


@dataclass(frozen=True)
class LengthGroup:
    """The runs of one comparison, the words naming their lengths, the runs of unlike
    lengths left out ('' for none), and the advice when a variant has no run ('')."""

    runs: pl.DataFrame
    words: str
    steps: int | None
    several: bool  # one of several groups: the subject names the length
    unlike: str = ""
    advice: str = ""

    def subject(self, subject: str) -> str:
        if not self.several:
            return subject
        return f"{subject}, {'unknown' if self.steps is None else f'{self.steps:,}'} steps"


def _length_words(steps: int | None, paper: int) -> str:
    if steps is None:
        return "runs of unknown length (no 'steps' in their summaries, no points)"
    if steps == paper:
        return f"runs of {steps:,} steps, the paper's length"
    return f"runs of {steps:,} steps; the paper's number is for {paper:,}"


def _steps(steps: int | None) -> str:
    return "unknown length" if steps is None else f"{steps:,} steps"


def _own(runs: pl.DataFrame, pair: tuple[str, str]) -> LengthGroup:
    """Each variant's runs at its longest length: 'flash at 1,750 steps, ref at 2,000'."""
    own = runs.filter(pl.col("steps").eq_missing(pl.col("steps").max().over("variant")))
    named = []
    for variant in pair:
        steps = own.filter(pl.col("variant") == variant)["steps"].drop_nulls()
        named.append(
            f"{variant} at {steps[0]:,} steps" if steps.len() else f"{variant} of unknown length"
        )
    return LengthGroup(own, f"each at its own full length: {', '.join(named)}", None, False)


def length_groups(
    runs: pl.DataFrame, lengths: Lengths, pair: tuple[str, str], paper: int
) -> list[LengthGroup]:
    """The groups of ``runs`` (finished runs of the two variants) compared apart."""
    if lengths == "own":
        return [_own(runs, pair)]
    by_variant = {v: set(runs.filter(pl.col("variant") == v)["steps"].to_list()) for v in pair}
    common = sorted(by_variant[pair[0]] & by_variant[pair[1]], key=lambda s: (s is None, s))
    alone = [
        (v, steps, runs.filter((pl.col("variant") == v) & pl.col("steps").eq_missing(steps)).height)
        for v in pair
        for steps in sorted(by_variant[v] - set(common), key=lambda s: (s is None, s))
    ]
    unlike = ", ".join(f"{v} {n} runs of {_steps(steps)}" for v, steps, n in alone)
    if common:
        return [
            LengthGroup(
                runs.filter(pl.col("steps").eq_missing(steps)),
                _length_words(steps, paper),
                steps,
                len(common) > 1,
                unlike,
            )
            for steps in common
        ]
    if not alone:  # no run at all
        return [LengthGroup(runs, _length_words(None, paper), None, False)]
    # no length both ran: name each, advise only lengths some variant was run at
    options = [
        f"{MIN_RUNS} {other} seeds of {_steps(steps)}"
        for v, steps, _ in alone
        for other in pair
        if other != v
    ]
    advice = (
        f"run {' or '.join(dict.fromkeys(options))}, or compare each at its own length "
        "(--lengths own)"
    )
    if len(by_variant[pair[0]]) == 0 or len(by_variant[pair[1]]) == 0:
        missing = pair[0] if not by_variant[pair[0]] else pair[1]
        steps = alone[0][1]
        advice = f"run {MIN_RUNS} {missing} seeds of {_steps(steps)}"
        return [LengthGroup(runs, _length_words(steps, paper), steps, False, "", advice)]
    return [LengthGroup(runs.clear(), "runs of unlike lengths", None, False, unlike, advice)]
