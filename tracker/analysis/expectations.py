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
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

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

    alpha: float  # significance of the EMA delta against the seed noise pooled over all jobs
    min_noise_jobs: int  # other jobs' values needed to trust their spread; fewer: floors decide
    ema_margin_factor: float  # candidate delta above this many pooled seed-noise deltas
    spread_factor: float  # a rise beyond this many standard deviations of the other jobs
    bpp_floor: float  # B/param: a bytes/param rise beyond this, where the spread is unknown
    val_loss_floor: float  # nats: a validation loss rise beyond this, likewise


@dataclass(frozen=True)
class Expectations:
    memory: MemoryExpectations
    training: TrainingExpectations
    claims: ClaimsExpectations
    gate: GateExpectations
    source: str  # the file they were read from, for reports


def _problem(text: str) -> PydanticCustomError:
    """What is wrong with a value; the message layer puts the key's dotted path before it."""
    return PydanticCustomError("expectation", "{problem}", {"problem": text})


def _checked(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _problem(f"must be a number, got {value!r:.60}")
    return value


def _number(value: Any) -> float:
    if _checked(value) < 0:
        raise _problem(f"must be >= 0, got {value!r}")
    return float(value)


def _positive(value: Any) -> float:
    if _checked(value) <= 0:
        raise _problem(f"must be > 0, got {value!r}")
    return float(value)


def _fraction(value: Any) -> float:
    number = _positive(value)
    if number >= 1:
        raise _problem(f"must be in (0, 1), got {number!r}")
    return number


def _rate(value: Any) -> float:
    number = _positive(value)
    if number > 1:
        raise _problem(f"must be in (0, 1], got {number!r}")
    return number


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _problem(f"must be a positive integer, got {value!r:.60}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _problem(f"must be a non-empty string, got {value!r:.60}")
    return value


Number = Annotated[float, PlainValidator(_number)]
Positive = Annotated[float, PlainValidator(_positive)]
Fraction = Annotated[float, PlainValidator(_fraction)]
Integer = Annotated[int, PlainValidator(_integer)]
String = Annotated[str, PlainValidator(_string)]


class _Table(BaseModel):
    """A TOML table of fixed keys: a key not listed here is a typo."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Rows(BaseModel):
    """A TOML table of a few fixed keys and one row per variant (its other keys)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class _Components(_Table):
    """A variant's analytic bytes per parameter; a component left out is not checked."""

    params: Annotated[float | None, PlainValidator(_number)] = None
    state: Annotated[float | None, PlainValidator(_number)] = None
    grads: Annotated[float | None, PlainValidator(_number)] = None


class _PaperRow(_Table):
    params: Positive
    optim: Positive


class _PaperRows(_Rows):
    __pydantic_extra__: dict[str, _PaperRow]

    def rows(self) -> dict[str, _PaperRow]:
        return dict(self.model_extra or {})


class _Table4(_PaperRows):
    relative_tolerance: Number


class _Gpt2(_PaperRows):
    model: String
    relative_tolerance: Number


class _Memory(_Table):
    gib: Integer
    extrapolate_params: Integer
    scaling_model_prefix: String
    bpp_tolerance: Number
    expected_bpp: dict[str, _Components]
    table4: _Table4
    gpt2_124m: _Gpt2
    known_differences: dict[str, String]


class _ValLoss(_Rows):
    tolerance: Number
    candidate_margin: Positive
    paper_steps: Integer
    __pydantic_extra__: dict[str, Positive]


class _Training(_Table):
    ema_alpha: Annotated[float, PlainValidator(_rate)]
    baseline: String
    candidate: String
    seed_twin: String
    divergent: String
    noise_factor: Number
    job_noise_factor: Number
    val_loss: _ValLoss


class _Claims(_Table):
    confidence: Fraction
    val_loss_margin: Positive
    bootstrap_resamples: Integer
    bootstrap_seed: Integer
    min_share_within: Fraction
    proportion_confidence: Fraction


class _Gate(_Table):
    alpha: Fraction
    min_noise_jobs: Integer
    ema_margin_factor: Positive
    spread_factor: Positive
    bpp_floor: Positive
    val_loss_floor: Positive


class ExpectationsFile(_Table):
    """The expectations TOML as it is written: every table and key, each checked."""

    memory: _Memory
    training: _Training
    claims: _Claims
    gate: _Gate


TABLES = frozenset(
    {*ExpectationsFile.model_fields, "memory.expected_bpp", "memory.table4", "memory.gpt2_124m",
     "memory.known_differences", "training.val_loss"}
)  # fmt: skip


# The order in which problems are reported: a table's own problems (not a table, unknown
# keys) first, then its keys in this order; "KEY/" is what is inside KEY, checked later than
# KEY itself. Keys not listed keep pydantic's order: the fields' order, rows in file order.
ORDER: dict[tuple[str, ...], list[str]] = {
    (): ["memory", "training", "claims", "gate"],
    ("memory",): [
        "expected_bpp", "known_differences", "table4", "gpt2_124m", "gib", "extrapolate_params",
        "scaling_model_prefix", "bpp_tolerance", "table4/", "gpt2_124m/",
    ],
    ("training",): [
        "val_loss", "ema_alpha", "baseline", "candidate", "seed_twin", "divergent",
        "noise_factor", "job_noise_factor", "val_loss/",
    ],
}  # fmt: skip


def _ranks(errors: list[Any]) -> list[tuple[int, ...]]:
    """Where each error comes in that order."""
    locs = [tuple(map(str, e["loc"])) for e in errors]
    first: dict[tuple[str, ...], int] = {}  # a key's place in pydantic's order
    for at, loc in enumerate(locs):
        for depth in range(1, len(loc) + 1):
            first.setdefault(loc[:depth], at)

    def rank(loc: tuple[str, ...]) -> list[int]:
        ranks = []
        for depth, key in enumerate(loc):
            order = ORDER.get(loc[:depth], [])
            inside = f"{key}/" if depth < len(loc) - 1 and f"{key}/" in order else key
            ranks.append(
                order.index(inside) if inside in order else len(order) + first[loc[: depth + 1]]
            )
        return ranks

    return [
        (*rank(loc[:-1]), -1) if e["type"] == "extra_forbidden" else tuple(rank(loc))
        for e, loc in zip(errors, locs, strict=True)
    ]  # a table's unknown keys: checked on entering it


def _problem_of(exc: ValidationError) -> str:
    """The first problem, as a line naming the key (all the unknown keys of one table)."""
    errors = exc.errors(include_url=False)
    ranks = _ranks(errors)
    error = errors[min(range(len(errors)), key=ranks.__getitem__)]
    where = ".".join(map(str, error["loc"]))
    if error["type"] == "extra_forbidden":
        table = error["loc"][:-1]
        names = [e["loc"][-1] for e in errors if e["type"] == error["type"]
                 and e["loc"][:-1] == table]  # fmt: skip
        key = ".".join(map(str, table)) or "the file"
        return "unknown key " + ", ".join(f"{key}.{name}" for name in sorted(names))
    if error["type"] == "missing":
        return f"missing table [{where}]" if where in TABLES else f"missing key {where}"
    if error["type"] in ("model_type", "dict_type"):
        return f"{where} must be a table, got {error['input']!r:.60}"
    return f"{where} {error['msg']}"


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
    claims = ClaimsExpectations(**cl.model_dump())
    gate = GateExpectations(**ga.model_dump())
    return Expectations(memory, training, claims, gate, source)


def _parse(doc: dict[str, Any], source: str) -> Expectations:
    try:
        checked = ExpectationsFile.model_validate(doc)
    except ValidationError as exc:
        raise BadExpectations(path=source, problem=_problem_of(exc)) from None
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
