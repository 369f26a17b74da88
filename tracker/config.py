"""Where the database lives: ``--db``, else ``TRACKER_DATABASE_URL``, else a local file."""

from __future__ import annotations

import os

DEFAULT_DATABASE_URL = "sqlite:///tracker.db"
DATABASE_URL_ENV = "TRACKER_DATABASE_URL"


def database_url(explicit: str | None = None) -> str:
    return explicit or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL
