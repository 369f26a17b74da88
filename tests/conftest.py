"""Fixtures: a fresh, really migrated database per test, on every configured backend.

SQLite always; PostgreSQL when TRACKER_TEST_POSTGRES_URL is set (each test gets a schema of
its own, created and dropped here; without it the PostgreSQL cases are deselected, in one
line). In CI (CI=true) a PostgreSQL or browser test that cannot run fails instead.
"""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import Iterator
from functools import cache, partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
import typer.main
import typer.testing
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from sqlalchemy import Engine, create_engine, make_url, text
from typer.testing import CliRunner

from tests.templates import Templates, libpq_url
from tracker.cli import app
from tracker.sample import write_sample_job
from tracker.server import create_app
from tracker.store.schema import current_revision, open_database

POSTGRES_ENV = "TRACKER_TEST_POSTGRES_URL"
# xdist sets COLUMNS=80 in its workers; the CLI fits its tables to COLUMNS, so unset, every test
# sees what a pipe gets unless it asks for a width itself (as `tracker` run under CI would)
os.environ.pop("COLUMNS", None)
IN_CI = os.environ.get("CI") == "true"

# No property test may depend on the machine's speed: no deadline per example, and no
# health check that fails because generating data was slow (a loaded CI machine).
settings.register_profile(
    "any_machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("any_machine")

# typer's test runner builds the whole click command tree for every invocation: three quarters
# of a short command's CPU. The tree is the same each time, so every runner here builds it once.
assert hasattr(typer.testing, "_get_command"), "typer's runner no longer builds it there"
typer.testing._get_command = cache(typer.main.get_command)


NO_POSTGRES = f"{POSTGRES_ENV} is not set: no PostgreSQL server to test against"


# The files of the longest tests (10-30 s each), run first: a worker out of tests takes only
# ones not yet started from another, so a long test started last ends the run on one core.
LONG_FIRST = (
    "test_interrupt_anywhere.py",
    "test_crash_safety.py",
    "test_gate.py",
    "test_concurrency.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first. Without a PostgreSQL server (and not in CI, where they fail
    instead), the PostgreSQL cases are deselected, said once at the end, rather than skipped
    one line each."""
    items.sort(key=lambda item: item.path.name not in LONG_FIRST)
    if os.environ.get(POSTGRES_ENV) or IN_CI:
        return
    postgres = [item for item in items if _backend(item) == "postgresql"]
    if postgres:
        config.hook.pytest_deselected(items=postgres)
        items[:] = [item for item in items if _backend(item) != "postgresql"]


def _backend(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("db_url")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (modules, their functions and classes) lives as long as the
    worker: frozen, each full collection of a test's garbage no longer walks it again. The
    young generations are collected less often than Python's default (every 700 allocations):
    the tests make many short-lived objects and few cycles, and the default's collections cost
    about 6% of a worker's CPU; a test that needs garbage gone collects it itself."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not os.environ.get(POSTGRES_ENV) and not IN_CI:
        terminalreporter.write_line(f"PostgreSQL tests deselected: {NO_POSTGRES}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Hypothesis times garbage collection with a gc callback; xdist stops a worker by
    interrupting its main thread, and a KeyboardInterrupt landing in that callback printed
    an "Exception ignored" traceback after the run: once the tests are done it goes."""
    gc.callbacks[:] = [
        callback
        for callback in gc.callbacks
        if not getattr(callback, "__module__", "").startswith("hypothesis.")
    ]


def require(condition: bool, reason: str) -> None:
    """Skip locally when a service is missing; in CI that is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@cache
def admin_connection(server: str) -> psycopg.Connection[Any]:
    """The connection a worker creates and drops the tests' schemas on: one, not one a test."""
    return psycopg.connect(libpq_url(server), autocommit=True)


def schema_url(server: str, schema: str) -> str:
    """A URL on ``server`` whose tables live in ``schema``, created here."""
    admin_connection(server).execute(f'CREATE SCHEMA "{schema}"'.encode())
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tracker.db'}"
        return
    server = os.environ.get(POSTGRES_ENV)
    require(bool(server), NO_POSTGRES)
    assert server is not None
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema_url(server, schema)
    admin = admin_connection(server)
    if not templates.release(admin, schema):
        return
    dropped[server] = dropped.get(server, 0) + 1
    if dropped[server] % VACUUM_EVERY == 0:
        admin.execute(VACUUM_CATALOG)


# Each test's schema leaves its tables' rows dead in the system catalogs when it is dropped;
# where autovacuum is off (as on the server this was measured on) they pile up, and every
# look at the catalog (each command's schema check) scans them: after one suite's worth, 163
# PostgreSQL tests took 101 s instead of 66 s.
VACUUM_EVERY = 50
VACUUM_CATALOG = (
    b"VACUUM pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_depend,"
    b" pg_catalog.pg_type, pg_catalog.pg_constraint, pg_catalog.pg_index,"
    b" pg_catalog.pg_attrdef, pg_catalog.pg_sequence, pg_catalog.pg_statistic"
)
dropped: dict[str, int] = {}  # schemas dropped by this worker, by server


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """The databases that many tests read, built once a session (``study``'s)."""
    server = os.environ.get(POSTGRES_ENV, "")
    built = Templates(tmp_path_factory.mktemp("templates"), partial(schema_url, server), Cli)
    yield built
    built.drop()


@pytest.fixture
def reader_url(db_url: str) -> Iterator[str]:
    """``db_url`` as a role without superuser rights (PostgreSQL), allowed to read the test's
    schema: ``tracker sql`` refuses superusers. The same URL on SQLite."""
    if not db_url.startswith("postgresql"):
        yield db_url
        return
    url = make_url(db_url)
    schema = str(url.query["options"]).removeprefix("-csearch_path=")
    role = f"r_{schema}"
    admin = create_engine(url.set(query={}), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        connection.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        connection.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        connection.execute(
            text(
                f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" GRANT SELECT ON TABLES TO "{role}"'
            )
        )
    yield url.set(username=role).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP OWNED BY "{role}"'))
        connection.execute(text(f'DROP ROLE "{role}"'))
    admin.dispose()


def migrated(templates: Templates, db_url: str) -> None:
    """``db_url`` made a database at the newest revision: a copy of one the real migrations
    built once a session, as replaying them costs each test about 0.1 s of CPU."""
    if templates.holds_a_copy(db_url):
        return
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:  # another fixture may have filled it already
            filled = current_revision(connection) is not None
    finally:
        engine.dispose()
    if not filled:
        templates.copy_into(db_url, "migrated", lambda _cli, _directory: None)


@pytest.fixture
def engine(templates: Templates, db_url: str) -> Iterator[Engine]:
    migrated(templates, db_url)
    engine = open_database(db_url)
    yield engine
    engine.dispose()


class Cli:
    """Runs the real command line against the test's database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.runner = CliRunner()

    def __call__(self, *args: str, ok: bool = True):  # type: ignore[no-untyped-def]
        result = self.runner.invoke(app, ["--db", self.url, *args], catch_exceptions=not ok)
        if ok:
            assert result.exit_code == 0, result.output + result.stderr
        return result


@pytest.fixture
def cli(templates: Templates, db_url: str) -> Cli:
    """The command line on a database that exists (reading commands never create one)."""
    migrated(templates, db_url)
    return Cli(db_url)


# The sample jobs a study holds: name -> (write_sample_job's options, --meta items), ingested
# in this order. A test module may name its own as JOBS (and their length as STEPS).
JOBS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "j1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z", "gpu=A10G", "flashoptim=0.1.0"]),
    "j3": (
        {"seed": 2, "flash_state_shift": 0.5},
        ["time=2026-11-01T00:00:00Z", "gpu=A10G", "flashoptim=0.1.1"],
    ),
    "j2": ({"seed": 1, "failed_probe": None}, ["time=2026-10-15T00:00:00Z", "gpu=L4"]),
}
STEPS = 300


def ingest_jobs(
    cli: Cli, root: Path, jobs: dict[str, tuple[dict[str, Any], list[str]]], steps: int
) -> None:
    """Write each sample job under ``root`` and ingest it with its metadata."""
    for name, (spec, meta) in jobs.items():
        directory = write_sample_job(root / name, steps=steps, **spec)
        cli("ingest", str(directory), *(f"--meta={item}" for item in meta))


@pytest.fixture
def study(db_url: str, request: pytest.FixtureRequest, templates: Templates) -> Cli:
    """The command line on a database holding the sample jobs: the test module's ``JOBS``
    of ``STEPS`` steps, else this module's (built once a session, copied for each test)."""
    jobs = getattr(request.module, "JOBS", JOBS)
    steps = getattr(request.module, "STEPS", STEPS)

    def build(cli: Cli, root: Path) -> None:
        ingest_jobs(cli, root, jobs, steps)

    templates.copy_into(db_url, ("study", repr(jobs), steps), build)
    return Cli(db_url)


def client_for(url: str, token: str | None = None, study: str | None = None) -> TestClient:
    """The server on ``url`` (guarded by ``token``; of ``study``'s jobs), answering errors as
    a client sees them."""
    app = create_app(url, token, study)
    return TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False)


@pytest.fixture
def client(study: Cli, db_url: str) -> Iterator[TestClient]:
    """The server on the study's database."""
    with client_for(db_url) as client:
        yield client


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """A real S3 API server on loopback (moto's server mode), for the whole session; the
    process's AWS variables point at it (and only at it) while it runs."""
    try:
        import s3fs  # noqa: F401  # what `tracker[s3]` installs

        from tests.s3_server import S3Server
    except ImportError as exc:
        require(False, f"{exc.name} is not installed: no S3 server to test against")
    server = S3Server()
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("AWS_")]:
            patch.delenv(name)
        for name, value in server.environment().items():
            patch.setenv(name, value)
        yield server
    server.stop()


@pytest.fixture
def s3(s3_server: Any) -> Any:
    """The S3 server with its request count and spoiled keys reset for this test."""
    s3_server.traffic.reset()
    return s3_server
