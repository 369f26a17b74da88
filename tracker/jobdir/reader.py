"""Reading a downloaded job directory: probe records, training arms and their provenance.

Nothing here touches the database. ``scan_job`` validates the layout, refuses a file past
``max_file_size`` by its size and hashes every file it will read, in blocks; ``read_arm``
parses one arm (``tracker.jobdir.curves``), ``read_job`` all of them, so that an ingest has
the whole job checked before it takes the database's write lock. Every problem is a
``BadInput`` naming the file and the record or line; the limits are ``tracker.jobdir.limits``.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import polars as pl

from tracker.domain import ArmName
from tracker.errors import BadInput, BadJobName, NothingToIngest, TrackerError
from tracker.jobdir.curves import CurveFile, check_file_size, read_curve_stream
from tracker.jobdir.jobmeta import META_FILES, parse_job_meta
from tracker.jobdir.limits import MAX_FILE_SIZE, READ_BLOCK
from tracker.jobdir.probes import read_json_stream, read_probe_stream
from tracker.jobdir.records import ProbeRecord, parse_arm_summary
from tracker.jobdir.source import JobSource, ListedFile, LocalSource
from tracker.notes import NoteKind, RunNote

PROBE_FILE = "mem_sweep.json"
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the job directory
    sha256: str
    size: int
    version: str | None = None  # as listed (ETag, mtime): a sync skips the job while it holds


@dataclass(frozen=True)
class ArmFiles:
    name: str
    variant: str
    seed: int
    csv_path: ListedFile
    json_path: ListedFile


@dataclass
class Arm:
    name: str
    model: str
    variant: str
    seed: int
    val_loss: float | None
    final_loss: float | None
    diverged: bool | None
    extra: dict[str, Any]
    curves: pl.DataFrame  # "step" (Int64) and one Float64 column per metric
    notes: list[RunNote] = field(default_factory=list)  # "resumed at step 1500, ..."


@dataclass
class JobDirectory:
    source: JobSource
    name: str
    probes: list[ProbeRecord]
    arms: list[ArmFiles]
    files: list[SourceFile]
    skipped: list[str]
    meta: dict[str, str] = field(default_factory=dict)  # from job.json or meta.json

    @property
    def digest(self) -> str:
        content = "\n".join(f"{f.path}\t{f.sha256}" for f in sorted(self.files, key=_by_path))
        return hashlib.sha256(content.encode()).hexdigest()


def _by_path(source: SourceFile) -> str:
    return source.path


def validate_job_name(name: str, *, from_directory: bool = False) -> str:
    if not JOB_NAME.fullmatch(name):
        hint = " (the directory's name: name the job with --job)" if from_directory else ""
        raise BadJobName(name=name, hint=hint)
    return name


def as_source(directory: Path | JobSource) -> JobSource:
    return directory if isinstance(directory, JobSource) else LocalSource(directory)


def _open(listed: ListedFile, max_file_size: int) -> IO[bytes]:
    """The file opened for reading, refused past ``max_file_size`` by its listed size."""
    check_file_size(listed.name, listed.size, max_file_size)
    return listed.open()


class _Hashing:
    """A stream that hashes what is read from it."""

    def __init__(self, listed: ListedFile, stream: IO[bytes]) -> None:
        self.listed = listed
        self.filename = listed.name
        self.stream = stream
        self.sha256 = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        try:
            data = self.stream.read(size)
        except OSError as exc:
            raise BadInput(path=self.filename, problem=f"cannot be read ({exc.strerror})") from None
        self.sha256.update(data)
        self.size += len(data)
        return data

    def source(self) -> SourceFile:
        """What was read to the end: the file's path, hash, size and listed version."""
        while self.read(READ_BLOCK):
            pass
        return SourceFile(self.filename, self.sha256.hexdigest(), self.size, self.listed.version)


def scan_job(
    directory: Path | JobSource, name: str | None = None, *, max_file_size: int = MAX_FILE_SIZE
) -> JobDirectory:
    """Validate a job directory's layout, parse its probes and hash every file it uses."""
    source = as_source(directory)
    listing = source.listing()
    if name is None:
        job_name = validate_job_name(source.name, from_directory=True)
    else:
        job_name = validate_job_name(name)
    probes: list[ProbeRecord] = []
    files: list[SourceFile] = []
    skipped: list[str] = [f"{subdirectory}/" for subdirectory in listing.directories]
    csvs: dict[str, ListedFile] = {}
    summaries: dict[str, ListedFile] = {}
    meta_files: list[ListedFile] = []
    for listed in listing.files:
        path = PurePosixPath(listed.name)
        if path.name == PROBE_FILE or path.suffix == ".jsonl":
            with _open(listed, max_file_size) as stream:
                hashing = _Hashing(listed, stream)
                probes.extend(read_probe_stream(path.name, hashing))  # type: ignore[arg-type]
                files.append(hashing.source())
        elif path.suffix == ".csv":
            csvs[path.stem] = listed
        elif path.suffix == ".json" and ArmName.find(path.stem) is not None:
            summaries[path.stem] = listed
        elif path.name in META_FILES:
            meta_files.append(listed)
        else:
            skipped.append(path.name)
    skipped.sort(key=lambda skip: skip.rstrip("/"))  # as the directory's entries sort
    arms = [_pair_arm_files(stem, csv_path, summaries) for stem, csv_path in csvs.items()]
    for stem in sorted(summaries.keys() - csvs.keys()):
        raise BadInput(path=f"{stem}.json", problem=f"summary without its curve {stem}.csv")
    for arm in arms:
        for listed in (arm.csv_path, arm.json_path):
            with _open(listed, max_file_size) as stream:
                files.append(_Hashing(listed, stream).source())
    if not probes and not arms and not any(f.path == PROBE_FILE for f in files):
        raise NothingToIngest(path=str(source))
    meta = _job_meta(meta_files)
    return JobDirectory(source, job_name, _merge_duplicates(probes), arms, files, skipped, meta)


