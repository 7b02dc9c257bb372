"""What the `runner.py inspect | diff | profile` commands share: chapter names on the command line, errors as one
line on stderr, and tables with one column per chapter or kernel that fit the terminal."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

from kernels.build import BuildError
from kernels.chapters import Chapter, chapters, select
from kernels.launch import DTYPES


class UsageError(ValueError):
    """The command line asked for something that does not exist: an unknown chapter, one too many."""


class ToolError(RuntimeError):
    """A tool the command needs is missing or failed (ncu, the GPU's counters, the profiled program)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: the problem, and where the help is."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with ``prog: error: message`` alone, without the usage block."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def run(parser: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int], argv: list[str]) -> int:
    """Parse ``argv`` and run the command; a bad name (exit 2) or a failing tool (exit 1) is one line on stderr."""
    args = parser.parse_args(argv)
    try:
        return handler(args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    except (BuildError, ToolError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1


def pick(wanted: Sequence[str]) -> list[Chapter]:
    """Chapters by number or slug, as words or comma lists ("3 4", "1,3", "naive,swizzle"); none named: all."""
    try:
        return select(chapters(), ",".join(wanted) or None)
    except ValueError as error:
        raise UsageError(str(error)) from error


def one_chapter(token: str) -> Chapter:
    """The chapter named by one number or slug ("3", "03", "ldmatrix", "k03_ldmatrix")."""
    picked = pick([token])
    if len(picked) != 1:
        raise UsageError(f"name one chapter, got {token!r}")
    return picked[0]


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_instance_options(parser: argparse.ArgumentParser) -> None:
    """--dtype and --causal: which kernel instance to look at or run."""
    parser.add_argument("--dtype", choices=DTYPES, default="bf16", help="element type (default bf16)")
    parser.add_argument("--causal", action="store_true", help="the causal instance (default: not causal)")


# ---------------------------------------------------------------------------------------------------
# Side-by-side tables
# ---------------------------------------------------------------------------------------------------


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
    short_heads: list[str]  # "k05", "FA2": for terminals too narrow for the full names
    sections: list[list[Row]]
    caption: str = ""
    legend: str = ""  # what a style means, on the terminal

    def table(self, columns: Sequence[int], *, short: bool = False, first: bool = True, last: bool = True) -> Table:
        """A rich table of some of the columns: the title over the first of several, the caption under the last."""
        caption = " ".join(part for part in (self.legend, self.caption) if part)
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


def print_side_by_side(table: SideBySide) -> None:
    """Print the table; on a terminal too narrow for it, with short heads and, where needed, as several tables.

    A pipe or a file gets it whole, however wide: nothing is cut off.
    """
    console = Console()
    columns = len(table.heads)
    whole = table.table(range(columns))
    if not console.is_terminal or table_width(console, whole) <= console.width:
        console.width = max(console.width, table_width(console, whole))
        console.print(whole)
        return
    for parts in range(1, columns + 1):  # short heads first, then ever more tables: the fewest that fit
        groups = split_evenly(columns, parts)
        if all(table_width(console, table.table(group, short=True)) <= console.width for group in groups):
            break
    for i, group in enumerate(groups):
        console.print(table.table(group, short=True, first=i == 0, last=i == len(groups) - 1))
