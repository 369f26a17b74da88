"""The studies known: the study files' (packaged, ``--studies``, ``TRACKER_STUDIES``) and,
with a database, those only the definitions it keeps give (a teammate's studies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from tracker.analysis.expectations import Expectations, judged_by, study_expectations, study_names
from tracker.analysis.study_files import StudyFile, study_files
from tracker.store.study_definitions import defined_studies, stored_study


def study_rows(session: Session | None = None) -> list[dict[str, Any]]:
    """Each known study's ``name``, ``title``, ``paper`` and how many ``claims`` it judges:
    the files' studies (the default first), then those only ``session``'s database defines,
    by name. Where there are such, every row also says its ``source``: ``packaged``, the
    directory of its file, or ``database (digest ...)``."""
    files = study_files()
    rows = [_row(name, study_expectations(name)) for name in study_names()]
    stored_only = [] if session is None else _stored_only(session, set(files))
    if not stored_only:
        return rows
    sources = [_file_source(files[row["name"]]) for row in rows]
    return [row | {"source": source} for row, source in zip(rows, sources, strict=True)] + [
        _row(name, exp) | {"source": source} for name, exp, source in stored_only
    ]


def _stored_only(session: Session, on_disk: set[str]) -> list[tuple[str, Expectations, str]]:
    """The studies of no file here that the database defines, each with what judges its
    jobs (``judged_by``) and its source."""
    found = []
    for name in defined_studies(session):
        stored = stored_study(session, name)
        assert stored is not None  # a job of it has one (``defined_studies``)
        if name not in on_disk:
            exp = judged_by(name, stored)
            unread = "" if exp.missing is None else ", unreadable: its jobs are not judged"
            found.append((name, exp, f"database (digest {stored.digest[:12]}{unread})"))
    return found


def _row(name: str, exp: Expectations) -> dict[str, Any]:
    title, paper = (exp.study.title, exp.study.paper) if exp.study else (name, "")
    return {"name": name, "title": title, "paper": paper, "claims": len(exp.claims)}


def _file_source(found: StudyFile) -> str:
    return "packaged" if found.packaged else str(Path(str(found.file)).parent)
