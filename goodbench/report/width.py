"""Tables as wide as their content, printed whole: split into tables that fit a terminal (the naming
columns repeated, never a number cut with an ellipsis), or at their own width when piped."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text


def _cell_len(cell) -> int:
    text = cell if isinstance(cell, Text) else Text.from_markup(str(cell))
    return max((Text(line).cell_len for line in text.plain.split("\n")), default=0)


def _col_width(col) -> int:
    return max([_cell_len(col.header)] + [_cell_len(c) for c in col._cells])


def natural_width(table: Table) -> int:
    """The columns a table needs to show every cell whole (its borders and padding included)."""
    return 1 + sum(_col_width(c) + 3 for c in table.columns)


def split_table(table: Table, width: int, keys: int = 2) -> list[Table]:
    """The table as several that each fit `width` columns: the first `keys` columns (what names a row)
    repeated in each, the others in order; a cell is folded, never cut with an ellipsis."""
    cols = table.columns
    widths = [_col_width(c) + 3 for c in cols]  # padding and a rule
    base = 1 + sum(widths[:keys])
    groups: list[list[int]] = [[]]
    for i in range(keys, len(cols)):
        if groups[-1] and base + sum(widths[j] for j in groups[-1]) + widths[i] > width:
            groups.append([])
        groups[-1].append(i)
    out = []
    for n, group in enumerate(groups):
        title = table.title if n == 0 else f"(continued, {n + 1} of {len(groups)})"
        t = Table(title=title, box=table.box, pad_edge=table.pad_edge, title_justify=table.title_justify)
        chosen = list(range(keys)) + group
        for i in chosen:
            t.add_column(cols[i].header, justify=cols[i].justify, overflow="fold")
        for r in range(table.row_count):
            t.add_row(*(cols[i]._cells[r] for i in chosen))
        out.append(t)
    return out


def print_wide(con, table: Table, keys: int = 2) -> None:
    """Print a table whole: at its own width when it fits or the output is not a terminal (piped output
    is complete; sweep.csv and sweep.json are for machines), else split into tables that fit."""
    need = natural_width(table)
    if need <= con.width:
        con.print(table)
    elif not con.is_terminal:
        width, con.width = con.width, need
        try:
            con.print(table)
        finally:
            con.width = width
    else:
        for t in split_table(table, con.width, keys):
            con.print(t)
