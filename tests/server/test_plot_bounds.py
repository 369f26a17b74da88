"""``/api/plot``'s bounds on SQLite and PostgreSQL: a request reads only its window's chunks
(and, to smooth or sum up wall time, the chunks before it, one at a time), holds at most
``points`` points per run, and waits for a heavy slot no longer than its patience. Curves are
stored in chunks of 100 points here, so that a few hundred steps span many chunks; work is
counted in decoded chunks, and every wait is for an event."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.orm import Session

import tracker.queries.plot as plot_module
import tracker.store.curves as curves_module
from tests.conftest import Cli, client_for
from tests.server.held import SAFETY_S, HeldCalls
from tests.templates import Templates
from tracker.analysis.smoothing import smooth, smooth_points
from tracker.elapsed import TimeColumn, TimeKind
from tracker.errors import ServerBusy
from tracker.queries.plot import PlotQuery, plot_series
from tracker.queries.walltime import elapsed_seconds, times_at
from tracker.sample import write_sample_job
from tracker.server.cache import HeavyWork
from tracker.services.ingest import ingest_job
from tracker.store import points
from tracker.store.curves import read_curve
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

STEPS = 600
CHUNK = 100
JOBS = [f"j{i}" for i in range(5)]
ARMS = [f"ref_s{i}" for i in range(10)]
RUNS = "&".join(f"run={job}/{arm}" for job in JOBS for arm in ARMS)  # 50 runs

STEP_MS = TimeColumn("step_ms", TimeKind.PER_STEP)


@pytest.fixture
def chunked(db_url: str, templates: Templates) -> str:
    """Five jobs of ten arms (50 runs), each curve in chunks of ``CHUNK`` points (built once
    a session, copied for each test)."""

    def build(cli: Cli, root: Path) -> None:
        engine = open_database(cli.url)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(points, "CHUNK_POINTS", CHUNK)
            for seed, job in enumerate(JOBS):  # each of its own content: no answer shared
                directory = write_sample_job(
                    root / job, seed=seed, steps=STEPS, arms=ARMS, probes=False
                )
                in_write_transaction(engine, partial(ingest_job, directory=directory, name=job))
        engine.dispose()

    templates.copy_into(db_url, ("chunked", CHUNK, STEPS), build)
    return db_url


class Decodes:
    """Chunks decoded, counted (the real decoding runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = curves_module.checked_decode

        def counted(*args: Any) -> Any:
            self.count += 1
            return real(*args)

        monkeypatch.setattr(curves_module, "checked_decode", counted)


def test_a_50_run_plot_decodes_only_its_windows_chunks(
    chunked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decodes = Decodes(monkeypatch)
    with client_for(chunked) as client:
        window = f"/api/plot?{RUNS}&start=250&end=349"
        body = client.get(window).json()
        assert decodes.count == 50 * 2  # chunks 200-299 and 300-399 of each run
        assert [s["in_window"] for s in body["series"]] == [100] * 50
        assert all(s["steps"] == list(range(250, 350)) for s in body["series"])
        assert client.get(window).json() == body and decodes.count == 50 * 2  # kept by query
        decodes.count = 0
        client.get(f"{window}&smooth=0.9")
        assert decodes.count == 50 * 4  # the EMA runs on from the first step: 4 chunks each
        decodes.count = 0
        client.get(f"{window}&x=time")
        assert decodes.count == 50 * (2 + 4)  # and step_ms summed up from its first chunk


def test_51_runs_are_refused_naming_the_cap(chunked: str) -> None:
    with client_for(chunked) as client:
        answer = client.get(f"/api/plot?{RUNS}&run=j9/ref_s0")
    assert answer.status_code == 422
    assert answer.json() == {"detail": "plot: 51 runs asked, at most 50 are drawn"}


def whole(
    url: str, arm: str, metric: str = "loss", job: str = "j0"
) -> tuple[np.ndarray, np.ndarray]:
    engine = open_database(url)
    try:
        with Session(engine) as session:
            curve = curves_module.find_curve(session, job, arm, metric)
            return read_curve(session, curve.id)
    finally:
        engine.dispose()


def test_chunk_by_chunk_is_the_whole_curves_smoothing_time_and_envelope(chunked: str) -> None:
    steps, values = whole(chunked, "ref_s3")
    source_steps, step_ms = whole(chunked, "ref_s3", "step_ms")
    seconds = times_at(source_steps, elapsed_seconds(STEP_MS, source_steps, step_ms), steps)
    engine = open_database(chunked)
    with Session(engine) as session:
        run = (("j0", "ref_s3"),)
        series = plot_series(session, PlotQuery(run, "loss", smooth=0.9, x="time"))["series"][0]
        np.testing.assert_array_equal(series["steps"], steps)  # 600 points: all drawn
        np.testing.assert_allclose(series["smoothed"], smooth(steps, values, 0.1), rtol=1e-12)
        np.testing.assert_allclose(series["times"], seconds, rtol=1e-12)
        by_point = PlotQuery(run, "loss", smooth=0.9, smooth_by="point", start=300)
        drawn = plot_series(session, by_point)["series"][0]["smoothed"]
        np.testing.assert_allclose(drawn, smooth_points(values, 0.1)[300:], rtol=1e-12)
        few = plot_series(session, PlotQuery(run, "loss", points=20))["series"][0]
        assert few["in_window"] == STEPS and few["downsampled"] and len(few["steps"]) <= 20
        finite = values[np.isfinite(values)]
        assert (np.nanmin(few["values"]), np.nanmax(few["values"])) == (finite.min(), finite.max())
        grouped = PlotQuery((("j0", "ref_s3"), ("j1", "ref_s4")), "loss", group="job", band=True)
        other = whole(chunked, "ref_s4", job="j1")[1]
        groups = plot_series(session, grouped)["groups"]
        assert [g["runs"] for g in groups] == [["j0/ref_s3"], ["j1/ref_s4"]]
        np.testing.assert_array_equal(groups[1]["mean"], other)
        mixed = PlotQuery((("j0", "ref_s3"), ("j1", "ref_s3")), "loss", group="arm")
        mean = np.mean([values, whole(chunked, "ref_s3", job="j1")[1]], axis=0)
        np.testing.assert_allclose(plot_series(session, mixed)["groups"][0]["mean"], mean)
    engine.dispose()


def test_a_plot_queued_behind_held_plots_is_answered_503_when_its_wait_ends(
    chunked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldCalls(monkeypatch, plot_module, "curve_chunks")
    with client_for(chunked) as client:
        heavy = client.app.state.served.heavy  # type: ignore[attr-defined]
        heavy.patience_s = 0  # the wait ends at once: the test holds the slots
        answers: list[Any] = [None] * heavy.slots

        def get(i: int) -> None:
            answers[i] = client.get(f"/api/plot?run=j{i}/ref_s0")

        threads = [threading.Thread(target=get, args=(i,)) for i in range(heavy.slots)]
        for thread in threads:
            thread.start()
        held.wait_for_calls(heavy.slots)
        busy = client.get(f"/api/plot?{RUNS}")
        assert (busy.status_code, busy.headers["retry-after"]) == (503, "5")
        assert busy.json()["detail"].startswith("the server is busy: 2 heavy requests")
        held.release.set()
        for thread in threads:
            thread.join(SAFETY_S)
        assert [answer.status_code for answer in answers] == [200] * heavy.slots
        assert client.get(f"/api/plot?{RUNS}").status_code == 200


def test_patience_counts_from_the_requests_arrival() -> None:
    """A request that spent its patience queued for a worker thread is refused at once."""
    heavy = HeavyWork(slots=1, patience_s=3600.0)
    taken = threading.Event()
    done = threading.Event()

    def hold() -> None:
        with heavy.slot():
            taken.set()
            assert done.wait(SAFETY_S)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(SAFETY_S)
    with pytest.raises(ServerBusy), heavy.slot(arrived=-3600.0):
        pass
    done.set()
    holder.join(SAFETY_S)
    with heavy.slot(arrived=-3600.0):  # a free slot is taken, however long the wait was
        pass
