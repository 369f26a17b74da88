"""The house rules of docs/architecture.md, checked on the source: what each floor may import
(lazy imports inside functions included), no circle between packages, no module over 400
lines, and the generated CLI reference equal to what typer's help gives today."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACKER = ROOT / "tracker"
MAX_LINES = 400

# The study's words: every package may import them, they import nothing of the tracker above.
WORDS = {
    "domain",
    "jsonio",
    "errors",
    "signal_note",
    "config",
    "models",
    "row_formats",
    "notes",
    "conditions",
    "elapsed",
    "completeness",
    "masking",
}
PURE = {"analysis", "jobdir", "sample", "summary", "figures", "studies"}
BELOW_THE_API = {
    "store",
    "models",
    "queries",
    "jobdir",
    "analysis",
    "server",
    "report",
    "summary",
    "figures",
    "services",
    "views",
}
# package -> the tracker packages it never imports (docs/architecture.md's table)
NEVER = {
    "analysis": {"store", "queries", "services", "views", "report", "server", "figures"},
    "jobdir": {"store", "queries", "services", "views", "report", "server", "figures"},
    "sample": {"store", "queries", "services", "views", "report", "server", "figures"},
    "summary": {"figures", "store", "queries", "services", "views", "report", "server"},
    "figures": {"store", "queries", "services", "views", "report", "server"},
    "studies": BELOW_THE_API,
    "store": {"figures", "views", "report", "server", "services", "queries"},
    "queries": {"views", "report", "server", "services"},
    "services": {"views", "report", "server"},
    "views": {"report", "server", "services"},
    "report": {"server", "services"},
    "server": {"report", "services"},
    "api": {"cli"},
}
# package -> the only tracker packages it imports, besides the words
ONLY = {"cli": {"api"}}
DATABASE_CODE = ("sqlalchemy", "alembic", "psycopg")


def modules() -> list[Path]:
    return sorted(TRACKER.rglob("*.py"))


def package_of(path: Path) -> str:
    """The first name under tracker/ (``store`` for tracker/store/x.py, ``jsonio``)."""
    return path.relative_to(TRACKER).parts[0].removesuffix(".py")


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def tracker_packages(names: set[str]) -> set[str]:
    return {name.split(".")[1] for name in names if name.startswith("tracker.") and "." in name}


def breaches() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        package = package_of(path)
        imported = imports(path)
        used = tracker_packages(imported) - {package}
        words = package in WORDS
        for other in sorted(used):
            outside = package in ONLY and other not in ONLY[package] | WORDS
            if other in NEVER.get(package, set()) or outside or (words and other not in WORDS):
                found[str(path.relative_to(ROOT))].append(f"imports tracker.{other}")
        if package in PURE:
            database = sorted(n for n in imported if n.split(".")[0] in DATABASE_CODE)
            found[str(path.relative_to(ROOT))].extend(f"imports {n}" for n in database)
    return {path: lines for path, lines in found.items() if lines}


def test_each_floor_imports_only_what_it_may() -> None:
    assert breaches() == {}


def test_no_packages_import_each_other_in_a_circle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in modules():
        package = package_of(path)
        graph[package] |= tracker_packages(imports(path)) - {package}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            step == goal or (step not in seen and reaches(step, goal, seen | {step}))
            for step in graph[start]
        )

    circles = sorted(p for p in list(graph) if reaches(p, p, {p}))
    assert circles == []


def test_no_module_is_over_the_limit() -> None:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in modules()}
    assert {path: n for path, n in lengths.items() if n > MAX_LINES} == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tracker.store.x import y\n", {"tracker.store.x", "tracker.store.x.y"}),
        ("def f():\n    import tracker.views.pages\n", {"tracker.views.pages"}),
        ("from . import sibling\n", set()),
    ],
)
def test_imports_are_found_at_any_depth(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imports(path) == expected


def test_the_cli_reference_is_what_typer_generates() -> None:
    """docs/cli.md is typer's own help; a help text changed without `make cli-docs` fails."""
    command = [sys.executable, "-m", "typer", "tracker.cli", "utils", "docs", "--name", "tracker"]
    title = ["--title", "tracker: command reference"]
    generated = subprocess.run(
        [*command, *title], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    assert (ROOT / "docs" / "cli.md").read_text() == generated.rstrip("\n") + "\n", (
        "docs/cli.md is out of date: run make cli-docs"
    )