def _job_meta(meta_files: list[ListedFile]) -> dict[str, str]:
    if len(meta_files) > 1:
        names = " and ".join(listed.name for listed in meta_files)
        raise BadInput(path=meta_files[-1].name, problem=f"{names} both hold metadata: keep one")
    return {k: v for f in meta_files for k, v in parse_job_meta(f.name, f.read_bytes()).items()}


def _pair_arm_files(stem: str, csv_path: ListedFile, summaries: dict[str, ListedFile]) -> ArmFiles:
    name = ArmName.find(stem)
    if name is None:
        raise BadInput(path=csv_path.name, problem="arm file not named <variant>_s<seed>.csv")
    if stem not in summaries:
        raise BadInput(path=csv_path.name, problem=f"arm without its summary {stem}.json")
    return ArmFiles(stem, name.variant, name.seed, csv_path, summaries[stem])


def _merge_duplicates(probes: list[ProbeRecord]) -> list[ProbeRecord]:
    """The probe prints JSON lines that may also be collected in mem_sweep.json: the same record
    twice is one record; two different records for one (model, variant) are an error."""
    seen: dict[tuple[str, str], ProbeRecord] = {}
    for probe in probes:
        key = (probe.model, probe.variant)
        first = seen.setdefault(key, probe)
        if first is not probe and first.columns() != probe.columns():
            raise BadInput(
                path=probe.origin,
                problem=f"conflicts with {first.origin} for model {probe.model!r} "
                f"variant {probe.variant!r}",
            )
    return list(seen.values())


def parse_probe_file(filename: str, data: bytes) -> list[ProbeRecord]:
    """Probe records from ``mem_sweep.json`` (a JSON list) or a ``*.jsonl`` file."""
    return read_probe_stream(filename, io.BytesIO(data))


def read_arm(
    arm: ArmFiles,
    default_model: str,
    *,
    strict_steps: bool = False,
    max_file_size: int = MAX_FILE_SIZE,
) -> Arm:
    """Parse one arm's summary JSON and CSV curves (``strict_steps``: see ``read_curve_csv``)."""
    where = arm.json_path.name
    with _open(arm.json_path, max_file_size) as stream:
        document = read_json_stream(where, stream)
    summary, extra = parse_arm_summary(document, where, arm.seed)
    with _open(arm.csv_path, max_file_size) as stream:
        curve_file = read_curve_stream(
            arm.csv_path.name, stream, arm.csv_path.size, strict_steps, max_file_size=max_file_size
        )
    notes = curve_file.notes
    if "val_loss" not in document:  # null is a value: a diverged run has none to give
        notes.append(RunNote(NoteKind.NO_VAL_LOSS, "summary has no val_loss"))
    return Arm(
        name=arm.name,
        model=default_model if summary.model is None else summary.model,
        variant=arm.variant,
        seed=arm.seed,
        val_loss=summary.val_loss,
        final_loss=summary.final_loss,
        diverged=summary.diverged,
        extra=extra,
        curves=curve_file.curves,
        notes=notes,
    )


def read_job_arms(
    scanned: JobDirectory,
    default_model: str,
    *,
    strict_steps: bool = False,
    max_file_size: int = MAX_FILE_SIZE,
    on_arm: Callable[[ArmFiles], None] | None = None,
) -> list[Arm]:
    """Every arm of a scanned job, parsed and checked (``on_arm`` is told of each one)."""
    arms = []
    for arm_files in scanned.arms:
        arms.append(
            read_arm(
                arm_files, default_model, strict_steps=strict_steps, max_file_size=max_file_size
            )
        )
        if on_arm is not None:
            on_arm(arm_files)
    return arms


def parse_curve_csv(filename: str, data: bytes, *, strict_steps: bool = False) -> pl.DataFrame:
    """The curves of ``read_curve_csv``, without its notes."""
    return read_curve_csv(filename, data, strict_steps).curves


def read_curve_csv(filename: str, data: bytes, strict_steps: bool = False) -> CurveFile:
    """An arm's CSV given as bytes: ``tracker.jobdir.curves.read_curve_stream``."""
    return read_curve_stream(filename, io.BytesIO(data), len(data), strict_steps)


def curve_bytes(directory: Path | JobSource) -> int:
    """Size of the curve files an ingest of ``directory`` will parse, for progress bars."""
    try:
        listing = as_source(directory).listing()
    except TrackerError:  # the ingest reports it
        return 0
    return sum(listed.size for listed in listing.files if listed.name.endswith(".csv"))
