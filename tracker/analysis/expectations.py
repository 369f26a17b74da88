"""What a job is checked against: the packaged ``expectations.toml`` or a user's copy.

``load_expectations()`` validates the whole file up front (every key present, of the right
type, no unknown key) so that a typo fails loudly with the file and the key, instead of
silently turning a check into N/A halfway through a report.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tracker.errors import BadExpectations

PACKAGED = "expectations.toml"
COMPONENTS = ("params", "state", "grads")


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
    noise_factor: float
    val_loss_tolerance: float
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
    """When ``compare`` counts a change of a stochastic check as a regression."""

    alpha: float  # significance against the seed noise pooled over all jobs
    min_noise_jobs: int  # pooled values needed for that test; fewer: the margins decide
    ema_margin_factor: float  # candidate delta above this many pooled seed-noise deltas
    val_loss_margin: float  # validation loss rise beyond this


@dataclass(frozen=True)
class Expectations:
    memory: MemoryExpectations
    training: TrainingExpectations
    claims: ClaimsExpectations
    gate: GateExpectations
    source: str  # the file they were read from, for reports


class _Reader:
    """Typed access to a parsed TOML document; every problem names the file and the key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, problem: str) -> BadExpectations:
        return BadExpectations(path=self.source, problem=problem)

    def table(self, doc: Any, key: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise self.fail(f"{key} must be a table, got {doc!r:.60}")
        if allowed is not None:
            unknown = sorted(set(doc) - allowed)
            if unknown:
                where = ", ".join(f"{key}.{name}" for name in unknown)
                raise self.fail(f"unknown key {where}")
        return doc

    def sub(
        self, doc: dict[str, Any], key: str, where: str, allowed: set[str] | None = None
    ) -> dict[str, Any]:
        name = f"{where}.{key}" if where else key
        if key not in doc:
            raise self.fail(f"missing table [{name}]")
        return self.table(doc[key], name, allowed)

    def value(self, doc: dict[str, Any], key: str, where: str) -> Any:
        if key not in doc:
            raise self.fail(f"missing key {where}.{key}")
        return doc[key]

    def number(
        self, doc: dict[str, Any], key: str, where: str, *, low: float = 0.0, positive: bool = False
    ) -> float:
        value = self.value(doc, key, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise self.fail(f"{where}.{key} must be a number, got {value!r:.60}")
        if value < low or (positive and value <= 0):
            bound = "> 0" if positive else f">= {low:g}"
            raise self.fail(f"{where}.{key} must be {bound}, got {value!r}")
        return float(value)

    def integer(self, doc: dict[str, Any], key: str, where: str) -> int:
        value = self.value(doc, key, where)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(f"{where}.{key} must be a positive integer, got {value!r:.60}")
        return value

    def fraction(self, doc: dict[str, Any], key: str, where: str) -> float:
        value = self.number(doc, key, where, positive=True)
        if value >= 1:
            raise self.fail(f"{where}.{key} must be in (0, 1), got {value!r}")
        return value

    def string(self, doc: dict[str, Any], key: str, where: str) -> str:
        value = self.value(doc, key, where)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key} must be a non-empty string, got {value!r:.60}")
        return value

    def paper_rows(self, doc: dict[str, Any], where: str, fixed: set[str]) -> dict[str, PaperGib]:
        rows = {}
        for variant, row in doc.items():
            if variant in fixed:
                continue
            name = f"{where}.{variant}"
            row = self.table(row, name, {"params", "optim"})
            rows[variant] = PaperGib(
                self.number(row, "params", name, positive=True),
                self.number(row, "optim", name, positive=True),
            )
        return rows


def _parse(doc: dict[str, Any], source: str) -> Expectations:
    r = _Reader(source)
    r.table(doc, "the file", {"memory", "training", "claims", "gate"})
    mem = r.sub(
        doc,
        "memory",
        "",
        {
            "gib",
            "extrapolate_params",
            "scaling_model_prefix",
            "bpp_tolerance",
            "expected_bpp",
            "table4",
            "gpt2_124m",
            "known_differences",
        },
    )
    expected_bpp = {}
    for variant, comps in r.sub(mem, "expected_bpp", "memory").items():
        where = f"memory.expected_bpp.{variant}"
        comps = r.table(comps, where, set(COMPONENTS))
        expected_bpp[variant] = ComponentBpp(
            *(r.number(comps, c, where) if c in comps else None for c in COMPONENTS)
        )
    known = r.sub(mem, "known_differences", "memory")
    known_differences = {
        variant: r.string(known, variant, "memory.known_differences") for variant in known
    }
    table4 = r.sub(mem, "table4", "memory")
    gpt2 = r.sub(mem, "gpt2_124m", "memory")
    memory = MemoryExpectations(
        gib=r.integer(mem, "gib", "memory"),
        extrapolate_params=r.integer(mem, "extrapolate_params", "memory"),
        scaling_model_prefix=r.string(mem, "scaling_model_prefix", "memory"),
        bpp_tolerance=r.number(mem, "bpp_tolerance", "memory"),
        expected_bpp=MappingProxyType(expected_bpp),
        table4=PaperTable(
            r.number(table4, "relative_tolerance", "memory.table4"),
            MappingProxyType(r.paper_rows(table4, "memory.table4", {"relative_tolerance"})),
        ),
        gpt2_model=r.string(gpt2, "model", "memory.gpt2_124m"),
        gpt2=PaperTable(
            r.number(gpt2, "relative_tolerance", "memory.gpt2_124m"),
            MappingProxyType(
                r.paper_rows(gpt2, "memory.gpt2_124m", {"relative_tolerance", "model"})
            ),
        ),
        known_differences=MappingProxyType(known_differences),
    )
    tr = r.sub(
        doc,
        "training",
        "",
        {
            "ema_alpha",
            "baseline",
            "candidate",
            "seed_twin",
            "divergent",
            "noise_factor",
            "val_loss",
        },
    )
    val = r.sub(tr, "val_loss", "training")
    alpha = r.number(tr, "ema_alpha", "training", positive=True)
    if alpha > 1:
        raise r.fail(f"training.ema_alpha must be in (0, 1], got {alpha!r}")
    training = TrainingExpectations(
        ema_alpha=alpha,
        baseline=r.string(tr, "baseline", "training"),
        candidate=r.string(tr, "candidate", "training"),
        seed_twin=r.string(tr, "seed_twin", "training"),
        divergent=r.string(tr, "divergent", "training"),
        noise_factor=r.number(tr, "noise_factor", "training"),
        val_loss_tolerance=r.number(val, "tolerance", "training.val_loss"),
        val_loss=MappingProxyType(
            {
                variant: r.number(val, variant, "training.val_loss", positive=True)
                for variant in val
                if variant != "tolerance"
            }
        ),
    )
    cl = r.sub(
        doc,
        "claims",
        "",
        {
            "confidence",
            "val_loss_margin",
            "bootstrap_resamples",
            "bootstrap_seed",
            "min_share_within",
            "proportion_confidence",
        },
    )
    claims = ClaimsExpectations(
        confidence=r.fraction(cl, "confidence", "claims"),
        val_loss_margin=r.number(cl, "val_loss_margin", "claims", positive=True),
        bootstrap_resamples=r.integer(cl, "bootstrap_resamples", "claims"),
        bootstrap_seed=r.integer(cl, "bootstrap_seed", "claims"),
        min_share_within=r.fraction(cl, "min_share_within", "claims"),
        proportion_confidence=r.fraction(cl, "proportion_confidence", "claims"),
    )
    ga = r.sub(
        doc,
        "gate",
        "",
        {"alpha", "min_noise_jobs", "ema_margin_factor", "val_loss_margin"},
    )
    gate = GateExpectations(
        alpha=r.fraction(ga, "alpha", "gate"),
        min_noise_jobs=r.integer(ga, "min_noise_jobs", "gate"),
        ema_margin_factor=r.number(ga, "ema_margin_factor", "gate", positive=True),
        val_loss_margin=r.number(ga, "val_loss_margin", "gate", positive=True),
    )
    return Expectations(memory, training, claims, gate, source)


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
