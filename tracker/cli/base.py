"""The command groups, the global ``--db`` option and what every command shares: the options
of the query commands and the parsing of ``KEY=VALUE`` items.

Nothing here imports the library's heavy modules (polars, plotly, the store): the commands
ask ``tracker.api`` for a name when they run (it loads the name's module then), so ``tracker
--help`` starts fast.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from tracker.conditions import Condition
from tracker.config import DATABASE_URL_ENV, STUDIES_ENV, database_url
from tracker.domain import META_KEY
from tracker.errors import Interrupted, TrackerError
from tracker.row_formats import Format, shown
from tracker.signal_note import forget_interrupts, interrupted, note_interrupt

if TYPE_CHECKING:
    from tracker.api import JobSelection

SIZE = re.compile(r"(\d{1,15})\s*((?:[KMGT]i?B)?)", re.IGNORECASE)
SIZE_UNITS = (
    {"": 1}
    | {f"{prefix}b": 1000 ** (power + 1) for power, prefix in enumerate("kmgt")}
    | {f"{prefix}ib": 1024 ** (power + 1) for power, prefix in enumerate("kmgt")}
)


# The driver's own log lines ("error ignored terminating <psycopg.Copy [BAD]>" on a lost
# connection) would precede the one ``Error:`` line: a handler of its own keeps them quiet.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C


def _interrupt(_signum: int, _frame: Any) -> None:
    note_interrupt()
    raise KeyboardInterrupt


class ErrorReportingGroup(TyperGroup):
    """Turns expected errors into one line on stderr, without a traceback; an interrupt
    (Ctrl-C, or SIGTERM, taken alike) into one line saying what was stored, and exit 130;
    gives every command's help its paragraphs unwrapped, for the terminal to wrap."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _unwrap_help(self)

    def invoke(self, ctx: Any) -> Any:
        from sqlalchemy.exc import DBAPIError

        from tracker import api

        main = threading.current_thread() is threading.main_thread()
        signals = (signal.SIGINT, signal.SIGTERM) if main else ()
        before = {signum: signal.signal(signum, _interrupt) for signum in signals}
        try:
            if not main:  # the hook is the process's: a thread leaves it alone
                return super().invoke(ctx)
            with api.keeping_lost_interrupts():
                return super().invoke(ctx)
        except Interrupted as exc:
            _last_line(str(exc))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BaseException as exc:
            if interrupted(exc):  # a Ctrl-C, or an error a library raised for one
                _last_line("interrupted")
                raise typer.Exit(EXIT_INTERRUPTED) from None
            if isinstance(exc, TrackerError):  # names in it may come from anywhere
                typer.echo(f"Error: {shown(str(exc))}", err=True)
            elif isinstance(exc, DBAPIError):  # reads: a damaged file, a server gone away
                typer.echo(f"Error: database error: {api.first_line(exc)}", err=True)
            else:
                raise
            raise typer.Exit(1) from None
        finally:
            forget_interrupts()
            # a process running commands in turn (tests) keeps its own handlers
            for signum, handler in before.items():
                signal.signal(signum, handler)


def _last_line(message: str) -> None:
    """An interrupted command's line on stderr; on a terminal, from the start of a cleared
    line, so that it is not glued to a progress bar drawn there."""
    clear = "\r\033[K" if sys.stderr.isatty() else ""
    typer.echo(f"{clear}{message}", err=True)


def _unwrap_help(command: Any) -> None:
    """Each paragraph of a help text on one line, in this command and those under it: typer
    keeps a docstring's line breaks after its first paragraph, which then end lines early."""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)
    for sub in getattr(command, "commands", {}).values():
        _unwrap_help(sub)


app = typer.Typer(
    cls=ErrorReportingGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Results tracker for ML reproduction studies.",
)
db_app = typer.Typer(
    no_args_is_help=True, help="Inspect and migrate the tracker's database schema."
)
app.add_typer(db_app, name="db")
query_app = typer.Typer(
    no_args_is_help=True, help="Tables across all ingested jobs, for people and scripts."
)
app.add_typer(query_app, name="query")

FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
JobFilter = Annotated[list[str] | None, typer.Option("--job", help="Only this job; repeatable.")]
ModelFilter = Annotated[
    list[str] | None, typer.Option("--model", help="Only this model; repeatable.")
]
VariantFilter = Annotated[
    list[str] | None, typer.Option("--variant", help="Only this variant; repeatable.")
]
WhereFilter = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        metavar="KEY=VALUE",
        help="Only jobs with this metadata, or runs with this number (val_loss<3.3, "
        "nonfinite>0, notes=resumed; = != < <= > >=); repeatable.",
    ),
]
GroupBy = Annotated[
    list[str] | None,
    typer.Option(
        "--group-by",
        metavar="KEY",
        help="Add this metadata as a column; with runs --aggregate-seeds, pool the seeds of "
        "the jobs sharing its value. Repeatable.",
    ),
]
SinceOption = Annotated[
    str | None,
    typer.Option(metavar="TIME", help="Only jobs whose time is at or after TIME (ISO 8601)."),
]
ExpectationsOption = Annotated[
    Path | None,
    typer.Option("--expectations", metavar="FILE", help="TOML replacing the packaged one."),
]
StudyFilter = Annotated[
    str | None,
    typer.Option(metavar="NAME", help="Only jobs of this study (see `tracker studies`)."),
]
StudyOption = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="The jobs' study (see `tracker studies`); default: each job.json's, else flashoptim.",
    ),
]


