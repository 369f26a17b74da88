"""Where a job directory's files are: on disk, or behind an fsspec URL (S3, GCS, HF buckets).

A ``JobSource`` lists the files directly in a job directory (name, size, and a version that
changes when a file is rewritten: the ETag, generation or modification time) and reads them;
the reader parses what it reads and never knows where it came from. ``walk`` lists every
directory below a prefix in one go, for ``tracker sync``.

fsspec and its filesystems are heavy: ``open_source`` imports them only for a URL, so that
commands on local directories start without them. Credentials come from each filesystem's
standard places (the AWS chain and ``AWS_ENDPOINT_URL``, Google's application default
credentials, ``HF_TOKEN``) and the caller's storage options; no message ever shows one.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from tracker.errors import (
    BadInput,
    MissingExtra,
    MisspelledURL,
    NoSuchDirectory,
    NotADirectory,
    StorageFailed,
    StorageUnreadable,
    TrackerError,
    UnknownProtocol,
    UnknownScheme,
    did_you_mean,
)
from tracker.masking import masked

# the extra of pyproject.toml that installs each protocol's filesystem, and its package
EXTRAS = {
    "s3": ("s3", "s3fs"),
    "s3a": ("s3", "s3fs"),
    "gs": ("gcs", "gcsfs"),
    "gcs": ("gcs", "gcsfs"),
    "hf": ("hf", "huggingface_hub"),
}
# what each filesystem's listing calls a file's version, most telling first
VERSION_KEYS = ("ETag", "etag", "generation", "md5Hash", "xet_hash", "blob_id", "sha256")
# storage options whose values no message may show
SECRET_KEYS = re.compile(r"secret|token|key|password|credential", re.IGNORECASE)
COPY_BLOCK = 1 << 20  # a remote file is copied to disk in blocks of this size
TIME_KEYS = ("mtime", "LastModified", "updated", "uploaded_at", "last_modified", "created")


@dataclass(frozen=True)
class ListedFile:
    """A file directly in a job directory, as the listing gave it; ``open`` reads it."""

    source: JobSource = field(repr=False, compare=False)
    name: str
    size: int
    version: str | None  # the ETag, generation or mtime: another one means a rewritten file

    def open(self) -> IO[bytes]:
        return self.source.open(self)

    def read_bytes(self) -> bytes:
        with self.open() as stream:
            return stream.read()


@dataclass(frozen=True)
class Listing:
    files: list[ListedFile]  # sorted by name
    directories: list[str]  # the names of the subdirectories


class JobSource(ABC):
    """One job directory: its listing (taken once) and its files' bytes."""

    def __init__(self, location: str, listing: Listing | None = None) -> None:
        self.location = location  # as given: every message names it
        self._listing = listing

    def __str__(self) -> str:
        return self.location

    @property
    @abstractmethod
    def name(self) -> str:
        """The directory's own name: the job's name unless one is given."""

    @property
    @abstractmethod
    def stored_location(self) -> str:
        """What the job keeps as its source: an absolute path, or the URL."""

    def listing(self) -> Listing:
        if self._listing is None:
            self._listing = self._list()
        return self._listing

    @abstractmethod
    def _list(self) -> Listing:
        """The files and subdirectories directly inside; ``NoSuchDirectory`` if none."""

    @abstractmethod
    def open(self, file: ListedFile) -> IO[bytes]:
        """A listed file opened for reading; a problem is a ``BadInput`` naming the file."""

    @abstractmethod
    def walk(self) -> Iterator[JobSource]:
        """Every directory at or below this one, each with its listing (one listing pass)."""


def _sorted(files: list[ListedFile]) -> list[ListedFile]:
    return sorted(files, key=lambda file: file.name)


