"""The ``tracker`` command line: a shell over ``tracker.api``, which it imports and nothing below
it; each command parses its arguments, calls one library function and prints what it returns.

Expected errors (``TrackerError``) become one ``Error: ...`` line on stderr and exit code 1.
The commands live by subject in this package's modules (importing one registers its
commands; the order below is the order of ``tracker --help``) and import the library only
when they run, so that ``tracker --help`` starts fast.
"""

from __future__ import annotations

import gc
import os

from tracker.cli.base import app

# Importing a module registers its commands; this order is the order of --help.
# isort: off
from tracker.cli import ingest, sync, jobs, demo, queries, export, serve, db  # noqa: F401
# isort: on

__all__ = ["app", "main"]


# polars' allocator (jemalloc) keeps the pages a frame freed for 0.5 s (polars' own setting)
# before it returns them, so a command that makes and drops large frames in turn holds them at
# its peak; after 0.1 s, `claims` over 10,000 jobs peaks at 330 MB instead of 370-385 MB and the
# server's home page at 425-440 MB instead of 470-480 MB, at the same CPU (0 s would save more,
# for 10% more CPU). polars adds it to its own when it loads, so it is set before any command
# imports polars. A value of the user's own is kept; polars' own default, which a parent
# process that imported polars passes on, is not one.
POLARS_ALLOCATOR = ("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")
POLARS_DEFAULT = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def main() -> None:
    name, value = POLARS_ALLOCATOR
    if os.environ.get(name, POLARS_DEFAULT) == POLARS_DEFAULT:
        os.environ[name] = value
    # A command imports its libraries as it runs (SQLAlchemy, polars, numpy: some 900 modules
    # whose objects live to the end, none of them garbage). Python's full collection, after
    # every 10 of the middle generation, walked them all again as they grew (0.08 s of the
    # 0.8 s of a one-job report); after every 100 it still bounds a long command's garbage.
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)
    try:
        app()
    finally:
        # The interpreter's exit collects every object once more (0.1-0.2 s: more than the
        # report of one job takes to write). Frozen, they are left to the operating system;
        # the commands have closed their files and disposed of their engines by then.
        gc.freeze()
