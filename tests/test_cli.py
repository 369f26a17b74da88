"""The command line: help everywhere, listings in every format, errors as one line."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.main import get_command

from tests.conftest import Cli
from tests.templates import Templates
from tracker.cli import POLARS_ALLOCATOR, POLARS_DEFAULT, app
from tracker.sample import write_sample_job

WHERE_KEYS = (  # what a --where key may name besides metadata
    "run columns: seed, val_loss, final_loss, diverged, steps, last_step, min_loss, last_loss, "
    "nonfinite, notes"
)


def all_commands() -> list[list[str]]:
    root = get_command(app)
    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found.append([*path, name])
            walk(sub, [*path, name])

    walk(root, [])
    return found


@pytest.mark.parametrize("path", all_commands(), ids=" ".join)
def test_every_command_has_help_with_an_example(path: list[str]) -> None:
    command = get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    assert command.help and command.help.strip(), f"{path} has no help"
    if not hasattr(command, "commands"):
        assert "Example: tracker " in command.help, f"{path} help has no example"
    result = Cli("sqlite://")(*path, "--help")
    assert result.stdout.startswith("\n Usage: tracker ") or "Usage:" in result.stdout


@pytest.fixture
def two_jobs(db_url: str, templates: Templates) -> Cli:
    """Two small jobs, ingested once a session and copied."""

    def build(cli: Cli, root: Path) -> None:
        cli("ingest", str(write_sample_job(root / "job1", steps=40)), "--meta", "gpu=A10G")
        cli("ingest", str(write_sample_job(root / "job2", seed=1, steps=20, arms=("ref_s0",))))

    templates.copy_into(db_url, "two small jobs", build)
    return Cli(db_url)


@pytest.mark.parametrize(
    ("own", "kept"),
    [
        (None, POLARS_ALLOCATOR[1]),
        (POLARS_DEFAULT, POLARS_ALLOCATOR[1]),  # passed on by a parent that imported polars
        ("dirty_decay_ms:5000", "dirty_decay_ms:5000"),
    ],
)
def test_a_command_has_polars_give_freed_memory_back_unless_told_otherwise(
    own: str | None, kept: str
) -> None:
    """Set before polars loads (its allocator reads it then): a fresh process, as a command
    runs; a value the user set is kept."""
    name = POLARS_ALLOCATOR[0]
    env = {key: value for key, value in os.environ.items() if key != name}
    if own is not None:
        env[name] = own
    code = (
        "import os, sys; from tracker.cli import main; sys.argv = ['tracker', '--help']\n"
        "try: main()\nexcept SystemExit: pass\n"
        f"print(os.environ[{name!r}], 'polars' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.splitlines()[-1] == f"{kept} False"


def test_jobs_in_every_format(two_jobs: Cli) -> None:
    table = two_jobs("jobs").stdout.splitlines()
    assert table[0].split() == [
        "job",
        "time",
        "ingested_at",
        "probes",
        "failed_probes",
        "arms",
        "points",
        "meta",
        "source",
    ]
    assert table[2].split()[:1] + table[2].split()[3:8] == [
        "job1",
        "25",
        "1",
        "4",
        "480",
        "gpu=A10G",
    ]
    rows = json.loads(two_jobs("jobs", "--format", "json").stdout)
    assert [(r["job"], r["arms"], r["points"]) for r in rows] == [("job1", 4, 480), ("job2", 1, 60)]
    csv_lines = two_jobs("jobs", "--format", "csv").stdout.splitlines()
    assert csv_lines[0] == "job,time,ingested_at,probes,failed_probes,arms,points,meta,source"
    assert csv_lines[2].startswith("job2,")


def test_show_lists_probes_and_arms(two_jobs: Cli) -> None:
    shown = json.loads(two_jobs("show", "job1", "--format", "json").stdout)
    assert len(shown["probes"]) == 25
    arms = {a["arm"]: a for a in shown["arms"]}
    assert set(arms) == {"ref_s0", "flash_s0", "ref_s1", "linear_s0"}
    assert arms["linear_s0"]["diverged"] is True
    assert arms["linear_s0"]["last_loss"] == "NaN"  # a string in JSON, as Infinity is
    assert arms["ref_s0"]["points"] == 40
    table = two_jobs("show", "job2").stdout
    assert "arms of job2:" in table and "ref_s0" in table


def flat(usage_error: str) -> str:
    """A usage error's text without the box and line breaks typer draws around it."""
    return " ".join(usage_error.replace("\u2502", " ").split())


