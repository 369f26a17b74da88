"""The one-line message of an expectations file's first problem (the models are
``tracker.analysis.expectations``'): the dotted key, then what is wrong with its value in the
words of the constraint it breaks."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

TABLES = frozenset(
    {"memory", "training", "gate", "study", "memory.expected_bpp", "memory.table4",
     "memory.gpt2_124m", "memory.known_differences", "training.val_loss"}
)  # fmt: skip


# The order in which problems are reported: a table's own problems (not a table, unknown
# keys) first, then its keys in this order; "KEY/" is what is inside KEY, checked later than
# KEY itself. Keys not listed keep pydantic's order: the fields' order, rows in file order.
ORDER: dict[tuple[str, ...], list[str]] = {
    (): ["memory", "training", "claims", "gate", "study"],
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
    return f"{where} {words(error)}"


def words(error: Any) -> str:
    """What is wrong with the value, as the file's readers have always been told."""
    kind, value = error["type"], error["input"]
    if kind in ("float_type", "finite_number"):
        return f"must be a number, got {value!r:.60}"
    if kind == "greater_than_equal" and error["ctx"]["ge"] == 0:
        return f"must be >= 0, got {value!r}"
    if kind in ("int_type", "greater_than_equal"):
        return f"must be a positive integer, got {value!r:.60}"
    if kind == "greater_than":
        return f"must be > 0, got {value!r}"
    if kind == "less_than":
        return f"must be in (0, 1), got {float(value)!r}"
    if kind == "less_than_equal":
        return f"must be in (0, 1], got {float(value)!r}"
    if kind in ("string_type", "string_pattern_mismatch"):
        return f"must be a non-empty string, got {value!r:.60}"
    return str(error["msg"])
