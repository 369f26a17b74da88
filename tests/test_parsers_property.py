"""Property tests of the job-directory parsers, and of ingesting what they accept.

``parse_probe_file`` and ``parse_curve_csv`` get arbitrary bytes and structured-but-perturbed
documents (JSON values of random types in every probe field; CSV texts of random headers,
cells, quoting, line endings, BOM and blank lines). Each call must either return a valid
result -- typed fields, text the database can store, curves with strictly increasing Int64
steps and Float64 metrics -- or raise ``BadInput`` whose message is one line starting with
the file name. Any other exception (a polars panic included) is a bug. Valid documents, as
the jobs write them, must read back exactly.

The database-level properties ingest a random curve CSV or probe file in a small sample job
through the command line: exit 0 with everything stored, or exit 1 with one ``Error:`` line
and an empty database -- never a traceback, never part of a job.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tests.stored import row_counts
from tracker.cli import app
from tracker.errors import BadInput
from tracker.jobdir.reader import parse_curve_csv, parse_probe_file, scan_job
from tracker.jobdir.records import CONTROL_CHARS, FLOAT_FIELDS, INT_LIMIT, NAME_MAX, ProbeRecord
from tracker.models import Curve, CurveChunk, Job, JobMeta, Probe, Run, SourceFile
from tracker.sample import MODELS, VARIANTS, write_sample_job
from tracker.store.catalog import delete_job
from tracker.store.transactions import in_write_transaction

PanicException = pl.exceptions.PanicException  # a Rust panic: a BaseException, not an Exception
CSV_NAME = "ref_s1.csv"
PROBE_NAMES = ("mem_sweep.json", "probe_stdout.jsonl")
METRIC_MAX = 200  # width of curve.metric
FAST = settings(max_examples=200, deadline=None)

# -- checks ------------------------------------------------------------------------------------


def storable(value: str | None, what: str) -> None:
    """Text every backend stores: valid UTF-8 (no lone surrogate) and no NUL (PostgreSQL)."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AssertionError(f"{what} {value!r} cannot be encoded as UTF-8") from None
    assert "\x00" not in value, f"{what} {value!r} holds NUL, which PostgreSQL cannot store"


def parse_or_bad_input(parse: Callable[[str, bytes], Any], filename: str, data: bytes) -> Any:
    """The parser's result, or None after checking the ``BadInput`` it raised."""
    try:
        return parse(filename, data)
    except BadInput as exc:
        message = str(exc)
        assert message.splitlines() == [message], f"not one line: {message!r}"
        place = rf"{re.escape(filename)}( line \d+| record \d+)?: \S"
        assert re.match(place, message), f"does not start with the file name: {message!r}"
        return None
    except (Exception, PanicException) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AssertionError(f"{type(exc).__name__} instead of BadInput: {first}") from exc


def check_curves(frame: Any, data: bytes) -> None:
    assert isinstance(frame, pl.DataFrame)
    assert frame.columns[0] == "step" and "loss" in frame.columns, frame.columns
    assert len(set(frame.columns)) == frame.width
    assert frame.schema["step"] == pl.Int64
    for name, dtype in frame.schema.items():
        if name != "step":
            assert dtype == pl.Float64, f"{name}: {dtype}"
            storable(name, "metric name")
            assert len(name) <= METRIC_MAX, f"metric name of {len(name)} characters"
    first_line = data.decode("utf-8-sig").split("\n", 1)[0]
    for name in frame.columns:  # no column the header does not name
        assert name in first_line or name.replace('"', '""') in first_line, f"invented {name!r}"
    assert frame["step"].null_count() == 0
    assert frame["step"].diff().drop_nulls().gt(0).all(), "steps not strictly increasing"


def check_probes(records: Any) -> None:
    assert isinstance(records, list)
    for record in records:
        assert isinstance(record, ProbeRecord)
        for name in (record.model, record.variant):
            assert isinstance(name, str) and name.strip() and len(name) <= NAME_MAX, name
            assert not CONTROL_CHARS.search(name), name
            storable(name, "name")
        columns = record.columns()
        if record.failed:
            assert columns["n_params"] is None and columns["peak_steady"] is None
            assert all(columns[key] is None for key in FLOAT_FIELDS)
        else:
            assert type(record.n_params) is int and 1 <= record.n_params < INT_LIMIT
            assert type(record.peak_steady) is int and 0 <= record.peak_steady < INT_LIMIT
            for key in FLOAT_FIELDS:
                value = getattr(record, key)
                assert type(value) is float and math.isfinite(value) and value >= 0, key
        assert record.error is None or isinstance(record.error, str)
        storable(record.error, "error")
        assert isinstance(record.extra, dict)
        json.dumps(record.extra)  # stored as JSON text


