"""``tracker report``: analyse jobs from the database and write an offline HTML report.

Layout of ``DIR``::

    index.html             summary: claims across the jobs, the jobs table (filters and pages
                           in the browser), the figures across jobs, the latest comparison
    claims.json            the claims across the jobs (tracker.queries.claims), one per row
    manifest.json          what each job's pages were made from, and the cross-job data kept
                           from them (verdict counts, smoothed curves on a grid)
    plotly.min.js          written once; every page links it by a relative path (no CDN)
    <job>/index.html       the job page: metadata, notes, verdicts (failures first), figures
    <job>/mem_analysis.json, gpt_analysis.json, verdicts.json   (strict JSON, NaN -> null)
    <job>/mem_scaling.html, gpt_trajectories.html, table4.html  (one figure each)

Incremental: a job's pages are keyed by its content digest, its metadata, the expectations
and the tracker's version; a report into a folder that holds one renders only the jobs whose
key changed (``force`` renders all), always the index, and removes the folders of jobs no
longer in the report. Many jobs are rendered by two processes.

Curves are smoothed and checked on all their points; only the drawn traces are downsampled.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import tracker
from tracker.domain import Status
from tracker.errors import NotADirectory

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from tracker.analysis.expectations import Expectations
    from tracker.queries.selection import Selection

PLOTLY_JS = "plotly.min.js"
INDEX = "index.html"
MANIFEST = "manifest.json"
# Bump when the manifest's entries change shape (2: smoothed curves as base64 float32)
MANIFEST_FORMAT = 2
CLAIMS = "claims.json"
RESERVED = {INDEX, PLOTLY_JS, MANIFEST, CLAIMS}
# from this many jobs to render on, a second process renders half of them (it takes about
# a second to start: its imports)
PARALLEL_FROM = 16


@dataclass(frozen=True)
class JobReport:
    """What the report holds for one job, for the command line to print."""

    job: str
    page: Path  # DIR/<job>/index.html
    counts: dict[str, int]  # PASS / FAIL / N/A
    notes: list[str] = field(default_factory=list)
    rendered: bool = True  # False: its pages were up to date and kept


@dataclass(frozen=True)
class Report:
    index: Path  # DIR/index.html
    jobs: list[JobReport]
    removed: list[str] = field(default_factory=list)  # folders of jobs no longer reported

    def summary(self) -> str:
        rendered = [job for job in self.jobs if job.rendered]
        lines = [
            f"{len(rendered)} job pages rendered, {len(self.jobs) - len(rendered)} up to date"
            + (f", {len(self.removed)} removed" if self.removed else ""),
            f"report: {self.index.resolve()}",
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Task:
    """One job's pages to render (picklable: it may go to the second process)."""

    name: str
    folder: str
    key: str
    out_dir: Path
    generated: str


def _directories(names: list[str]) -> dict[str, str]:
    """Folder per job: its name, unless reserved or equal to another's on a case-blind disk.

    Job names are ``[A-Za-z0-9._-]`` (checked at ingest); ``+`` never occurs in one, so a
    suffixed folder cannot collide with another job's.
    """
    taken: set[str] = {name.casefold() for name in RESERVED}
    folders = {}
    for name in names:
        folder, n = name, 1
        while folder.casefold() in taken:
            n += 1
            folder = f"{name}+{n}"
        taken.add(folder.casefold())
        folders[name] = folder
    return folders


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _write_if_changed(path: Path, data: bytes) -> None:
    """Rewritten only when absent or different (plotly.min.js is 4-5 MB)."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _render_job(session: Session, exp: Expectations, task: _Task) -> dict[str, Any]:
    """Write one job's folder; return its manifest entry."""
    from tracker.analysis.verdict import verdicts_document
    from tracker.jsonio import to_json
    from tracker.report.jobview import job_content
    from tracker.report.pages import figure_page, job_page

    content = job_content(session, task.name, exp)
    view, analysis = content.view, content.analysis
    folder = task.out_dir / task.folder
    folder.mkdir(exist_ok=True)
    _write(folder / "mem_analysis.json", to_json(analysis.mem) + "\n")
    _write(folder / "gpt_analysis.json", to_json(analysis.gpt) + "\n")
    _write(folder / "verdicts.json", to_json(verdicts_document(analysis.verdicts)) + "\n")
    links = dict(plotly_src=f"../{PLOTLY_JS}", index_href=f"../{INDEX}")
    for fig in view.figures:
        _write(folder / fig.file, figure_page(view, fig, task.generated, **links))
    _write(folder / INDEX, job_page(view, task.generated, **links))
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
    from sqlalchemy.orm import Session

    from tracker.store.db import open_database

    global _worker
    _worker = (Session(open_database(url)), exp)


