"""The tracker from Python, for notebooks and for the command line: the one front door.

    >>> from tracker import api
    >>> api.trend(None, "bpp_state", model="gpt-124m", variant="flash")   # default database
    >>> api.runs("postgresql+psycopg://team@db/tracker", aggregate_seeds=True)

Every function takes the database as its first argument: a URL, an ``Engine`` from
``api.connect``, or None for ``TRACKER_DATABASE_URL`` / ``sqlite:///tracker.db`` (which
``jobs``, ``probes`` and ``runs`` also take when it is left out). The ``tracker`` command
line is a shell over these functions: each command parses, calls one of them and prints;
storing works from here too, telling its progress to the callbacks given:

    >>> api.ingest("sqlite:///study.db", "s3://bucket/job2", meta={"gpu": "A10G"})
    >>> api.sync(None, "hf://buckets/ORG/flashoptim-repro/", on_job=print)
    >>> api.upgrade(None)   # migrate, then refill the kept rows (api.rederive)

Behind this door: ``rows`` (the catalog as rows and dicts, raw SQL, engines: no polars),
``read`` (the queries as polars DataFrames, the report, the server) and ``write`` (ingest,
sync, copy, rederive, upgrade, check, the demo). A name is loaded from its module when it is
first asked for, so that ``tracker jobs`` and the other light commands start without
polars.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as mypy and editors see them, by module
    # isort: off
    from tracker.api.rows import (
        HEAD as HEAD,
        Database as Database,
        Row as Row,
        SqlLimits as SqlLimits,
        SqlResult as SqlResult,
        check_study as check_study,
        connect as connect,
        delete as delete,
        edit_meta as edit_meta,
        first_line as first_line,
        in_write as in_write,
        job_meta as job_meta,
        job_rows as job_rows,
        keeping_lost_interrupts as keeping_lost_interrupts,
        meta_text as meta_text,
        open_engine as open_engine,
        parse_time as parse_time,
        parse_where as parse_where,
        raise_lost_interrupt as raise_lost_interrupt,
        schema_revision as schema_revision,
        show as show,
        sql_result as sql_result,
        storing_engine as storing_engine,
        studies as studies,
        use_study_dirs as use_study_dirs,
        using_engine as using_engine,
        with_session as with_session,
    )
    from tracker.api.read import (
        Comparison as Comparison,
        Filters as Filters,
        JobSelection as JobSelection,
        Where as Where,
        claims as claims,
        compare as compare,
        comparison as comparison,
        curve as curve,
        export as export,
        jobs as jobs,
        probes as probes,
        report as report,
        runs as runs,
        serve as serve,
        sql as sql,
        trend as trend,
    )
    from tracker.api.write import (
        Checked as Checked,
        CopiedJob as CopiedJob,
        Demo as Demo,
        IngestOptions as IngestOptions,
        IngestProgress as IngestProgress,
        IngestReport as IngestReport,
        IngestResult as IngestResult,
        Rederived as Rederived,
        SyncReport as SyncReport,
        SyncStatus as SyncStatus,
        SyncedJob as SyncedJob,
        Upgrade as Upgrade,
        check as check,
        copy_jobs as copy_jobs,
        demo as demo,
        demo_jobs as demo_jobs,
        ingest as ingest,
        ingest_directories as ingest_directories,
        nothing_stored_yet as nothing_stored_yet,
        rederive as rederive,
        sync as sync,
        upgrade as upgrade,
    )
    from tracker.jobdir.limits import (
        MAX_FILE_SIZE as MAX_FILE_SIZE,
        size_text as size_text,
    )
    # isort: on

# each name by the module it comes from, which is imported when the name is first asked for
# (a --help default needs the limits: a module of the standard library alone)
_NAMES = {
    "tracker.api.rows": (
        "HEAD Database Row SqlLimits SqlResult check_study connect delete edit_meta "
        "first_line in_write job_meta job_rows keeping_lost_interrupts meta_text open_engine "
        "parse_time parse_where raise_lost_interrupt schema_revision show sql_result "
        "storing_engine studies use_study_dirs using_engine with_session"
    ),
    "tracker.api.read": (
        "Comparison Filters JobSelection Where claims compare comparison curve export jobs "
        "probes report runs serve sql trend"
    ),
    "tracker.api.write": (
        "Checked CopiedJob Demo IngestOptions IngestProgress IngestReport IngestResult "
        "Rederived SyncReport SyncStatus SyncedJob Upgrade check copy_jobs demo demo_jobs "
        "ingest ingest_directories nothing_stored_yet rederive sync upgrade"
    ),
    "tracker.jobdir.limits": "MAX_FILE_SIZE size_text",
}
_HOMES = {name: module for module, names in _NAMES.items() for name in names.split()}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    """A name of the API, imported from its module when first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # asked once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
