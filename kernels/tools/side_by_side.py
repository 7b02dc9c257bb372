"""Tables with one column per chapter or kernel, as `runner.py inspect` and `runner.py profile` print them: on a
terminal, fitted to its width; in a pipe or a file, fitted to PIPE_WIDTH; or whole, as GitHub Markdown."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

# The width of a table printed into a pipe or a file: a log read in an editor, not a terminal's window.
PIPE_WIDTH = 140


@dataclass(frozen=True)
class Cell:
    """One value in a side-by-side table, and a rich style to mark it with (Markdown shows a marked cell bold)."""

    text: str
    style: str = ""


Row = tuple[str, list[Cell]]


@dataclass(frozen=True)
class SideBySide:
    """A table with one column per chapter or kernel and its rows in sections: what inspect and profile print."""

    title: str
    heads: list[str]  # "k05_pipelining", "torch FA2"
    short_heads: list[str]  # "k05", "FA2": for widths too narrow for the full names
    sections: list[list[Row]]
    caption: str = ""
    legend: str = ""  # what the colours mean: shown only where there are colours

    def table(
        self, columns: Sequence[int], *, short: bool = False, first: bool = True, last: bool = True, colour: bool = True
    ) -> Table:
        """A rich table of some of the columns: the title over the first of several, the caption under the last."""
        caption = " ".join(part for part in (self.legend if colour else "", self.caption) if part)
        table = Table(title=self.title if first else None, caption=caption if last else None)
        table.add_column("", no_wrap=True)
        heads = self.short_heads if short else self.heads
        for column in columns:
            table.add_column(heads[column], justify="right", no_wrap=True)
        for i, section in enumerate(self.sections):
            if i:
                table.add_section()
            for label, cells in section:
                table.add_row(label, *(Text(cells[column].text, style=cells[column].style) for column in columns))
        return table

    def markdown(self) -> str:
        """The whole table in GitHub Markdown, marked cells in bold, the caption under it."""
        rows = [
            [label, *(f"**{cell.text}**" if cell.style else cell.text for cell in cells)]
            for section in self.sections
            for label, cells in section
        ]
        aligns = ("left", *["right"] * len(self.heads))
        table = tabulate(rows, headers=["", *self.heads], tablefmt="github", colalign=aligns)
        return "\n\n".join(part for part in (f"**{self.title}**", table, self.caption) if part)


def table_width(console: Console, table: Table) -> int:
    """The width the table takes unsqueezed."""
    return console.measure(table, options=console.options.update_width(10_000)).maximum


def split_evenly(n: int, parts: int) -> list[range]:
    """range(n) cut into ``parts`` consecutive ranges whose lengths differ by at most one."""
    bounds = [i * n // parts for i in range(parts + 1)]
    return [range(start, stop) for start, stop in itertools.pairwise(bounds)]


def shows_colour(console: Console) -> bool:
    """Whether the console prints colours: a terminal, and NO_COLOR not set."""
    return console.is_terminal and console.color_system is not None and not console.no_color


def stdout_console() -> Console:
    """A console on stdout as wide as the terminal, or PIPE_WIDTH where stdout is not a terminal."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPE_WIDTH)


def print_side_by_side(table: SideBySide) -> None:
    """Print the table whole if it fits, else with short heads and, where needed, as several tables that do.

    It fits the terminal's width, or PIPE_WIDTH where the output is not a terminal (a pipe, a file).
    """
    console = stdout_console()
    colour = shows_colour(console)
    columns = len(table.heads)
    whole = table.table(range(columns), colour=colour)
    if table_width(console, whole) <= console.width:
        console.print(whole)
        return
    for parts in range(1, columns + 1):  # short heads first, then ever more tables: the fewest that fit
        groups = split_evenly(columns, parts)
        tables = [table.table(group, short=True, colour=colour) for group in groups]
        if all(table_width(console, part) <= console.width for part in tables):
            break
    for i, group in enumerate(groups):
        console.print(table.table(group, short=True, first=i == 0, last=i == len(groups) - 1, colour=colour))
