"""What a job's stored rows were judged against: the expectations' values and the code that
judged them, as one digest.

The code's part is a hash of the source files of the modules that make the kept rows
(``KEPT_ROWS_MAKERS``) and of every tracker module they import, followed from their
import statements once at import: any change of them, a new verdict or a changed number,
makes every stored row stale, so that stored rows of older code are ignored (analysed afresh
on every read) until ``tracker db rederive`` (or ``tracker db upgrade``) refills them. Code
that only reads kept rows (the claims across jobs, the gate, the pages) is outside it: a
release that changes only that keeps every stored row. No version number is kept by hand.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds ``tracker/``
KEPT_ROWS_MAKERS = ("tracker.summary.build", "tracker.summary.run_index")
# ``from tracker.x import a, b`` (parenthesised over lines too) and ``import tracker.x``: the
# tracker imports itself by absolute names only
IMPORTS = re.compile(
    r"^[ \t]*(?:from[ \t]+(tracker(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)"
    r"|import[ \t]+(tracker(?:\.\w+)*))",
    re.MULTILINE,
)


def _source(root: Path, module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def code_files(root: Path = SOURCE_ROOT, makers: tuple[str, ...] = KEPT_ROWS_MAKERS) -> list[Path]:
    """The source files of ``makers`` and of the tracker modules they import, transitively
    (an imported name that is a module counts as one, and a module's packages too), by
    relative path."""
    found: dict[str, Path] = {}
    waiting = list(makers)
    while waiting:
        module = waiting.pop()
        path = _source(root, module)
        if module in found or path is None:
            continue
        found[module] = path
        if "." in module:  # its package's ``__init__`` runs first
            waiting.append(module.rpartition(".")[0])
        for match in IMPORTS.finditer(path.read_text(encoding="utf-8")):
            source, names, imported = match.groups()
            if imported:
                waiting.append(imported)
                continue
            waiting.append(source)
            for name in re.findall(r"\w+(?=\s*(?:,|\)|$| as ))", names.strip("()")):
                waiting.append(f"{source}.{name}")
    return sorted(found.values(), key=lambda path: path.relative_to(root).as_posix())


def code_digest(root: Path = SOURCE_ROOT, makers: tuple[str, ...] = KEPT_ROWS_MAKERS) -> str:
    """A hash of ``code_files``, each by its relative path and its bytes."""
    sha = hashlib.sha256()
    for path in code_files(root, makers):
        sha.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()


CODE_DIGEST = code_digest()


# id -> (expectations, code digest, digest): the models are frozen, and their repr takes
# about a millisecond, which every job page paid again; kept for a few at a time
_digests: dict[int, tuple[Expectations, str, str]] = {}
DIGESTS_KEPT = 16


def expectations_digest(exp: Expectations) -> str:
    """What stored rows were judged against: the expectations' values (not their file
    name) and the code of the analysis."""
    kept = _digests.get(id(exp))
    if kept is not None and kept[0] is exp and kept[1] == CODE_DIGEST:
        return kept[2]
    # the models' repr holds every value and never their source (a private attribute); not
    # model_dump_json(): a serializer calls back into Python, where a Ctrl-C would be wrapped
    text = f"{CODE_DIGEST}\n{exp!r}"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if len(_digests) >= DIGESTS_KEPT:
        _digests.clear()
    _digests[id(exp)] = (exp, CODE_DIGEST, digest)
    return digest
