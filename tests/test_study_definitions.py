"""A database carries its studies: each job keeps the exact text of the study file it was
ingested with (by digest), which judges it where that file is missing; and the studies of
one database draw their variants in colours of their own."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tests.conftest import Cli, client_for
from tracker.analysis.expectations import judged_by, study_expectations, study_names
from tracker.analysis.study_files import StoredStudy, use_study_dirs
from tracker.analysis.study_looks import study_styles
from tracker.cli import app
from tracker.errors import UnknownStudy
from tracker.models import Job, StudyDefinition
from tracker.sample import sample_study, write_sample_job
from tracker.server import create_app
from tracker.store.schema import downgrade, upgrade

PACKAGE = Path(__file__).parents[1] / "tracker" / "studies"
STORED = "judged by the definition of study 'lion' stored in the database (digest {digest:.12})"


def lion_text(colors: bool = True) -> str:
    """A study of a user's: the 8-bit Adam study named lion (with its colours, or none)."""
    study = (PACKAGE / "adam8bit.toml").read_text()
    if not colors:
        study = study[: study.index("[style.variants]")] + study[study.index("\n[sample]\n") :]
    study = study.replace('name = "adam8bit"', 'name = "lion"').replace('"adam8bit-"', '"lion-"')
    return study.replace('title = "8-bit Adam"', 'title = "Lion"')


@pytest.fixture
def lion(tmp_path: Path) -> Iterator[Path]:
    """A directory holding the lion study."""
    directory = tmp_path / "studies"
    directory.mkdir()
    (directory / "lion.toml").write_text(lion_text())
    yield directory
    use_study_dirs([])  # the in-process commands' --studies, for the next test's server


def claims(cli: Cli, *args: str) -> list[dict]:
    rows: list[dict] = json.loads(cli(*args, "claims", "-f", "json").stdout)
    return rows


def ingest_lion_jobs(cli: Cli, root: Path, lion: Path) -> list[str]:
    sample = sample_study("adam8bit")
    for seed in (0, 1):
        job = write_sample_job(
            root / f"lion{seed}", seed=seed, steps=20, arms=sample.arms,
            variants=sample.probes, failed_probe=None,
        )  # fmt: skip
        cli("--studies", str(lion), "ingest", str(job), "--study", "lion")
    return ["lion0", "lion1"]


def stored_digest_of(url: str) -> str:
    engine = create_engine(url)
    with Session(engine) as session:
        digests = set(session.scalars(select(Job.study_digest)))
        kept = session.execute(select(StudyDefinition.name, StudyDefinition.text)).all()
    engine.dispose()
    assert len(digests) == 1 and kept == [("lion", lion_text())]  # the file's text, once
    return str(digests.pop())


def judged_alike(rows: list[dict], with_file: list[dict], note: str) -> None:
    """``rows`` are ``with_file``'s verdicts, each detail saying what judged it."""
    assert [row["detail"] for row in rows] == [f"{row['detail']}; {note}" for row in with_file]
    assert [row | {"detail": ""} for row in rows] == [row | {"detail": ""} for row in with_file]


def test_a_database_carries_its_studies_to_a_teammate(
    cli: Cli, tmp_path: Path, lion: Path, db_url: str
) -> None:
    jobs = ingest_lion_jobs(cli, tmp_path, lion)
    digest = stored_digest_of(cli.url)
    assert digest == hashlib.sha256((lion / "lion.toml").read_bytes()).hexdigest()
    with_file = claims(cli, "--studies", str(lion))
    assert {row["status"] for row in with_file} != {"INCONCLUSIVE"}
    # a teammate: no lion.toml (no --studies); the database's own definition judges
    note = STORED.format(digest=digest) + ": no file lion.toml here"
    judged_alike(claims(cli), with_file, note)
    assert claims(cli) == json.loads(cli("claims", "-f", "json", "--study", "lion").stdout)
    cli("report", "--study", "lion", "--out", str(tmp_path / "report"))
    page = (tmp_path / "report" / jobs[0] / "index.html").read_text()
    assert note.replace("'", "&#39;") in page
    with client_for(cli.url) as client:
        page = client.get(f"/jobs/{jobs[0]}")
        assert page.status_code == 200
        assert note.replace("'", "&#39;") in page.text and "not judged" not in page.text
        assert "<h1>Lion reproduction: 2 jobs</h1>" in client.get("/").text
        assert client.get("/api/claims").json() == claims(cli)
    # db copy carries the definition: the copy is judged alike, without the file either
    copied = Cli(f"sqlite:///{tmp_path / 'copy.db'}")
    assert cli("db", "copy", cli.url, copied.url).stdout.splitlines()[-1] == "2 jobs copied"
    assert stored_digest_of(copied.url) == digest
    judged_alike(claims(copied), with_file, note)


