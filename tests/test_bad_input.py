"""Broken job directories are refused with one clear error line; odd but honest ones are read.

Every broken case starts from a small valid sample job (``write_sample_job(steps=50)``),
breaks exactly one thing, and runs the real ``tracker ingest``. It must exit with code 1,
print exactly one ``Error: <dir>: <file or file line N or file record N>: <problem>`` line on
stderr, show no traceback, and leave no trace of the job in the database.

Arms are read in file-name order (flash_s0, linear_s0, ref_s0, ref_s1), after the probes,
so a broken ``ref_s1`` is an error in the last file the ingest reads.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, inspect, select, table

from tracker.sample import write_sample_job

STEPS = 50
ARMS = ("flash_s0", "linear_s0", "ref_s0", "ref_s1")
HEADER = "step,loss,lr,step_ms"
# mem_sweep.json of the sample job (0-based here, 1-based in messages): record 0 is
# gpt-30m/ref, record 15 the gpt-355m/ref
# out-of-memory failure (a record without n_params).
FAILED_RECORD = 15
JOB_NAME_RULE = (
    "use letters, digits, '.', '_' or '-', starting with a letter or digit, at most 100 characters"
)
DIRECTORY_NAME_HINT = " (the directory's name: name the job with --job)"

# A breaker changes the valid job directory and returns the arguments for `tracker ingest`,
# or None to ingest the directory itself.
Breaker = Callable[[Path], list[str] | None]
DELETE = object()  # a record key to remove


# -- helpers that build breakers -----------------------------------------------------------


def _records(job: Path) -> list[Any]:
    records: list[Any] = json.loads((job / "mem_sweep.json").read_text())
    return records


def _write_records(job: Path, records: Any, name: str = "mem_sweep.json") -> None:
    (job / name).write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n")


def edit_record(index: int, **changes: Any) -> Breaker:
    """Change (or, with DELETE, remove) keys of one mem_sweep.json record."""

    def breaker(job: Path) -> None:
        records = _records(job)
        for key, value in changes.items():
            if value is DELETE:
                del records[index][key]
            else:
                records[index][key] = value
        _write_records(job, records)

    return breaker


def replace_record(index: int, value: Any) -> Breaker:
    def breaker(job: Path) -> None:
        records = _records(job)
        records[index] = value
        _write_records(job, records)

    return breaker


def write_file(name: str, content: str | bytes) -> Breaker:
    def breaker(job: Path) -> None:
        data = content.encode() if isinstance(content, str) else content
        (job / name).write_bytes(data)

    return breaker


def delete_file(name: str) -> Breaker:
    def breaker(job: Path) -> None:
        (job / name).unlink()

    return breaker


def _lines(job: Path, name: str) -> list[str]:
    return (job / name).read_text().splitlines()


def _write_lines(job: Path, name: str, lines: list[str]) -> None:
    (job / name).write_text("\n".join(lines) + "\n")


def set_line(name: str, number: int, text: str) -> Breaker:
    """Replace line ``number`` (1-based; the CSV header is line 1)."""

    def breaker(job: Path) -> None:
        lines = _lines(job, name)
        lines[number - 1] = text
        _write_lines(job, name, lines)

    return breaker


def drop_line(name: str, number: int) -> Breaker:
    def breaker(job: Path) -> None:
        lines = _lines(job, name)
        del lines[number - 1]
        _write_lines(job, name, lines)

    return breaker


def swap_lines(name: str, first: int, second: int) -> Breaker:
    def breaker(job: Path) -> None:
        lines = _lines(job, name)
        lines[first - 1], lines[second - 1] = lines[second - 1], lines[first - 1]
        _write_lines(job, name, lines)

    return breaker


def edit_summary(arm: str, **changes: Any) -> Breaker:
    def breaker(job: Path) -> None:
        path = job / f"{arm}.json"
        summary = json.loads(path.read_text())
        summary.update(changes)
        path.write_text(json.dumps(summary, indent=2) + "\n")

    return breaker


def probe_lines(*lines: str) -> Breaker:
    """Add a probes.jsonl file (read after mem_sweep.json: file-name order)."""
    return write_file("probes.jsonl", "".join(line + "\n" for line in lines))


def ingest_args(*args: str) -> Breaker:
    """Ingest the intact job with extra options before the directory."""

    def breaker(job: Path) -> list[str]:
        return [*args, str(job)]

    return breaker


def strictly(breaker: Breaker) -> Breaker:
    """Break the job with ``breaker`` and ingest it with --strict-steps."""

    def strict(job: Path) -> list[str]:
        return ["--strict-steps", *(breaker(job) or [str(job)])]

    return strict


def _record_line(index: int, **changes: Any) -> Callable[[Path], str]:
    def line(job: Path) -> str:
        return json.dumps({**_records(job)[index], **changes})

    return line


def conflicting_jsonl(job: Path) -> None:
    same = _record_line(1)(job)
    other = _record_line(0, bpp_state=9.5)(job)
    (job / "probes.jsonl").write_text(same + "\n" + other + "\n")


def remove_directory(job: Path) -> None:
    shutil.rmtree(job)


def file_not_directory(job: Path) -> list[str]:
    return [str(job / "ref_s0.csv")]


def only_readme(job: Path) -> None:
    for path in job.iterdir():
        path.unlink()
    (job / "README.txt").write_text("results of job 7, see mem_sweep.json\n")


def truncate(name: str, keep: int) -> Breaker:
    def breaker(job: Path) -> None:
        path = job / name
        path.write_bytes(path.read_bytes()[:keep])

    return breaker


def truncate_after_record(job: Path) -> None:
    """Cut mem_sweep.json right after the first record's closing '},'."""
    text = (job / "mem_sweep.json").read_text()
    (job / "mem_sweep.json").write_text(text[: text.index("},") + 2] + "\n")


