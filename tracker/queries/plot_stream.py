"""The plot's series and group means computed chunk by chunk: each run's window is read one
chunk at a time and min/max-downsampled as it goes, so a request holds at most a chunk per run
and a few times ``points`` points per series, whatever the curves' length.

A chunk's part in the window is cut down to ``points`` at once (``minmax_indices``), and the
points kept so far again whenever they pass twice that: the extremes of every stretch survive
each cut, so the drawn line keeps the whole window's envelope, spikes and gaps. A window of at
most ``points`` points is never cut: every raw point is drawn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from tracker.summary.downsample import minmax_indices

Piece = dict[str, np.ndarray]  # columns of consecutive points: "steps" and the drawn ones


@dataclass
class Kept:
    """At most ``points`` of the points given piece by piece, keeping the envelope of the
    ``lines`` columns (half the budget each when there are two)."""

    points: int
    lines: tuple[str, ...]
    seen: int = 0
    parts: list[Piece] = field(default_factory=list)
    held: int = 0

    def add(self, piece: Piece) -> None:
        size = piece["steps"].size
        self.seen += size
        if size:
            self.parts.append(self._cut(piece))
            self.held += self.parts[-1]["steps"].size
        if self.held > 2 * self.points:
            self.parts = [self._cut(self._joined())]
            self.held = self.parts[0]["steps"].size

    def result(self) -> Piece:
        """The points kept: every one given when they were at most ``points``."""
        return self._cut(self._joined())

    def _joined(self) -> Piece:
        if not self.parts:
            return {}
        return {name: np.concatenate([p[name] for p in self.parts]) for name in self.parts[0]}

    def _cut(self, piece: Piece) -> Piece:
        if not piece or piece["steps"].size <= self.points:
            return piece
        budget = self.points // len(self.lines)
        keep = minmax_indices(piece[self.lines[0]], budget)
        for line in self.lines[1:]:
            keep = np.union1d(keep, minmax_indices(piece[line], budget))
        return {name: column[keep] for name, column in piece.items()}


def drain(pieces: Iterator[Piece], kept: Kept) -> None:
    for piece in pieces:
        kept.add(piece)


def _cut_to(piece: Piece, frontier: float) -> tuple[Piece, Piece]:
    """``piece``'s points up to ``frontier`` (included), and the rest."""
    at = int(np.searchsorted(piece["steps"], frontier, side="right"))
    return {k: v[:at] for k, v in piece.items()}, {k: v[at:] for k, v in piece.items()}


def _joined(first: Piece, second: Piece) -> Piece:
    return {k: np.concatenate([first[k], second[k]]) for k in first} if first else second


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
