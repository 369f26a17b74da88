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

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.analysis.stats import f_survival

# The chance, over all keys tried, that a history with no real groups is split.
SPLIT_LEVEL = 0.001
UNSET = "unset"  # the group of the jobs without the key


@dataclass(frozen=True)
class Split:
    """The key that splits the jobs, each value's jobs (by position), and the value the judged
    job carries."""

    key: str
    groups: Mapping[str, Sequence[int]]
    own: str

    def note(self) -> str:
        """'comparable jobs split by gpu: A100 (5) vs H100 (6); judged against A100'."""
        sizes = " vs ".join(f"{value} ({len(at)})" for value, at in self.groups.items())
        return f"comparable jobs split by {self.key}: {sizes}; judged against {self.own}"


def _groups(meta: Sequence[Mapping[str, str]], key: str) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for at, own in enumerate(meta):
        groups.setdefault(own.get(key, UNSET), []).append(at)
    return dict(sorted(groups.items()))


def _p_value(values: Sequence[float], groups: Mapping[str, Sequence[int]]) -> float:
    """The F test's p-value of the groups' means all equal; 1 when no value differs."""
    overall = statistics.fmean(values)
    between = within = 0.0
    for at in groups.values():
        own = [values[i] for i in at]
        mean = statistics.fmean(own)
        between += len(own) * (mean - overall) ** 2
        within += sum((v - mean) ** 2 for v in own)
    if between == 0:
        return 1.0
    if within == 0:
        return 0.0
    dfn, dfd = len(groups) - 1, len(values) - len(groups)
    return f_survival((between / dfn) / (within / dfd), dfn, dfd)


def find_split(
    values: Sequence[float], meta: Sequence[Mapping[str, str]], own: Mapping[str, str]
) -> Split | None:
    """The key that splits the jobs' ``values`` (each job's metadata in ``meta``) into groups,
    the judged job (metadata ``own``) in one of them; None when none does."""
    tried: list[tuple[float, str, dict[str, list[int]]]] = []
    for key in sorted({key for job in meta for key in job}):
        groups = _groups(meta, key)
        if len(groups) < 2 or own.get(key, UNSET) not in groups:
            continue
        if min(len(at) for at in groups.values()) < 2:
            continue
        tried.append((_p_value(values, groups), key, groups))
    if not tried:
        return None
    p_value, key, groups = min(tried)
    if p_value >= SPLIT_LEVEL / len(tried):
        return None
    return Split(key, groups, own.get(key, UNSET))
