"""SQLite database files: the path a URL names, opening it read-only, refusing a missing one."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, make_url
from sqlalchemy.exc import ArgumentError

from tracker.config import normalize_url
from tracker.errors import DatabaseUnavailable, NoSuchDatabase


def refuse_missing_file(engine: Engine) -> None:
    """Only commands that store data create a SQLite file: elsewhere a mistyped path would
    silently become a new, empty database."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.query.get("uri"):
        return
    if url.database not in (None, "", ":memory:") and not Path(url.database).exists():
        raise NoSuchDatabase(path=url.database)


def sqlite_file(url: str) -> str | None:
    """The path of a SQLite database file named by ``url`` (plain or a ``file:`` URI); None
    for another backend or an in-memory database."""
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        return None  # opening it says what is wrong
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    path = database.removeprefix("file:").split("?", 1)[0]
    return None if path in ("", ":memory:") else path


def read_only_uri(url: str, *, immutable: bool = False) -> str:
    """SQLite's ``file:`` URI opening the file of ``url`` read-only (``mode=ro``);
    ``immutable``: also without its ``-shm`` (see ``reads_only_as_immutable``)."""
    path = sqlite_file(url)
    if path is None:
        raise DatabaseUnavailable(url=url, reason="an in-memory database has nothing to read")
    return f"file:{quote(path)}?mode=ro{'&immutable=1' if immutable else ''}"


def read_only_url(url: str, *, immutable: bool = False) -> str:
    """``read_only_uri`` as SQLAlchemy's URL."""
    return f"sqlite:///{read_only_uri(url, immutable=immutable)}&uri=true"


def reads_only_as_immutable(url: str) -> bool:
    """Whether the SQLite file at ``url`` can be read only as immutable: a WAL database on
    read-only media, where SQLite can neither open nor create the ``-shm`` a reader needs.
    Immutable, SQLite takes no lock and never looks for other writers' changes, so it is
    used only then; a non-empty ``-wal`` (changes an immutable reader would miss) is refused.
    """
    path = sqlite_file(url)
    if path is None or not Path(path).is_file():
        return False
    try:
        with closing(sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)) as connection:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return False
    except sqlite3.OperationalError as exc:
        if str(exc) != "unable to open database file":
            return False  # the ordinary open reports it
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        reason = (
            "its -wal file holds changes that need a -shm file, which cannot be created "
            "here (read-only media?); open it once where it is writable first"
        )
        raise DatabaseUnavailable(url=url, reason=reason)
    return True