def _render_in_worker(task: _Task) -> dict[str, Any]:
    assert _worker is not None
    return _render_job(*_worker, task)


def _render_all(
    session: Session, exp: Expectations, tasks: list[_Task]
) -> dict[str, dict[str, Any]]:
    """Every task's job rendered; with enough of them on two cores, half by a second
    process, which opens its own connection and returns small data. It is spawned, not
    forked: polars' thread pool does not survive a fork (the child would deadlock)."""
    if len(tasks) < PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        return {task.name: _render_job(session, exp, task) for task in tasks}
    url = session.get_bind().engine.url.render_as_string(hide_password=False)
    from multiprocessing.reduction import ForkingPickler

    context = multiprocessing.get_context("spawn")
    # the expectations hold read-only mappings, which pickle as the dicts they wrap
    ForkingPickler.register(MappingProxyType, _mapping_proxy)
    with context.Pool(1, initializer=_open_worker, initargs=(url, exp)) as pool:
        theirs = pool.map_async(_render_in_worker, tasks[1::2], chunksize=2)
        mine = [_render_job(session, exp, task) for task in tasks[0::2]]
        results = dict(zip([t.name for t in tasks[0::2]], mine, strict=True))
        results.update(zip([t.name for t in tasks[1::2]], theirs.get(), strict=True))
    return results


def _mapping_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _read_only, (dict(proxy),)


