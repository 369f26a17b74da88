"""Databases built once a session and copied into each test's own database.

Most tests read the same few sample jobs; ingesting them for every test cost the suite most of
its time. A template is built once per (backend, key) in a worker, then copied: SQLite through
its online backup (consistent beside WAL), PostgreSQL by running a ``pg_dump`` of the
template's schema (as plain statements) in the test's schema, in one transaction on one
connection of the session. A copy keeps every test free to write.

On PostgreSQL a copy is mostly DDL, which costs the server more than most tests' own work; a
copy whose tables its test left as they were restored (same columns, constraints, grants:
``_fingerprint``) is therefore kept, its rows and sequences put back from the template's if the
test changed them, and handed by a rename to the next test that asks for the same template.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
from sqlalchemy import make_url

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
        self.held: dict[str, tuple[Hashable, Copy]] = {}  # a test's schema: its template's copy
        self.kept: dict[Hashable, list[tuple[str, Copy]]] = {}  # copies to hand on, by template

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
            self._copy_postgres(url, key, template)
        return template.value

    def holds_a_copy(self, url: str) -> bool:
        """Whether ``url`` (PostgreSQL) holds a template copied here (so it is migrated)."""
        return make_url(url).get_backend_name() != "sqlite" and _schema(url) in self.held

    def _copy_postgres(self, url: str, key: Hashable, template: Template) -> None:
        assert template.dump is not None
        if self.restorer is None:
            self.restorer = psycopg.connect(libpq_url(url), autocommit=True)
        schema = _schema(url)
        kept = self.kept.get(key)
        if kept:
            name, copy = kept.pop()
            self.release(self.restorer, schema)
            self.restorer.execute(f'ALTER SCHEMA "{name}" RENAME TO "{schema}"'.encode())
        else:
            _restore(self.restorer, template.dump, schema)
            copy = Copy(_fingerprint(self.restorer, schema))
        self.held[schema] = (key, copy)

    def release(self, connection: psycopg.Connection[Any], schema: str) -> bool:
        """Done with a test's schema: kept for the next test if it still holds its template's
        tables as restored (its rows put back if the test changed only rows), else dropped.
        Whether it was dropped."""
        if self._set_aside(schema):
            return False
        connection.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())
        return True

    def _set_aside(self, schema: str) -> bool:
        """``schema`` renamed and kept if it holds a copy of its template's tables, with the
        template's rows; whether it was."""
        held = self.held.pop(schema, None)
        if held is None or self.restorer is None:
            return False
        key, copy = held
        now = _fingerprint(self.restorer, schema)
        if now.tables != copy.fingerprint.tables:
            return False
        if now.rows != copy.fingerprint.rows:  # rows written: put back, not the DDL redone
            if copy.refills == REFILLS:
                return False
            template = _schema(self.built[("postgresql", key)].url)
            _refill(self.restorer, template, schema)
            copy = Copy(_fingerprint(self.restorer, schema), copy.refills + 1)
        name = f"kept_{uuid.uuid4().hex[:16]}"
        self.restorer.execute(f'ALTER SCHEMA "{schema}" RENAME TO "{name}"'.encode())
        self.kept.setdefault(key, []).append((name, copy))
        return True

    def _build(self, backend: str, build: Callable[[Any, Path], Any]) -> Template:
        name = f"tmpl_{uuid.uuid4().hex[:16]}"
        # not the schema's name: the dump's copies have that name replaced, and the rows'
        # paths (a job's source_path) must name the directory that was ingested in each copy
        directory = self.root / f"files_{uuid.uuid4().hex[:16]}"
        directory.mkdir(parents=True)
        if backend == "sqlite":
            url = f"sqlite:///{directory / 'tracker.db'}"
        else:
            url = self.postgres_url(name)
            self.schemas.append(name)
            if self.restorer is None:
                self.restorer = psycopg.connect(libpq_url(url), autocommit=True)
        open_database(url).dispose()
        value = build(self.cli(url), directory)
        dump = None if backend == "sqlite" else _dump(url).replace(name, SCHEMA_PLACEHOLDER)
        return Template(url, value, dump)

    def drop(self) -> None:
        """The templates and the kept copies dropped."""
        if self.restorer is None:
            return
        kept = [name for copies in self.kept.values() for name, _ in copies]
        for schema in self.schemas + kept:
            self.restorer.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())
        self.restorer.close()


SCHEMA_PLACEHOLDER = "@@schema@@"


