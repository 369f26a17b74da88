"""What a job's stored rows were judged against: the expectations' values and the code that
judged them (the analysis and the summary), as one digest.

The code's part is a hash of the source files of ``tracker.analysis`` and ``tracker.summary``,
taken once at import: any change of them, a new verdict or a changed number, makes every
stored row stale, so that stored rows of older code are ignored (analysed afresh on every
read) until ``tracker db rederive`` (or ``tracker db upgrade``) refills them. No version
number is kept by hand.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

PACKAGE = Path(__file__).resolve().parent.parent
CODE_PACKAGES = ("analysis", "summary")


def code_digest(root: Path = PACKAGE, packages: tuple[str, ...] = CODE_PACKAGES) -> str:
    """A hash of the Python source files under ``root``'s ``packages``, by relative path."""
    sha = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
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
