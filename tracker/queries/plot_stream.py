"""The plot's series and group means computed chunk by chunk: each run's window is read one
chunk at a time and min/max-downsampled as it goes, so a request holds at most a chunk per run
and ``points`` points per series, whatever the curves' length.

The downsampling is ``minmax_indices``' scheme on buckets of steps rather than of points, so
that it can run before the window's size is known: every point is kept until there are more
than ``points``; then the steps are cut into buckets of ``width`` steps from the first one,
each keeping its first and last point, its lowest and highest finite value of each line drawn
and its first non-finite one, and ``width`` doubles until the points kept fit. Doubling joins
two buckets into one, whose points to keep are among theirs: cutting the kept points again is
exactly cutting all the points, so the drawn line keeps the whole window's envelope, spikes
and gaps. A window of at most ``points`` points is never cut: every raw point is drawn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

Piece = dict[str, np.ndarray]  # columns of consecutive points: "steps" and the drawn ones


@dataclass
class Kept:
    """At most ``points`` of the points given piece by piece in step order, keeping the
    envelope of the ``lines`` columns (see the module docstring)."""

    points: int
    lines: tuple[str, ...]
    seen: int = 0
    held: Piece = field(default_factory=dict)
    width: int = 1  # steps per bucket; 1: every point kept
    origin: int = 0  # the first step given: the buckets start there

    def add(self, piece: Piece) -> None:
        if not piece["steps"].size:
            return
        if not self.seen:
            self.origin = int(piece["steps"][0])
        self.seen += piece["steps"].size
        self.held = _joined(self.held, piece)
        if self.width > 1:
            self.held = self._cut(self.held)
        steps = self.held["steps"]
        while steps.size > self.points and self.width <= steps[-1] - steps[0]:
            self.width *= 2
            self.held = self._cut(self.held)
            steps = self.held["steps"]

    def result(self) -> Piece:
        """The points kept: every one given when they were at most ``points``."""
        return self.held

    def _cut(self, piece: Piece) -> Piece:
        steps = piece["steps"]
        bucket = (steps - self.origin) // self.width
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        counts = np.diff(np.r_[starts, steps.size])
        which = np.repeat(np.arange(starts.size), counts)
        picked = [starts, starts + counts - 1]
        for line in self.lines:
            values = piece[line]
            finite = np.isfinite(values)
            for fill, reduce in ((np.inf, np.minimum), (-np.inf, np.maximum)):
                filled = np.where(finite, values, fill)
                extreme = np.repeat(reduce.reduceat(filled, starts), counts)
                picked.append(_firsts(np.flatnonzero(finite & (filled == extreme)), which))
            picked.append(_firsts(np.flatnonzero(~finite), which))
        keep = np.zeros(steps.size, bool)
        keep[np.concatenate(picked)] = True
        return {name: column[keep] for name, column in piece.items()}


def _firsts(indices: np.ndarray, which: np.ndarray) -> np.ndarray:
    """The first of ``indices`` in each bucket (``which`` maps a point to its bucket)."""
    if not indices.size:
        return indices
    buckets = which[indices]
    return indices[np.r_[True, buckets[1:] != buckets[:-1]]]


def _joined(first: Piece, second: Piece) -> Piece:
    return {k: np.concatenate([first[k], second[k]]) for k in first} if first else second


def drain(pieces: Iterator[Piece], kept: Kept) -> None:
    for piece in pieces:
        kept.add(piece)


def _cut_to(piece: Piece, frontier: float) -> tuple[Piece, Piece]:
    """``piece``'s points up to ``frontier`` (included), and the rest."""
    at = int(np.searchsorted(piece["steps"], frontier, side="right"))
    return {k: v[:at] for k, v in piece.items()}, {k: v[at:] for k, v in piece.items()}


def group_mean(
    members: Sequence[Iterator[Piece]], kepts: Sequence[Kept], line: str, points: int
) -> tuple[Kept, bool]:
    """The members' ``line`` averaged on the steps all of them have (with min, max and the
    mean time), at most ``points`` of it kept, read in step order from the members' pieces
    (each also given to its own ``kepts``); and whether the members have times. Each member
    holds only the points past the steps all have so far."""
    group = Kept(points, ("mean",))
    held: list[Piece] = [{} for _ in members]
    done = [False] * len(members)
    timed = False
    while True:
        for i, pieces in enumerate(members):
            while not done[i] and not held[i].get("steps", np.empty(0)).size:
                piece = next(pieces, None)
                if piece is None:
                    done[i] = True
                else:
                    kepts[i].add(piece)
                    held[i] = _joined(held[i], piece)
        if any(not part.get("steps", np.empty(0)).size for part in held):
            break
        frontier = min(float(part["steps"][-1]) for part in held)
        cuts = [_cut_to(part, frontier) for part in held]
        held = [rest for _, rest in cuts]
        common = cuts[0][0]["steps"]
        for now, _ in cuts[1:]:
            common = np.intersect1d(common, now["steps"], assume_unique=True)
        at = [np.searchsorted(now["steps"], common) for now, _ in cuts]
        stack = np.array([now[line][i] for (now, _), i in zip(cuts, at, strict=True)])
        stack = stack.reshape(len(members), common.size)
        with np.errstate(all="ignore"):
            mean = {"steps": common, "mean": stack.mean(axis=0), "low": stack.min(axis=0)}
            mean["high"] = stack.max(axis=0)
            if "times" in cuts[0][0]:
                timed = True
                times = [now["times"][i] for (now, _), i in zip(cuts, at, strict=True)]
                mean["times"] = np.array(times).reshape(stack.shape).mean(axis=0)
        group.add(mean)
    for pieces, kept in zip(members, kepts, strict=True):
        drain(pieces, kept)
    return group, timed
