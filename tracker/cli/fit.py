"""Tables and lines that fit the terminal: text columns wrapped (at spaces, ``_`` and ``/``,
never inside a number), and what still does not fit moved under its row as ``name value``.

The width is ``COLUMNS`` when set, else the terminal's when stdout is one; a pipe, a file or
a CI log gets every line whole (nothing to fit, and a line found by grep is the whole line).
``--format csv|json`` never comes here.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence

INDENT = "    "  # a row's spilled columns and a long line's continuation
GAP = "  "
BREAK_AFTER = re.compile(r"(?<=[ _/])")  # a piece ends after a space, "_" or "/"


def terminal_width() -> int | None:
    """The width to fit, or None: stdout is no terminal and ``COLUMNS`` is unset."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def wrap(text: str, width: int, later: int | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` characters (``later`` for all but the first),
    broken only after a space, ``_`` or ``/``; a piece longer than that (a number, a long
    word) stays whole."""
    lines: list[str] = []
    line = ""
    for piece in BREAK_AFTER.split(text):
        room = width if not lines else later or width
        if line and len((line + piece).rstrip()) > room:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    return [*lines, line.rstrip()] if line.strip() or not lines else lines


def longest_piece(text: str) -> int:
    return max((len(piece.rstrip()) for piece in BREAK_AFTER.split(text)), default=0)


def fitted_lines(lines: Sequence[str], width: int) -> list[str]:
    """Each line wrapped to ``width``, its continuations indented under its start."""
    out = []
    for line in lines:
        lead = line[: len(line) - len(line.lstrip())]
        room = width - len(lead)
        first, *rest = wrap(line.strip(), room, room - len(INDENT))
        out += [lead + first, *(lead + INDENT + part for part in rest)]
    return out


def fitted_table(
    cells: Sequence[Sequence[str]],
    names: Sequence[str],
    width: int,
    *,
    wrapped: Sequence[str],
    spill: Sequence[tuple[str, ...]] = (),
) -> list[str]:
    """An aligned table of ``cells`` (one list of strings per row) within ``width``.

    ``wrapped`` columns may wrap down to their longest unbreakable piece, the one that wraps
    the fewest rows first;
    when even that is too wide, the ``spill`` groups of columns leave the grid in that order
    and follow their row on an indented line. Other columns (numbers, short words) are never
    touched: a table that cannot fit even so is as wide as it must be.
    """
    natural = {
        name: max(len(name), *(len(row[i]) for row in cells)) for i, name in enumerate(names)
    }
    least = {
        name: max(len(name), *(longest_piece(row[i]) for row in cells))
        if name in wrapped
        else natural[name]
        for i, name in enumerate(names)
    }
    grid = list(names)
    spilled: list[str] = []

    def total(widths: dict[str, int]) -> int:
        return sum(widths[name] for name in grid) + len(GAP) * (len(grid) - 1)

    for group in spill:
        if total(least) <= width:
            break
        grid = [name for name in grid if name not in group]
        spilled += group
    widths = {name: natural[name] for name in grid}
    index = {name: i for i, name in enumerate(names)}

    def lines_at(name: str, narrower: int) -> int:
        return sum(len(wrap(row[index[name]], narrower)) for row in cells)

    while total(widths) > width:
        shrinkable = [n for n in grid if n in wrapped and widths[n] > least[n]]
        if not shrinkable:
            break
        # the column whose narrowing wraps the fewest more lines, the widest of those
        cheapest = min(shrinkable, key=lambda n: (lines_at(n, widths[n] - 1), -widths[n]))
        widths[cheapest] -= 1
    lines = [GAP.join(name.ljust(widths[name]) for name in grid).rstrip()]
    lines.append(GAP.join("-" * widths[name] for name in grid))
    for row in cells:
        parts = [wrap(row[index[name]], widths[name]) for name in grid]
        for k in range(max(map(len, parts))):
            line = GAP.join(
                (part[k] if k < len(part) else "").ljust(widths[name])
                for part, name in zip(parts, grid, strict=True)
            )
            lines.append(line.rstrip())
        extra = "; ".join(
            f"{name} {row[index[name]]}"
            for name in sorted(spilled, key=index.__getitem__)
            if row[index[name]]
        )
        if extra:
            lines += [INDENT + part for part in wrap(extra, width - len(INDENT))]
    return lines
