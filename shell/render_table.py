"""`\\set output table` and `ttable` (tt connect's formats): a statement's values as
rich tables.

What becomes a table, in the order the values come (tt connect's batching):
* consecutive rows make one table, one row each: a tuple or another array of
  scalars (`s:get(1), s:get(2)`), a map (one column per key; a run of maps with the
  same keys), a scalar (`1, 'x'`: column col1);
* a value that is itself a set of rows (an array of tuples or arrays: a select, a
  Spark result; an array of maps) is a table of its own;
* a `box.info.replication`-shaped value is its peers' table (render_replication.py).
Columns of tuples are headed with their format's field names (the console engine
finds them: Reply.columns), else col1..colN. An empty table, and an error, print as
the YAML document Tarantool would print.

A table wider than the terminal is folded into the vertical layout (`ttable`, always
vertical): the table transposed, one line per field and one column per row, cut
into several tables when its rows do not fit side by side.
"""
from __future__ import annotations

import io
from typing import Any, Callable

from rich import box
from rich.console import Console
from rich.cells import cell_len
from rich.table import Table

from spindle.lua.render import render_values

from .render_replication import election_line, replication_peers, replication_table

COLUMN_EDGES = 3   # a column's padding (a blank either side) and its right edge


def render_reply(reply, width: int = 120, color: bool = False,
                 election: Callable[[], dict | None] | None = None) -> str:
    """The text to show for a console Reply: its values drawn as tables when they are
    a statement's results under table output (Reply.layout), else its text.
    `election()` gives box.info.election for a replication table (None: election off)."""
    if reply.layout is None or reply.error is not None or not reply.values:
        return reply.text
    return render_table(reply.values, columns=reply.columns, width=width, color=color,
                        vertical=reply.layout == "ttable", election=election)


def render_table(values: list[Any], error: Any = None, width: int = 120,
                 color: bool = False, columns: list | None = None, vertical: bool = False,
                 election: Callable[[], dict | None] | None = None) -> str:
    if error is not None or not values:
        return render_values(values, error, "yaml")
    draw = _Drawer(width, color)
    parts = []
    for kind, batch in _batches(values, columns or [None] * len(values)):
        if kind == "replication":
            state = election() if election is not None else None
            if state is not None:
                parts.append(draw.text(election_line(state)))
            parts.append(draw.table(replication_table(replication_peers(batch[0][0]), state)))
        elif kind == "other":
            parts.append(render_values([batch[0][0]], None, "yaml"))
        else:
            heads, rows = _grid(kind, batch)
            parts.append(draw.grid(heads, rows, vertical))
    return "".join(parts)


# ===================================================================== batching

def _kind(value: Any) -> str:
    """replication, rows (a set of rows: a table of its own), tuple, map, scalar;
    other for what no table shows (an empty array or map)."""
    if replication_peers(value) is not None:
        return "replication"
    if isinstance(value, list):
        if not value:
            return "other"
        if all(isinstance(row, list) for row in value) or \
                all(isinstance(row, dict) and row for row in value):
            return "rows"
        return "tuple"
    if isinstance(value, dict):
        return "map" if value else "other"
    return "scalar"


def _batches(values: list[Any], columns: list) -> list[tuple[str, list]]:
    """(kind, [(value, names)...]): runs of rows of one kind that share a table."""
    batches: list[tuple[str, list]] = []
    for value, names in zip(values, columns):
        kind = _kind(value)
        if batches and kind in ("tuple", "map", "scalar") and batches[-1][0] == kind and \
                _joins(kind, batches[-1][1][-1], (value, names)):
            batches[-1][1].append((value, names))
        else:
            batches.append((kind, [(value, names)]))
    return batches


def _joins(kind: str, previous: tuple, current: tuple) -> bool:
    if kind == "map":   # tt's rule: maps share a table when they have the same keys
        return list(map(str, previous[0])) == list(map(str, current[0]))
    return True


def _grid(kind: str, batch: list[tuple[Any, list | None]]) -> tuple[list[str], list[list]]:
    """The head and the rows (of cell texts) of a batch."""
    if kind == "rows":
        value, names = batch[0]
        if isinstance(value[0], dict):
            return _map_grid(value)
        return _array_grid(value, names)
    if kind == "map":
        return _map_grid([value for value, _ in batch])
    if kind == "scalar":
        return ["col1"], [[_cell(value)] for value, _ in batch]
    names = batch[0][1]
    if any(other != names for _, other in batch):
        names = None   # tuples of several formats: positions only
    return _array_grid([value for value, _ in batch], names)


def _array_grid(rows: list[list], names: list | None) -> tuple[list[str], list[list]]:
    width = max(len(row) for row in rows)
    names = names or []
    heads = [names[i] if i < len(names) and names[i] else f"col{i + 1}"
             for i in range(width)]
    return heads, [[_cell(row[i]) if i < len(row) else "" for i in range(width)]
                   for row in rows]


