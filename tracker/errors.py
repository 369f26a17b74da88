"""Expected errors: the CLI prints each as one ``Error: ...`` line and exits with code 1.

Each class's docstring is its message template; ``str.format`` fills it from the keyword
arguments given when raising, so the text users read lives in one place.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from tracker.masking import masked

KNOWN_NAMES_SHOWN = 30


class TrackerError(Exception):
    """{message}"""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        template = (self.__doc__ or "{message}").strip()
        super().__init__(masked(template.format(**fields)))  # no URL's credentials, ever


class BadInput(TrackerError):
    """{path}: {problem}"""


class NothingToIngest(TrackerError):
    """{path}: no mem_sweep.json, *.jsonl probe file or <variant>_s<seed>.csv arm found"""


class NoSuchDirectory(TrackerError):
    """{path}: no such directory"""


class NotADirectory(TrackerError):
    """{path}: not a directory"""


class BadJobName(TrackerError):
    """invalid job name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit, at most 100 characters{hint}"""


class JobExists(TrackerError):
    """job {name!r} already exists with different content; use --replace to swap it"""


class NotADemoJob(TrackerError):
    """job {name!r} already exists and is not one of the demo's sample jobs; run the demo on another database, e.g. tracker --db sqlite:///demo.db demo"""


class JobNotFound(TrackerError):
    """no job named {name!r}"""


class UnknownJob(JobNotFound):
    """no job named {name!r}; known jobs: {known}"""


class UnknownArm(TrackerError):
    """no arm {name!r} in the selected jobs; known arms: {known}"""


class UnknownMetaKey(TrackerError):
    """no job has metadata {key!r}; known keys: {known}"""


class BadWhere(TrackerError):
    """{message}"""


class UnknownWhereKey(BadWhere):
    """no run column or metadata key {key!r}; run columns: {columns}; metadata: {known}{hint}"""


class NumberComparedToText(BadWhere):
    """{key} is a number: {condition!r} compares it with the text {value!r}"""


class UnknownNoteKind(BadWhere):
    """no note kind {kind!r}; known kinds: {known}"""


class NotesOperator(BadWhere):
    """{condition!r}: notes takes = or != and a kind (notes=resumed, notes!=resumed)"""


class UnknownValue(TrackerError):
    """no job has {what}; known values: {known}{hint}"""


class NoJobSince(TrackerError):
    """no selected job is at or after {since}; the latest is {latest} ({job})"""


class MissingMetaKey(TrackerError):
    """job {job!r} has no metadata {key!r} to unset; its keys: {known}"""


class UnknownRevision(TrackerError):
    """database {url} is at schema revision {revision}, which this tracker does not know (newer tracker?); it was left untouched"""


class NotATrackerDatabase(TrackerError):
    """database {url} holds tables but no tracker schema version; it was left untouched"""


class OutdatedSchema(TrackerError):
    """database {url} is at schema revision {revision}, older than this tracker's {head}; run `tracker db upgrade`"""


class DatabaseBusy(TrackerError):
    """database {url} stayed locked by other writers for {seconds} s; nothing was written, try again"""


class DatabaseFailed(TrackerError):
    """database error: {reason}; nothing of this transaction was written"""


class DatabaseUnavailable(TrackerError):
    """cannot use database {url}: {reason}"""


class DatabaseGone(TrackerError):
    """database file {path} is gone (removed or moved away); pages answer again once a tracker database is back at that path"""


class ServerBusy(TrackerError):
    """the server is busy: {slots} heavy requests are under way and more are queued; try again in {seconds} s"""


class CurveNotFound(TrackerError):
    """job {job!r} has no curve {metric!r} for arm {arm!r}; its metrics: {known}"""


class DamagedCurve(TrackerError):
    """stored curve {job}/{arm} {metric} steps {first}-{last} is damaged ({reason}); re-ingest the job from its files"""


class DamagedRun(TrackerError):
    """stored run {job}/{arm} is damaged ({reason}); re-ingest the job from its files"""


class DamagedSummary(TrackerError):
    """stored summary of job {job} is damaged ({reason}); re-ingest the job from its files"""


