"""The server's database connection: read-only by the database's own means
(``tracker.store.readonly.read_only_engine``). No endpoint writes; those guards make a bug
that tried fail loudly.

A SQLite file replaced or removed while serving is noticed by the next request
(``ServedDatabase``). A request reads one snapshot on both backends, so the cache key a
request reads and the result it caches under that key come from the same state of the
database.
"""

from __future__ import annotations

import os
import threading

from sqlalchemy import Engine

from tracker.errors import DatabaseGone, DatabaseUnavailable
from tracker.store.readonly import read_only_engine
from tracker.store.sqlite_files import sqlite_file

# Routes run in anyio's worker threads, at most 40 at once, each with a session: a pool as
# large, so that requests queued behind one heavy computation never time out on the pool.
REQUEST_THREADS = 40


class ServedDatabase:
    """The engine on the database file that is at the served path now.

    Each request compares the file's identity (device and inode) with the one opened: a
    file replaced at the path (deleted and ingested anew, or moved over) is opened again,
    and while no file is there every request is one ``DatabaseGone`` (503). A descriptor
    held on the opened file keeps its inode allocated, so a new file can never reuse its
    number. PostgreSQL has no file: its engine is used as it is.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = sqlite_file(url)
        self._lock = threading.Lock()
        self._held: int | None = None  # a descriptor on the opened file
        self._identity: tuple[int, int] | None = None  # its device and inode
        self._engine: Engine | None = None
        self._open()

    def _open(self) -> None:
        if self.path is None:
            self._engine = read_only_engine(self.url, pool_size=REQUEST_THREADS)
            return
        try:
            held = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise DatabaseUnavailable(url=self.url, reason=exc.strerror or str(exc)) from None
        try:
            engine = read_only_engine(self.url, pool_size=REQUEST_THREADS)
        except BaseException:
            os.close(held)
            raise
        self.close()
        opened = os.fstat(held)
        self._held, self._identity, self._engine = held, (opened.st_dev, opened.st_ino), engine

    def _identity_now(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return None
        return now.st_dev, now.st_ino

    def engine(self) -> Engine:
        """The engine on the file now at the path; ``DatabaseGone`` while there is none."""
        engine = self._engine
        if self.path is None or (engine is not None and self._identity_now() == self._identity):
            assert engine is not None
            return engine
        with self._lock:
            identity = self._identity_now()
            if identity is None:
                self.close()  # nothing of the removed file is kept open
                raise DatabaseGone(path=self.path)
            if identity != self._identity or self._engine is None:
                self._open()
            assert self._engine is not None
            return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._held is not None:
            os.close(self._held)
            self._held, self._identity = None, None
