"""Reading a downloaded job directory: probe records, training arms and their provenance.

Nothing here touches the database. ``scan_job`` validates the layout and hashes every file it
will read; ``read_arm`` parses one arm when the ingest gets to it, so a large job is never held
in memory whole. Every problem is a ``BadInput`` naming the file and the record or line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from tracker.domain import LOSS, ArmName
from tracker.errors import BadInput, BadJobName, NothingToIngest, TrackerError
from tracker.jobdir.jobmeta import META_FILES, parse_job_meta
from tracker.jobdir.logs import check_field_counts, settle_steps
from tracker.jobdir.records import (
    ProbeRecord,
    name_problem,
    parse_arm_summary,
    parse_probe_record,
)
from tracker.jobdir.source import JobSource, ListedFile, LocalSource

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
    notes: list[str] = field(default_factory=list)  # warnings: "resumed at step 1500, ..."


@dataclass
class CurveFile:
    """An arm's CSV as stored (one row per step) and what reading it changed or found."""

    curves: pl.DataFrame
    notes: list[str]


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


def _source_file(listed: ListedFile, data: bytes) -> SourceFile:
    return SourceFile(listed.name, hashlib.sha256(data).hexdigest(), len(data), listed.version)


def scan_job(directory: Path | JobSource, name: str | None = None) -> JobDirectory:
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
            data = listed.read_bytes()
            files.append(_source_file(listed, data))
            probes.extend(parse_probe_file(path.name, data))
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
            files.append(_source_file(listed, listed.read_bytes()))
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
    text = _decode(filename, data)
    if filename.endswith(".jsonl"):
        return [
            parse_probe_record(
                _load_json(f"{filename} line {number}", line, one_line=True),
                f"{filename} line {number}",
            )
            for number, line in _nonblank_lines(text)
        ]
    records = _load_json(filename, text)
    if not isinstance(records, list):
        raise BadInput(path=filename, problem="expected a JSON list of probe records")
    return [
        parse_probe_record(record, f"{filename} record {index}")
        for index, record in enumerate(records, start=1)
    ]


def _nonblank_lines(text: str) -> Iterator[tuple[int, str]]:
    # JSON lines end at "\n" only: str.splitlines would also cut at U+2028 inside strings
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


def _load_json(where: str, text: str, *, one_line: bool = False) -> Any:
    if not text.strip():
        raise BadInput(path=where, problem="empty file")
    try:
        return json.loads(text)  # accepts NaN and Infinity, as Python's json.dump writes them
    except json.JSONDecodeError as exc:
        place = f"column {exc.colno}" if one_line else f"line {exc.lineno}, column {exc.colno}"
        raise BadInput(path=where, problem=f"malformed JSON ({place}): {exc.msg}") from None
    except RecursionError:
        raise BadInput(path=where, problem="malformed JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise BadInput(path=where, problem=f"malformed JSON: {exc}") from None


def read_arm(arm: ArmFiles, default_model: str, *, strict_steps: bool = False) -> Arm:
    """Parse one arm's summary JSON and CSV curves (``strict_steps``: see ``read_curve_csv``)."""
    where = arm.json_path.name
    document = _load_json(where, _decode(where, arm.json_path.read_bytes()))
    summary, extra = parse_arm_summary(document, where, arm.seed)
    curve_file = read_curve_csv(arm.csv_path.name, arm.csv_path.read_bytes(), strict_steps)
    notes = curve_file.notes
    if "val_loss" not in document:  # null is a value: a diverged run has none to give
        notes.append("summary has no val_loss")
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


def parse_curve_csv(filename: str, data: bytes, *, strict_steps: bool = False) -> pl.DataFrame:
    """The curves of ``read_curve_csv``, without its notes."""
    return read_curve_csv(filename, data, strict_steps).curves


def read_curve_csv(filename: str, data: bytes, strict_steps: bool = False) -> CurveFile:
    """Columns ``step`` (Int64, strictly increasing) and one Float64 column per numeric metric.

    Empty cells are missing values (null); ``nan``, ``inf`` and ``-inf`` are values.
    Columns holding only text are not metrics and are dropped. A resumed run, a step logged
    twice in a row and an incomplete last line are settled and noted (``tracker.jobdir.steps``);
    with ``strict_steps`` they are refused, as they once were.
    """
    text = _decode(filename, data).replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise BadInput(path=filename, problem="empty file")
    header = _header(filename, text)
    line = "#line"  # the row index: a name no header column can take
    while line in header:
        line += "#"
    notes: list[str] = []
    cut = check_field_counts(filename, text, len(header), allow_short_last=not strict_steps)
    if cut is not None:  # a job killed mid-write: its last line is lost, not wrong
        text = "\n".join(text.split("\n")[: cut - 1]) + "\n"
        notes.append(f"incomplete last line {cut} dropped")
    try:
        raw = pl.read_csv(io.StringIO(text), infer_schema=False, new_columns=header)
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0]
        raise BadInput(path=filename, problem=f"malformed CSV: {first}") from None
    raw = raw.with_columns(pl.all().str.strip_chars()).with_row_index(line, offset=2)
    raw = raw.filter(~pl.all_horizontal(pl.exclude(line).is_null() | (pl.exclude(line) == "")))
    fail = partial(_fail_on_first, filename, raw, line)
    curves = _metric_columns(raw, header, fail)
    if strict_steps:
        change = curves["step"].diff()
        fail(change == 0, "step", "is a duplicate")
        fail(change < 0, "step", "is lower than the step before it")
    else:
        curves, settled = settle_steps(curves)
        notes.extend(settled)
    if curves.height == 0:
        notes.append("no data rows")
    return CurveFile(curves, notes)


