"""A window of a curve read where users read: ``tracker query curve --start/--end/--points``,
``api.curve(start=, end=, points=)`` and ``/api/curve`` give the same points, from the chunks
that hold them alone."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tests.templates import Templates
from tests.test_cli import flat
from tracker import api
from tracker.errors import TooFewPoints, WindowReversed
from tracker.sample import write_sample_job
from tracker.server import create_app
from tracker.store import codec
from tracker.store.points import CHUNK_POINTS

STEPS = 2 * CHUNK_POINTS + 7_000  # three chunks per curve: 0-16383, 16384-32767, the rest
SECOND = (CHUNK_POINTS + 100, 2 * CHUNK_POINTS - 100)  # inside the second chunk alone
ACROSS = (2 * CHUNK_POINTS - 3_000, 2 * CHUNK_POINTS + 3_000)  # the second and the third
CASES = [
    ((None, None), 200),
    ((SECOND[0], None), 10),
    (SECOND, 2_000),
    (ACROSS, 500),
    ((ACROSS[0], ACROSS[0] + 1_000), 2_000),  # fewer points than asked: every raw one
]


def ingest_long_job(cli: Cli, root: Path) -> None:
    arms = ("ref_s0", "linear_s0")  # linear_s0 diverges: NaN and inf in its loss
    job = write_sample_job(root / "long", steps=STEPS, arms=arms, failed_probe=None)
    cli("ingest", str(job))


@pytest.fixture
def long_job(db_url: str, templates: Templates) -> Cli:
    templates.copy_into(db_url, "long-job", ingest_long_job)
    return Cli(db_url)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of points of each chunk decoded from now on, in order."""
    counts: list[int] = []
    decode = codec.decode

    def counted(
        data: bytes, into: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        step, value = decode(data, into)
        counts.append(len(step))
        return step, value

    monkeypatch.setattr(codec, "decode", counted)
    return counts


@pytest.fixture
def client(long_job: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(long_job.url), base_url="http://127.0.0.1:8765") as client:
        yield client


def options(steps: tuple[int | None, int | None], points: int) -> list[str]:
    given = [("--start", steps[0]), ("--end", steps[1]), ("--points", points)]
    return [text for name, value in given if value is not None for text in (name, str(value))]


def same(values: list[Any]) -> list[Any]:
    """Values comparable with NaN among them (the JSON of both spells NaN ``NaN``)."""
    return [repr(float(v)) for v in values]


@pytest.mark.parametrize(("steps", "points"), CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("arm", ["ref_s0", "linear_s0"])
def test_a_window_is_the_same_through_cli_api_and_server(
    long_job: Cli, client: TestClient, arm: str, steps: tuple[int | None, int | None], points: int
) -> None:
    query = {"job": "long", "arm": arm, "points": points}
    query |= {k: v for k, v in zip(("start", "end"), steps, strict=True) if v is not None}
    served = client.get("/api/curve", params=query).json()
    frame = api.curve(long_job.url, arm, job="long", start=steps[0], end=steps[1], points=points)
    args = ("query", "curve", "--job", "long", "--arm", arm, *options(steps, points))
    as_json = json.loads(long_job(*args, "--format", "json").stdout)
    as_csv = list(csv.DictReader(io.StringIO(long_job(*args, "--format", "csv").stdout)))
    assert len(served["step"]) == min(points, served["in_window"])  # every point that fits
    assert served["raw"] is (served["in_window"] <= points)
    assert frame["step"].to_list() == served["step"]
    assert [row["step"] for row in as_json] == served["step"]
    assert [int(row["step"]) for row in as_csv] == served["step"]
    assert same(frame["value"].to_list()) == same(served["value"])
    assert same([row["value"] for row in as_json]) == same(served["value"])
    assert same([row["value"] for row in as_csv]) == same(served["value"])
    assert {row["arm"] for row in as_json} == {arm}


def test_a_small_window_keeps_as_many_points_as_asked(long_job: Cli) -> None:
    frame = api.curve(long_job.url, "ref_s0", job="long", start=10, end=20, points=10)
    steps = frame["step"].to_list()
    whole = api.curve(long_job.url, "ref_s0", job="long", start=10, end=20)
    assert len(steps) == 10 and steps[0] == 10 and steps[-1] == 20  # not 4 of 11
    values = whole["value"].to_list()
    kept = set(steps)
    for extreme in (values.index(min(values)), values.index(max(values))):
        assert 10 + extreme in kept  # the extremes kept, as min/max downsampling does


def test_only_the_chunks_holding_the_window_are_decoded(
    long_job: Cli, client: TestClient, decoded: list[int]
) -> None:
    api.curve(long_job.url, "ref_s0", job="long", start=SECOND[0], end=SECOND[1], points=100)
    assert decoded == [CHUNK_POINTS]
    decoded.clear()
    long_job("query", "curve", "--job", "long", "--arm", "ref_s0", *options(ACROSS, 100))
    assert decoded == [CHUNK_POINTS, STEPS - 2 * CHUNK_POINTS]
    decoded.clear()
    window = {"job": "long", "arm": "ref_s0", "start": SECOND[0], "end": SECOND[1]}
    assert client.get("/api/curve", params=window).status_code == 200
    assert decoded == [CHUNK_POINTS]
    decoded.clear()
    api.curve(long_job.url, "ref_s0", job="long", points=100)  # the whole curve: every chunk
    assert decoded == [CHUNK_POINTS, CHUNK_POINTS, STEPS - 2 * CHUNK_POINTS]


def test_the_ema_of_a_window_is_the_whole_curves(long_job: Cli, decoded: list[int]) -> None:
    whole = api.curve(long_job.url, "ref_s0", job="long", ema=0.02)
    decoded.clear()
    window = api.curve(long_job.url, "ref_s0", job="long", ema=0.02, start=SECOND[0], end=SECOND[1])
    assert decoded == [CHUNK_POINTS, CHUNK_POINTS]  # from the first step: the EMA needs them
    inside = whole.filter((whole["step"] >= SECOND[0]) & (whole["step"] <= SECOND[1]))
    assert window.equals(inside)


def test_bad_windows_are_one_error_line(long_job: Cli) -> None:
    curve = ("query", "curve", "--job", "long", "--arm", "ref_s0")
    reversed_ = long_job(*curve, "--start", "9", "--end", "3", ok=False)
    assert (reversed_.exit_code, reversed_.stderr) == (
        1,
        "Error: start must not exceed end (start 9, end 3)\n",
    )
    for points in ("-5", "5"):
        few = long_job(*curve, "--points", points, ok=False)
        assert few.exit_code == 2
        message = "Invalid value for '--points': Input should be greater than or equal to 10"
        assert message in flat(few.stderr)
    with pytest.raises(WindowReversed, match=r"^start must not exceed end \(start 9, end 3\)$"):
        api.curve(long_job.url, "ref_s0", job="long", start=9, end=3)
    with pytest.raises(TooFewPoints, match=r"^points must be at least 10, got -1$"):
        api.curve(long_job.url, "ref_s0", job="long", points=-1)
