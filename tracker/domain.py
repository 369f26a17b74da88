"""The study's words: arm names, statuses, the metric the analysis reads, a job's data.

The lowest floor: it imports nothing of the tracker, no database code, and polars only for
the types of ``JobData``. Statuses are ``StrEnum`` s, so each compares equal to (and is
written as) its text: ``Status.NA == "N/A"``, ``f"{Status.NA}" == "N/A"``, JSON ``"N/A"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DEFAULT_ARM_MODEL",
    "LOSS",
    "ArmName",
    "Change",
    "ClaimStatus",
    "IngestStatus",
    "JobData",
    "Status",
]

# the columns of the jobs listing it sorts by (``tracker jobs --sort``): all but the metadata
JOB_SORT_KEYS = ("job", "time", "ingested_at", "probes", "failed_probes", "arms", "points")
LOSS = "loss"  # the curve metric the analysis, the figures and the summaries use
DEFAULT_ARM_MODEL = "gpt-124m"  # the model of an arm whose summary JSON names none
META_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,99}")  # a metadata key: --meta, job.json
MIN_WINDOW_POINTS = 10  # a curve window's fewest points: two min/max buckets of five

# <variant>_s<seed>: the variant starts with a letter or digit, the seed has 1 to 9 digits
_ARM_NAME = re.compile(r"(?P<variant>[A-Za-z0-9][A-Za-z0-9._-]*)_s(?P<seed>[0-9]{1,9})")


@dataclass(frozen=True)
class ArmName:
    """A training arm's name, ``<variant>_s<seed>`` (``"flash_gr_s1"``: ``flash_gr``, seed 1).

    The one rule for arm names: what the ingest accepts as an arm file's stem. ``str`` gives
    the canonical name (``ArmName("ref", 0)`` is ``"ref_s0"``; a stem ``ref_s00`` keeps its own
    spelling in the database, which stores the stem).
    """

    variant: str
    seed: int

    @classmethod
    def parse(cls, text: str) -> ArmName:
        """The arm ``text`` names; ``ValueError`` when it is no ``<variant>_s<seed>``."""
        found = cls.find(text)
        if found is None:
            raise ValueError(f"arm name {text!r} is not <variant>_s<seed>")
        return found

    @classmethod
    def find(cls, text: str) -> ArmName | None:
        """The arm ``text`` names, or None when it is no arm name."""
        match = _ARM_NAME.fullmatch(text)
        if match is None:
            return None
        return cls(match["variant"], int(match["seed"]))

    def __str__(self) -> str:
        return f"{self.variant}_s{self.seed}"


class Status(StrEnum):
    """A verdict's status."""

    PASS = "PASS"  # measured within the tolerance of the expected value
    FAIL = "FAIL"  # outside it: something to look at
    # outside it where the expectations file names the reason (a setup difference from the
    # paper, [memory.known_differences]): counted apart, never a failure
    KNOWN = "KNOWN"
    NA = "N/A"  # not checked: a side is missing, or the run is not the expected setup


class ClaimStatus(StrEnum):
    """A claim's status over the jobs."""

    REPRODUCED = "REPRODUCED"
    NOT_REPRODUCED = "NOT_REPRODUCED"
    MIXED = "MIXED"
    INCONCLUSIVE = "INCONCLUSIVE"


class RunLengths(StrEnum):
    """Which runs a comparing claim compares by length (``lengths`` of a study's claim)."""

    matched = "matched"  # only runs of one length, a row per length both variants ran
    own = "own"  # each variant's runs at its own full length


class Change(StrEnum):
    """How a verdict changed from one job to another (``tracker compare``), in table order."""

    REGRESSED = "regressed"
    FIXED = "fixed"
    NEW = "new"
    GONE = "gone"
    CHANGED = "changed"
    NOISE = "noise"
    SAME = "same"


class IngestStatus(StrEnum):
    """What ingesting a job directory did."""

    INGESTED = "ingested"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    METADATA_UPDATED = "metadata updated"


@dataclass
class JobData:
    """One job's data as polars frames: what the analysis and the figures work on."""

    name: str
    meta: dict[str, str]
    probes: pl.DataFrame  # store.jobdata.PROBE_COLUMNS, in the order the job's files listed them
    runs: pl.DataFrame  # store.jobdata.RUN_COLUMNS, one row per arm
    curves: dict[str, pl.DataFrame]  # arm -> its loss curve: "step", "value" (full series)
