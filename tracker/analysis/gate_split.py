"""Whether the regression gate's comparable jobs fall into groups: a metadata key whose values
separate the jobs' levels of one check and subject (docs/claims.md, "The regression gate").

A history of A100 jobs and of H100 jobs whose memory probes differ by a fixed overhead is two
yardsticks, not one noisy one: judged against both, a regression of an A100 job hides in the
gap. A key splits the jobs when every value of it is carried by two or more of them and the
one-way analysis of variance of their values by it (the F test: the spread between the
groups' means against the spread within them) has a p-value below ``SPLIT_LEVEL`` divided by
the number of keys tried (Bonferroni). The second compared job is then judged against the
jobs of its own group. bench/bench_gate.py measures how often same-distribution histories
split by chance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tracker.analysis.stats import f_survival

# The chance, over all keys tried, that a history with no real groups is split.
SPLIT_LEVEL = 0.001
UNSET = "unset"  # the group of the jobs without the key


@dataclass(frozen=True)
class Level:
    """One metadata key's values (in order, ``UNSET`` for the jobs without it) and each job's
    value as its position among them."""

    values: Sequence[str]
    codes: NDArray[np.intp]

    def at(self, chosen: NDArray[np.bool_] | NDArray[np.intp]) -> Level:
        return Level(self.values, self.codes[chosen])


Levels = Mapping[str, Level]  # metadata key -> its values over the jobs


def levels_of(meta: Sequence[Mapping[str, str]]) -> dict[str, Level]:
    """``Levels`` of the jobs whose metadata ``meta`` lists, for every key one of them has."""
    levels = {}
    for key in sorted({key for own in meta for key in own}):
        labels = [own.get(key, UNSET) for own in meta]
        values = sorted(set(labels))
        position = {value: i for i, value in enumerate(values)}
        levels[key] = Level(values, np.array([position[v] for v in labels], dtype=np.intp))
    return levels


@dataclass(frozen=True)
class Split:
    """The key that splits the jobs, each value's jobs (by position), and the value the judged
    job carries."""

    key: str
    groups: Mapping[str, NDArray[np.intp]]
    own: str

    def note(self) -> str:
        """'comparable jobs split by gpu: A100 (5) vs H100 (6); judged against A100'."""
        sizes = " vs ".join(f"{value} ({len(at)})" for value, at in self.groups.items())
        return f"comparable jobs split by {self.key}: {sizes}; judged against {self.own}"


def _groups(level: Level) -> dict[str, NDArray[np.intp]]:
    """Each value's positions, the values in order."""
    present = np.flatnonzero(np.bincount(level.codes, minlength=len(level.values)))
    return {level.values[i]: np.flatnonzero(level.codes == i) for i in present.tolist()}


def _p_value(values: NDArray[np.float64], groups: Mapping[str, NDArray[np.intp]]) -> float:
    """The F test's p-value of the groups' means all equal; 1 when no value differs."""
    overall = math.fsum(values.tolist()) / len(values)
    between = within = 0.0
    for at in groups.values():
        own = values[at]
        mean = math.fsum(own.tolist()) / len(own)
        between += len(own) * (mean - overall) ** 2
        within += math.fsum(((own - mean) ** 2).tolist())
    if between == 0:
        return 1.0
    if within == 0:
        return 0.0
    dfn, dfd = len(groups) - 1, len(values) - len(groups)
    return f_survival((between / dfn) / (within / dfd), dfn, dfd)


def find_split(values: NDArray[np.float64], levels: Levels, own: Mapping[str, str]) -> Split | None:
    """The key that splits the jobs' ``values`` (their metadata in ``levels``) into groups,
    the judged job (metadata ``own``) in one of them; None when none does."""
    tried: list[tuple[float, str, dict[str, NDArray[np.intp]]]] = []
    for key in sorted(levels):
        groups = _groups(levels[key])
        if len(groups) < 2 or own.get(key, UNSET) not in groups:
            continue
        if min(len(at) for at in groups.values()) < 2:
            continue
        tried.append((_p_value(values, groups), key, groups))
    if not tried:
        return None
    p_value, key, groups = min(tried, key=lambda found: found[:2])
    if p_value >= SPLIT_LEVEL / len(tried):
        return None
    return Split(key, groups, own.get(key, UNSET))