# -- strategies: probes ------------------------------------------------------------------------

NASTY_TEXT = (
    "",
    " ",
    "\t",
    "\x00",
    "\ud800",  # a lone surrogate, as the JSON escape \ud800 gives it
    "a\u2028b",  # LINE SEPARATOR: valid unescaped inside a JSON string
    "x\x85y",  # NEXT LINE
    "line\nbreak",
    "é ü 漢",
    "m" * 201,
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=10**308, max_value=10**320),  # beyond any float
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(NASTY_TEXT),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
EDGE_COUNTS = st.sampled_from([0, -1, 1, INT_LIMIT - 1, INT_LIMIT, 1.0, 1.5, 1e15, True])
EDGE_FIGURES = st.sampled_from([0, -0.0, -1, 1e308, 2**1024, True, "1.5"])
ODD_TEXT = st.text(max_size=20) | st.sampled_from(NASTY_TEXT)
# per field: (a typical value, an odd but plausible one)
FIELDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "model": (st.sampled_from(list(MODELS)), ODD_TEXT),
    "variant": (st.sampled_from(VARIANTS), ODD_TEXT),
    "n_params": (st.integers(1, 10**12), EDGE_COUNTS),
    "peak_steady": (st.integers(0, 10**12), EDGE_COUNTS),
    "error": (st.none() | st.text(max_size=30), st.sampled_from(NASTY_TEXT)),
    **{key: (st.floats(0, 64) | st.integers(0, 64), EDGE_FIGURES) for key in FLOAT_FIELDS},
}


def rarely(draw: st.DrawFn, one_in: int) -> bool:
    return draw(st.integers(1, one_in)) == 1


