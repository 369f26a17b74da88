"""The regression gate's comparable jobs: what every job of the database shows, from the rows
kept at ingest, and which of them a comparison is judged against (docs/claims.md, "The
regression gate").

A job's run length is part of its configuration: where the study's ``[gate] configuration``
names ``steps`` and a job has no ``steps`` metadata, its arms' run length (the longest arm's
summary ``steps``) stands in, so a job of 5,100 steps is no yardstick for jobs of 1,500.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Text, select, type_coerce
from sqlalchemy.orm import Session

from tracker.analysis.checks import Check
from tracker.analysis.gate import Yardstick
from tracker.analysis.gate_split import Levels, levels_of
from tracker.conditions import Condition
from tracker.domain import ArmName
from tracker.models import Job, JobMeta, Run
from tracker.queries.job_analysis import VerdictBatch, verdict_batches
from tracker.store.catalog import check_meta_keys, check_meta_values
from tracker.store.raw_rows import plain_rows
from tracker.store.value_lists import among
from tracker.store.verdict_keys import Key as VerdictKey
from tracker.summary.model import SEED_NOISE
from tracker.summary.run_index import stored_steps

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

Key = tuple[str, str]  # (check, subject)
Where = Sequence[tuple[str, str]]
LENGTH_KEY = "steps"  # the configuration key a job's run length stands in for
Seeds = tuple[float, int]  # sum of squares of a job's seeds about their variants' means, df


@dataclass(frozen=True)
class Values:
    """Every job's value of one (check, subject), in job id order: 16 bytes a job."""

    jobs: array[int] = field(default_factory=lambda: array("q"))
    values: array[float] = field(default_factory=lambda: array("d"))

    def pairs(self) -> zip[tuple[int, float]]:
        return zip(self.jobs, self.values, strict=True)


@dataclass(frozen=True)
class OtherJobs:
    """What the comparable jobs show: each one's seed-noise EMA delta (by name), the measured
    values of every (check, subject) (of every job, by id), how they were chosen, and the
    metadata of the second compared job; then the comparable jobs' ids in order with, at
    the same positions, their names, metadata and seeds (``Yardstick``'s)."""

    ema: Mapping[str, float] = field(default_factory=dict)
    measured: Mapping[Key, Values] = field(default_factory=dict)
    scope: str = ""
    own: Mapping[str, str] = field(default_factory=dict)
    ids: NDArray[np.int64] = field(default_factory=lambda: np.array([], dtype=np.int64))
    names: NDArray[np.object_] = field(default_factory=lambda: np.array([], dtype=object))
    levels: Levels = field(default_factory=dict)
    seeds: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 2)))

    def yardstick(self, key: Key) -> Yardstick:
        found = self.measured.get(key)
        if found is None or not self.ids.size:
            return Yardstick(scope=self.scope)
        jobs = np.frombuffer(found.jobs, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, jobs), self.ids.size - 1)
        chosen = self.ids[at] == jobs
        at = at[chosen]
        values = np.frombuffer(found.values, dtype=np.float64)[chosen]
        levels = {name: level.at(at) for name, level in self.levels.items()}
        return Yardstick(self.names[at], values, self.scope, levels, self.seeds[at])

    def seed_noise(self) -> Yardstick:
        names = np.array(list(self.ema), dtype=object)
        return Yardstick(names, np.array(list(self.ema.values()), dtype=np.float64), self.scope)


def _scope(key: str, values: set[str | None]) -> str:
    """'optimizer=adamw', 'optimizer=adamw or sgd', 'optimizer unset'."""
    parts = [f"{key}={value}" for value in sorted(v for v in values if v is not None)]
    return " or ".join(parts + ([f"{key} unset"] if None in values else []))