def test_show_gives_one_table_per_csv(two_jobs: Cli) -> None:
    refused = two_jobs("show", "job1", "--format", "csv", ok=False)
    assert refused.exit_code == 2
    assert "CSV holds one table: add --part probes or --part arms" in flat(refused.stderr)
    arms = list(
        csv.DictReader(io.StringIO(two_jobs("show", "job2", "--part", "arms", "-f", "csv").stdout))
    )
    assert [(row["arm"], row["points"]) for row in arms] == [("ref_s0", "20")]
    probes = two_jobs("show", "job2", "--part", "probes", "-f", "csv").stdout
    assert len(list(csv.DictReader(io.StringIO(probes)))) == 25
    only_arms = json.loads(two_jobs("show", "job2", "--part", "arms", "-f", "json").stdout)
    assert list(only_arms) == ["job", "arms"] and len(only_arms["arms"]) == 1
    table = two_jobs("show", "job2", "--part", "arms").stdout
    assert table.startswith("arms of job2:\narm ") and "probes of" not in table


def listed_jobs(cli: Cli, *args: str) -> list[str]:
    return [r["job"] for r in json.loads(cli("jobs", *args, "-f", "json").stdout)]


def test_delete_removes_the_job(two_jobs: Cli) -> None:
    assert two_jobs("delete", "job2", "--yes").stdout == "deleted job2\n"
    assert listed_jobs(two_jobs) == ["job1"]
    missing = two_jobs("delete", "job2", "job1", "--yes", ok=False)
    assert (missing.exit_code, missing.stderr) == (
        1,
        "Error: no job named 'job2'; known jobs: job1\n",
    )
    assert listed_jobs(two_jobs) == ["job1"]  # all or nothing


def test_delete_several_or_by_where_and_only_when_told(two_jobs: Cli, tmp_path: Path) -> None:
    asked = two_jobs("delete", "job1", ok=False)  # no terminal here: it cannot ask
    assert asked.exit_code == 2
    assert "Invalid value for --yes: deleting asks first on a terminal; give --yes to delete " in (
        flat(asked.stderr)
    )
    both = two_jobs("delete", "job1", "--where", "gpu=A10G", "--yes", ok=False)
    assert both.exit_code == 2
    assert "name the jobs to delete, or choose them with --where" in flat(both.stderr)
    assert listed_jobs(two_jobs) == ["job1", "job2"]
    two_jobs(
        "ingest", str(write_sample_job(tmp_path / "job3", steps=5, arms=())), "--meta=gpu=A10G"
    )
    by_where = two_jobs("delete", "--where", "gpu=A10G", "-y")
    assert by_where.stdout == "deleted job1\ndeleted job3\n"
    unknown = two_jobs("delete", "--where", "gpu=A10G", "-y", ok=False)
    assert (unknown.exit_code, unknown.stderr) == (
        1,
        f"Error: no run column or metadata key 'gpu'; {WHERE_KEYS}; metadata: none\n",
    )
    assert two_jobs("delete", "job2", "job2", "-y").stdout == "deleted job2\n"


def test_delete_asks_on_a_terminal(two_jobs: Cli) -> None:
    def on_terminal(answer: str) -> subprocess.CompletedProcess[str]:
        controller, terminal = pty.openpty()
        os.write(controller, answer.encode())  # typed ahead: read when it asks
        command = [sys.executable, "-m", "tracker", "--db", two_jobs.url, "delete", "job2", "job1"]
        try:
            return subprocess.run(command, stdin=terminal, capture_output=True, text=True)
        finally:
            os.close(terminal)
            os.close(controller)

    question = (
        f"delete 2 jobs (job2, job1) and everything ingested with them from {two_jobs.url}? [y/N] "
    )
    kept = on_terminal("n\n")
    assert (kept.returncode, kept.stdout, kept.stderr) == (1, "", f"{question}nothing deleted\n")
    assert listed_jobs(two_jobs) == ["job1", "job2"]
    deleted = on_terminal("y\n")
    assert (deleted.returncode, deleted.stdout) == (0, "deleted job2\ndeleted job1\n")
    assert listed_jobs(two_jobs) == []


