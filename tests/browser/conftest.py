"""What the browser tests share: Debian's chromium under Playwright, a page that records what it
should not do (a request off its origin, a console error, an uncaught exception, a dialog), the
demo jobs' report and ``tracker serve`` over them."""

from __future__ import annotations

import importlib.util
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine, make_url
from sqlalchemy.orm import Session

from tests.conftest import POSTGRES_ENV, Cli, admin_connection, require, schema_url
from tests.live_server import running_server
from tests.templates import Templates
from tracker.analysis.expectations import load_expectations
from tracker.report import generate_report
from tracker.sample import DEMO_META, write_demo_jobs, write_sample_job
from tracker.store.schema import open_database

if TYPE_CHECKING:
    from playwright.sync_api import ProxySettings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SAFETY_NET_MS = 300_000  # only for a page that never draws: no verdict depends on it
SAFETY_S = 180  # likewise, for a wait on a served page
LONG_STEPS = 20_000  # the served long job's steps


@dataclass
class Watch:
    """Everything a page did that it should not have."""

    network: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, list[str]]:
        return {k: v for k, v in vars(self).items() if v}


@cache
def dead_end() -> socket.socket:
    """A local port that is bound and never listened on: a connection to it is refused."""
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    return bound


def dead_end_proxy(origin: str = "") -> ProxySettings:
    """A proxy that every request not to ``origin``'s host and port goes to, and fails there,
    loopback included (``<-loopback>``: not bypassed as by default)."""
    host, port = dead_end().getsockname()
    bypass = ["<-loopback>", urlsplit(origin).netloc]
    return {"server": f"http://{host}:{port}", "bypass": ",".join(filter(None, bypass))}


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One chromium a worker: starting it costs more CPU than most tests' pages."""
    require(
        importlib.util.find_spec("playwright") is not None,
        "the playwright Python package is not installed",
    )
    require(CHROMIUM.is_file(), f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, proxy=dead_end_proxy()
        )
        yield browser
        browser.close()


class Tab(NamedTuple):
    origin: str
    init_script: str


class Browser:
    """The worker's chromium as a test sees it: Playwright's ``new_context`` and ``new_page``,
    and one watched tab an origin (``open_page``) that the tests take turns in. A context and a
    tab of its own cost a test more CPU than most of its pages: a renderer to start, plotly.js
    to compile again."""

    def __init__(self, chromium: Any) -> None:
        self.chromium = chromium
        self.tabs: dict[Tab, Any] = {}
        self.watches: dict[Tab, Watch] = {}
        self.used: set[Tab] = set()  # the tabs the test at hand took

    def new_context(self, **options: Any) -> Any:
        return self.chromium.new_context(**options)

    def new_page(self, **options: Any) -> Any:
        return self.chromium.new_page(**options)

    def tab(self, origin: str, watch: Watch, init_script: str = "") -> Any:
        """``origin``'s tab (running ``init_script`` in each document before its own scripts),
        its events noted in ``watch`` from now on."""
        key = Tab(origin, init_script)
        if key not in self.tabs:
            self.tabs[key] = self._open_tab(key)
        self.watches[key] = watch
        self.used.add(key)
        return self.tabs[key]

    def _open_tab(self, key: Tab) -> Any:
        origin = key.origin
        context = self.chromium.new_context(proxy=dead_end_proxy(origin))
        context.set_default_timeout(SAFETY_NET_MS)
        page = context.new_page()
        if key.init_script:
            page.add_init_script(key.init_script)

        def note_off_origin(request: Any) -> None:
            if not request.url.startswith((origin, "data:", "blob:")):
                self.watches[key].network.append(request.url)

        def note_console(message: Any) -> None:
            if message.type in ("error", "warning"):
                self.watches[key].console.append(message.text)

        def note_dialog(dialog: Any) -> None:
            self.watches[key].dialogs.append(dialog.message)
            dialog.dismiss()

        # listened to, not routed: a route would stop every request for a round trip through
        # Python and turn the browser's HTTP cache off
        page.on("request", note_off_origin)
        page.on("console", note_console)
        page.on("pageerror", lambda exc: self.watches[key].errors.append(str(exc)))
        page.on("dialog", note_dialog)
        return page

    def after_test(self) -> None:
        """The tabs the test took left blank and without cookies, nothing they do noted any
        more (the others were left so after the test that took them last); every other
        context closed."""
        for key in self.used:
            self.watches[key] = Watch()
            self.tabs[key].mouse.move(0, 0)
            self.tabs[key].goto("about:blank")
            self.tabs[key].context.clear_cookies()
        self.used.clear()
        kept = [page.context for page in self.tabs.values()]
        for context in self.chromium.contexts:
            if context not in kept:
                context.close()


