"""What a job's stored rows were judged against: the expectations' values and the analysis'
version, as one digest."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

# Bump when a change of the analysis changes a verdict, a number or a summary for the same
# data and expectations: stored rows of an older version are then ignored (analysed afresh
# on every read) until `tracker db rederive` (or `tracker db upgrade`) refills them.
ANALYSIS_VERSION = 3  # 2: the tracking check and the figures smooth with ``smooth``; KNOWN and
# the per-job validation-loss checks; 3: runs that stopped early are left out, the per-job
# validation-loss check is judged with the job's seed spread


def expectations_digest(exp: Expectations) -> str:
    """What stored rows were judged against: the expectations' values (not their file
    name) and the analysis version."""
    text = f"{ANALYSIS_VERSION}\n{dataclasses.replace(exp, source='')!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
