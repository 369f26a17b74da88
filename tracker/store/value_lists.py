"""A column among a list of values of any length (the ids of every selected job), as ONE bound
parameter: an ``IN (...)`` list binds a parameter a value, past the drivers' limits at tens of
thousands (psycopg: 65,535; SQLite: 32,766), and makes a statement of its own for each length.

PostgreSQL: ``column = ANY(:values)``, the values an array; SQLite: ``column IN (SELECT value
FROM json_each(:values))``, the values a JSON array's text. Both still search the column's
index for each value."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ARRAY, Boolean, ColumnElement, Text, bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine

from tracker.jsonio import to_stored_json


class _Values(TypeDecorator[Any]):
    """The values as one parameter: an array of the column's type on PostgreSQL, else the
    text of a JSON array."""

    impl = Text
    cache_ok = True

    def __init__(self, item: TypeEngine[Any]) -> None:
        super().__init__()
        self.item = item

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(self.item))
        return dialect.type_descriptor(Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        values = list(value)
        return values if dialect.name == "postgresql" else to_stored_json(values)


class _Among(FunctionElement[bool]):
    """The condition: its clauses the column and the bound values."""

    inherit_cache = True
    type = Boolean()
    _is_implicitly_boolean = True  # a condition as it is, not compared with 1 on SQLite


@compiles(_Among)
def _json_each(element: _Among, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"{column} IN (SELECT value FROM json_each({values}))"


@compiles(_Among, "postgresql")
def _any(element: _Among, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"{column} = ANY({values})"


def among(
    column: QueryableAttribute[Any] | ColumnElement[Any], values: Iterable[Any] | str
) -> ColumnElement[bool]:
    """``column`` is one of ``values`` (ids or names, any number), bound as one parameter;
    ``values`` a name: the parameter of that name, given when a statement built once runs."""
    kind = _Values(column.type)
    if isinstance(values, str):
        return _Among(column, bindparam(values, type_=kind))
    return _Among(column, bindparam(None, list(values), type_=kind))
