"""`\\set output table`: a statement's values drawn as rich tables.

A `box.info.replication`-shaped value becomes one coloured row per peer
(render_replication.py); an array of arrays (tuples) becomes a table with columns
col1..colN; an array of maps becomes a table with one column per key (in order of
first appearance). Any other value — and an error — is printed as the YAML document
Tarantool would print.
"""
from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from spindle.lua.render import render_values

from .render_replication import replication_peers, replication_table


def render_reply(reply, output: str, width: int = 120, color: bool = False) -> str:
    """The text to show for a console Reply under the engine's output format."""
    if output == "table" and reply.error is None and reply.values:
        return render_table(reply.values, None, width=width, color=color)
    return reply.text


def render_table(values: list[Any], error: str | None = None, width: int = 120,
                 color: bool = False) -> str:
    if error is not None or not values:
        return render_values(values, error, "yaml")
    parts = []
    for value in values:
        table = _as_table(value)
        if table is None:
            parts.append(render_values([value], None, "yaml"))
        else:
            parts.append(_draw(table, width, color))
    return "".join(parts)


def _as_table(value: Any) -> Table | None:
    peers = replication_peers(value)
    if peers is not None:
        return replication_table(peers)
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(row, list) for row in value):
        columns = [f"col{i + 1}" for i in range(max(len(row) for row in value))]
        rows = [[_cell(row[i]) if i < len(row) else "" for i in range(len(columns))]
                for row in value]
    elif all(isinstance(row, dict) for row in value):
        columns = list(dict.fromkeys(str(key) for row in value for key in row))
        rows = [[_cell(_lookup(row, name)) if _has(row, name) else "" for name in columns]
                for row in value]
    else:
        return None
    table = Table(box=box.SQUARE, show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _has(row: dict, name: str) -> bool:
    return any(str(key) == name for key in row)


def _lookup(row: dict, name: str) -> Any:
    for key, value in row.items():
        if str(key) == name:
            return value
    return None


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return render_values([value], None, "lua").rstrip(";\n")
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def _draw(table: Table, width: int, color: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color,
                      color_system="standard" if color else None, highlight=False,
                      markup=False, emoji=False)
    console.print(table)
    return buffer.getvalue()