def test_jobs_where_since_sort_and_limit(two_jobs: Cli, tmp_path: Path) -> None:
    two_jobs("meta", "job1", "time=2026-10-01T00:00Z")
    two_jobs("meta", "job2", "time=2026-11-01T00:00Z", "gpu=H100")
    assert listed_jobs(two_jobs, "--where", "gpu=A10G") == ["job1"]
    assert listed_jobs(two_jobs, "--since", "2026-10-15") == ["job2"]
    assert listed_jobs(two_jobs, "--sort", "-points") == ["job1", "job2"]
    assert listed_jobs(two_jobs, "--sort", "points") == ["job2", "job1"]
    assert listed_jobs(two_jobs, "--sort", "-time", "--limit", "1") == ["job2"]
    late = two_jobs("jobs", "--since", "2027-01-01", ok=False)
    assert (late.exit_code, late.stderr) == (
        1,
        "Error: no selected job is at or after 2027-01-01T00:00:00Z; "
        "the latest is 2026-11-01T00:00:00Z (job2)\n",
    )
    value = two_jobs("jobs", "--where", "gpu=a10g", ok=False)
    assert (value.exit_code, value.stderr) == (
        1,
        "Error: no job has gpu=a10g; known values: A10G, H100 (gpu=A10G differs only in case)\n",
    )
    bad = two_jobs("jobs", "--sort", "-size", ok=False)
    assert bad.exit_code == 2
    assert (
        "no column 'size'; sort by one of: job, time, ingested_at, probes, failed_probes, arms, "
        "points" in flat(bad.stderr)
    )


def test_show_unknown_job(cli: Cli) -> None:
    result = cli("show", "nope", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: no job named 'nope'; known jobs: none\n",
    )


def test_usage_errors_are_typers(cli: Cli, tmp_path: Path) -> None:
    result = cli("ingest", str(tmp_path), "--meta", "novalue", ok=False)
    assert result.exit_code == 2
    assert "expected KEY=VALUE, got 'novalue'" in result.stderr
    assert cli("jobs", "--format", "xml", ok=False).exit_code == 2


