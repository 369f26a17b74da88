"""A verdict: one check of one subject, with what was measured and what was expected."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from tracker.domain import Status
from tracker.jsonio import null_non_finite

PASS, FAIL, KNOWN, NA = Status.PASS, Status.FAIL, Status.KNOWN, Status.NA
# A verdict's keys in its JSON document; a KNOWN verdict's reason is its detail's last words
DOCUMENT_KEYS = ("check", "subject", "measured", "expected", "tolerance", "status", "detail")


@dataclass(frozen=True)
class Verdict:
    check: str  # a Check (tracker.analysis.checks; plain text when read back from storage)
    subject: str  # e.g. "gpt-124m/flash", "flash_s0"
    measured: float | bool | str | None
    expected: float | bool | str | None
    tolerance: float | None
    status: str  # a Status: PASS, FAIL, KNOWN or N/A (plain text when read back from storage)
    detail: str  # one line for people
    known: str | None = None  # a KNOWN verdict's reason: what the study knowingly does otherwise

    def as_dict(self) -> dict[str, Any]:
        # every field is a scalar: no copy to make, unlike ``dataclasses.asdict``'s
        return {name: getattr(self, name) for name in FIELDS}


def within(measured: float | None, expected: float | None, tolerance: float) -> Status:
    """PASS when |measured - expected| <= tolerance; N/A when either side is missing."""
    if measured is None or expected is None or measured != measured:
        return NA if measured is None or expected is None else FAIL
    return PASS if abs(measured - expected) <= tolerance else FAIL


def verdicts_document(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    """Verdicts as JSON objects, the same on every route that gives them (the report's and the
    server's ``verdicts.json``, ``/api/jobs/NAME``): a non-finite number is null, as in the
    study's files (``tracker.jsonio``'s null policy)."""
    return null_non_finite([{key: getattr(v, key) for key in DOCUMENT_KEYS} for v in verdicts])


FIELDS = tuple(f.name for f in fields(Verdict))  # in order, as ``as_dict`` keys them
