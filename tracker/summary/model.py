"""A job's kept summary and its codec: stored as compressed bytes (``to_stored``), read back
by ``from_stored``.

The stored form is ``STORED_FORMAT`` (one byte), the xxh3-64 of the rest seeded by the job's
name (8 bytes, checked on every read: a flipped bit that still decompresses, or a summary
moved to another job, reads as damage, not as other figures), then the zstandard frame of a
JSON document.
The trajectories figure's downsampled lines (most of a summary: two float64 columns of up to
``DEFAULT_MAX_POINTS`` points per arm, full precision) are kept only for a job of more than
``DRAWN_KEPT_ABOVE`` loss values; a shorter job's are drawn from its points when a page asks,
which costs about what reading them back did and keeps many short jobs small.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import xxhash
import zstandard

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

# the first byte of a stored summary; a later form takes another (1 had no checksum, 2 one
# not tied to its job)
STORED_FORMAT = 3
DRAWN_KEPT_ABOVE = 100_000  # loss values (all arms): decoding and smoothing them takes ~10 ms
LEVEL = 9  # zstandard: 7% smaller than its default for ~3 ms a job (19: 5% more, 100 ms)
_compressor = zstandard.ZstdCompressor(level=LEVEL)
_decompressor = zstandard.ZstdDecompressor()


class UnknownSummaryFormat(ValueError):
    """A summary written by a newer tracker."""


class SummaryChecksumMismatch(ValueError):
    """A stored summary whose bytes are not those its checksum was made of."""


def _checksum(frame: bytes | memoryview, job: str) -> bytes:
    return xxhash.xxh3_64_digest(frame, seed=xxhash.xxh3_64_intdigest(job.encode("utf-8")))


@dataclass(frozen=True)
class Derived:
    """A job's verdicts and the numbers behind them, as claims and the gate read them."""

    verdicts: list[Verdict]
    numbers: dict[str, float | None]  # NUMBERS, None when not computable


@dataclass(frozen=True)
class Summary:
    """What a job's pages show that takes every point to make."""

    analysis: JobAnalysis
    draw: Callable[[], TrajectoryDrawing] = field(repr=False, compare=False)
    curves: dict[str, GridCurve]  # arm -> smoothed loss on a grid, for the figures across jobs
    steps: int  # loss values, all arms together

    @cached_property
    def trajectories(self) -> TrajectoryDrawing:
        """The trajectories figure's lines, downsampled: kept, or drawn on first use (pages
        that show no trajectories, such as the index, never draw them)."""
        return self.draw()

    def to_stored(self, job: str) -> bytes:
        """The summary of job ``job`` as stored: the drawn lines only for a job of more than
        ``DRAWN_KEPT_ABOVE`` loss values. Read back by ``from_stored`` only."""
        analysis = self.analysis
        kept = self.steps > DRAWN_KEPT_ABOVE
        return _framed(
            {
                "analysis": {
                    "mem": analysis.mem,
                    "gpt": analysis.gpt,
                    "verdicts": [v.as_dict() for v in analysis.verdicts],
                    "notes": analysis.notes,
                    "tracking": analysis.tracking,
                },
                "trajectories": self.trajectories.to_json() if kept else None,
                "curves": {arm: curve.to_json() for arm, curve in self.curves.items()},
                "steps": self.steps,
            },
            job,
        )

    def curves_to_stored(self, job: str) -> bytes:
        """The smoothed curves alone, as the index reads them for many jobs without
        decompressing each whole summary; read back by ``curves_from_stored``."""
        return _framed({arm: curve.to_json() for arm, curve in self.curves.items()}, job)

    @classmethod
    def from_stored(cls, data: bytes, job: str, draw: Callable[[], TrajectoryDrawing]) -> Summary:
        """Job ``job``'s stored summary; ``draw`` makes its lines from the job's points if none
        were kept."""
        doc = _unframed(data, job)
        analysis = doc["analysis"]
        verdicts = [Verdict(**v) for v in analysis["verdicts"]]
        kept = doc["trajectories"] and TrajectoryDrawing.from_json(doc["trajectories"])
        return cls(
            JobAnalysis(
                analysis["mem"], analysis["gpt"], verdicts, analysis["notes"], analysis["tracking"]
            ),
            draw if kept is None else lambda: kept,
            {arm: GridCurve.from_json(curve) for arm, curve in doc["curves"].items()},
            doc["steps"],
        )


def curves_from_stored(data: bytes, job: str) -> dict[str, GridCurve]:
    """Job ``job``'s smoothed curves as ``Summary.curves_to_stored`` kept them."""
    return {arm: GridCurve.from_json(curve) for arm, curve in _unframed(data, job).items()}


def _framed(doc: object, job: str) -> bytes:
    frame = _compressor.compress(to_stored_json(doc).encode("utf-8"))
    return bytes([STORED_FORMAT]) + _checksum(frame, job) + frame


def _unframed(data: bytes, job: str) -> Any:
    if not data or data[0] != STORED_FORMAT:
        raise UnknownSummaryFormat(f"stored summary of unknown format {data[:1]!r}")
    frame = memoryview(data)[9:]
    if _checksum(frame, job) != data[1:9]:
        raise SummaryChecksumMismatch("checksum mismatch")
    return from_stored_json(_decompressor.decompress(frame).decode("utf-8"))