def _metric_columns(raw: pl.DataFrame, header: list[str], fail: Any) -> pl.DataFrame:
    """``step`` as integers and every numeric column as floats, in file order."""
    steps = raw["step"].cast(pl.Int64, strict=False)
    fail(raw["step"].is_null(), "step", "is empty")
    fail(steps.is_null(), "step", "is not an integer")
    columns = [steps.alias("step")]
    for name in header:
        if name == "step":
            continue
        present = raw[name].is_not_null() & (raw[name] != "")
        values = raw[name].cast(pl.Float64, strict=False)
        unparsed = present & values.is_null()
        if name != LOSS and present.any() and unparsed.sum() == present.sum():
            continue  # a text column (a phase name, a timestamp): not a metric
        fail(unparsed, name, "is not a number")
        columns.append(values.alias(name))
    return pl.DataFrame(columns)


def _decode(filename: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(path=filename, problem="not UTF-8 text") from None


def _header(filename: str, text: str) -> list[str]:
    first = text.split("\n", 1)[0]
    if not first.strip():
        raise BadInput(path=f"{filename} line 1", problem="empty: the first line is the header")
    try:
        header = [name.strip() for name in next(csv.reader([first]))]
    except csv.Error as exc:
        raise BadInput(path=f"{filename} line 1", problem=f"malformed CSV header: {exc}") from None
    for required in ("step", LOSS):
        if required not in header:
            raise BadInput(path=filename, problem="header must have 'step' and 'loss' columns")
    for position, name in enumerate(header, start=1):
        if not name:
            raise BadInput(path=filename, problem=f"column {position} of the header has no name")
        problem = name_problem(name, f"column {name!r:.60}")
        if problem:
            raise BadInput(path=filename, problem=problem)
    if len(set(header)) != len(header):
        twice = next(name for name in header if header.count(name) > 1)
        raise BadInput(path=filename, problem=f"column {twice!r} appears twice in the header")
    return header


def _fail_on_first(
    filename: str, raw: pl.DataFrame, line: str, bad: pl.Series, column: str, problem: str
) -> None:
    if bad.any():
        row = raw.filter(bad).row(0, named=True)
        shown = f" {row[column]!r:.60}" if row[column] else ""
        raise BadInput(path=f"{filename} line {row[line]}", problem=f"{column}{shown} {problem}")


def curve_bytes(directory: Path | JobSource) -> int:
    """Size of the curve files an ingest of ``directory`` will parse, for progress bars."""
    try:
        listing = as_source(directory).listing()
    except TrackerError:  # the ingest reports it
        return 0
    return sum(listed.size for listed in listing.files if listed.name.endswith(".csv"))
