"""Where the database lives: ``--db``, else ``TRACKER_DATABASE_URL``, else a local file; how
long a read-only statement may run."""

from __future__ import annotations

import os

from tracker.errors import NotADatabaseUrl, UnsupportedDatabase

DEFAULT_DATABASE_URL = "sqlite:///tracker.db"
DATABASE_URL_ENV = "TRACKER_DATABASE_URL"
STUDIES_ENV = "TRACKER_STUDIES"  # directories of study files besides the packaged ones
# a statement of `tracker sql` or of a served request is stopped after this many seconds
STATEMENT_TIMEOUT_S = 60.0
# what one `tracker sql` may read back: a terminal's or a script's worth; more is an export's job
MAX_ROWS = 100_000
MAX_BYTES = 64 * 1024 * 1024  # of the values, as text or bytes (a number counts 8)


# psycopg 3 is the tracker's PostgreSQL driver; SQLAlchemy's bare schemes mean psycopg2.
POSTGRES_SCHEMES = ("postgres", "postgresql")
# what the tracker installs drivers for (any other SQLAlchemy dialect fails on a missing module)
SUPPORTED_SCHEMES = ("sqlite", "sqlite+pysqlite", "postgresql+psycopg", *POSTGRES_SCHEMES)


def database_url(explicit: str | None = None) -> str:
    return normalize_url(explicit or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL)


def normalize_url(url: str) -> str:
    """A URL as users type it: ``postgres://`` and ``postgresql://`` use psycopg 3; a bare
    file path is refused with the SQLite URL it probably meant."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        raise NotADatabaseUrl(url=url)
    if scheme not in SUPPORTED_SCHEMES:
        raise UnsupportedDatabase(scheme=scheme)
    return f"postgresql+psycopg://{rest}" if scheme in POSTGRES_SCHEMES else url