class LocalSource(JobSource):
    def __init__(self, directory: Path, listing: Listing | None = None) -> None:
        super().__init__(str(directory), listing)
        self.directory = directory

    @property
    def name(self) -> str:
        return self.directory.resolve().name

    @property
    def stored_location(self) -> str:
        return str(self.directory.resolve())

    def _list(self) -> Listing:
        if not self.directory.exists():
            raise NoSuchDirectory(path=self.location)
        if not self.directory.is_dir():
            raise NotADirectory(path=self.location)
        files: list[ListedFile] = []
        directories: list[str] = []
        for path in self.directory.iterdir():
            if path.is_dir():
                directories.append(path.name)
            else:
                files.append(self._listed(path))
        return Listing(_sorted(files), sorted(directories))

    def _listed(self, path: Path) -> ListedFile:
        try:
            status = path.stat()
        except OSError:  # a dangling link: reading it says why
            return ListedFile(self, path.name, 0, None)
        return ListedFile(self, path.name, status.st_size, str(status.st_mtime_ns))

    def open(self, file: ListedFile) -> IO[bytes]:
        root = self.directory.resolve()
        resolved = (self.directory / file.name).resolve()
        if not resolved.is_relative_to(root):
            raise BadInput(path=file.name, problem="links outside the job directory")
        if resolved.exists() and not resolved.is_file():
            raise BadInput(path=file.name, problem="not a regular file")  # a FIFO blocks forever
        try:
            return resolved.open("rb")
        except OSError as exc:
            raise BadInput(path=file.name, problem=f"cannot be read ({exc.strerror})") from None

    def walk(self) -> Iterator[JobSource]:
        self.listing()  # the prefix itself must exist
        for top, directories, names in os.walk(self.directory):
            directories.sort()
            here = LocalSource(Path(top))
            files = [here._listed(Path(top, name)) for name in names]
            here._listing = Listing(_sorted(files), sorted(directories))
            yield here


class RemoteSource(JobSource):
    """A directory of an fsspec filesystem; every failure of the storage is one error line."""

    def __init__(
        self, fs: Any, path: str, url: str, secrets: frozenset[str], listing: Listing | None = None
    ) -> None:
        super().__init__(url, listing)
        self.fs = fs
        self.path = path.rstrip("/")
        self.secrets = secrets
        self._spool: tempfile.TemporaryDirectory[str] | None = None
        self._kept: dict[str, Path] = {}

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def stored_location(self) -> str:
        return self.location.rstrip("/")

    def _list(self) -> Listing:
        try:
            entries = self.fs.ls(self.path, detail=True)
        except FileNotFoundError as exc:
            raise self._missing(exc) from None
        except Exception as exc:
            raise self._failed(exc) from None
        if len(entries) == 1 and entries[0]["name"].rstrip("/") == self.path:
            raise NotADirectory(path=self.location)  # ls of a file lists the file
        files = [self._listed(entry) for entry in entries if entry["type"] != "directory"]
        directories = [PurePosixPath(e["name"]).name for e in entries if e["type"] == "directory"]
        return Listing(_sorted(files), sorted(directories))

    def _listed(self, entry: Mapping[str, Any]) -> ListedFile:
        name = posixpath.basename(entry["name"])  # string work: a sync lists every file
        return ListedFile(self, name, int(entry.get("size") or 0), _version(entry))

    def open(self, file: ListedFile) -> IO[bytes]:
        """Downloaded once, in ranged GETs of ``COPY_BLOCK`` bytes, to a temporary copy on
        disk: a scan hashes a file and the ingest parses it later from that copy, which goes
        with the second open. The download stops as soon as more bytes arrive than the
        listing gave (which ``--max-file-size`` was checked on), whatever the object holds."""
        kept = self._kept.pop(file.name, None)
        if kept is not None:  # the second and last open (the parse): the copy goes
            stream = kept.open("rb")
            kept.unlink()  # the open stream still reads it
            return stream
        if self._spool is None:
            self._spool = tempfile.TemporaryDirectory(prefix="tracker-")  # removed when freed
        # named by a digest: a key may be longer than a local file name may be
        copy = Path(self._spool.name, hashlib.sha256(file.name.encode()).hexdigest())
        try:
            with (
                self.fs.open(f"{self.path}/{file.name}", "rb", cache_type="none") as remote,
                copy.open("wb") as local,
            ):
                size = _copy_at_most(remote, local, file.size + 1)
        except Exception as exc:  # whatever the filesystem raises: one line naming the file
            copy.unlink(missing_ok=True)
            reason = self._redact(_first_line(exc) or type(exc).__name__)
            raise StorageUnreadable(path=file.name, reason=reason) from None
        if size != file.size:
            copy.unlink()
            problem = (
                f"truncated: {size} of its {file.size} bytes read"
                if size < file.size
                else f"more than the {file.size} bytes listed arrived (rewritten while read?)"
            )
            raise BadInput(path=file.name, problem=problem)
        self._kept[file.name] = copy
        return copy.open("rb")

    def walk(self) -> Iterator[JobSource]:
        try:
            found: dict[str, Any] = self.fs.find(self.path, withdirs=False, detail=True)
        except FileNotFoundError as exc:
            raise self._missing(exc) from None
        except Exception as exc:
            raise self._failed(exc) from None
        if not found:
            self.listing()  # an empty prefix is fine, a missing bucket is not
        entries: dict[str, list[Any]] = {self.path: []}
        subdirectories: dict[str, set[str]] = {}
        for name, entry in found.items():
            directory = posixpath.dirname(name)
            entries.setdefault(directory, []).append(entry)
            while directory != self.path and len(directory) > len(self.path):
                parent, child = posixpath.split(directory)
                subdirectories.setdefault(parent, set()).add(child)
                entries.setdefault(parent, [])
                directory = parent
        for path in sorted(entries):
            url = (
                self.location
                if path == self.path
                else self.stored_location + path[len(self.path) :]
            )
            here = RemoteSource(self.fs, path, url, self.secrets)
            files = [here._listed(entry) for entry in entries[path]]
            here._listing = Listing(_sorted(files), sorted(subdirectories.get(path, ())))
            yield here

    def _missing(self, exc: FileNotFoundError) -> TrackerError:
        reason = _first_line(exc)
        if not reason or reason.rstrip("/").endswith(self.path):
            return NoSuchDirectory(path=self.location)
        return StorageFailed(url=self.location, reason=self._redact(reason))

    def _failed(self, exc: Exception) -> TrackerError:
        if isinstance(exc, PermissionError):
            reason = f"access denied ({_first_line(exc)})"
        elif isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
            reason = "timed out"
        else:
            reason = _first_line(exc) or type(exc).__name__
        return StorageFailed(url=self.location, reason=self._redact(reason))

    def _redact(self, text: str) -> str:
        return _redacted(text, self.secrets)