def rename_arm_files(job: Path) -> None:
    (job / "ref_s0.csv").rename(job / "ref.csv")
    (job / "ref_s0.json").rename(job / "ref.json")


def non_utf8_in(name: str) -> Breaker:
    def breaker(job: Path) -> None:
        path = job / name
        data = path.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 1
        path.write_bytes(data[:cut] + b"caf\xe9\xff\n" + data[cut:])

    return breaker


def link_outside(job: Path) -> None:
    outside = job.parent / "elsewhere.csv"
    (job / "ref_s0.csv").rename(outside)
    (job / "ref_s0.csv").symlink_to(outside)


def dangling_link(job: Path) -> None:
    (job / "ref_s0.csv").unlink()
    (job / "ref_s0.csv").symlink_to(job / "gone.csv")


def unreadable(job: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root from reading the file")
    (job / "ref_s0.json").chmod(0)


def fifo(job: Path) -> None:
    (job / "ref_s0.csv").unlink()
    os.mkfifo(job / "ref_s0.csv")


def rename_directory(new_name: str) -> Breaker:
    def breaker(job: Path) -> list[str]:
        target = job.parent / new_name
        job.rename(target)
        return [str(target)]

    return breaker


def ragged(name: str, number: int, extra: str) -> Breaker:
    """Append ``extra`` to line ``number`` (a field too many, or cut fields off)."""

    def breaker(job: Path) -> None:
        lines = _lines(job, name)
        lines[number - 1] = lines[number - 1] + extra
        _write_lines(job, name, lines)

    return breaker


def cut_fields(name: str, number: int, keep: int) -> Breaker:
    def breaker(job: Path) -> None:
        lines = _lines(job, name)
        lines[number - 1] = ",".join(lines[number - 1].split(",")[:keep])
        _write_lines(job, name, lines)

    return breaker


def set_header(name: str, header: str) -> Breaker:
    return set_line(name, 1, header)


# -- the corpus ------------------------------------------------------------------------------

R0 = "mem_sweep.json record 1"  # records count from 1
NUM_ERR = "must be a finite number >= 0"

# (case id, breaker, exact message after "Error: "); "{job}" is the job directory's path.
CASES: list[tuple[str, Breaker, str]] = [
    # the directory itself
    ("missing_directory", remove_directory, "{job}: no such directory"),
    ("file_instead_of_directory", file_not_directory, "{job}/ref_s0.csv: not a directory"),
    (
        "nothing_recognisable",
        only_readme,
        "{job}: no mem_sweep.json, *.jsonl probe file or <variant>_s<seed>.csv arm found",
    ),
    # mem_sweep.json as a whole
    ("empty_mem_sweep", write_file("mem_sweep.json", ""), "mem_sweep.json: empty file"),
    (
        "truncated_mem_sweep_mid_string",
        truncate("mem_sweep.json", 200),
        "mem_sweep.json: malformed JSON (line 9, column 5): Unterminated string starting at",
    ),
    (
        "truncated_mem_sweep_after_record",
        truncate_after_record,
        "mem_sweep.json: malformed JSON (line 17, column 1): Expecting value",
    ),
    (
        "mem_sweep_not_a_list",
        write_file("mem_sweep.json", '{"model": "gpt-30m", "variant": "ref"}'),
        "mem_sweep.json: expected a JSON list of probe records",
    ),
    (
        "mem_sweep_not_utf8",
        non_utf8_in("mem_sweep.json"),
        "mem_sweep.json: not UTF-8 text",
    ),
    # one mem_sweep.json record
    (
        "record_not_an_object",
        replace_record(3, "gpt-30m split_only"),
        "mem_sweep.json record 4: expected a JSON object",
    ),
    (
        "record_without_model",
        edit_record(2, model=DELETE),
        "mem_sweep.json record 3: missing 'model'",
    ),
    (
        "record_without_variant",
        edit_record(4, variant=DELETE),
        "mem_sweep.json record 5: missing 'variant'",
    ),
    (
        "failed_record_without_model",
        edit_record(FAILED_RECORD, model=DELETE),
        f"mem_sweep.json record {FAILED_RECORD + 1}: missing 'model'",
    ),
    ("model_not_a_string", edit_record(0, model=124), f"{R0}: 'model' must be a non-empty string"),
    ("model_empty", edit_record(0, model=""), f"{R0}: 'model' must be a non-empty string"),
    ("model_blank", edit_record(0, model="   "), f"{R0}: 'model' must be a non-empty string"),
    (
        "model_control_characters",
        edit_record(0, model="gpt-30m\n\x1b[31m"),
        f"{R0}: 'model' contains control characters",
    ),
    (
        "model_too_long",
        edit_record(0, model="g" * 201),
        f"{R0}: 'model' is longer than 200 characters",
    ),
    (
        "variant_not_a_string",
        edit_record(1, variant=["flash"]),
        "mem_sweep.json record 2: 'variant' must be a non-empty string",
    ),
    (
        "n_params_string",
        edit_record(0, n_params="30339456"),
        f"{R0}: 'n_params' must be an integer, got \"30339456\"",
    ),
    (
        "n_params_boolean",
        edit_record(0, n_params=True),
        f"{R0}: 'n_params' must be an integer, got true",
    ),
    (
        "n_params_huge",
        edit_record(0, n_params=10**30),
        f"{R0}: 'n_params' is out of range: {10**30}",
    ),
    ("n_params_zero", edit_record(0, n_params=0), f"{R0}: 'n_params' is out of range: 0"),
    ("n_params_negative", edit_record(0, n_params=-5), f"{R0}: 'n_params' is out of range: -5"),
    (
        "n_params_fraction",
        edit_record(0, n_params=30339456.5),
        f"{R0}: 'n_params' must be an integer, got 30339456.5",
    ),
    (
        "bpp_state_negative",
        edit_record(0, bpp_state=-8.0),
        f"{R0}: 'bpp_state' {NUM_ERR}, got -8.0",
    ),
    (
        "bpp_state_infinite",
        edit_record(0, bpp_state=float("inf")),
        f"{R0}: 'bpp_state' {NUM_ERR}, got Infinity",
    ),
    (
        "bpp_params_boolean",
        edit_record(0, bpp_params=False),
        f"{R0}: 'bpp_params' must be a number, got false",
    ),
    (
        "bpp_grads_null_on_success",
        edit_record(0, bpp_grads=None),
        f"{R0}: 'bpp_grads' must be a number, got null",
    ),
    (
        "bpp_state_missing_on_success",
        edit_record(0, bpp_state=DELETE),
        f"{R0}: missing 'bpp_state'",
    ),
    (
        "peak_steady_fraction",
        edit_record(0, peak_steady=1.5),
        f"{R0}: 'peak_steady' must be an integer, got 1.5",
    ),
    # *.jsonl probe files
    (
        "jsonl_malformed_line",
        probe_lines(
            '{"model": "gpt-30m", "variant": "ref", "error": "OOM"}',
            "",
            '{"model": "gpt-82m", "variant": ',
        ),
        "probes.jsonl line 3: malformed JSON (column 33): Expecting value",
    ),
    (
        "jsonl_line_not_an_object",
        probe_lines('{"model": "gpt-30m", "variant": "ref", "error": "OOM"}', "[1, 2]"),
        "probes.jsonl line 2: expected a JSON object",
    ),
    (
        "jsonl_conflicts_with_mem_sweep",
        conflicting_jsonl,
        "probes.jsonl line 2: conflicts with mem_sweep.json record 1 "
        "for model 'gpt-30m' variant 'ref'",
    ),
    # arm files and their pairing
    (
        "arm_csv_without_summary",
        delete_file("ref_s0.json"),
        "ref_s0.csv: arm without its summary ref_s0.json",
    ),
    (
        "summary_without_csv",
        delete_file("ref_s1.csv"),
        "ref_s1.json: summary without its curve ref_s1.csv",
    ),
    (
        "arm_not_named_variant_seed",
        rename_arm_files,
        "ref.csv: arm file not named <variant>_s<seed>.csv",
    ),
    ("symlink_outside_job", link_outside, "ref_s0.csv: links outside the job directory"),
    (
        "dangling_symlink",
        dangling_link,
        "ref_s0.csv: cannot be read (No such file or directory)",
    ),
    ("unreadable_file", unreadable, "ref_s0.json: cannot be read (Permission denied)"),
    ("fifo_instead_of_file", fifo, "ref_s0.csv: not a regular file"),
    # CSV curves
    ("csv_empty", write_file("ref_s0.csv", ""), "ref_s0.csv: empty file"),
    (
        "csv_without_header",
        drop_line("ref_s0.csv", 1),
        "ref_s0.csv: header must have 'step' and 'loss' columns; line 1 is numbers, not a header",
    ),
    (
        "csv_without_step",
        set_header("ref_s0.csv", "iteration,loss,lr,step_ms"),
        "ref_s0.csv: header must have 'step' and 'loss' columns; found: iteration, loss, lr, "
        "step_ms",
    ),
    (
        "csv_without_loss",
        set_header("ref_s0.csv", "step,train_loss,lr,step_ms"),
        "ref_s0.csv: header must have 'step' and 'loss' columns; found: step, train_loss, lr, "
        "step_ms",
    ),
    (
        "csv_duplicate_columns",
        set_header("ref_s0.csv", "step,loss,lr,loss"),
        "ref_s0.csv: column 'loss' appears twice in the header",
    ),
    (
        "csv_text_in_loss",
        set_line("ref_s0.csv", 7, "5,diverged,0.000594812,292.93"),
        "ref_s0.csv line 7: loss 'diverged' is not a number",
    ),
    (
        "csv_text_in_one_lr_cell",
        set_line("ref_s0.csv", 9, "7,4.1,n/a,292.93"),
        "ref_s0.csv line 9: lr 'n/a' is not a number",
    ),
    (
        "csv_fractional_step",
        set_line("ref_s0.csv", 4, "1.5,4.9,0.0006,298.39"),
        "ref_s0.csv line 4: step '1.5' is not an integer",
    ),
    (
        "csv_missing_step",
        set_line("ref_s0.csv", 4, ",4.9,0.0006,298.39"),
        "ref_s0.csv line 4: step is empty",
    ),
    (
        "csv_duplicate_step_strictly",
        strictly(set_line("ref_s0.csv", 6, "3,4.6,0.0006,298.39")),
        "ref_s0.csv line 6: step '3' is a duplicate",
    ),
    (
        "csv_decreasing_step_strictly",
        strictly(swap_lines("ref_s0.csv", 10, 11)),
        "ref_s0.csv line 11: step '8' is lower than the step before it",
    ),
    (
        "csv_row_with_extra_field",
        ragged("ref_s0.csv", 6, ",17"),
        "ref_s0.csv line 6: 5 fields, but the header has 4",
    ),
    (
        "csv_row_with_missing_fields",
        cut_fields("ref_s0.csv", 6, 2),
        "ref_s0.csv line 6: 2 fields, but the header has 4",
    ),
    (
        "csv_incomplete_last_line_strictly",
        strictly(cut_fields("ref_s0.csv", STEPS + 1, 1)),
        f"ref_s0.csv line {STEPS + 1}: 1 fields, but the header has 4",
    ),
    ("csv_not_utf8", non_utf8_in("ref_s0.csv"), "ref_s0.csv: not UTF-8 text"),
    # JSON summaries
    (
        "summary_malformed",
        write_file("ref_s0.json", '{"val_loss": 3.26,}'),
        "ref_s0.json: malformed JSON (line 1, column 19): "
        "Expecting property name enclosed in double quotes",
    ),
    (
        "summary_not_an_object",
        write_file("ref_s0.json", "[3.26, 3.3, false]\n"),
        "ref_s0.json: expected a JSON object",
    ),
    (
        "summary_val_loss_string",
        edit_summary("ref_s0", val_loss="3.26"),
        "ref_s0.json: 'val_loss' must be a number or null, got \"3.26\"",
    ),
    (
        "summary_diverged_string",
        edit_summary("ref_s0", diverged="no"),
        "ref_s0.json: 'diverged' must be true or false, got \"no\"",
    ),
    (
        "summary_seed_disagrees_with_name",
        edit_summary("ref_s1", seed=0),
        "ref_s1.json: 'seed' is 0 but the file name says seed 1",
    ),
    (
        "summary_model_empty",
        edit_summary("ref_s0", model=""),
        "ref_s0.json: 'model' must be a non-empty string",
    ),
    ("summary_not_utf8", non_utf8_in("ref_s0.json"), "ref_s0.json: not UTF-8 text"),
    # job names
    (
        "job_name_with_slash",
        ingest_args("--job", "runs/job2"),
        f"invalid job name 'runs/job2': {JOB_NAME_RULE}",
    ),
    ("job_name_dotdot", ingest_args("--job", ".."), f"invalid job name '..': {JOB_NAME_RULE}"),
    (
        "job_name_control_character",
        ingest_args("--job", "job2\n\x07"),
        f"invalid job name 'job2\\n\\x07': {JOB_NAME_RULE}",
    ),
    (
        "directory_name_not_a_job_name",
        rename_directory("job 2"),
        f"invalid job name 'job 2': {JOB_NAME_RULE}{DIRECTORY_NAME_HINT}",
    ),
    # atomicity: the last file the ingest reads is broken, after three arms were stored
    (
        "last_arm_broken",
        set_line("ref_s1.csv", 51, "49,oops,6e-05,290.1"),
        "ref_s1.csv line 51: loss 'oops' is not a number",
    ),
    (
        "last_summary_broken",
        edit_summary("ref_s1", diverged=1),
        "ref_s1.json: 'diverged' must be true or false, got 1",
    ),
]


def test_corpus_is_large_and_ids_are_unique() -> None:
    ids = [case_id for case_id, _, _ in CASES]
    assert len(ids) >= 35
    assert len(set(ids)) == len(ids)


def _table_counts(engine: Engine) -> dict[str, int]:
    """The rows of every table the database holds (its own list: one statement, where
    reflecting each table's columns took dozens)."""
    with engine.connect() as connection:
        return {
            name: connection.execute(select(func.count()).select_from(table(name))).scalar_one()
            for name in inspect(connection).get_table_names()
            if name != "alembic_version"
        }


@pytest.mark.parametrize(
    ("breaker", "expected"),
    [pytest.param(breaker, expected, id=case_id) for case_id, breaker, expected in CASES],
)
def test_broken_job_is_refused(
    cli: Any, engine: Engine, tmp_path: Path, breaker: Breaker, expected: str
) -> None:
    job = write_sample_job(tmp_path / "job", steps=STEPS)
    args = breaker(job) or [str(job)]
    result = cli("ingest", *args, ok=False)
    assert "Traceback" not in result.output
    assert result.exit_code == 1, f"accepted: {result.stdout!r}"
    assert "ingested" not in result.stdout
    assert cli("jobs", "--format", "json").stdout.strip() == "[]"
    assert not any(_table_counts(engine).values()), "rows left behind by a refused ingest"
    directory = args[-1]  # each error names the directory given, unless it is about it
    named = expected if expected.startswith("{job}") else f"{directory}: {expected}"
    assert result.stderr == f"Error: {named.replace('{job}', str(job))}\n"


# -- odd but honest inputs: accepted and read correctly ---------------------------------------


def _show(cli: Any, job: str = "job") -> dict[str, Any]:
    document: dict[str, Any] = json.loads(cli("show", job, "--format", "json").stdout)
    return document


def _arm(cli: Any, arm: str, job: str = "job") -> dict[str, Any]:
    arms = {row["arm"]: row for row in _show(cli, job)["arms"]}
    return arms[arm]


def _losses(path: Path) -> list[float]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return [float(row["loss"]) for row in csv.DictReader(fh)]


def _job_row(cli: Any) -> dict[str, Any]:
    (row,) = json.loads(cli("jobs", "--format", "json").stdout)
    return dict(row)


SAMPLE_POINTS = len(ARMS) * STEPS * 3  # loss, lr and step_ms of every arm


class TestOddButHonestInputs:
    @pytest.fixture
    def job(self, tmp_path: Path) -> Path:
        return write_sample_job(tmp_path / "job", steps=STEPS)

    def _ingest(self, cli: Any, job: Path) -> None:
        result = cli("ingest", str(job))
        assert result.stderr == ""
        assert "Traceback" not in result.output

    def _assert_ref_s0_intact(self, cli: Any, job: Path, losses: list[float]) -> None:
        arm = _arm(cli, "ref_s0")
        assert arm["points"] == STEPS
        assert arm["last_loss"] == pytest.approx(losses[-1])
        assert arm["min_loss"] == pytest.approx(min(losses))
        assert arm["val_loss"] == pytest.approx(
            json.loads((job / "ref_s0.json").read_text())["val_loss"]
        )
        assert _job_row(cli)["points"] == SAMPLE_POINTS

    def test_csv_with_utf8_bom(self, cli: Any, job: Path) -> None:
        losses = _losses(job / "ref_s0.csv")
        path = job / "ref_s0.csv"
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        self._ingest(cli, job)
        self._assert_ref_s0_intact(cli, job, losses)

    def test_json_files_with_utf8_bom(self, cli: Any, job: Path) -> None:
        for name in ("mem_sweep.json", "ref_s0.json"):
            (job / name).write_bytes(b"\xef\xbb\xbf" + (job / name).read_bytes())
        self._ingest(cli, job)
        show = _show(cli)
        assert len(show["probes"]) == 25
        assert _arm(cli, "ref_s0")["val_loss"] == pytest.approx(
            json.loads((job / "ref_s0.json").read_text(encoding="utf-8-sig"))["val_loss"]
        )

    def test_crlf_line_endings(self, cli: Any, job: Path) -> None:
        losses = _losses(job / "ref_s0.csv")
        for name in ("ref_s0.csv", "ref_s0.json", "mem_sweep.json"):
            path = job / name
            path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
        self._ingest(cli, job)
        self._assert_ref_s0_intact(cli, job, losses)
        assert len(_show(cli)["probes"]) == 25

    def test_blank_trailing_lines(self, cli: Any, job: Path) -> None:
        losses = _losses(job / "ref_s0.csv")
        with (job / "ref_s0.csv").open("a") as fh:
            fh.write("\n\n   \n\n")
        self._ingest(cli, job)
        self._assert_ref_s0_intact(cli, job, losses)

    def test_extra_numeric_columns(self, cli: Any, job: Path) -> None:
        losses = _losses(job / "ref_s0.csv")
        lines = _lines(job, "ref_s0.csv")
        lines = [lines[0] + ",grad_norm,tokens_per_s"] + [
            f"{line},{0.5 + i / 100},{120000 + i}" for i, line in enumerate(lines[1:])
        ]
        _write_lines(job, "ref_s0.csv", lines)
        self._ingest(cli, job)
        arm = _arm(cli, "ref_s0")
        assert arm["points"] == STEPS
        assert arm["last_loss"] == pytest.approx(losses[-1])
        assert _job_row(cli)["points"] == SAMPLE_POINTS + 2 * STEPS

    def test_text_column_is_not_a_metric(self, cli: Any, job: Path) -> None:
        lines = _lines(job, "ref_s0.csv")
        lines = [lines[0] + ",phase"] + [
            f"{line},{'warmup' if i < 5 else 'train'}" for i, line in enumerate(lines[1:])
        ]
        _write_lines(job, "ref_s0.csv", lines)
        self._ingest(cli, job)
        assert _arm(cli, "ref_s0")["points"] == STEPS
        assert _job_row(cli)["points"] == SAMPLE_POINTS

    def test_header_only_csv_is_an_arm_without_points(self, cli: Any, job: Path) -> None:
        (job / "ref_s1.csv").write_text(HEADER + "\n")
        self._ingest(cli, job)
        arm = _arm(cli, "ref_s1")
        assert arm["points"] == 0
        assert arm["last_loss"] is None
        assert arm["val_loss"] == pytest.approx(
            json.loads((job / "ref_s1.json").read_text())["val_loss"]
        )
        row = _job_row(cli)
        assert row["arms"] == 4
        assert row["points"] == SAMPLE_POINTS - 3 * STEPS

    def test_unicode_model_names(self, cli: Any, job: Path) -> None:
        records = _records(job)
        records[0]["model"] = "gpt-124m-δ"
        records[1]["model"] = "ResNet-50 «ImageNet» 日本"
        _write_records(job, records)  # raw UTF-8, not \u escapes
        summary = json.loads((job / "ref_s0.json").read_text())
        summary["model"] = "gpt-124m-δ"
        (job / "ref_s0.json").write_text(json.dumps(summary), encoding="utf-8")
        self._ingest(cli, job)
        probes = {(p["model"], p["variant"]): p for p in _show(cli)["probes"]}
        assert len(probes) == 25
        assert probes["gpt-124m-δ", "ref"]["n_params"] == records[0]["n_params"]
        assert probes["gpt-124m-δ", "ref"]["bpp_state"] == pytest.approx(records[0]["bpp_state"])
        assert (
            probes["ResNet-50 «ImageNet» 日本", "flash"]["peak_steady"] == records[1]["peak_steady"]
        )
        assert _arm(cli, "ref_s0")["model"] == "gpt-124m-δ"

    def test_model_name_of_exactly_200_characters(self, cli: Any, job: Path) -> None:
        edit_record(0, model="m" * 200)(job)
        self._ingest(cli, job)
        assert ("m" * 200, "ref") in {(p["model"], p["variant"]) for p in _show(cli)["probes"]}

    def test_identical_duplicates_in_jsonl_are_one_record(self, cli: Any, job: Path) -> None:
        records = _records(job)
        lines = [json.dumps(records[i]) for i in (0, FAILED_RECORD, 7)]
        (job / "probes.jsonl").write_text("\n".join(lines) + "\n\n")
        self._ingest(cli, job)
        row = _job_row(cli)
        assert row["probes"] == 25
        assert row["failed_probes"] == 1

    def test_summary_without_optional_keys(self, cli: Any, job: Path) -> None:
        (job / "ref_s0.json").write_text("{}\n")
        self._ingest(cli, job)
        arm = _arm(cli, "ref_s0")
        assert arm["model"] == "gpt-124m"  # --arm-model default
        assert arm["val_loss"] is None
        assert arm["diverged"] is None
        assert arm["points"] == STEPS