def _map_grid(rows: list[dict]) -> tuple[list[str], list[list]]:
    heads = list(dict.fromkeys(_key(key) for row in rows for key in row))
    cells = []
    for row in rows:
        by_name = {_key(key): value for key, value in row.items()}
        cells.append([_cell(by_name[name]) if name in by_name else "" for name in heads])
    return heads, cells


def _key(key: Any) -> str:
    return _cell(getattr(key, "value", key))   # a MapKey shows its value


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


# ====================================================================== drawing

class _Drawer:
    def __init__(self, width: int, color: bool):
        self.width = max(width, 20)
        self.color = color
        self.console = Console(file=io.StringIO(), width=self.width, force_terminal=color,
                               color_system="standard" if color else None,
                               highlight=False, markup=False, emoji=False)

    def text(self, line: str) -> str:
        return self._print(line)

    def table(self, table: Table) -> str:
        return self._print(table)

    def grid(self, heads: list[str], rows: list[list], vertical: bool) -> str:
        if not vertical:
            columns = [[name] + [row[i] for row in rows] for i, name in enumerate(heads)]
            widths = [_text_width(column) for column in columns]
            if _natural_width(widths) <= self.width:
                if _one_line(heads, rows):
                    return _boxed([heads] + rows, widths, True, False, self.color)
                return self._print(_horizontal(heads, rows))
        return "".join(self._vertical(heads, part)
                       for part in self._side_by_side(heads, rows))

    def _vertical(self, heads: list[str], rows: list[list]) -> str:
        lines = [[name] + [row[index] for row in rows] for index, name in enumerate(heads)]
        widths = [_text_width(heads)] + [_text_width(row) for row in rows]
        if _natural_width(widths) <= self.width and _one_line(heads, rows):
            return _boxed(lines, widths, False, True, self.color)
        return self._print(_transposed(heads, rows))   # rich wraps what is too wide

    def _side_by_side(self, heads: list[str], rows: list[list]) -> list[list[list]]:
        """The rows cut into runs whose transposed table fits the width (at least one
        row a run: a row too wide alone has its values wrapped)."""
        parts: list[list[list]] = []
        names = _text_width(heads)
        used = 0
        for row in rows:
            width = _text_width(row)
            if parts and _natural_width([names, used, width]) <= self.width:
                parts[-1].append(row)
                used += width + COLUMN_EDGES   # (a run's columns: as one wide column)
            else:
                parts.append([row])
                used = width
        return parts

    def _print(self, renderable) -> str:
        buffer = self.console.file
        buffer.seek(0)
        buffer.truncate()
        self.console.print(renderable)
        return buffer.getvalue()


def _one_line(heads: list[str], rows: list[list]) -> bool:
    """Every cell one line of printable text (what _boxed draws as rich would)."""
    return all(name.isprintable() for name in heads) and \
        all(cell.isprintable() for row in rows for cell in row)


def _boxed(lines: list[list[str]], widths: list[int], header: bool, names_first: bool,
           color: bool) -> str:
    """A table that fits unwrapped, drawn as rich's box.SQUARE tables are (same text):
    rich takes seconds over a select of thousands of rows, this a blink. `header`:
    the first line heads the columns (bold, a rule under it); `names_first`: the
    first column names the lines (bold)."""
    bold, plain = ("\x1b[1m", "\x1b[0m") if color else ("", "")

    def rule(left: str, middle: str, right: str) -> str:
        return left + middle.join("─" * (width + 2) for width in widths) + right + "\n"

    def line(cells: list[str], strong: bool) -> str:
        drawn = []
        for index, (cell, width) in enumerate(zip(cells, widths)):
            pad = " " * (width - cell_len(cell))
            if strong or (names_first and index == 0):
                cell = bold + cell + plain if cell else cell
            drawn.append(f" {cell}{pad} ")
        return "│" + "│".join(drawn) + "│\n"

    out = [rule("┌", "┬", "┐")]
    for number, cells in enumerate(lines):
        out.append(line(cells, header and number == 0))
        if header and number == 0:
            out.append(rule("├", "┼", "┤"))
    out.append(rule("└", "┴", "┘"))
    return "".join(out)


def _text_width(cells) -> int:
    """The width a column of these cells takes unwrapped (its longest line)."""
    return max((cell_len(line) for cell in cells for line in cell.splitlines()),
               default=0)


def _natural_width(column_widths) -> int:
    """A box table's width with nothing wrapped: its left edge, then per column the
    text, a blank either side and the edge after it."""
    return 1 + sum(width + COLUMN_EDGES for width in column_widths)


def _horizontal(heads: list[str], rows: list[list]) -> Table:
    table = Table(box=box.SQUARE, show_lines=False, header_style="bold")
    for name in heads:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _transposed(heads: list[str], rows: list[list]) -> Table:
    """tt's ttable: a line per field, its name first, then the field of each row."""
    table = Table(box=box.SQUARE, show_header=False, show_lines=False)
    table.add_column(style="bold", no_wrap=True)
    for _ in rows:
        table.add_column(overflow="fold")
    for index, name in enumerate(heads):
        table.add_row(name, *(row[index] for row in rows))
    return table
