"""Where study files are: the packaged ones (``tracker/studies/``), then those of the
directories given with ``--studies`` and of ``TRACKER_STUDIES`` (``:``-separated), in that
order; each directory's ``NAME.toml`` is the study NAME. Two files of one name are refused."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import NamedTuple

from tracker.config import STUDIES_ENV
from tracker.errors import DuplicateStudy, NotAStudyDirectory

STUDIES_PACKAGE = "tracker.studies"
_given: list[Path] = []  # --studies, for this process


def use_study_dirs(dirs: Sequence[Path]) -> None:
    """The directories given with ``--studies`` (looked in before ``TRACKER_STUDIES``)."""
    _given[:] = [Path(d) for d in dirs]


def study_dirs() -> list[tuple[str, Path]]:
    """Each directory of study files besides the package's, with what gave it."""
    env = [d for d in os.environ.get(STUDIES_ENV, "").split(":") if d.strip()]
    return [("--studies", d) for d in _given] + [(STUDIES_ENV, Path(d)) for d in env]


class StudyFile(NamedTuple):
    file: Traversable
    packaged: bool

    @property
    def source(self) -> str:
        """How reports name it."""
        if self.packaged:
            return f"{STUDIES_PACKAGE.replace('.', '/')}/{self.file.name} (packaged)"
        return str(self.file)


class StoredStudy(NamedTuple):
    """A study file's exact text and its sha256 (hex), as a database keeps it with the jobs
    ingested by it."""

    digest: str
    text: str


def study_text(found: StudyFile) -> StoredStudy:
    """The text of a study file (read, checked and parsed already) and its digest."""
    data = found.file.read_bytes()
    return StoredStudy(hashlib.sha256(data).hexdigest(), data.decode("utf-8"))


@cache
def _packaged_study_files() -> dict[str, StudyFile]:
    """The package's own study files: they do not change while the process runs."""
    return {
        entry.name.removesuffix(".toml"): StudyFile(entry, packaged=True)
        for entry in files(STUDIES_PACKAGE).iterdir()
        if entry.name.endswith(".toml")
    }


def study_files() -> dict[str, StudyFile]:
    """Study name -> its file: the packaged ones first, then each directory's, in order."""
    found = dict(_packaged_study_files())
    for given, directory in study_dirs():
        if not directory.is_dir():
            raise NotAStudyDirectory(given=given, path=str(directory))
        for path in sorted(directory.glob("*.toml")):
            first = found.setdefault(path.stem, StudyFile(path, packaged=False))
            if first.file != path:
                raise DuplicateStudy(study=path.stem, first=first.source, second=str(path))
    return found
