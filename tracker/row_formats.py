"""Rendering rows for the terminal or for scripts: ``--format table|csv|json``.

Works on plain lists of dicts so that light commands never import polars. JSON follows the
API policy of ``tracker.jsonio``.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from datetime import datetime
from enum import StrEnum
from typing import Any

from tracker.jsonio import format_time, to_api_json
from tracker.masking import masked

# control, format (U+202E turns text around), surrogate, private and unassigned characters,
# and the line and paragraph separators: none may reach a terminal or a log as it is
UNSHOWN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as its escape
    (``\\x1b``, ``\\u202e``): names from a bucket can hold anything."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in UNSHOWN else ch for ch in text)


def shown(text: str) -> str:
    """A line as a terminal or a log gets it: credentials masked, control characters escaped."""
    return printable(masked(text))


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


def render(rows: list[dict[str, Any]], fmt: Format, columns: list[str] | None = None) -> str:
    """Rows as an aligned table, CSV (with header) or a JSON list of objects."""
    names = columns or (list(rows[0]) if rows else [])
    if fmt is Format.json:
        return to_api_json([{name: row.get(name) for name in names} for row in rows], indent=2)
    if fmt is Format.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[_csv_cell(row.get(name)) for name in names] for row in rows])
        return buffer.getvalue().rstrip("\n")
    if not rows:
        return "(no rows)"
    cells = table_cells(rows, names)
    widths = [max(len(name), *(len(line[i]) for line in cells)) for i, name in enumerate(names)]
    lines = ["  ".join(name.ljust(w) for name, w in zip(names, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(line.rstrip() for line in lines)


def table_cells(rows: list[dict[str, Any]], names: list[str]) -> list[list[str]]:
    """Each row's values as a text table shows them, in ``names``' order."""
    return [[_cell(row.get(name)) for name in names] for row in rows]


def _csv_cell(value: Any) -> Any:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, datetime):
        return format_time(value)
    return "" if value is None else value
