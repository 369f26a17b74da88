"""The schema of an expectations file (``expectations.toml``), as pydantic models, and the
one-line message of its first problem: ``tracker.analysis.expectations`` turns a checked
file into the frozen dataclasses the analysis reads."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

COMPONENTS = ("params", "state", "grads")


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


def _keys(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _problem(f"must be a list of metadata keys, got {value!r:.60}")
    keys = tuple(_string(key) for key in value)
    if len(set(keys)) != len(keys):
        raise _problem(f"must not repeat a key, got {value!r:.60}")
    return keys


class _Gate(_Table):
    configuration: Annotated[tuple[str, ...], PlainValidator(_keys)]
    alpha: Fraction
    min_noise_jobs: Integer
    ema_margin_factor: Positive
    spread_factor: Positive


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


def problem_of(exc: ValidationError) -> str:
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