def _copy_sqlite(source: str, target: str) -> None:
    source_path = make_url(source).database
    target_path = make_url(target).database
    assert source_path and target_path
    copy_sqlite_file(Path(source_path), Path(target_path))


def copy_sqlite_file(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` through SQLite's backup (a consistent copy)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
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


# What a test could have changed in a copy, as one digest: the schema's grants; its relations
# (with their grants and options), columns, defaults, indexes, constraints, triggers and
# functions; then each table's row count and the oldest and newest transaction that wrote
# its rows (an insert or update writes a new one, a delete lowers the count); and each
# sequence's position.
_CATALOG = """
SELECT 'schema ' || coalesce(nspacl::text, '') FROM pg_namespace WHERE oid = {ns}
UNION ALL SELECT concat_ws(' ', relname, relkind, relacl::text, reloptions::text)
  FROM pg_class WHERE relnamespace = {ns}
UNION ALL SELECT concat_ws(' ', c.relname, a.attname, a.atttypid, a.attnotnull, a.attisdropped,
    pg_get_expr(d.adbin, d.adrelid))
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE c.relnamespace = {ns} AND a.attnum > 0
UNION ALL SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = {ns}
UNION ALL SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
  WHERE connamespace = {ns}
UNION ALL SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE c.relnamespace = {ns}
UNION ALL SELECT proname FROM pg_proc WHERE pronamespace = {ns}
"""


class Fingerprint(NamedTuple):
    tables: str  # the schema's catalog: its DDL and grants
    rows: str  # each table's rows and each sequence's position


class Copy(NamedTuple):
    fingerprint: Fingerprint
    refills: int = 0  # times its rows were put back


# A refill deletes the rows a test left, which stay dead where autovacuum is off: a copy
# refilled this often is dropped instead, so that no table grows more than tenfold.
REFILLS = 10


def _fingerprint(connection: psycopg.Connection[Any], schema: str) -> Fingerprint:
    ns = f"'\"{schema}\"'::regnamespace"
    # the schema's name, which a copy changes, shows in its indexes', keys' and defaults' text
    catalog = f"SELECT replace(x, '{schema}', '@') FROM ({_CATALOG.format(ns=ns)}) s(x)"
    parts = [f"SELECT '#' || md5(string_agg(y, '|' ORDER BY y)) FROM ({catalog}) c(y)"]
    for name, kind in _relations(connection, schema):
        table = f'"{schema}"."{name}"'
        if kind == "r":
            parts.append(
                f"SELECT concat_ws(' ', '{name}', count(*), min(xmin::text::bigint),"
                f" max(xmin::text::bigint)) FROM {table}"
            )
        else:
            parts.append(f"SELECT concat_ws(' ', '{name}', last_value, is_called) FROM {table}")
    rows = connection.execute("\nUNION ALL\n".join(f"({p})" for p in parts).encode())
    tables, *contents = sorted(str(row[0]) for row in rows)  # '#' sorts before any name
    return Fingerprint(tables, "\n".join(contents))


def _relations(connection: psycopg.Connection[Any], schema: str) -> list[tuple[str, str]]:
    """The schema's tables ('r') and sequences ('S'), by name."""
    return connection.execute(
        f"SELECT relname, relkind FROM pg_class WHERE relnamespace = '\"{schema}\"'::regnamespace"
        " AND relkind IN ('r', 'S') ORDER BY relname".encode()
    ).fetchall()


def _refill(connection: psycopg.Connection[Any], template: str, schema: str) -> None:
    """``schema``'s rows and sequences made the template's again, in one transaction (its
    tables are the template's: the fingerprint said so). Foreign keys are not checked
    (``session_replication_role``): the rows are the template's, which were. Deleted, not
    truncated: a TRUNCATE gives each table and index a new file, 7 times the server's CPU."""
    relations = _relations(connection, template)
    statements = ["SET LOCAL session_replication_role = replica"]
    statements += [f'DELETE FROM "{schema}"."{name}"' for name, kind in relations if kind == "r"]
    for name, kind in relations:
        if kind == "r":
            statements.append(
                f'INSERT INTO "{schema}"."{name}" SELECT * FROM "{template}"."{name}"'
            )
        else:
            statements.append(
                f'SELECT setval(\'"{schema}"."{name}"\', last_value, is_called)'
                f' FROM "{template}"."{name}"'
            )
    with connection.transaction():
        connection.execute(";\n".join(statements).encode())