def test_database_url_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    job = write_sample_job(tmp_path / "envjob", steps=5, arms=())
    result = typer.testing.CliRunner(env={"TRACKER_DATABASE_URL": url}).invoke(
        app, ["ingest", str(job)], catch_exceptions=False
    )
    assert result.exit_code == 0
    assert (tmp_path / "env.db").exists()


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}"
    result = Cli(url)("ingest", str(tmp_path), ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: cannot use database {url}: unable to open database file\n"


def test_python_dash_m_and_default_database(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRACKER_DATABASE_URL"}

    def tracker(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tracker", *args]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)

    refused = tracker("jobs")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith("Error: no database file tracker.db;")
    assert not (tmp_path / "tracker.db").exists()
    job = write_sample_job(tmp_path / "job1", steps=5, arms=())
    assert tracker("ingest", str(job)).returncode == 0
    listed = tracker("jobs", "--format", "csv")
    assert listed.stdout.splitlines()[1].startswith("job1,")


def test_a_meta_key_given_twice_is_refused(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "job1", steps=5, arms=())
    twice = cli("ingest", str(job), "--meta", "gpu=A", "--meta", "gpu=B", ok=False)
    assert twice.exit_code == 2 and "'gpu' is given twice" in flat(twice.stderr)
    assert cli("jobs", "-f", "csv").stdout == "\n"  # nothing was stored (no header: no rows)
    cli("ingest", str(job))
    again = cli("meta", "job1", "gpu=A", "gpu=B", ok=False)
    assert again.exit_code == 2 and "'gpu' is given twice" in flat(again.stderr)


def test_show_lists_models_by_size(two_jobs: Cli, tmp_path: Path) -> None:
    job1 = write_sample_job(tmp_path / "job1", steps=40)  # its files, as ingested
    records = json.loads((job1 / "mem_sweep.json").read_text())
    sizes: dict[str, int] = {}
    for record in records:
        sizes[record["model"]] = max(sizes.get(record["model"], 0), record.get("n_params", 0))
    shown = json.loads(two_jobs("show", "job1", "-f", "json").stdout)["probes"]
    models = list(dict.fromkeys(probe["model"] for probe in shown))
    assert models == sorted(sizes, key=sizes.__getitem__)
    assert models.index("gpt-30m") < models.index("gpt-124m")


def test_compare_help_fits_80_columns() -> None:
    result = typer.testing.CliRunner(env={"COLUMNS": "80"}).invoke(app, ["compare", "--help"])
    line = next(line for line in result.stdout.splitlines() if "--fail-on-regression" in line)
    assert "\u2026" not in line and "--no-fail" not in result.stdout


def test_a_near_miss_suggests_the_close_name(two_jobs: Cli) -> None:
    cases = [
        (("show", "Job2"), "no job named 'Job2'; known jobs: job1, job2; did you mean job2?"),
        (("show", "job3"), "no job named 'job3'; known jobs: job1, job2"),  # two as close
        (
            ("query", "curve", "--arm", "flash_s9"),
            "no arm 'flash_s9' in the selected jobs; known arms: flash_s0, linear_s0, ref_s0, "
            "ref_s1; did you mean flash_s0?",
        ),
        (
            ("query", "curve", "--arm", "ref_s0", "--metric", "los"),
            "unknown metric 'los'; choose one of: loss, lr, step_ms; did you mean loss?",
        ),
        (
            ("meta", "job1", "--unset", "gpuu"),
            "job 'job1' has no metadata 'gpuu' to unset; its keys: gpu; did you mean gpu?",
        ),
        (
            ("jobs", "--where", "gpuu=A10G"),
            f"no run column or metadata key 'gpuu'; {WHERE_KEYS}; metadata: gpu; did you mean gpu?",
        ),
        (
            ("query", "probes", "--where", "gpu=A10"),
            "no job has gpu=A10; known values: A10G; did you mean gpu=A10G?",
        ),
    ]
    for args, message in cases:
        result = two_jobs(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n"), args


def test_help_paragraphs_wrap_at_the_terminal_not_the_source() -> None:
    result = typer.testing.CliRunner(env={"COLUMNS": "200"}).invoke(app, ["ingest", "--help"])
    assert (
        "A directory that fails is reported, naming it, and the others are still stored; the "
        "command then exits with code 1." in result.stdout
    )


@pytest.mark.parametrize(
    ("pair", "problem"),
    [
        ("bad key=1", "it holds a space"),
        ("1st=1", "it starts with '1'"),
        ("a:b=1", "it holds ':'"),
        ("=1", "it is empty"),
    ],
)
def test_a_bad_meta_key_says_what_is_wrong(two_jobs: Cli, pair: str, problem: str) -> None:
    result = two_jobs("meta", "job1", pair, ok=False)
    assert result.exit_code == 2
    key = pair.partition("=")[0]
    assert (
        f"Invalid value for KEY=VALUE: invalid metadata key {key!r} ({problem}): a key is "
        "letters, digits, '_', '.' and '-', starting with a letter or '_', at most 100 characters"
    ) in flat(result.stderr)
    assert two_jobs("meta", "job1").stdout == "job1: gpu=A10G\n"


def test_ingest_of_several_directories_draws_no_bar_off_a_terminal(
    cli: Cli, tmp_path: Path
) -> None:
    jobs = [str(write_sample_job(tmp_path / name, steps=5, arms=())) for name in ("j1", "j2")]
    result = cli("ingest", *jobs)
    assert result.stderr == ""
    assert result.stdout.splitlines()[-1] == "2 directories: 2 ingested"


def test_compare_writes_a_nan_delta_as_nan(cli: Cli, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "a", steps=40)))
    b = write_sample_job(tmp_path / "b", seed=1, steps=40)
    summary = json.loads((b / "flash_s0.json").read_text())
    (b / "flash_s0.json").write_text(json.dumps({**summary, "val_loss": float("nan")}))
    cli("ingest", str(b))
    result = cli("compare", "a", "b", ok=False)
    (line,) = [line for line in result.stdout.splitlines() if "val_loss flash_s0:" in line]
    assert line.startswith("  val_loss flash_s0: PASS -> FAIL (delta NaN); status: NaN after ")
    assert "nan" not in line
