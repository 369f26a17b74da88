"""Plain-text forms of values shown in the report's tables."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tracker.analysis.verdict import FAIL, KNOWN, NA, PASS

if TYPE_CHECKING:
    from tracker.analysis.verdict import Verdict

STATUSES = (PASS, FAIL, KNOWN, NA)
# KNOWN (a known setup difference) has a neutral style of its own: it is no failure
STATUS_CLASS: dict[str, str] = {PASS: "pass", FAIL: "fail", KNOWN: "known", NA: "na"}
# verdict tables list failures first, then passes, then known differences, then what could
# not be checked
STATUS_RANK: dict[str, int] = {FAIL: 0, PASS: 1, KNOWN: 2, NA: 3}


def fmt_value(value: object) -> str:
    """A measured/expected/tolerance value for a table cell (plain text, not escaped)."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    return str(value)


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    tally = Counter(v.status for v in verdicts)
    return {status: tally.get(status, 0) for status in STATUSES}


def failures_first(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """FAIL, then PASS, then KNOWN, then N/A; the analysis' order within each."""
    return sorted(verdicts, key=lambda v: STATUS_RANK.get(v.status, len(STATUS_RANK)))