def studies(cli: Cli, *args: str) -> list[dict]:
    rows: list[dict] = json.loads(cli(*args, "studies", "-f", "json").stdout)
    return rows


def test_a_study_only_the_database_defines_is_served_and_listed(
    cli: Cli, tmp_path: Path, lion: Path, db_url: str
) -> None:
    ingest_lion_jobs(cli, tmp_path, lion)
    digest = stored_digest_of(cli.url)
    lion_claims = json.loads(cli("claims", "--study", "lion", "-f", "json").stdout)
    assert lion_claims != []
    with client_for(cli.url, study="lion") as client:  # a teammate: no lion.toml here
        home = client.get("/")
        assert home.status_code == 200 and "<h1>Lion reproduction: 2 jobs</h1>" in home.text
        page = client.get("/claims")
        # the page shows a statement without its subject, which has a column of its own
        assert (
            page.status_code == 200 and lion_claims[0]["statement"].split(": ", 1)[-1] in page.text
        )
        assert client.get("/api/claims").json() == lion_claims
    # listed as with its file, after the files' studies, every row then saying its source
    with_file = studies(cli, "--studies", str(lion))
    assert "source" not in with_file[0]
    stored = f"database (digest {digest:.12})"
    listed = studies(cli)
    assert [row["name"] for row in listed] == [
        *(row["name"] for row in with_file if row["name"] != "lion"),
        "lion",
    ]
    assert {row["name"]: row for row in listed} == {
        row["name"]: row | {"source": stored if row["name"] == "lion" else "packaged"}
        for row in with_file
    }
    table = cli("studies").stdout.splitlines()
    assert table[0].split() == ["name", "title", "paper", "claims", "source"]
    assert table[-1].endswith(f"  {stored}") and table[-1].startswith("lion ")
    assert cli("studies", "-f", "csv").stdout.splitlines()[0] == "name,title,paper,claims,source"


def test_an_unknown_study_names_the_studies_of_the_files_and_the_database(
    cli: Cli, tmp_path: Path, lion: Path, db_url: str
) -> None:
    ingest_lion_jobs(cli, tmp_path, lion)
    for command in (("serve", "--port", "0"), ("claims",), ("report", "--out", str(tmp_path))):
        result = cli(*command, "--study", "lionn", ok=False)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
        known = result.stderr.removeprefix("Error: unknown study 'lionn'; the known studies: ")
        assert known.removesuffix("; did you mean lion?\n").split(", ") == sorted(
            [*study_names(), "lion"]
        )
    with pytest.raises(UnknownStudy, match="did you mean lion"):
        create_app(cli.url, study="lionn")


def test_without_a_database_only_the_study_files_are_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no tracker.db here: the default database is none
    monkeypatch.delenv("TRACKER_DATABASE_URL", raising=False)
    result = CliRunner().invoke(app, ["studies", "-f", "json"])
    assert result.exit_code == 0
    assert [row["name"] for row in json.loads(result.stdout)] == study_names()
    assert not (tmp_path / "tracker.db").exists()
    named = Cli(f"sqlite:///{tmp_path / 'nope.db'}")("studies", ok=False)
    assert (named.exit_code, named.stderr.startswith("Error: no database file ")) == (1, True)


