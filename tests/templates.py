"""Databases built once a session and copied into each test's own database.

Most tests read the same few sample jobs; ingesting them for every test cost the suite most of
its time. A template is built once per (backend, key) in a worker, then copied: SQLite through
its online backup (consistent beside WAL), PostgreSQL by running a ``pg_dump`` of the
template's schema (as plain statements) in the test's schema, in one transaction on one
connection of the session. A copy keeps every test free to write.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import create_engine, make_url, text

from tracker.store.schema import open_database

# What the dump holds that is not for a schema of the test: the schema's creation (the test's
# exists already), psql's meta-commands, and the emptied search path (it would outlast the
# transaction on the session's connection).
NOT_FOR_THE_COPY = re.compile(
    r"^(CREATE SCHEMA [^;]+;|\\.*|SELECT pg_catalog.set_config\('search_path'.*)$", re.MULTILINE
)


@dataclass(frozen=True)
class Template:
    url: str
    value: Any  # what the builder returned (expected values measured while building)
    dump: str | None  # PostgreSQL: the schema's dump, its name a placeholder


def _schema(url: str) -> str:
    return str(make_url(url).query["options"]).removeprefix("-csearch_path=")


def libpq_url(url: str) -> str:
    """The server's address as psql and pg_dump take it (no driver, no options)."""
    return make_url(url).set(drivername="postgresql", query={}).render_as_string(False)


class Templates:
    """The session's built databases, by backend and key."""

    def __init__(
        self, root: Path, postgres_url: Callable[[str], str], cli: Callable[[str], Any]
    ) -> None:
        self.root = root
        self.cli = cli  # a URL -> the command line on it
        self.postgres_url = postgres_url  # a schema name -> a URL on it
        self.built: dict[tuple[str, Hashable], Template] = {}
        self.schemas: list[str] = []
        self.restorer: psycopg.Connection[Any] | None = None  # PostgreSQL, made on first use

    def copy_into(self, url: str, key: Hashable, build: Callable[[Any, Path], Any]) -> Any:
        """Fill the empty database at ``url`` with the template ``key`` (built by
        ``build(cli, directory)`` the first time); returns what ``build`` returned."""
        backend = make_url(url).get_backend_name()
        template = self.built.get((backend, key))
        if template is None:
            template = self.built[(backend, key)] = self._build(backend, build)
        if backend == "sqlite":
            _copy_sqlite(template.url, url)
        else:
            assert template.dump is not None
            if self.restorer is None:
                self.restorer = psycopg.connect(libpq_url(url), autocommit=True)
            _restore(self.restorer, template.dump, _schema(url))
        return template.value

    def _build(self, backend: str, build: Callable[[Any, Path], Any]) -> Template:
        name = f"tmpl_{uuid.uuid4().hex[:16]}"
        directory = self.root / name
        directory.mkdir(parents=True)
        if backend == "sqlite":
            url = f"sqlite:///{directory / 'tracker.db'}"
        else:
            url = self.postgres_url(name)
            self.schemas.append(name)
        open_database(url).dispose()
        value = build(self.cli(url), directory)
        dump = None if backend == "sqlite" else _dump(url).replace(name, SCHEMA_PLACEHOLDER)
        return Template(url, value, dump)

    def drop(self, admin_url: str) -> None:
        if self.restorer is not None:
            self.restorer.close()
        if not self.schemas:
            return
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            for schema in self.schemas:
                connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


SCHEMA_PLACEHOLDER = "@@schema@@"


def _copy_sqlite(source: str, target: str) -> None:
    source_path = make_url(source).database
    target_path = make_url(target).database
    assert source_path and target_path
    src, dst = sqlite3.connect(source_path), sqlite3.connect(target_path)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _dump(url: str) -> str:
    command = ["pg_dump", "--no-owner", "--no-privileges", "--schema", _schema(url)]
    command += ["--inserts", "--rows-per-insert=100"]  # statements one connection can run
    dumped = subprocess.run(
        [*command, libpq_url(url)], check=True, capture_output=True, text=True
    ).stdout
    return NOT_FOR_THE_COPY.sub("", dumped)


def _restore(connection: psycopg.Connection[Any], dump: str, schema: str) -> None:
    """The dump run in ``schema``, emptied first (a test's fixtures may have filled it with
    another template: a migrated database under the sample study's), in one transaction: one
    commit to flush instead of one a statement."""
    emptied = f'DROP SCHEMA "{schema}" CASCADE; CREATE SCHEMA "{schema}";\n'
    with connection.transaction():
        connection.execute((emptied + dump.replace(SCHEMA_PLACEHOLDER, schema)).encode())
