"""A migration's own code (its copy of a stored format), loaded from its file to test it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

VERSIONS = Path(__file__).parent.parent / "migrations" / "versions"


def migration_module(file_name: str) -> ModuleType:
    """The module of ``migrations/versions/<file_name>``."""
    spec = importlib.util.spec_from_file_location(Path(file_name).stem, VERSIONS / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