@st.composite
def probe_records(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly plausible records: a field is at times missing, odd, or any JSON value."""
    record = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=2))
    for key, (typical, odd) in FIELDS.items():
        if key == "error" and draw(st.booleans()):
            continue
        if rarely(draw, 30):
            continue  # missing
        strategy = json_values if rarely(draw, 20) else odd if rarely(draw, 8) else typical
        record[key] = draw(strategy)
    return record


@st.composite
def perturbed(draw: st.DrawFn, text: str) -> str:
    """The text, or the text with a slice deleted, a character inserted, or cut short."""
    how = draw(st.sampled_from(["delete", "insert", "cut"]))
    if not text or not rarely(draw, 6):
        return text
    at = draw(st.integers(0, len(text) - 1))
    if how == "delete":
        return text[:at] + text[at + draw(st.integers(1, 5)) :]
    if how == "insert":
        return text[:at] + draw(st.sampled_from('{}[],:"\\\n\r 0e-')) + text[at:]
    return text[:at]


def encode(draw: st.DrawFn, text: str) -> bytes:
    encoding = draw(st.sampled_from(["utf-8-sig", "utf-16"])) if rarely(draw, 5) else "utf-8"
    return text.encode(encoding, errors="surrogatepass")


@st.composite
def probe_documents(draw: st.DrawFn) -> tuple[str, bytes]:
    filename = draw(st.sampled_from(PROBE_NAMES))
    size = draw(st.integers(0, 3) if rarely(draw, 5) else st.just(1))
    records = [draw(json_values if rarely(draw, 10) else probe_records()) for _ in range(size)]
    ascii_only = draw(st.booleans())
    if filename.endswith(".jsonl"):
        newline = draw(st.sampled_from(["\n", "\r\n"]))
        lines = [json.dumps(record, ensure_ascii=ascii_only) for record in records]
        for _ in range(draw(st.integers(0, 2))):
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["", "  "])))
        text = newline.join(lines) + draw(st.sampled_from(["", newline]))
    else:
        document: Any = draw(json_values) if rarely(draw, 10) else records
        indent = draw(st.sampled_from([None, 2]))
        text = json.dumps(document, ensure_ascii=ascii_only, indent=indent)
    return filename, encode(draw, draw(perturbed(text)))


# -- strategies: curve CSVs --------------------------------------------------------------------

TYPICAL_NAMES = st.sampled_from(["lr", "step_ms", "grad_norm", "tokens", "phase"])
ODD_NAMES = st.one_of(
    st.sampled_from(
        [
            *("step", "loss", "line", "index", "", " loss ", "Step", "val loss", "a,b"),
            *('q"t', "é", "m" * 201, "x\x00y", "column_1"),
        ]
    ),
    st.text(max_size=10),
)
TYPICAL_CELLS = st.one_of(
    st.floats(-1e6, 1e6).map(repr),
    st.sampled_from(["", "nan", "inf", "-inf"]),
)
ODD_CELLS = st.one_of(
    st.integers(-5, 10**6).map(str),
    st.floats().map(repr),
    st.sampled_from(
        [
            *("", " ", "NaN", "Infinity", "1e999", "1_000", "0x10", "abc", "warmup", "1,5"),
            *('"', "\x00", "1.5.2", "+3", " 7 ", "9223372036854775808", "-0", "1e3", "\t"),
        ]
    ),
    st.text(max_size=6),
)


def cell(draw: st.DrawFn, typical: st.SearchStrategy[str]) -> str:
    value = draw(ODD_CELLS if rarely(draw, 12) else typical)
    if rarely(draw, 10):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def curve_csvs(draw: st.DrawFn) -> bytes:
    """A CSV text: header, rows, quoting, line endings, BOM and blank lines, perturbed."""
    names = st.lists(ODD_NAMES if rarely(draw, 4) else TYPICAL_NAMES, max_size=3, unique=True)
    header = draw(names)
    for required in ("step", "loss"):
        if not rarely(draw, 40):
            header.insert(draw(st.integers(0, len(header))), required)
    step = draw(st.integers(-3, 5))
    rows = []
    for _ in range(draw(st.integers(0, 8))):
        step += draw(st.sampled_from([1, 2, 100, 0, -1]) if rarely(draw, 8) else st.just(1))
        typical_step = st.just(str(step))
        row = [cell(draw, typical_step if name == "step" else TYPICAL_CELLS) for name in header]
        if rarely(draw, 60) and row:
            row.pop()
        elif rarely(draw, 60):
            row.append(draw(ODD_CELLS))
        rows.append(row)
    lines = [",".join(row) for row in [header, *rows]]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(1, len(lines)))
        lines.insert(at, draw(st.sampled_from(["", "", "  ", "\t", ","])))
    if rarely(draw, 10):  # mixed line endings
        text = "".join(line + draw(st.sampled_from(["\n", "\r\n", "\r"])) for line in lines)
    else:
        newline = "\r" if rarely(draw, 10) else draw(st.sampled_from(["\n", "\r\n"]))
        text = newline.join(lines) + draw(st.sampled_from(["", newline]))
    if rarely(draw, 6):
        text = "\ufeff" + text
    return encode(draw, draw(perturbed(text)))


@st.composite
def valid_tables(draw: st.DrawFn) -> tuple[list[str], list[int], dict[str, list[float | None]]]:
    metric_names = st.sampled_from(["lr", "step_ms", "grad_norm", "tokens", "val_loss", "line"])
    metrics = draw(
        st.lists(
            metric_names | st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True), max_size=4
        ).map(lambda names: [n for n in dict.fromkeys(names) if n not in ("step", "loss")])
    )
    names = draw(st.permutations(["step", "loss", *metrics]))
    size = draw(st.integers(0, 30))
    steps = sorted(draw(st.sets(st.integers(-(10**6), 2**62), min_size=size, max_size=size)))
    values = {
        name: draw(st.lists(st.none() | st.floats(), min_size=size, max_size=size))
        for name in names
        if name != "step"
    }
    return names, steps, values


# -- properties of the parsers -----------------------------------------------------------------

PROBE_CRASHES = [
    # a 400-digit integer where a float is expected: OverflowError in math.isfinite
    b'[{"model": "m", "variant": "v", "n_params": 1, "bpp_params": ' + b"9" * 400 + b", "
    b'"bpp_state": 1, "bpp_grads": 1, "bpp_params_state_grads": 1, "peak_steady": 1}]',
    # more digits than Python converts: ValueError from json.loads
    b'[{"model": "m", "variant": "v", "n_params": ' + b"9" * 5000 + b"}]",
]
CSV_CRASHES = [
    b'step,loss\n0,"1\n2"\n1,3\n',  # a quoted line break: polars panics (field counts)
    b"step,loss,line\n0,1,2\n",  # a metric named "line": polars DuplicateError
    b"step,loss\r0,1\r1,2\r",  # old Mac line endings: csv.Error
]


@FAST
@given(data=st.binary(max_size=3000), filename=st.sampled_from(PROBE_NAMES))
@example(data=PROBE_CRASHES[0], filename="mem_sweep.json")
@example(data=PROBE_CRASHES[1], filename="mem_sweep.json")
def test_probe_parser_on_arbitrary_bytes(data: bytes, filename: str) -> None:
    records = parse_or_bad_input(parse_probe_file, filename, data)
    if records is not None:
        check_probes(records)


@FAST
@given(data=st.binary(max_size=3000))
@example(data=CSV_CRASHES[0])
@example(data=CSV_CRASHES[1])
@example(data=CSV_CRASHES[2])
def test_curve_parser_on_arbitrary_bytes(data: bytes) -> None:
    frame = parse_or_bad_input(parse_curve_csv, CSV_NAME, data)
    if frame is not None:
        check_curves(frame, data)


@FAST
@given(case=probe_documents())
@example(case=("mem_sweep.json", b'[{"model": "\\ud800", "variant": "ref"}]'))
@example(case=("mem_sweep.json", b'[{"model": "m", "variant": "v", "error": "a\\u0000b"}]'))
def test_probe_parser_on_perturbed_records(case: tuple[str, bytes]) -> None:
    filename, data = case
    records = parse_or_bad_input(parse_probe_file, filename, data)
    if records is not None:
        check_probes(records)


@FAST
@given(data=curve_csvs())
@example(data=b"step,loss,\n0,1,\n1,2,\n")  # a trailing comma: no column "column_2"
@example(data=b"step,loss," + b"m" * 201 + b"\n0,1,2\n")  # wider than curve.metric
@example(data=b"step,loss")  # a header without its line break
@example(data=b"\nstep,loss\n0,1\n")  # a blank first line
@example(data=b"0\x0c0")  # a form feed in a header name: escaped, not a line break
def test_curve_parser_on_perturbed_csv(data: bytes) -> None:
    frame = parse_or_bad_input(parse_curve_csv, CSV_NAME, data)
    if frame is not None:
        check_curves(frame, data)


valid_names = st.text(min_size=1, max_size=NAME_MAX).filter(
    lambda s: bool(s.strip()) and s.isprintable()  # no control, invisible, direction character
)
json_safe = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10)
extra_fields = st.dictionaries(
    st.text(max_size=8).filter(lambda key: key not in (*FIELDS, "error")), json_safe, max_size=3
)


@st.composite
def valid_probe_records(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A record as the probe writes it, and the probe-table columns it must give."""
    extra = draw(extra_fields)
    record: dict[str, Any] = {"model": draw(valid_names), "variant": draw(valid_names), **extra}
    error = draw(st.none() | st.text(max_size=40).map(lambda text: text.replace("\x00", "")))
    if error is not None:
        record["error"] = error
    columns: dict[str, Any] = {"model": record["model"], "variant": record["variant"]}
    if draw(st.booleans()):  # a failed probe: no n_params, whatever else is kept in extra
        return record, {**columns, "error": error, "extra": extra}
    figures = {
        "n_params": draw(st.integers(1, INT_LIMIT - 1)),
        "peak_steady": draw(st.integers(0, INT_LIMIT - 1)),
        **{key: draw(st.floats(0, 1e6)) for key in FLOAT_FIELDS},
    }
    record.update(figures)
    if error is not None and error.strip():  # an error makes it a failure, figures or not
        return record, {**columns, "error": error, "extra": {**extra, **figures}}
    return record, {**columns, **figures, "error": error, "extra": extra}


@FAST
@given(
    cases=st.lists(valid_probe_records(), max_size=5),
    filename=st.sampled_from(PROBE_NAMES),
    newline=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
)
@example(
    # LINE SEPARATOR inside a JSON string does not end a JSONL line (a name refuses it: not
    # printable; an error text keeps it)
    cases=[
        (
            {"model": "m", "variant": "ref", "error": "a\u2028b"},
            {"model": "m", "variant": "ref", "error": "a\u2028b", "extra": {}},
        )
    ],
    filename="probe_stdout.jsonl",
    newline="\n",
    bom=False,
)
def test_valid_probe_records_read_back_exactly(
    cases: list[tuple[dict[str, Any], dict[str, Any]]], filename: str, newline: str, bom: bool
) -> None:
    records = [record for record, _ in cases]
    if filename.endswith(".jsonl"):  # one record per line, as the probe prints them
        text = "".join(json.dumps(record, ensure_ascii=False) + newline for record in records)
    else:
        text = json.dumps(records, ensure_ascii=False, indent=2)
    data = (("\ufeff" if bom else "") + text).encode()
    if not records and filename.endswith(".json"):
        assert parse_probe_file(filename, data) == []
        return
    parsed = parse_or_bad_input(parse_probe_file, filename, data)
    assert parsed is not None, "valid records refused (see the BadInput above)"
    empty = dict.fromkeys(("n_params", "peak_steady", *FLOAT_FIELDS, "error"))
    expected = [{**empty, "extra": {}, **columns} for _, columns in cases]
    assert [record.columns() for record in parsed] == expected


def same_floats(got: list[float | None], expected: list[float | None]) -> bool:
    return len(got) == len(expected) and all(
        (a is None and b is None)
        or (a is not None and b is not None and (a == b or (math.isnan(a) and math.isnan(b))))
        for a, b in zip(got, expected, strict=True)
    )


@FAST
@given(
    table=valid_tables(),
    newline=st.sampled_from(["\n", "\r\n"]),
    quote_all=st.booleans(),
    bom=st.booleans(),
    blank_lines=st.booleans(),
)
def test_valid_curve_csv_reads_back_exactly(
    table: tuple[list[str], list[int], dict[str, list[float | None]]],
    newline: str,
    quote_all: bool,
    bom: bool,
    blank_lines: bool,
) -> None:
    names, steps, values = table
    out = io.StringIO()
    if quote_all:
        writer = csv.writer(out, lineterminator=newline, quoting=csv.QUOTE_ALL)
    else:
        writer = csv.writer(out, lineterminator=newline)
    writer.writerow(names)
    for index, step in enumerate(steps):
        cells = {"step": step, **{name: column[index] for name, column in values.items()}}
        writer.writerow(["" if cells[name] is None else repr(cells[name]) for name in names])
        if blank_lines and index % 3 == 0:
            out.write(newline)
    data = (("\ufeff" if bom else "") + out.getvalue()).encode()
    frame = parse_or_bad_input(parse_curve_csv, CSV_NAME, data)
    assert frame is not None, "a valid CSV refused (see the BadInput above)"
    assert frame.columns == ["step", *(name for name in names if name != "step")]
    assert frame["step"].to_list() == steps
    for name, column in values.items():
        assert same_floats(frame[name].to_list(), column), name


# -- properties of the ingest --------------------------------------------------------------------

DB_STEPS = 5
JOB = "job"
# No shrinking through the command line (minutes per failure): the parser properties and
# KNOWN_CASES below give the minimal examples.
SLOW = settings(
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TABLES = (Job, JobMeta, SourceFile, Probe, Run, Curve, CurveChunk)


def counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return row_counts(session, TABLES)


class Ingest:
    """Ingests the sample job through the command line and checks, on ``engine`` (one for
    every example: opening a database checks its schema), all or nothing."""

    def __init__(self, url: str, engine: Engine, directory: Path) -> None:
        self.url = url
        self.engine = engine
        self.directory = directory
        self.runner = CliRunner()

    def __call__(self, expected_probes: Callable[[], int], expected_points: Callable[[], int]):
        assert counts(self.engine)["job"] == 0
        try:
            result = self.runner.invoke(app, ["--db", self.url, "ingest", str(self.directory)])
        except PanicException as exc:  # not an Exception: the runner lets it through
            raise AssertionError(f"a traceback: PanicException: {exc}") from exc
        error = result.exception
        if error is not None and not isinstance(error, SystemExit):
            first = (str(error).strip().splitlines() or [""])[0]
            raise AssertionError(f"a traceback: {type(error).__name__}: {first}") from error
        stored = counts(self.engine)
        if result.exit_code == 1:
            lines = result.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
            assert result.stdout == ""
            assert all(n == 0 for n in stored.values()), f"part of the job was left: {stored}"
            return
        assert result.exit_code == 0, result.output
        probes, points = expected_probes(), expected_points()
        assert result.stdout.startswith(f"{JOB}: ingested {probes} probes"), result.stdout
        assert result.stdout.splitlines()[0].endswith(f", 4 arms, {points} points")
        assert (stored["probe"], stored["run"], stored["point"]) == (probes, 4, points)
        in_write_transaction(self.engine, partial(delete_job, name=JOB))


def stored_points(frame: pl.DataFrame) -> int:
    """Points a curve frame gives: every metric cell that is not missing (NaN counts)."""
    return sum(frame.height - frame[name].null_count() for name in frame.columns[1:])


def ingest_file(ingest: Ingest, filename: str, data: bytes) -> None:
    """Put ``data`` into the sample job as ``filename`` and ingest it: all or nothing."""
    (ingest.directory / filename).write_bytes(data)
    if filename == CSV_NAME:
        other_points = 3 * 3 * DB_STEPS  # the untouched arms: loss, lr and step_ms each
        ingest(lambda: 25, lambda: other_points + stored_points(parse_curve_csv(filename, data)))
    else:
        ingest(lambda: len(scan_job(ingest.directory).probes), lambda: 4 * 3 * DB_STEPS)


def test_ingesting_a_random_curve_csv_stores_all_or_nothing(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    ingest = Ingest(db_url, engine, write_sample_job(tmp_path / JOB, steps=DB_STEPS))

    @SLOW
    @given(data=curve_csvs())
    def ingest_random_csv(data: bytes) -> None:
        ingest_file(ingest, CSV_NAME, data)

    ingest_random_csv()


def test_ingesting_a_random_probe_file_stores_all_or_nothing(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    ingest = Ingest(db_url, engine, write_sample_job(tmp_path / JOB, steps=DB_STEPS))

    @SLOW
    @given(case=probe_documents().filter(lambda case: case[0] == "mem_sweep.json"))
    def ingest_random_probes(case: tuple[str, bytes]) -> None:
        ingest_file(ingest, "mem_sweep.json", case[1])

    ingest_random_probes()


KNOWN_CASES = {
    # parser crashes: a traceback instead of one Error line
    "csv-quoted-line-break": (CSV_NAME, CSV_CRASHES[0]),
    "csv-metric-named-line": (CSV_NAME, CSV_CRASHES[1]),
    "csv-cr-line-endings": (CSV_NAME, CSV_CRASHES[2]),
    "csv-header-without-line-break": (CSV_NAME, b"step,loss"),
    "csv-blank-first-line": (CSV_NAME, b"\nstep,loss\n0,1\n"),
    "probe-400-digit-figure": ("mem_sweep.json", PROBE_CRASHES[0]),
    "probe-5000-digit-count": ("mem_sweep.json", PROBE_CRASHES[1]),
    # parsed, but the database cannot store it
    "csv-metric-name-201-chars": (CSV_NAME, b"step,loss," + b"m" * 201 + b"\n0,1,2\n"),
    "csv-metric-name-with-nul": (CSV_NAME, b"step,loss,a\x00b\n0,1,2\n"),
    "probe-name-lone-surrogate": ("mem_sweep.json", b'[{"model": "\\ud800", "variant": "ref"}]'),
    "probe-error-with-nul": (
        "mem_sweep.json",
        b'[{"model": "m", "variant": "v", "error": "\\u0000"}]',
    ),
}


@pytest.mark.parametrize("case", KNOWN_CASES.values(), ids=KNOWN_CASES.keys())
def test_known_hard_inputs_ingest_all_or_nothing(
    db_url: str, engine: Engine, tmp_path: Path, case: tuple[str, bytes]
) -> None:
    """Inputs the properties found, one by one through the command line."""
    ingest = Ingest(db_url, engine, write_sample_job(tmp_path / JOB, steps=DB_STEPS))
    ingest_file(ingest, *case)
