"""Refusals that say what is wrong: a string past the record limit in ``mem_sweep.json`` is
a record too long (not malformed JSON); a first step of -2**63 then 1, 2, ... is steps that
rise, not a resume (their gap overflows an int64: steps are compared, never subtracted)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.errors import BadInput
from tracker.jobdir.probes import read_probe_stream
from tracker.sample import write_sample_job


@pytest.mark.parametrize("size", [3 * 1024 * 1024, 50 * 1024 * 1024], ids=["3 MiB", "50 MiB"])
def test_a_string_past_the_record_limit_is_a_record_too_long(size: int) -> None:
    records = [{"model": "gpt-124m", "variant": "ref"}, {"model": "x" * size, "variant": "ref"}]
    data = json.dumps(records).encode()
    with pytest.raises(BadInput) as raised:
        read_probe_stream("mem_sweep.json", io.BytesIO(data))
    assert str(raised.value) == "mem_sweep.json record 2: longer than 1 MiB"
    unterminated = data[: len(data) // 2]  # cut inside the long string: still too long first
    with pytest.raises(BadInput, match="record 2: longer than 1 MiB"):
        read_probe_stream("mem_sweep.json", io.BytesIO(unterminated))
    short = json.dumps(records[:1]).encode()[:-3]  # a short record cut: malformed, as before
    with pytest.raises(BadInput, match="malformed JSON"):
        read_probe_stream("mem_sweep.json", io.BytesIO(short))


def test_the_record_limit_through_ingest(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "job1", steps=20, arms=("ref_s0",))
    records = json.loads((job / "mem_sweep.json").read_text())
    records[1]["model"] = "x" * (3 * 1024 * 1024)
    (job / "mem_sweep.json").write_text(json.dumps(records))
    result = cli("ingest", str(job), ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {job}: mem_sweep.json record 2: longer than 1 MiB\n",
    )


def test_a_first_step_of_the_lowest_int64_then_rising_steps_is_no_resume(
    cli: Cli, tmp_path: Path
) -> None:
    job = write_sample_job(tmp_path / "job1", steps=20, arms=("ref_s0",))
    head, first, *rest = (job / "ref_s0.csv").read_text().splitlines()
    first = ",".join([str(-(2**63)), *first.split(",")[1:]])
    (job / "ref_s0.csv").write_text("\n".join([head, first, *rest]) + "\n")
    result = cli("ingest", str(job))
    assert "resumed" not in result.stdout + result.stderr
    curve = cli("query", "curve", "--job", "job1", "--arm", "ref_s0", "--format", "csv").stdout
    steps = [line.split(",")[2] for line in curve.splitlines()[1:]]
    assert steps == [str(-(2**63)), *map(str, range(1, 20))]
    assert cli("db", "check").stdout.endswith(": no damage found\n")
    # the lowest step last: a fall, told as the restart it is
    (job / "ref_s0.csv").write_text("\n".join([head, *rest, first]) + "\n")
    restarted = cli("ingest", str(job), "--replace").stdout
    assert (
        "warning: ref_s0: restarted from step -9223372036854775808 once: the last run kept,"
        " 19 earlier steps dropped"
    ) in restarted
