"""Rendering the job pages of a report: each job's folder, written by this process or, with
many jobs on two cores, half of them by a second one; each process reads its jobs' rows in a
few streamed statements (``tracker.views.job.job_contents``)."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations
from tracker.analysis.verdict import verdicts_document
from tracker.jsonio import to_json
from tracker.report.files import INDEX, PLOTLY_JS, write_text
from tracker.store.schema import open_database
from tracker.views.job import JobContent, job_contents
from tracker.views.pages import figure_page, job_page

# from this many jobs to render on, a second process renders half of them (it takes about
# a second to start: its imports)
PARALLEL_FROM = 16


@dataclass(frozen=True)
class Task:
    """One job's pages to render (picklable: it may go to the second process)."""

    name: str
    job_id: int
    folder: str
    key: str
    out_dir: Path
    generated: str


def render_jobs(
    session: Session, exp: Expectations, tasks: list[Task]
) -> dict[str, dict[str, Any]]:
    """Write each task's job folder; return their manifest entries, by job."""
    by_name = {task.name: task for task in tasks}
    ids = [task.job_id for task in tasks]
    return {
        content.view.name: _render(content, by_name[content.view.name])
        for content in job_contents(session, ids, exp)
    }


def _render(content: JobContent, task: Task) -> dict[str, Any]:
    """Write one job's folder; return its manifest entry."""
    view, analysis = content.view, content.analysis
    folder = task.out_dir / task.folder
    folder.mkdir(exist_ok=True)
    write_text(folder / "mem_analysis.json", to_json(analysis.mem) + "\n")
    write_text(folder / "gpt_analysis.json", to_json(analysis.gpt) + "\n")
    write_text(folder / "verdicts.json", to_json(verdicts_document(analysis.verdicts)) + "\n")
    links = dict(plotly_src=f"../{PLOTLY_JS}", index_href=f"../{INDEX}")
    for fig in view.figures:
        write_text(folder / fig.file, figure_page(view, fig, task.generated, **links))
    write_text(folder / INDEX, job_page(view, task.generated, **links))
    return {
        "key": task.key,
        "folder": task.folder,
        "tally": view.tally,
        "notes": view.notes,
        "probes": content.probes,
        "arms": content.arms,
        "curves": {arm: curve.to_json() for arm, curve in content.curves.items()},
    }


# The second process's own database session and expectations.
_worker: tuple[Session, Expectations] | None = None


def _open_worker(url: str, exp: Expectations) -> None:
    global _worker
    _worker = (Session(open_database(url)), exp)


def _render_in_worker(tasks: list[Task]) -> dict[str, dict[str, Any]]:
    assert _worker is not None
    return render_jobs(*_worker, tasks)


def render_all(session: Session, exp: Expectations, tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """Every task's job rendered; with enough of them on two cores, half by a second
    process, which opens its own connection and returns small data. It is spawned, not
    forked: polars' thread pool does not survive a fork (the child would deadlock)."""
    if len(tasks) < PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        return render_jobs(session, exp, tasks)
    url = session.get_bind().engine.url.render_as_string(hide_password=False)
    context = multiprocessing.get_context("spawn")
    # the expectations hold read-only mappings, which pickle as the dicts they wrap
    ForkingPickler.register(MappingProxyType, _mapping_proxy)
    with context.Pool(1, initializer=_open_worker, initargs=(url, exp)) as pool:
        theirs = pool.apply_async(_render_in_worker, (tasks[1::2],))
        results = render_jobs(session, exp, tasks[0::2])
        results.update(theirs.get())
    return results


def _mapping_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _read_only, (dict(proxy),)


def _read_only(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(mapping)