@dataclass(frozen=True)
class KeptVerdicts:
    """What every job of the database shows, by job id, from the rows kept at ingest, and its
    metadata (a run length standing in for ``steps``) and seeds: the gate's yardstick before
    the comparable jobs are picked (the server keeps it per database state, so a comparison
    reads no verdict rows)."""

    names: Mapping[int, str]  # job id -> name, in job id order
    meta: Mapping[int, Mapping[str, str]]  # job id -> its metadata
    ema: Mapping[int, float]  # job id -> its seed-noise EMA delta
    measured: Mapping[Key, Values]  # (check, subject) -> every job's value
    seeds: Mapping[int, Seeds] = field(default_factory=dict)

    def comparable(
        self, compared: Sequence[str], configuration: Sequence[str], where: Where | None = None
    ) -> OtherJobs:
        """The jobs the two ``compared`` are judged against: neither of them (a shifted job
        must not widen the spread it is judged against), and those with ``where``'s metadata
        (one key given twice: either value) or, without it, one of the compared jobs' values
        of each ``configuration`` key (a job lacking a key they carry is unlike them, as is
        one carrying a key they both lack)."""
        ids = {name: job_id for job_id, name in self.names.items()}
        left_out = {ids[name] for name in compared if name in ids}
        wanted: dict[str, set[str | None]] = {}
        if where is not None:
            for key, value in where:
                wanted.setdefault(key, set()).add(value)
        else:
            for key in configuration:
                wanted[key] = {self.meta.get(job_id, {}).get(key) for job_id in left_out}
        carried = {key for own in self.meta.values() for key in own}
        wanted = {key: values for key, values in wanted.items() if key in carried}
        kept = {
            job_id
            for job_id in self.names
            if job_id not in left_out
            and all(self.meta.get(job_id, {}).get(k) in vs for k, vs in wanted.items())
        }
        ema = {self.names[job_id]: v for job_id, v in self.ema.items() if job_id in kept}
        scope = ", ".join(_scope(key, values) for key, values in wanted.items())
        second = ids.get(compared[-1]) if compared else None
        own = self.meta.get(second, {}) if second is not None else {}
        order = sorted(kept)
        names = np.array([self.names[job_id] for job_id in order], dtype=object)
        levels = levels_of([self.meta.get(job_id, {}) for job_id in order])
        seeds = np.array([self.seeds.get(job_id, (0.0, 0)) for job_id in order], dtype=np.float64)
        return OtherJobs(
            ema,
            self.measured,
            scope,
            own,
            np.array(order, dtype=np.int64),
            names,
            levels,
            seeds.reshape(-1, 2),
        )


def _seeds(measured: Mapping[Key, Values]) -> dict[int, Seeds]:
    """Each job's arms' final validation losses: their sum of squares about each variant's
    mean and its degrees of freedom (seeds less one, summed over the variants)."""
    losses: dict[tuple[int, str], list[float]] = {}
    for (check, subject), values in measured.items():
        arm = ArmName.find(subject) if check == Check.VAL_LOSS_PAPER else None
        for job_id, value in values.pairs() if arm else ():
            losses.setdefault((job_id, arm.variant), []).append(value)  # type: ignore[union-attr]
    seeds: dict[int, Seeds] = {}
    for (job_id, _), own in losses.items():
        mean = sum(own) / len(own)
        ss, df = seeds.get(job_id, (0.0, 0))
        seeds[job_id] = (ss + sum((v - mean) ** 2 for v in own), df + len(own) - 1)
    return seeds


def _lengths(session: Session, ids: Sequence[int]) -> dict[int, int]:
    """Each job's run length: its longest arm's summary ``steps``."""
    lengths: dict[int, int] = {}
    query = select(Run.job_id, type_coerce(Run.extra, Text)).where(among(Run.job_id, ids))
    for job_id, extra in plain_rows(session, query):  # the texts a page's runs table parsed
        steps = None if extra is None else stored_steps(extra)
        if steps is not None:
            lengths[job_id] = max(steps, lengths.get(job_id, 0))
    return lengths


