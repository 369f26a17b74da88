"""What the tests count and sum: rows per table, the points the chunks hold, decoded, and the
bytes/param figure's model chosen from every probe read."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from sqlalchemy import Connection, func, inspect, select, text
from sqlalchemy.orm import Session

from tracker.figures.crossjob import ModelChoice, choose_model
from tracker.models import Curve, Job, Run
from tracker.store.curves import load_curves
from tracker.store.verdict_keys import detail


def stored_points(session: Session) -> pl.DataFrame:
    """Every stored point: ``job``, ``curve_id``, ``step``, ``value``, decoded from its chunk."""
    owners = session.execute(
        select(Curve.id, Job.name).join(Run, Run.id == Curve.run_id).join(Job, Job.id == Run.job_id)
    ).all()
    jobs = pl.DataFrame(
        {"curve_id": [c for c, _ in owners], "job": [j for _, j in owners]},
        schema={"curve_id": pl.Int64, "job": pl.String},
    )
    return load_curves(session, list(jobs["curve_id"])).join(jobs, on="curve_id")


def row_counts(session: Session, models: tuple[Any, ...]) -> dict[str, int]:
    """Rows per table of ``models``, and ``point``: the points their chunks hold."""
    counts = {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in models
    }
    return {**counts, "point": stored_points(session).height}


def kept_verdicts(connection: Connection) -> list[dict[str, Any]]:
    """Every kept verdict as a row of its columns before revision 0019 (``job_id``,
    ``position``, ``check``, ..., ``detail``, ``known``), in job and position order, its
    numbers as floats (SQLite's text 'NaN' too): since 0020 unpacked from its job's columns,
    since 0019 with its key's columns and its detail rebuilt; before, ``job_verdict``'s own."""
    tables = inspect(connection)
    if tables.has_table("job_verdicts"):
        rows = _unpacked(connection)
    elif not tables.has_table("verdict_key"):
        query = text("SELECT * FROM job_verdict ORDER BY job_id, position")
        rows = [dict(row._mapping) for row in connection.execute(query)]
    else:
        query = text(
            'SELECT v.job_id, v.position, k."check", k.subject, v.measured, k.expected, '
            "v.tolerance, k.status, k.detail_template, v.figures, k.known FROM job_verdict v "
            "JOIN verdict_key k ON k.id = v.key_id ORDER BY v.job_id, v.position"
        )
        rows = []
        for row in connection.execute(query):
            values = dict(row._mapping)
            figures, known = values.pop("figures"), values.pop("known")
            template = values.pop("detail_template")
            values["detail"] = detail(template, None if figures is None else bytes(figures))
            rows.append({**values, "known": known})
    for row in rows:
        for name in ("measured", "expected", "tolerance"):
            row[name] = None if row[name] is None else float(row[name])
    return rows


def _unpacked(connection: Connection) -> list[dict[str, Any]]:
    """The verdicts of ``job_verdicts``, unpacked as its columns are laid out (models.py)."""
    keys = {
        row[0]: row[1:]
        for row in connection.execute(
            text(
                'SELECT id, "check", subject, expected, status, detail_template, known '
                "FROM verdict_key"
            )
        )
    }
    query = text(
        "SELECT job_id, keys, measured, tolerance, absent, figure_ends, figures "
        "FROM job_verdicts ORDER BY job_id"
    )
    rows = []
    for job_id, *packed in connection.execute(query):
        ids, measured, tolerance, absent, ends, figures = (bytes(part) for part in packed)
        at = 0
        for position, key_id in enumerate(np.frombuffer(ids, "<i4").tolist()):
            check, subject, expected, status, template, known = keys[key_id]
            end = int(np.frombuffer(ends, "<i4")[position])
            flags = absent[position]
            rows.append(
                {
                    "job_id": job_id,
                    "position": position,
                    "check": check,
                    "subject": subject,
                    "measured": None
                    if flags & 1
                    else np.frombuffer(measured, "<f8")[position].item(),
                    "expected": expected,
                    "tolerance": None
                    if flags & 2
                    else np.frombuffer(tolerance, "<f8")[position].item(),
                    "status": status,
                    "detail": detail(template, None if flags & 4 else figures[at:end]),
                    "known": known,
                }
            )
            at = end
    return rows


def pick_model(probes: pl.DataFrame, prefix: str) -> ModelChoice:
    """``choose_model`` of the ``prefix`` models of ``probes`` (``tables.probes``), counted
    over every probe read: what ``tables.probe_models`` counts in SQL."""
    scaling = probes.filter(pl.col("model").str.starts_with(prefix))
    ok = pl.col("n_params").is_not_null()
    stats = scaling.group_by("model", maintain_order=True).agg(
        size=pl.col("n_params").max(),
        measured=ok.sum(),
        failed=(~ok).sum(),
        jobs=pl.col("job").filter(ok).n_unique(),
    )
    return choose_model(stats, scaling.get_column("job").n_unique(), prefix)