@pytest.fixture(scope="session")
def shared_browser(chromium: Any) -> Browser:
    return Browser(chromium)


@pytest.fixture
def browser(shared_browser: Browser) -> Iterator[Browser]:
    """The worker's chromium; what a test opened is closed or blanked after it, so that no test
    sees another's."""
    yield shared_browser
    shared_browser.after_test()


def open_page(
    browser: Browser,
    origin: str,
    watch: Watch,
    width: int = 1400,
    height: int = 1000,
    init_script: str = "",
) -> Any:
    """The tab that may load only from ``origin`` (and data:, blob:), at this size: each other
    request is noted in ``watch``, with its console errors and warnings, exceptions and
    dialogs, and reaches no network (``dead_end_proxy``)."""
    page = browser.tab(origin, watch, init_script)
    page.set_viewport_size({"width": width, "height": height})
    return page


def open_report_page(
    browser: Browser, path: Path, watch: Watch, figures: int, width: int = 1400
) -> Any:
    """The watched report page at ``path`` once its ``figures`` have drawn."""
    page = open_page(browser, "file://", watch, width)
    page.goto(path.as_uri(), wait_until="load")
    # Events, not a clock: every figure has drawn its SVG, then two frames have been painted,
    # so that errors thrown while drawing have surfaced.
    page.wait_for_function(
        "n => { const plots = document.querySelectorAll('.js-plotly-plot');"
        " return plots.length >= n && [...plots].every(p => p.querySelector('.main-svg')); }",
        arg=figures,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return page


def report_of(engine: Engine, out: Path) -> Path:
    """``out``, where the report of every job in ``engine``'s database has been written."""
    with Session(engine) as session:
        generate_report(session, out, load_expectations())
    return out


def small_jobs_report(
    root: Path, count: int, name: str, fails_every: int, meta: Callable[[int], dict[str, str]]
) -> Path:
    """The report of ``count`` small jobs (``name.format(i)``, job i's metadata ``meta(i)``; a
    regressed optimizer state in every ``fails_every``-th) from a SQLite database under
    ``root``: a page's test, not a database's."""
    from tracker.services.ingest import ingest_job
    from tracker.store.transactions import write_session

    engine = open_database(f"sqlite:///{root / 'jobs.db'}")
    for i in range(count):
        job = write_sample_job(
            root / "jobs" / name.format(i),
            seed=i,
            steps=30,
            arms=("ref_s0", "flash_s0"),
            flash_state_shift=0.5 if i % fails_every == 0 else 0.0,
        )
        with write_session(engine) as session, session.begin():
            ingest_job(session, job, meta=meta(i))
    out = report_of(engine, root / "report")
    engine.dispose()
    return out


def ingest_demo_jobs(cli: Cli, directory: Path, names: tuple[str, ...]) -> None:
    """The demo jobs ``names``, ingested in that order with their metadata."""
    jobs = {d.name: d for d in write_demo_jobs(directory, steps=300)}
    for name in names:
        meta = [arg for k, v in DEMO_META[name].items() for arg in ("--meta", f"{k}={v}")]
        cli("ingest", str(jobs[name]), *meta)


def ingest_unordered_demo(cli: Cli, root: Path) -> None:
    ingest_demo_jobs(cli, root / "jobs", ("job2", "job3", "job1"))  # not in time order


@pytest.fixture
def demo_report(db_url: str, shared_reports: SharedReports) -> Path:
    """The report of the demo jobs (ingested out of time order) from ``db_url``'s backend."""
    return shared_reports.report(db_url, "demo-unordered", ingest_unordered_demo)


def ingest_served_jobs(cli: Cli, root: Path) -> None:
    """The demo jobs and a long one."""
    ingest_demo_jobs(cli, root / "jobs", ("job1", "job2", "job3"))
    long = write_sample_job(root / "long", steps=LONG_STEPS, arms=("ref_s0",))
    cli("ingest", str(long), "--meta", "time=2026-11-20T09:00:00Z")


Ingest = Callable[[Cli, Path], None]


class SharedServers:
    """The ``tracker serve`` processes a worker keeps for the browser tests, one a backend and
    set of jobs: a server only reads, and starting one costs more CPU than most tests' pages."""

    def __init__(self, templates: Templates, root: Path) -> None:
        self.templates = templates
        self.root = root
        self.running: dict[tuple[str, str], str] = {}
        self.schemas: list[str] = []
        self.stack = ExitStack()

    def serve(self, db_url: str, template: str, build: Ingest, then: Ingest | None = None) -> str:
        """The base URL of the server over a copy of ``template`` (on ``db_url``'s backend),
        with what ``then`` ingested after it started."""
        backend = make_url(db_url).get_backend_name()
        key = (backend, f"{template}+{getattr(then, '__name__', '')}")
        if key not in self.running:
            url = self.database(backend)
            self.templates.copy_into(url, template, build)
            self.running[key] = self.stack.enter_context(running_server(url))
            if then is not None:
                then(Cli(url), self.root / uuid.uuid4().hex)
        return self.running[key]

    def database(self, backend: str) -> str:
        """A new database of ``backend``'s, kept until the session ends."""
        if backend == "sqlite":
            return f"sqlite:///{self.root / uuid.uuid4().hex}.db"
        schema = f"s_{uuid.uuid4().hex[:16]}"
        self.schemas.append(schema)
        return schema_url(os.environ[POSTGRES_ENV], schema)

    def close(self) -> None:
        self.stack.close()
        for schema in self.schemas:
            admin_connection(os.environ[POSTGRES_ENV]).execute(
                f'DROP SCHEMA "{schema}" CASCADE'.encode()
            )


@pytest.fixture(scope="session")
def shared_servers(
    templates: Templates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedServers]:
    servers = SharedServers(templates, tmp_path_factory.mktemp("served"))
    yield servers
    servers.close()


class SharedReports:
    """The reports a worker writes for the browser tests, one a backend and set of jobs: a
    test only reads one, and writing it (then compiling its own copy of plotly.js, at a file:
    URL chromium has not cached) costs more CPU than most tests' pages."""

    def __init__(self, servers: SharedServers) -> None:
        self.servers = servers
        self.written: dict[tuple[str, str], Path] = {}

    def report(self, db_url: str, template: str, build: Ingest) -> Path:
        """The report of a copy of ``template`` (on ``db_url``'s backend)."""
        key = (make_url(db_url).get_backend_name(), template)
        if key not in self.written:
            url = self.servers.database(key[0])
            self.servers.templates.copy_into(url, template, build)
            engine = open_database(url)
            self.written[key] = report_of(engine, self.servers.root / uuid.uuid4().hex)
            engine.dispose()
        return self.written[key]


@pytest.fixture(scope="session")
def shared_reports(shared_servers: SharedServers) -> SharedReports:
    return SharedReports(shared_servers)


@pytest.fixture
def server(db_url: str, templates: Templates, shared_servers: SharedServers) -> str:
    """``tracker serve`` over the demo jobs and a long one, at the URL it returns; the test's
    own database (``db_url``) holds the same jobs."""
    templates.copy_into(db_url, "served", ingest_served_jobs)
    return shared_servers.serve(db_url, "served", ingest_served_jobs)