class DamagedRunIndex(TrackerError):
    """stored runs index of job {job} is damaged ({reason}); rebuild it with `tracker db check --repair`"""


class BadExpectations(TrackerError):
    """{path}: {problem}"""


class BadTime(TrackerError):
    """time {value!r} is not an ISO 8601 date or time (e.g. 2026-11-29T14:00:00Z)"""


class UnknownMetric(TrackerError):
    """unknown metric {metric!r}; choose one of: {known}"""


class UnknownColumn(TrackerError):
    """no column {name!r} in the runs table; its columns: {known}"""


class UnknownStatus(TrackerError):
    """no verdict status {status!r}; choose one of: {known}"""


class SqlRefused(TrackerError):
    """sql: {reason}"""


class UpgradeFailed(TrackerError):
    """upgrading {url} failed and was rolled back, it is still at revision {revision}: {reason}"""


class GroupKeyClash(TrackerError):
    """cannot group by metadata {key!r}: the table already has a column of that name"""


class UnsafeHost(TrackerError):
    """refusing to serve on {host} without a token: anyone who can reach it could read the study; give --token (or TRACKER_SERVE_TOKEN), or serve on 127.0.0.1"""


class PortInUse(TrackerError):
    """port {port} is in use; pick another with --port"""


class CannotListen(TrackerError):
    """cannot listen on {host} port {port}: {reason}"""


class NotADatabaseUrl(TrackerError):
    """{url!r} is not a database URL; for a SQLite file write sqlite:///{url}"""


class UnsupportedDatabase(TrackerError):
    """unsupported database URL scheme '{scheme}://': the tracker works with SQLite (sqlite:///FILE) and PostgreSQL (postgresql://USER@HOST/DATABASE, psycopg 3)"""


class NotAReportFolder(TrackerError):
    """{path} is not empty and holds no report (no manifest.json), whose files a report would overwrite; write the report into another folder, or give --force"""


class NoSuchDatabase(TrackerError):
    """no database file {path}; only `tracker ingest`, `tracker demo` and `tracker db upgrade` create one"""


def known_names(names: Iterable[str], near: str | None = None) -> str:
    """The names an unknown one could have meant, sorted, for the ``known`` of an error;
    with ``near`` (the unknown name), the one close to it if there is one (``did_you_mean``)."""
    unique = sorted(set(names))
    if not unique:
        return "none"
    shown = ", ".join(unique[:KNOWN_NAMES_SHOWN])
    hidden = len(unique) - KNOWN_NAMES_SHOWN
    listed = f"{shown} and {hidden} more" if hidden > 0 else shown
    return listed + ("" if near is None else did_you_mean(near, unique))


NEAR_MISS = 0.8  # difflib's similarity ratio from which a known name counts as close


def _transposed(typed: str, name: str) -> bool:
    """Whether ``typed`` is ``name`` with two neighbouring letters swapped (``jbo2``)."""
    if len(typed) != len(name):
        return False
    differ = [i for i, (a, b) in enumerate(zip(typed, name, strict=True)) if a != b]
    return (
        len(differ) == 2
        and differ[1] == differ[0] + 1
        and typed[differ[0]] == name[differ[1]]
        and typed[differ[1]] == name[differ[0]]
    )


def did_you_mean(value: str, known: Iterable[str], shown: str = "{}") -> str:
    """``; did you mean X?`` when exactly one known name is ``value`` with two neighbouring
    letters swapped (``jbo2`` -> job2, whatever job1..job6 are known), else when exactly one
    is closest to it and close (case aside: ``Job2`` -> job2, ``flsh`` -> flash; ``job7``
    among job1..job6 names none), else ''. ``shown`` formats the name as the message spells
    it (``"gpu={}"``)."""
    names = {name.casefold(): name for name in sorted(set(known), reverse=True)}
    swapped = [name for folded, name in names.items() if _transposed(value.casefold(), folded)]
    if len(swapped) == 1:
        return f"; did you mean {shown.format(swapped[0])}?"
    scores = sorted(
        (difflib.SequenceMatcher(None, value.casefold(), folded).ratio(), folded)
        for folded in names
    )
    if not scores or scores[-1][0] < NEAR_MISS:
        return ""
    if len(scores) > 1 and scores[-2][0] == scores[-1][0]:
        return ""  # two as close: no guess
    return f"; did you mean {shown.format(names[scores[-1][1]])}?"


