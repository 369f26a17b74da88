"""What the report's index shows across jobs, and the server's comparison of two jobs, as
data for their templates (no HTML here; the figures are ``tracker.figures.crossjob``'s).

Job order is the ``time`` metadata given at ingest, else the ingest time (as every cross-job
query). The section has the bytes/param of one model per variant over job time (figure and
a small table), the validation loss per variant, each arm's smoothed loss across jobs
(``tracker.figures.crossjob``), each of the latest ``FIGURE_JOBS`` jobs, and the comparison
of the two most recent jobs with its regressions first, against every job. A report of fewer
than two jobs has a one-line note instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import polars as pl
from sqlalchemy.orm import Session

from tracker.figures.armloss import ARM_HEIGHT, arm_across_jobs
from tracker.figures.crossjob import (
    BPP_HEIGHT,
    VAL_HEIGHT,
    Job,
    ModelChoice,
    analytic_total,
    bpp_across_jobs,
    choose_model,
    val_loss_across_jobs,
    variant_order,
)
from tracker.figures.style import legend_under_title
from tracker.queries import tables
from tracker.queries.compare import Comparison, compare_in_study
from tracker.queries.job_analysis import job_studies
from tracker.queries.selection import JobSelection
from tracker.queries.yardsticks import KeptVerdicts, VerdictValues, kept_verdicts
from tracker.summary.grid import GridCurve
from tracker.summary.trajectories import arm_order
from tracker.views.keeping import NOWHERE, Keeping
from tracker.views.pages import FigureSlot, figure_slot

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations
    from tracker.analysis.verdict import Verdict

# The figures across jobs draw the latest jobs alone: at thousands of jobs every drawn job costs
# the first visit a curve to decode and points to ship, while the claims and the comparison
# still judge every job.
FIGURE_JOBS = 1000
NOTE = "Across jobs: nothing to compare, this report covers {n} job{s} (two or more needed)."
# the narrowest a figure is drawn (px): the index's full-width figures and its two columns
FULL_WIDTH = 760
HALF_WIDTH = 520


@dataclass(frozen=True)
class BppRow:
    variant: str
    analytic: float | None
    median: float | None
    latest: float | None  # the newest job's value
    latest_off: bool
    off: int  # jobs more than the tolerance away from the analytic total
    jobs: int  # jobs with a value


@dataclass(frozen=True)
class ComparisonView:
    job_a: str
    job_b: str
    href_a: str
    href_b: str
    tally: list[tuple[str, int]]  # change -> rows, in the order of Change, only those present
    regressions: list[str]
    within_noise: list[str]  # PASS -> FAIL judged within the noise: listed with the regressions
    rows: list[dict[str, Any]]  # in the table's order: regressions first, the same ones last
    hidden: int = 0  # rows of no change left out (``changes_only``)


@dataclass(frozen=True)
class CrossJobView:
    note: str | None = None  # instead of the section, with fewer than two jobs
    jobs: int = 0  # drawn: the latest ``FIGURE_JOBS``
    of: int = 0  # in all
    first: str = ""
    last: str = ""
    bpp: FigureSlot | None = None
    bpp_rows: list[BppRow] = field(default_factory=list)
    bpp_model: str | None = None
    bpp_tolerance: float = 0.0
    val: FigureSlot | None = None
    arms: list[FigureSlot] = field(default_factory=list)
    comparison: ComparisonView | None = None


def note(count: int) -> CrossJobView:
    return CrossJobView(note=NOTE.format(n=count, s="" if count == 1 else "s"))


def _bpp_rows(
    probes: pl.DataFrame, jobs: Sequence[Job], exp: Expectations, choice: ModelChoice
) -> list[BppRow]:
    """Per variant: the analytic total, the median over jobs, the newest job's value and how
    many jobs are off the analytic total."""
    if choice.model is None:
        return []
    ok = probes.filter((pl.col("model") == choice.model) & pl.col("n_params").is_not_null())
    newest = jobs[-1].name
    tolerance = exp.memory.bpp_tolerance
    rows = []
    present = ok.get_column("variant").unique(maintain_order=True).to_list()
    for variant in variant_order(present, exp):
        values = dict(
            ok.filter(pl.col("variant") == variant).select("job", "bpp_params_state_grads").rows()
        )
        analytic = analytic_total(exp, variant)

        def off(value: float | None, analytic: float | None = analytic) -> bool:
            return value is not None and analytic is not None and abs(value - analytic) > tolerance

        numbers = sorted(values.values())
        median = None
        if numbers:
            mid = len(numbers) // 2
            median = numbers[mid] if len(numbers) % 2 else (numbers[mid - 1] + numbers[mid]) / 2
        latest = values.get(newest)
        rows.append(
            BppRow(
                variant=variant,
                analytic=analytic,
                median=median,
                latest=latest,
                latest_off=off(latest),
                off=sum(off(v) for v in numbers),
                jobs=len(numbers),
            )
        )
    return rows


def comparison_view(
    comparison: Comparison, folders: Mapping[str, str], changes_only: bool = False
) -> ComparisonView:
    """Every row of the comparison in its table's order (regressions first); with
    ``changes_only`` without the ``same`` ones."""
    shown = comparison.changes_only() if changes_only else comparison
    return ComparisonView(
        job_a=comparison.job_a,
        job_b=comparison.job_b,
        href_a=job_href(folders, comparison.job_a),
        href_b=job_href(folders, comparison.job_b),
        tally=[(str(change), n) for change, n in comparison.counts().items() if n],
        regressions=list(comparison.regressions),
        within_noise=list(comparison.within_noise),
        rows=shown.table.to_dicts(),
        hidden=comparison.table.height - shown.table.height,
    )


def drawn_jobs(selected: pl.DataFrame) -> pl.DataFrame:
    """The latest ``FIGURE_JOBS`` of the ``selected`` jobs (in job order): those the figures
    across jobs draw."""
    return selected.tail(FIGURE_JOBS)


def job_href(folders: Mapping[str, str], name: str) -> str:
    return f"{quote(folders[name])}/index.html"


def cross_job_view(
    session: Session,
    selected: pl.DataFrame,
    folders: Mapping[str, str],
    curves: Mapping[str, Mapping[str, GridCurve]],
    latest: tuple[Sequence[Verdict], Sequence[Verdict]],
    exp: Expectations,
    read: VerdictValues | None = None,
    keeping: Keeping = NOWHERE,
) -> CrossJobView:
    """The section for the ``selected`` jobs (``selected_jobs``, in job order): its figures
    and their table of the latest ``FIGURE_JOBS`` (``drawn_jobs``), the comparison against
    every one.

    ``curves``: job -> arm -> its smoothed loss on a grid (``figures.crossjob.grid_curve``),
    kept from when the job's page was made, so no curve is read here; ``latest``: the
    verdicts of the two most recent jobs, for their comparison; ``read``: the kept verdict
    values of the jobs read already (for the comparison's yardstick, ``kept_verdicts``);
    ``keeping``: where the yardstick is kept for other pages.
    """
    if selected.height < 2:
        return note(selected.height)
    drawn = drawn_jobs(selected)
    jobs = [Job(name, time) for name, time in drawn.select("job", "time").iter_rows()]
    prefix = exp.memory.scaling_model_prefix
    choice = choose_model(*tables.probe_models(session, drawn["job_id"].to_list(), prefix), prefix)
    # the figure and its table show the chosen model alone
    models = JobSelection(models=() if choice.model is None else (choice.model,))
    probes = tables.probes(session, models, jobs=drawn) if choice.model else pl.DataFrame()
    runs = tables.seeds(session, JobSelection(), jobs=drawn)

    def slot(fig: Any, key: str, title: str, height: int, width: int = FULL_WIDTH) -> FigureSlot:
        fig = legend_under_title(fig, width)  # the page's slot grows with the legend
        return figure_slot(fig, f"x-{key}", title, fig["layout"].get("height", height))

    arms: dict[str, dict[str, GridCurve]] = {}
    for job in jobs:
        for arm, curve in curves.get(job.name, {}).items():
            if curve.points:
                arms.setdefault(arm, {})[job.name] = curve
    shared = [arm for arm in arm_order(list(arms), exp) if len(arms[arm]) >= 2]
    a, b = jobs[-2].name, jobs[-1].name
    last = selected["job_id"][-1]
    study = job_studies(session, [last])[last]

    def kept(gate: Expectations) -> KeptVerdicts:
        return keeping.kept_verdicts(study, lambda: kept_verdicts(session, gate, study, read))

    comparison = compare_in_study(session, exp, (a, latest[0]), (b, latest[1]), study, kept)
    return CrossJobView(
        jobs=len(jobs),
        of=selected.height,
        first=jobs[0].name,
        last=jobs[-1].name,
        bpp=slot(bpp_across_jobs(probes, jobs, exp, choice), "bpp", "Bytes/param", BPP_HEIGHT),
        bpp_rows=_bpp_rows(probes, jobs, exp, choice),
        bpp_model=choice.model,
        bpp_tolerance=exp.memory.bpp_tolerance,
        val=slot(val_loss_across_jobs(runs, jobs, exp), "val", "Validation loss", VAL_HEIGHT),
        arms=[
            slot(arm_across_jobs(arm, arms[arm], exp), f"arm-{i}", arm, ARM_HEIGHT, HALF_WIDTH)
            for i, arm in enumerate(shared, start=1)
        ],
        comparison=comparison_view(comparison, folders),
    )