def test_the_file_on_disk_wins_over_a_stored_definition_that_differs(
    cli: Cli, tmp_path: Path, lion: Path
) -> None:
    jobs = ingest_lion_jobs(cli, tmp_path, lion)
    digest = stored_digest_of(cli.url)
    with_file = claims(cli, "--studies", str(lion))
    edited = tmp_path / "edited" / "lion.toml"  # (a file is read once a process: another)
    edited.parent.mkdir()
    edited.write_text(lion_text() + "\n# edited since\n")
    note = (
        f"judged by the study file {edited}; the definition stored with its jobs differs "
        f"(digest {digest:.12}, the file's {hashlib.sha256(edited.read_bytes()).hexdigest():.12})"
    )
    judged_alike(claims(cli, "--studies", str(edited.parent)), with_file, note)
    with client_for(cli.url) as client:
        page = client.get(f"/jobs/{jobs[1]}")
        assert page.status_code == 200 and note in page.text.replace("&#39;", "'")


def test_a_tampered_stored_definition_is_one_line_and_its_jobs_are_not_judged(
    cli: Cli, tmp_path: Path, lion: Path
) -> None:
    jobs = ingest_lion_jobs(cli, tmp_path, lion)
    digest = stored_digest_of(cli.url)
    engine = create_engine(cli.url)
    with engine.begin() as connection:
        connection.execute(update(StudyDefinition).values(text="[claims\n"))
    engine.dispose()
    result = cli("claims", "-f", "json")
    assert json.loads(result.stdout) == [] and result.stderr == ""
    why = STORED.format(digest=digest).removeprefix("judged by ") + (
        " is not the text of that digest: its jobs are not judged"
    )
    with client_for(cli.url) as client:
        page = client.get(f"/jobs/{jobs[0]}")
        assert page.status_code == 200 and why in page.text.replace("&#39;", "'")


@pytest.mark.parametrize(
    ("stored", "why"),
    [
        ("[claims\n", "is not valid TOML (Expected ']' at the end of a table declaration"),
        ("gate = 1\n", "(digest {digest:.12}): missing key claims"),
        (lion_text().replace('name = "lion"', 'name = "puma"'), "is of study 'puma'"),
    ],
)
def test_a_stored_definition_that_cannot_judge_says_why(stored: str, why: str) -> None:
    digest = hashlib.sha256(stored.encode()).hexdigest()
    exp = judged_by("lion", StoredStudy(digest, stored))
    assert exp.missing is not None and not exp.claims
    assert exp.missing.startswith(STORED.format(digest=digest).removeprefix("judged by "))
    assert why.format(digest=digest) in exp.missing
    assert exp.missing.endswith(": its jobs are not judged")


def test_jobs_of_a_migrated_database_have_no_stored_definition(
    cli: Cli, tmp_path: Path, lion: Path, db_url: str
) -> None:
    ingest_lion_jobs(cli, tmp_path, lion)
    engine = create_engine(db_url)
    downgrade(engine, "0014")
    with engine.connect() as connection:
        assert "study_definition" not in connection.dialect.get_table_names(connection)
    upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM study_definition")).scalar() == 0
        assert connection.execute(text("SELECT study_digest FROM job")).scalars().all() == [
            None,
            None,
        ]
    engine.dispose()
    assert claims(cli) == []  # as before databases kept them: listed, not judged
    assert claims(cli, "--studies", str(lion)) != []


def test_variants_of_the_studies_known_are_drawn_in_distinct_colours(lion: Path) -> None:
    packaged = study_styles()
    copy = lion_text().replace('name = "lion"', 'name = "puma"').replace("adam", "puma")
    (lion / "puma.toml").write_text(copy)  # a study whose colours are adam8bit's
    bare = lion_text(colors=False).replace('name = "lion"', 'name = "lynx"')
    (lion / "lynx.toml").write_text(bare.replace("adam", "lynx"))  # one of no colours
    (lion / "lion.toml").unlink()
    use_study_dirs([lion])
    styles = study_styles()
    colours = {variant: look.color for variant, look in styles.variants.items()}
    assert len(set(colours.values())) == len(colours)
    assert {"puma32", "puma8bit", "lynx32", "lynx8bit"} <= set(colours)
    # the packaged studies keep theirs
    assert {v: look.color for v, look in packaged.variants.items()}.items() <= colours.items()
    puma = study_expectations("puma").style
    assert puma is not None
    assert colours["puma32"] != puma.variants["puma32"].color  # adam32's, taken before
    assert styles.arms["puma32_s0"].color == colours["puma32"]  # its arms follow it
