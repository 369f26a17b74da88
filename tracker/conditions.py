"""Filter conditions as users type them: ``KEY=VALUE``, ``val_loss<3.3``, ``seed!=0``.

The operators are ``=``, ``!=``, ``<``, ``<=``, ``>`` and ``>=``. Both sides are compared as
numbers when both are numbers (``lr<1e-3`` holds for ``0.0005``), else as text; a missing
value, or a NaN, satisfies no order comparison (only ``!=``). Which keys name metadata and
which name a run's columns is the store's business (``tracker.store.runfilter``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# the key: anything up to the first operator character; the operator: the longest one there
_CONDITION = re.compile(r"(?P<key>[^=!<>]+?)\s*(?P<op><=|>=|!=|=|<|>)\s*(?P<value>.*)", re.S)


class BadCondition(ValueError):
    """A condition that is not KEY OP VALUE."""


@dataclass(frozen=True)
class Condition:
    """``key op value``; ``Condition("gpu", "h100")`` is ``gpu=h100``."""

    key: str
    value: str
    op: str = "="

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"

    def holds(self, actual: str | float | None) -> bool:
        """Whether ``actual`` (a stored value; None when there is none) satisfies it."""
        if actual is None:
            return self.op == "!="
        wanted: object = self.value
        found: object = actual
        number = as_number(self.value)
        actual_number = actual if isinstance(actual, (int, float)) else as_number(str(actual))
        if number is not None and actual_number is not None:
            wanted, found = number, actual_number
            if math.isnan(actual_number):
                return self.op == "!="
        elif isinstance(actual, (int, float)):
            found = str(actual)
        return _COMPARE[self.op](found, wanted)


def as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_condition(item: str) -> Condition:
    """One condition as typed (``KEY=VALUE`` keeps its value as typed, spaces included); a
    ``BadCondition`` names the operators."""
    match = _CONDITION.fullmatch(item)
    if (
        match is None
        or not match["key"].strip()
        or match["value"][:1] in ("=", "<", ">")
        or (match["op"] != "=" and not match["value"].strip())
    ):
        raise BadCondition(
            f"expected KEY=VALUE or KEY OP VALUE (OP one of {' '.join(OPERATORS)}), got {item!r}"
        )
    op, value = match["op"], match["value"]
    return Condition(match["key"].strip(), value if op == "=" else value.strip(), op)


def as_conditions(where: Iterable[Condition | tuple[str, str] | str]) -> tuple[Condition, ...]:
    """Conditions, (key, value) pairs (``=``) or conditions as typed, as conditions."""
    return tuple(
        item
        if isinstance(item, Condition)
        else parse_condition(item)
        if isinstance(item, str)
        else Condition(*item)
        for item in where
    )
