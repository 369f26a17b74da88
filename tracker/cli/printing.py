"""Printing what the library returns: rows and polars frames as a table, CSV or JSON."""

from __future__ import annotations

import json
from typing import Any

import typer

from tracker.cli.fit import fitted_lines, fitted_table, terminal_width
from tracker.row_formats import Format, render, table_cells


def print_rows(rows: list[dict[str, Any]], fmt: Format, columns: list[str] | None = None) -> None:
    typer.echo(render(rows, fmt, columns))


def print_fitted(
    rows: list[dict[str, Any]],
    columns: list[str],
    *,
    wrapped: tuple[str, ...],
    spill: tuple[tuple[str, ...], ...] = (),
) -> None:
    """Rows as a text table within the terminal's width (``tracker.cli.fit.fitted_table``);
    as it is where there is no width to fit."""
    if not rows:
        typer.echo(render(rows, Format.table))
        return
    width = terminal_width()
    if width is None:
        typer.echo(render(rows, Format.table, columns))
        return
    cells = table_cells(rows, columns)
    typer.echo("\n".join(fitted_table(cells, columns, width, wrapped=wrapped, spill=spill)))


def echo_fitted(lines: list[str]) -> None:
    """Lines wrapped to the terminal's width, each one's continuations indented."""
    width = terminal_width()
    if lines:
        typer.echo("\n".join(lines if width is None else fitted_lines(lines, width)))


def print_frame(frame: Any, fmt: Format) -> None:
    """A polars DataFrame, its columns in order."""
    print_rows(frame.to_dicts(), fmt, frame.columns)


def print_tables(job: str, tables: dict[str, list[dict[str, Any]]], fmt: Format) -> None:
    """A job's named tables: one JSON document, one CSV table, or titled text tables."""
    if fmt is Format.json:
        document: dict[str, Any] = {
            "job": job,
            **{name: json.loads(render(rows, fmt)) for name, rows in tables.items()},
        }
        typer.echo(json.dumps(document, indent=2))
        return
    if fmt is Format.csv:
        typer.echo(render(next(iter(tables.values())), fmt))
        return
    typer.echo(
        "\n\n".join(f"{name} of {job}:\n{render(rows, fmt)}" for name, rows in tables.items())
    )