class VerdictValues:
    """Every job's kept verdict values and seed-noise delta, gathered from ``verdict_batches``
    in whatever job order they are read (``add``): a page that reads every job's verdicts for
    its claims hands them here too, so that they are read (and their checksums made) once."""

    def __init__(self) -> None:
        self.jobs: set[int] = set()  # the jobs read
        self._ema: dict[int, float] = {}
        self._measured: dict[Key, Values] = {}  # two arrays a (check, subject), not every row
        self._keys: tuple[Sequence[VerdictKey], list[Key], NDArray[np.intp]] | None = None

    def add(self, batch: VerdictBatch) -> None:
        columns, numbers = batch
        for job_id, own in numbers.items():
            self.jobs.add(job_id)
            if (value := own.get(SEED_NOISE)) is not None:
                self._ema[job_id] = value
        # the rows with a number, by (check, subject), each one's rows in the batch's order
        pairs, pair_of = self._pairs(columns.key_rows)
        rows = np.flatnonzero(columns.has_measured)
        if not rows.size:
            return
        rows = rows[np.argsort(pair_of[columns.keys[rows]], kind="stable")]
        of_rows = pair_of[columns.keys[rows]]
        starts = np.flatnonzero(np.diff(of_rows, prepend=-1))
        for pair, chosen in zip(of_rows[starts].tolist(), np.split(rows, starts[1:]), strict=True):
            if (found := self._measured.get(pairs[pair])) is None:
                found = self._measured[pairs[pair]] = Values()
            found.jobs.frombytes(columns.job_ids[chosen].tobytes())
            found.values.frombytes(columns.measured[chosen].tobytes())

    def _pairs(self, key_rows: Sequence[VerdictKey]) -> tuple[list[Key], NDArray[np.intp]]:
        """The (check, subject) pairs of the keys and each key's pair, made once for the
        batches that share their keys (every batch of one read: 10,000 keys at 10,000 jobs)."""
        if self._keys is None or self._keys[0] is not key_rows:
            pairs = list(dict.fromkeys(key[:2] for key in key_rows))
            index = {pair: i for i, pair in enumerate(pairs)}
            pair_of = np.array([index[key[:2]] for key in key_rows], dtype=np.intp)
            self._keys = (key_rows, pairs, pair_of)
        return self._keys[1], self._keys[2]

    def in_job_id_order(
        self, kept: Mapping[int, str]
    ) -> tuple[dict[int, float], dict[Key, Values]]:
        """The seed-noise deltas and values of the jobs ``kept``, in job id order."""
        ema = {job_id: self._ema[job_id] for job_id in sorted(self._ema) if job_id in kept}
        wanted = np.fromiter(kept, dtype=np.int64, count=len(kept))
        measured: dict[Key, Values] = {}
        for key, found in self._measured.items():
            jobs = np.frombuffer(found.jobs, dtype=np.int64)
            chosen = np.flatnonzero(np.isin(jobs, wanted))
            # stable: a job's own values keep their order (a million values: not in Python)
            at = chosen[np.argsort(jobs[chosen], kind="stable")]
            if at.size:
                values = np.frombuffer(found.values, dtype=np.float64)
                measured[key] = Values(
                    array("q", jobs[at].tobytes()), array("d", values[at].tobytes())
                )
        return ema, measured


def kept_verdicts(
    session: Session, exp: Expectations, study: str | None = None, read: VerdictValues | None = None
) -> KeptVerdicts:
    """Every job's (of ``study``, or all) kept verdict values, seed-noise delta, metadata
    (its run length for ``steps`` where it has none) and seeds (``KeptVerdicts``); ``read``:
    the values of the jobs read already (the others are read now)."""
    query = select(Job.id, Job.name).order_by(Job.id)
    if study is not None:
        query = query.where(Job.study == study)
    names = {job_id: name for job_id, name in session.execute(query)}
    meta: dict[int, dict[str, str]] = {job_id: {} for job_id in names}
    stored = session.execute(
        select(JobMeta.job_id, JobMeta.key, JobMeta.value).where(among(JobMeta.job_id, names))
    )
    for job_id, key, text in stored:
        meta[job_id][key] = text
    if LENGTH_KEY in exp.gate.configuration:
        for job_id, steps in _lengths(session, list(names)).items():
            meta[job_id].setdefault(LENGTH_KEY, str(steps))
    values = VerdictValues() if read is None else read
    unread = [job_id for job_id in names if job_id not in values.jobs]
    for batch in verdict_batches(session, unread, exp):  # in job id order
        values.add(batch)
    ema, measured = values.in_job_id_order(names)
    meta = {job_id: own for job_id, own in meta.items() if own}
    return KeptVerdicts(names, meta, ema, measured, _seeds(measured))


def checked_where(session: Session, where: Where | None) -> Where | None:
    """``--baseline-where`` pairs, each key and value one some job has (else an error naming
    the known ones)."""
    if where is not None:
        check_meta_keys(session, [key for key, _ in where])
        check_meta_values(session, [Condition(key, value) for key, value in where])
    return where
