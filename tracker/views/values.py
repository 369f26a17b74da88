"""Plain-text forms of values shown in the report's tables."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from tracker.analysis.verdict import FAIL, KNOWN, NA, PASS
from tracker.domain import ClaimStatus, Status
from tracker.jsonio import format_time

if TYPE_CHECKING:
    from tracker.analysis.verdict import Verdict

STATUSES = (PASS, FAIL, KNOWN, NA)
# KNOWN (a known setup difference) has a neutral style of its own: it is no failure
STATUS_CLASS: dict[str, str] = {PASS: "pass", FAIL: "fail", KNOWN: "known", NA: "na"}
# verdict tables list failures first, then passes, then known differences, then what could
# not be checked
STATUS_RANK: dict[str, int] = {FAIL: 0, PASS: 1, KNOWN: 2, NA: 3}
# the jobs table's verdict columns, in the verdict tables' order
JOB_STATUSES: tuple[str, ...] = tuple(
    sorted(Status, key=lambda s: STATUS_RANK.get(s, len(STATUS_RANK)))
)


def status_key(status: str) -> str:
    """A status as a URL and a CSS class know it: ``fail``, ``pass``, ``na``, ..."""
    return STATUS_CLASS.get(status) or "".join(c for c in status.lower() if c.isalnum())


# the jobs table's columns: (header, sort key, numeric)
# The jobs table's verdicts filter: a row's status (``tracker.views.pages.status_of``) -> its
# label; "" is any.
JOB_FILTERS: tuple[tuple[str, str], ...] = (
    ("", "any"),
    ("fail", "with a FAIL"),
    ("pass", "no FAIL"),
    ("na", "nothing checked"),
)
JOB_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("job", "job", False),
    ("time", "time", False),
    *((status, status_key(status), True) for status in JOB_STATUSES),
    ("probes", "probes", True),
    ("arms", "arms", True),
    ("metadata", "metadata", False),
)
# Claims the study did not see reproduced come first: they are what a reader acts on.
CLAIM_ORDER: tuple[str, ...] = (
    ClaimStatus.NOT_REPRODUCED,
    ClaimStatus.MIXED,
    ClaimStatus.INCONCLUSIVE,
    ClaimStatus.REPRODUCED,
)
CLAIM_CLASS: dict[str, str] = {
    ClaimStatus.NOT_REPRODUCED: "fail",
    ClaimStatus.MIXED: "mixed",
    ClaimStatus.INCONCLUSIVE: "na",
    ClaimStatus.REPRODUCED: "pass",
}


def fmt_value(value: object) -> str:
    """A measured/expected/tolerance value for a table cell (plain text, not escaped)."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_time(value)  # one format everywhere: 2026-11-29T21:13:57Z
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    return str(value)


def breakable(value: object) -> Markup:
    """``value`` escaped, with a line-break opportunity after each ``_``, ``/``, ``=`` and
    ``,``: a long name then wraps at its parts instead of mid-word or off the page."""
    parts = re.split(r"(?<=[_/=,])", str(value))
    return Markup("<wbr>").join(escape(part) for part in parts)


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    tally = Counter(v.status for v in verdicts)
    return {status: tally.get(status, 0) for status in STATUSES}


def failures_first(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """FAIL, then PASS, then KNOWN, then N/A; the analysis' order within each."""
    return sorted(verdicts, key=lambda v: STATUS_RANK.get(v.status, len(STATUS_RANK)))


def claim_rows(
    rows: Sequence[Mapping[str, Any]], status: str | None = None
) -> list[Mapping[str, Any]]:
    """Claims in ``CLAIM_ORDER`` (stable within a status), only ``status`` when given."""
    rank = {s: i for i, s in enumerate(CLAIM_ORDER)}
    kept = [row for row in rows if status is None or row["status"] == status]
    return sorted(kept, key=lambda row: rank.get(row["status"], len(rank)))
