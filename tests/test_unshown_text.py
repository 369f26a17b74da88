"""Text that is not what it looks like: control, invisible (U+200B) and text-direction (U+202E)
characters are refused in ``--meta`` and ``tracker meta`` values (as ``job.json`` refuses
them) and in a probe's or an arm summary's ``model`` (``gpt\\u200b-124m`` would print as
``gpt-124m`` but be grouped apart), each with one ``Error:`` line and nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.sample import write_sample_job

UNSHOWN = {"escape": "\x1b[2J", "zero width space": "\u200b", "right-to-left override": "\u202e"}


def refusal(value: str) -> str:
    code = f"U+{ord(value[0]):04X}"
    shown = repr(f"A10G{value}").encode("ascii", "backslashreplace").decode()
    return (
        f"metadata gpu: the value {shown} contains {code}, a character that is not printable"
        " (a value is printable text: no control, invisible or text-direction character)"
    )


@pytest.mark.parametrize("value", UNSHOWN.values(), ids=UNSHOWN.keys())
def test_a_meta_value_that_is_not_printable_is_refused(
    cli: Cli, tmp_path: Path, value: str
) -> None:
    job = write_sample_job(tmp_path / "job1", steps=20)
    result = cli("ingest", str(job), "--meta", f"gpu=A10G{value}", ok=False)
    assert (result.exit_code, result.stderr) == (1, f"Error: {job}: {refusal(value)}\n")
    assert cli("jobs", "--format", "csv").stdout.strip() == ""
    cli("ingest", str(job), "--meta", "gpu=A10G")
    result = cli("meta", "job1", f"gpu=A10G{value}", ok=False)
    assert (result.exit_code, result.stderr) == (1, f"Error: {refusal(value)}\n")
    assert cli("meta", "job1").stdout == "job1: gpu=A10G\n"


@pytest.mark.parametrize("value", ["\u200b", "\u202e"], ids=["U+200B", "U+202E"])
@pytest.mark.parametrize("file", ["mem_sweep.json", "ref_s0.json"])
def test_a_model_name_that_is_not_printable_is_refused(
    cli: Cli, tmp_path: Path, value: str, file: str
) -> None:
    job = write_sample_job(tmp_path / "job1", steps=20)
    document = json.loads((job / file).read_text())
    record = document[0] if isinstance(document, list) else document
    record["model"] = f"gpt{value}-124m"
    (job / file).write_text(json.dumps(document))
    result = cli("ingest", str(job), ok=False)
    assert result.exit_code == 1
    code = f"U+{ord(value):04X}"
    assert result.stderr.startswith(f"Error: {job}: {file}")
    assert result.stderr.endswith(f"'model' contains {code}, a character that is not printable\n")
    assert result.stderr.count("\n") == 1
    assert cli("jobs", "--format", "csv").stdout.strip() == ""
