"""What a job's stored rows were judged against: the expectations' values and the analysis'
version, as one digest."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

# Bump when a change of the analysis changes a verdict, a number or a summary for the same
# data and expectations: stored rows of an older version are then ignored (analysed afresh
# on every read) until `tracker db rederive` (or `tracker db upgrade`) refills them.
ANALYSIS_VERSION = 2  # 2: the tracking check and the figures smooth with ``smooth``; KNOWN and
# the per-job validation-loss checks


def expectations_digest(exp: Expectations) -> str:
    """What stored rows were judged against: the expectations' values (not their file
    name) and the analysis version."""
    # the models' repr holds every value and never their source (a private attribute); not
    # model_dump_json(): a serializer calls back into Python, where a Ctrl-C would be wrapped
    text = f"{ANALYSIS_VERSION}\n{exp!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
