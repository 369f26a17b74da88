"""What the browser tests share: Debian's chromium under Playwright, a page that records what it
should not do (a request off its origin, a console error, an uncaught exception, a dialog), the
demo jobs' report and ``tracker serve`` over them."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.conftest import Cli, require
from tests.live_server import running_server
from tests.templates import Templates
from tracker.analysis.expectations import load_expectations
from tracker.report import generate_report
from tracker.sample import DEMO_META, write_demo_jobs, write_sample_job
from tracker.store.schema import open_database

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


@pytest.fixture
def browser() -> Iterator[Any]:
    require(
        importlib.util.find_spec("playwright") is not None,
        "the playwright Python package is not installed",
    )
    require(CHROMIUM.is_file(), f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(
    browser: Any, origin: str, watch: Watch, width: int = 1400, height: int = 1000
) -> Any:
    """A new page that may load only from ``origin`` (and data:, blob:), each other request
    aborted and noted in ``watch`` with its console errors and warnings, exceptions and
    dialogs."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(SAFETY_NET_MS)

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.startswith((origin, "data:", "blob:")):
            request_route.continue_()
        else:
            watch.network.append(url)
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on(
        "console",
        lambda msg: watch.console.append(msg.text) if msg.type in ("error", "warning") else None,
    )
    page.on("pageerror", lambda exc: watch.errors.append(str(exc)))

    def dialog(d: Any) -> None:
        watch.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    return page


def open_report_page(
    browser: Any, path: Path, watch: Watch, figures: int, width: int = 1400
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
def demo_report(db_url: str, templates: Templates, tmp_path: Path) -> Iterator[Path]:
    templates.copy_into(db_url, "demo-unordered", ingest_unordered_demo)
    engine = open_database(db_url)
    yield report_of(engine, tmp_path / "report")
    engine.dispose()


def ingest_served_jobs(cli: Cli, root: Path) -> None:
    """The demo jobs and a long one."""
    ingest_demo_jobs(cli, root / "jobs", ("job1", "job2", "job3"))
    long = write_sample_job(root / "long", steps=LONG_STEPS, arms=("ref_s0",))
    cli("ingest", str(long), "--meta", "time=2026-11-20T09:00:00Z")


@pytest.fixture
def server(db_url: str, templates: Templates) -> Iterator[str]:
    """``tracker serve`` over the demo jobs and a long one, at the URL it yields."""
    templates.copy_into(db_url, "served", ingest_served_jobs)
    with running_server(db_url) as base:
        yield base