class State:
    def __init__(self, url: str, named: bool = True) -> None:
        self.url = url
        self.named = named  # by --db or the environment, not the default file

    def engine(self, *, may_create_file: bool = False) -> Any:
        """Only the commands that store data (ingest, demo) may create a SQLite file."""
        from tracker import api

        return api.open_engine(
            self.url, may_create_file=may_create_file, on_lock_wait=_tell_waiting
        )

    def storing_engine(self) -> Any:
        """The engine of a command that stores jobs (``api.storing_engine``)."""
        from tracker import api

        return api.storing_engine(self.url, on_lock_wait=_tell_waiting)


def _tell_waiting(engine: Any) -> None:
    """A write that queues for the lock says why the command seems to hang."""
    url = engine.url.render_as_string(hide_password=True)
    typer.echo(f"waiting for another writer to finish with {url} ...", err=True)


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help=f"Database URL (env {DATABASE_URL_ENV}; default sqlite:///tracker.db).",
        ),
    ] = None,
    studies: Annotated[
        list[Path] | None,
        typer.Option(
            "--studies",
            metavar="DIR",
            help=f"Study files (NAME.toml) in DIR too, beside the packaged ones (env "
            f"{STUDIES_ENV}, ':'-separated); repeatable.",
        ),
    ] = None,
) -> None:
    """Results tracker for ML reproduction studies.

    Example: tracker --db sqlite:///study.db --studies ./studies jobs
    """
    from tracker import api

    api.use_study_dirs(studies or [])
    ctx.obj = State(database_url(db), named=bool(db or os.environ.get(DATABASE_URL_ENV)))


def state(ctx: typer.Context) -> State:
    found = ctx.find_object(State)
    assert found is not None
    return found


def parse_size(text: str, param_hint: str) -> int:
    """A size in bytes, as ``2GiB``, ``500MiB``, ``500MB`` (10**6) or a number of bytes."""
    match = SIZE.fullmatch(text.strip())
    if match is None:
        raise typer.BadParameter(
            f"expected a size such as 2GiB or 500MiB, got {text!r}", param_hint=param_hint
        )
    number, unit = match.groups()
    return int(number) * SIZE_UNITS[unit.lower()]


def parse_meta(items: list[str], param_hint: str = "--meta") -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=param_hint)
        if not META_KEY.fullmatch(key):
            raise typer.BadParameter(
                f"invalid metadata key {key!r} ({_key_problem(key)}): a key is letters, digits, "
                "'_', '.' and '-', starting with a letter or '_', at most 100 characters",
                param_hint=param_hint,
            )
        if key in meta:
            raise typer.BadParameter(f"{key!r} is given twice", param_hint=param_hint)
        meta[key] = value
    return meta


def parse_since(since: str | None) -> Any:
    """``--since`` as a datetime in UTC (None: every job), checked before the database opens."""
    from tracker import api

    try:
        return None if since is None else api.parse_time(since)
    except TrackerError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None


def job_selection(
    job: list[str] | None = None,
    model: list[str] | None = None,
    variant: list[str] | None = None,
    where: list[str] | None = None,
    group_by: list[str] | None = None,
    since: str | None = None,
    study: str | None = None,
) -> JobSelection:
    """``--job``, ``--model``, ``--variant``, ``--where``, ``--group-by``, ``--since`` and
    ``--study`` as the ``tracker.api.JobSelection`` they make, checked before the database
    opens."""
    from tracker import api

    return api.JobSelection(
        jobs=tuple(job or ()),
        models=tuple(model or ()),
        variants=tuple(variant or ()),
        where=where_pairs(where),
        group_by=tuple(group_by or ()),
        since=parse_since(since),
        study=study,
    )


def _key_problem(key: str) -> str:
    """What makes ``key`` no metadata key, in words: the first thing a reader must change."""
    if not key:
        return "it is empty"
    wrong = next((c for c in key if not re.fullmatch(r"[A-Za-z0-9_.-]", c)), None)
    if wrong is not None:
        return "it holds a space" if wrong.isspace() else f"it holds {wrong!r}"
    if not re.fullmatch(r"[A-Za-z_]", key[0]):
        return f"it starts with {key[0]!r}"
    return f"it has {len(key)} characters"


def where_pairs(where: list[str] | None, option: str = "--where") -> tuple[Condition, ...]:
    """``--where`` (or ``option``) items as conditions, checked before the database is
    opened."""
    from tracker import api

    try:
        return api.parse_where(where)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def parse_storage_options(items: list[str]) -> dict[str, Any]:
    """``--storage-option KEY=VALUE`` items; a value that reads as JSON (``true``, ``3``,
    ``{"region_name": "eu-west-1"}``) is passed as that, any other as text."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise typer.BadParameter(
                f"expected KEY=VALUE, got {key!r}=...", param_hint="--storage-option"
            )  # never the value: it may be a secret
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


StorageOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        help="Option of the URL's filesystem KEY=VALUE (e.g. endpoint_url=..., anon=true); "
        "repeatable. Credentials otherwise come from the standard places.",
    ),
]
