"""The ``tracker`` command line: a shell over ``tracker.api``, which it imports and nothing below
it; each command parses its arguments, calls one library function and prints what it returns.

Expected errors (``TrackerError``) become one ``Error: ...`` line on stderr and exit code 1.
The commands live by subject in this package's modules (importing one registers its
commands; the order below is the order of ``tracker --help``) and import the library only
when they run, so that ``tracker --help`` starts fast.
"""

from __future__ import annotations

from tracker.cli.base import app

# Importing a module registers its commands; this order is the order of --help.
# isort: off
from tracker.cli import ingest, sync, jobs, demo, queries, export, serve, db  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    app()
