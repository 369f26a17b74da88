"""What a job is checked against: the packaged ``expectations.toml`` or a user's copy.

``load_expectations()`` validates the whole file up front (every key present, of the right
type, no unknown key) so that a typo fails loudly with the file and the key, instead of
silently turning a check into N/A halfway through a report. The file's schema is a pydantic
model (``ExpectationsFile``); what it yields are the frozen dataclasses below.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from tracker.analysis.expectations_file import (
    ExpectationsFile,
    _Gpt2,
    _Table4,
    problem_of,
)
from tracker.errors import BadExpectations

PACKAGED = "expectations.toml"


@dataclass(frozen=True)
class ComponentBpp:
    """Analytic bytes per parameter of one variant; None: that component is not checked."""

    params: float | None
    state: float | None
    grads: float | None

    def get(self, component: str) -> float | None:
        value: float | None = getattr(self, component)
        return value


@dataclass(frozen=True)
class PaperGib:
    """A paper's GiB of parameters and of optimizer state for one variant."""

    params: float
    optim: float


@dataclass(frozen=True)
class PaperTable:
    """Paper rows per variant, compared with a relative tolerance."""

    relative_tolerance: float
    rows: Mapping[str, PaperGib]


@dataclass(frozen=True)
class MemoryExpectations:
    gib: int
    extrapolate_params: int
    scaling_model_prefix: str
    bpp_tolerance: float
    expected_bpp: Mapping[str, ComponentBpp]  # in file order: the order of the verdicts
    table4: PaperTable
    gpt2_model: str
    gpt2: PaperTable
    known_differences: Mapping[str, str]  # variant -> why the study differs from the paper


@dataclass(frozen=True)
class TrainingExpectations:
    ema_alpha: float
    baseline: str
    candidate: str
    seed_twin: str
    divergent: str
    noise_factor: float  # the cross-job tracking claim's limit
    job_noise_factor: float  # one job's own tracking check's limit
    val_loss_tolerance: float
    val_loss_margin: float  # candidate minus baseline final validation loss, per job
    paper_steps: int  # the paper's run length: where its validation losses apply
    val_loss: Mapping[str, float]  # variant -> paper's final validation loss


@dataclass(frozen=True)
class ClaimsExpectations:
    """How cross-job claims are decided (see docs/claims.md)."""

    confidence: float  # of the Welch interval, the TOST (alpha = 1 - confidence) and bootstrap
    val_loss_margin: float  # equivalence margin of the final validation losses
    bootstrap_resamples: int
    bootstrap_seed: int
    min_share_within: float  # share of jobs within seed noise the tracking claim needs
    proportion_confidence: float  # of the binomial interval of that share


@dataclass(frozen=True)
class GateExpectations:
    """When ``compare`` counts a change as a regression."""

    configuration: tuple[str, ...]  # metadata keys whose values comparable jobs share
    alpha: float  # significance of the EMA delta against the comparable jobs' seed noise
    min_noise_jobs: int  # comparable jobs' values needed to measure a spread; fewer: tolerance
    ema_margin_factor: float  # candidate delta above this many pooled seed-noise deltas
    spread_factor: float  # a rise beyond this many (scaled) MADs of the comparable jobs


@dataclass(frozen=True)
class Expectations:
    memory: MemoryExpectations
    training: TrainingExpectations
    claims: ClaimsExpectations
    gate: GateExpectations
    source: str  # the file they were read from, for reports


def _paper(table: _Table4 | _Gpt2) -> PaperTable:
    rows = {variant: PaperGib(row.params, row.optim) for variant, row in table.rows().items()}
    return PaperTable(table.relative_tolerance, MappingProxyType(rows))


def _expectations(doc: ExpectationsFile, source: str) -> Expectations:
    mem, tr, cl, ga = doc.memory, doc.training, doc.claims, doc.gate
    expected_bpp = {
        variant: ComponentBpp(c.params, c.state, c.grads) for variant, c in mem.expected_bpp.items()
    }
    memory = MemoryExpectations(
        gib=mem.gib,
        extrapolate_params=mem.extrapolate_params,
        scaling_model_prefix=mem.scaling_model_prefix,
        bpp_tolerance=mem.bpp_tolerance,
        expected_bpp=MappingProxyType(expected_bpp),
        table4=_paper(mem.table4),
        gpt2_model=mem.gpt2_124m.model,
        gpt2=_paper(mem.gpt2_124m),
        known_differences=MappingProxyType(dict(mem.known_differences)),
    )
    training = TrainingExpectations(
        ema_alpha=tr.ema_alpha,
        baseline=tr.baseline,
        candidate=tr.candidate,
        seed_twin=tr.seed_twin,
        divergent=tr.divergent,
        noise_factor=tr.noise_factor,
        job_noise_factor=tr.job_noise_factor,
        val_loss_tolerance=tr.val_loss.tolerance,
        val_loss_margin=tr.val_loss.candidate_margin,
        paper_steps=tr.val_loss.paper_steps,
        val_loss=MappingProxyType(dict(tr.val_loss.model_extra or {})),
    )
    claims = ClaimsExpectations(**dict(cl))  # not model_dump(): see parse_probe_record
    gate = GateExpectations(**dict(ga))
    return Expectations(memory, training, claims, gate, source)


def _parse(doc: dict[str, Any], source: str) -> Expectations:
    try:
        checked = ExpectationsFile.model_validate(doc)
    except ValidationError as exc:
        raise BadExpectations(path=source, problem=problem_of(exc)) from None
    return _expectations(checked, source)


def load_expectations(path: Path | None = None) -> Expectations:
    """The packaged expectations, or those of the TOML file ``path``.

    Raises ``BadExpectations`` (naming the file and the key) when the file is missing or
    unreadable, is not valid TOML, or has a missing, mistyped or unknown key.
    """
    if path is None:
        package = __package__ or "tracker.analysis"
        source = f"{package.replace('.', '/')}/{PACKAGED} (packaged)"
        text = files(package).joinpath(PACKAGED).read_text("utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise BadExpectations(path=source, problem="no such file") from None
        except IsADirectoryError:
            raise BadExpectations(path=source, problem="is a directory, not a file") from None
        except OSError as exc:
            raise BadExpectations(path=source, problem=f"cannot be read ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise BadExpectations(path=source, problem="not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadExpectations(path=source, problem=f"invalid TOML: {exc}") from None
    return _parse(doc, source)