class BadPlot(TrackerError):
    """plot: {problem}"""


class WindowReversed(TrackerError):
    """start must not exceed end (start {start}, end {end})"""


class TooFewPoints(TrackerError):
    """points must be at least {least}, got {points}"""


class RunNotFound(CurveNotFound):
    """job {job!r} has no arm {arm!r}; its arms: {known}"""


def case_hint(value: str, known: Iterable[str], shown: str = "{}") -> str:
    """`` (X differs only in case)`` when a known name is ``value`` but for case, else ''.
    ``shown`` formats the known name as the message spells it (``"gpu={}"``)."""
    for name in sorted(set(known)):
        if name.casefold() == value.casefold():
            return f" ({shown.format(name)} differs only in case)"
    return ""


class MissingExtra(TrackerError):
    """{url}: reading {protocol}:// needs {package}: pip install 'tracker[{extra}]'"""


class UnknownProtocol(TrackerError):
    """{url}: {reason}"""


class UnknownScheme(TrackerError):
    """{url}: no URL scheme {scheme!r}; known: {known}, or a local path{hint}"""


class MisspelledURL(TrackerError):
    """{location}: not a local path but a misspelt URL; did you mean {url}?"""


class StorageFailed(TrackerError):
    """{url}: {reason}; nothing was stored"""


class ExportFailed(TrackerError):
    """export to {directory} failed writing job {job} ({reason}); {written}, no partial file left"""


class StorageUnreadable(BadInput):
    """{path}: cannot be read ({reason})"""


class Interrupted(KeyboardInterrupt):
    """interrupted: {outcome}"""

    # A KeyboardInterrupt, not a TrackerError: no ``except TrackerError`` may swallow it.
    def __init__(self, outcome: str, stored: Sequence[str] = (), not_stored: Sequence[str] = ()):
        self.stored = list(stored)
        self.not_stored = list(not_stored)
        super().__init__((self.__doc__ or "{outcome}").strip().format(outcome=outcome))

    @classmethod
    def of_jobs(cls, stored: Sequence[str], not_stored: Sequence[str]) -> Interrupted:
        """``job1, job2 stored; job3 not stored``."""
        parts = [
            f"{', '.join(names)} {word}"
            for names, word in ((stored, "stored"), (not_stored, "not stored"))
            if names
        ]
        return cls("; ".join(parts) or "nothing stored", stored, not_stored)


def raised_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` stands for a Ctrl-C: a library that calls back into Python wraps the
    KeyboardInterrupt raised there in its own error (pydantic's serializers), and cleanup
    failing while one unwinds raises another (SQLAlchemy's asserts on a half-closed
    transaction). Either way the interrupt is in its chain."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


class JobOfOtherStudy(TrackerError):
    """job {job!r} is of study {actual!r}, not {study!r}"""


class NoSampleJobs(TrackerError):
    """study {study!r} has no sample jobs for the demo; the studies that have: {known}"""


class UnknownStudy(TrackerError):
    """unknown study {study!r}; the known studies: {known}"""


class DamagedCurveNumbers(TrackerError):
    """stored curve {job}/{arm} {metric}: its row's {column} is {stored}, its points give {derived}; rebuild it with `tracker db check --repair`"""


class DamagedVerdicts(TrackerError):
    """stored verdicts and numbers of job {job} are damaged ({difference}); rebuild them with `tracker db check --repair`"""


class ReportFailed(TrackerError):
    """report to {directory} failed ({reason}); its index.html and manifest not updated, job pages written so far are kept and rendered again by the next run"""


class BadMetaValue(TrackerError):
    """metadata {key}: the value {value!r} contains {character}, a character that is not printable (a value is printable text: no control, invisible or text-direction character)"""


class NotAStudyDirectory(TrackerError):
    """{given}: {path} is not a directory of study files"""


class DuplicateStudy(TrackerError):
    """two studies named {study!r}: {first} and {second}; rename one (its file and its [study] name)"""