def _redacted(text: str, secrets: frozenset[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _copy_at_most(remote: IO[bytes], local: IO[bytes], limit: int) -> int:
    """Copy blocks until ``limit`` bytes or the end; the bytes copied."""
    copied = 0
    while copied < limit:
        block = remote.read(min(COPY_BLOCK, limit - copied))
        if not block:
            break
        local.write(block)
        copied += len(block)
    return copied


def _version(entry: Mapping[str, Any]) -> str | None:
    for key in (*VERSION_KEYS, *TIME_KEYS):
        if entry.get(key) not in (None, ""):
            return str(entry[key])
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# a protocol fsspec knows followed by "//" or ":/" but not "://": a slip, not a directory
MISSING_COLON = re.compile(r"(?P<scheme>s3|gs|gcs|hf|az|abfs|memory|https?)(?::/(?!/)|//)")


SCHEMES = ("s3", "gs", "gcs", "hf", "az", "abfs", "http", "https", "file", "memory")


def _check_scheme(url: str, protocol: str) -> None:
    """A scheme fsspec does not know is a slip (``htps://``): one line naming the usual ones
    and the URL likely meant."""
    from fsspec.registry import known_implementations, registry

    if protocol in known_implementations or protocol in registry:
        return
    rest = url.split("://", 1)[1]
    hint = did_you_mean(protocol, SCHEMES, "{}://" + rest.replace("{", "{{").replace("}", "}}"))
    raise UnknownScheme(url=masked(url), scheme=protocol, known=", ".join(SCHEMES), hint=hint)


def is_url(location: str | Path) -> bool:
    return isinstance(location, str) and "://" in location


def open_source(
    location: str | Path, storage_options: Mapping[str, Any] | None = None
) -> JobSource:
    """The job directory at a local path or an fsspec URL (``s3://``, ``gs://``, ``hf://``,
    ``memory://``, ``file://``); ``storage_options`` go to the URL's filesystem."""
    if not is_url(location):
        slip = MISSING_COLON.match(str(location))
        if slip is not None and not Path(location).exists():  # s3//bucket: s3://bucket meant
            url = f"{slip['scheme']}://{str(location)[slip.end() :]}"
            raise MisspelledURL(location=str(location), url=url)
        return LocalSource(Path(location))
    url = str(location)
    protocol = url.split("://", 1)[0].lower()
    _check_scheme(url, protocol)
    options = dict(storage_options or {})
    secrets = frozenset(
        str(value) for key, value in options.items() if SECRET_KEYS.search(key) and str(value)
    )
    try:
        import fsspec.core

        # a fresh filesystem without cached listings: a watching sync must see new files
        fs, path = fsspec.core.url_to_fs(
            url, skip_instance_cache=True, use_listings_cache=False, **options
        )
    except ImportError as exc:
        extra, package = EXTRAS.get(protocol, ("cloud", str(exc.name or "its filesystem")))
        raise MissingExtra(url=url, protocol=protocol, package=package, extra=extra) from None
    except ValueError as exc:
        raise UnknownProtocol(url=url, reason=_redacted(_first_line(exc), secrets)) from None
    except TypeError as exc:  # a storage option the filesystem does not take
        raise UnknownProtocol(url=url, reason=f"storage options: {_first_line(exc)}") from None
    return RemoteSource(fs, path, masked(url), secrets)  # shown and kept without credentials