def _read_only(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(mapping)


def _read_manifest(out_dir: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("jobs"), dict) else {}


def _remove_folder(out_dir: Path, folder: object) -> bool:
    """Remove a job folder an earlier report wrote (only a plain name directly in DIR)."""
    if not isinstance(folder, str) or folder in RESERVED or Path(folder).name != folder:
        return False
    path = out_dir / folder
    if folder in {"", ".", ".."} or not path.is_dir() or path.is_symlink():
        return False
    shutil.rmtree(path)
    return True


def _plotly_js() -> bytes:
    """The plotly.js bundled with plotly.py, read without importing plotly."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    return (package / "package_data" / PLOTLY_JS).read_bytes()


def generate_report(
    session: Session,
    out_dir: Path,
    exp: Expectations,
    selection: Selection | None = None,
    *,
    force: bool = False,
) -> Report:
    """Write the report of the selected jobs (all by default) under ``out_dir``.

    Only jobs whose pages are missing or out of date are rendered (all with ``force``).
    The claims across the selected jobs (``tracker.queries.claims``) are shown on the index
    and written to ``claims.json``. Raises ``JobNotFound`` for an unknown job
    name before writing anything, and ``NotADirectory`` when ``out_dir`` exists as something
    else than a directory.
    """
    from sqlalchemy import select

    from tracker.figures.crossjob import GridCurve
    from tracker.jsonio import to_json
    from tracker.models import Job as JobRow
    from tracker.models import JobMeta
    from tracker.queries.claims import claims
    from tracker.queries.selection import Selection, selected_jobs
    from tracker.report.crossjob import cross_job_view, job_href
    from tracker.report.pages import IndexView, index_page, meta_text, status_of
    from tracker.report.pages import JobRow as TableRow
    from tracker.store.derived import expectations_digest, load_derived

    out_dir = Path(out_dir)
    ordered = selected_jobs(session, selection or Selection())
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectory(path=str(out_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    names: list[str] = ordered.get_column("job").to_list()
    ids = dict(zip(names, ordered.get_column("job_id").to_list(), strict=True))
    folders = _directories(names)
    digests = dict(
        session.execute(
            select(JobRow.id, JobRow.content_digest).where(JobRow.id.in_(ids.values()))
        ).all()
    )
    meta: dict[int, dict[str, str]] = {}
    for job_id, key, value in session.execute(
        select(JobMeta.job_id, JobMeta.key, JobMeta.value).where(JobMeta.job_id.in_(ids.values()))
    ):
        meta.setdefault(job_id, {})[key] = value
    version = tracker.__version__
    # the expectations' values, and the file they came from (the job pages name it)
    exp_digest = _digest(expectations_digest(exp), exp.source)
    keys = {
        name: _digest(
            digests[ids[name]],
            json.dumps(sorted(meta.get(ids[name], {}).items())),
            exp_digest,
            version,
            folders[name],
        )
        for name in names
    }

    manifest = _read_manifest(out_dir)
    earlier = manifest.get("jobs", {})
    # entries in another format cannot be read back: their jobs are rendered again
    previous = earlier if manifest.get("format") == MANIFEST_FORMAT and not force else {}
    kept = {
        name: previous[name]
        for name in names
        if isinstance(previous.get(name), dict)
        and previous[name].get("key") == keys[name]
        and (out_dir / folders[name] / INDEX).is_file()
    }
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    generated = f"generated {stamp} by tracker {version}"
    tasks = [
        _Task(name, folders[name], keys[name], out_dir, generated)
        for name in names
        if name not in kept
    ]
    rendered = _render_all(session, exp, tasks)
    entries = {name: kept.get(name) or rendered[name] for name in names}

    # folders of an earlier report that no job of this one uses
    removed = []
    in_use = set(folders.values())
    for old in earlier.values():
        folder = old.get("folder") if isinstance(old, dict) else None
        if folder not in in_use and _remove_folder(out_dir, folder):
            removed.append(str(folder))

    # the two latest jobs' verdicts as kept at ingest (as ``tracker compare`` reads them)
    derived = load_derived(session, [ids[name] for name in names[-2:]], exp)
    latest = [derived[ids[name]].verdicts for name in names[-2:]]
    curves = {
        name: {arm: GridCurve.from_json(doc) for arm, doc in entries[name]["curves"].items()}
        for name in names
    }
    cross = cross_job_view(
        session,
        ordered,
        folders,
        curves,
        (latest[0], latest[-1]) if latest else ([], []),
        exp,
    )
    rows = [
        TableRow(
            name=name,
            href=job_href(folders, name),
            time=time.strftime("%Y-%m-%d %H:%M"),
            tally=entries[name]["tally"],
            probes=entries[name]["probes"],
            arms=entries[name]["arms"],
            meta=meta_text(meta.get(ids[name], {})),
            status=status_of(entries[name]["tally"]),
        )
        for name, time in reversed(ordered.select("job", "time").rows())
    ]
    tally: dict[str, int] = {status: sum(row.tally[status] for row in rows) for status in Status}
    claim_rows = claims(session, selection or Selection(), exp, jobs=ordered).to_dicts()
    view = IndexView(
        rows=rows,
        tally=tally,
        failing=sum(row.tally[Status.FAIL] > 0 for row in rows),
        cross=cross,
        claims=claim_rows,
        claims_note="No claim could be judged: no job of this report has what they need.",
    )
    _write_if_changed(out_dir / PLOTLY_JS, _plotly_js())
    _write_if_changed(out_dir / CLAIMS, (to_json(claim_rows) + "\n").encode("utf-8"))
    index = out_dir / INDEX
    sub = f"{generated}"
    _write(index, index_page(view, sub, exp.source, plotly_src=PLOTLY_JS))
    manifest = {
        "format": MANIFEST_FORMAT,
        "tracker": version,
        "expectations": exp_digest,
        "jobs": entries,
    }
    _write_if_changed(out_dir / MANIFEST, json.dumps(manifest, separators=(",", ":")).encode())
    return Report(
        index,
        [
            JobReport(
                name,
                out_dir / folders[name] / INDEX,
                entries[name]["tally"],
                list(entries[name]["notes"]),
                name in rendered,
            )
            for name in names
        ],
        removed,
    )


def write_report(
    session: Session,
    out_dir: Path,
    exp: Expectations,
    selection: Selection | None = None,
    *,
    force: bool = False,
) -> Path:
    """Write the report (see ``generate_report``) and return ``out_dir/index.html``."""
    return generate_report(session, out_dir, exp, selection, force=force).index
