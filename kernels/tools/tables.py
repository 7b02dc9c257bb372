"""The ladder's tables, computed from a run's samples: a rich table on the terminal, GitHub Markdown, and an
ablation's grid. "% of FA2" and "step" are medians of per-round ratios; "% of peak" is against the ceilings."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from tabulate import tabulate

from kernels.tools.ceilings import pct_of_peak
from kernels.tools.runs import Row, Run, shape_title
from kernels.tools.side_by_side import stdout_console
from kernels.tools.stats import Spread, ratio_spread
from reference import REFERENCE

# --- the statistics a table shows --------------------------------------------------------------------------


def reference_row(run: Run) -> Row | None:
    """The row "% of FA2" divides by, if the run has it."""
    return next((row for row in run.rows if row.name == REFERENCE), None)


def pct_of_reference(row: Row, reference: Row) -> Spread:
    """The reference's time over the row's, round by round, as a percentage."""
    return ratio_spread(reference.round_ms, row.round_ms).scaled(100)


def steps(run: Run) -> dict[str, Spread]:
    """Each ladder chapter's speed-up over the chapter before it in the run, round by round."""
    found, previous = {}, None
    for row in run.rows:
        if row.kind == "chapter":
            if previous is not None:
                found[row.name] = ratio_spread(previous.round_ms, row.round_ms)
            previous = row
    return found


def format_spread(value: Spread, rounds: int, digits: int = 1, unit: str = "") -> str:
    """"307.2 [301.0–310.4]": the median and, when there were several rounds, the min–max."""
    text = f"{value.median:.{digits}f}{unit}"
    return text if rounds < 2 else f"{text} [{value.low:.{digits}f}–{value.high:.{digits}f}]"


def format_step(step: Spread, rounds: int) -> str:
    """"1.10× [1.08–1.12]", or "1.01× ~ [0.99–1.03]" when the rounds disagree on the sign of the step."""
    mark = " ~" if rounds > 1 and step.within_noise else ""
    text = f"{step.median:.2f}×{mark}"
    return text if rounds < 2 else f"{text} [{step.low:.2f}–{step.high:.2f}]"


def legend(run: Run) -> str:
    """How to read the table's numbers."""
    if run.rounds < 2:
        return "one round: every number is the median of its repeats, with no spread to judge noise by"
    return (
        f"medians over {run.rounds} rounds [min–max]; % of FA2 and step: medians of per-round ratios; "
        "~: the step's min–max includes 1.00, within noise"
    )


COLUMNS = ["", "ms", "TFLOP/s", "% of FA2", "% of peak", "step", "max err", "rel L2", "check"]


def table_cells(run: Run, ceilings: dict[str, float]) -> list[list[str]]:
    """The ladder table's cells, one list per row, in COLUMNS order."""
    reference, run_steps, lines = reference_row(run), steps(run), []
    for row in run.rows:
        kernel = row.kind != "reference"
        pct = pct_of_reference(row, reference).median if kernel and reference else None
        peak = pct_of_peak(row, ceilings) if kernel else None
        step = run_steps.get(row.name)
        lines.append([
            row.name,
            f"{row.ms:.3f}",
            format_spread(row.tflops_spread, run.rounds),
            "" if pct is None else f"{pct:.1f}%",
            "" if peak is None else f"{peak:.1f}%",
            "" if step is None else format_step(step, run.rounds),
            f"{row.max_abs:.1e}",
            f"{row.rel_l2:.1e}",
            {True: "pass", False: "FAIL", None: ""}[row.ok],
        ])
    return lines


def grid_cells(run: Run) -> tuple[list[str], list[list[str]]]:
    """An ablation's grid: a header and one line per grid row, each cell the median TFLOP/s [min–max]."""
    by_name = {row.name: row for row in run.rows}
    lines = []
    for grid_row in run.grid.rows:
        cells = [grid_row]
        for column in run.grid.columns:
            name = run.grid.cells.get((grid_row, column))
            row = by_name.get(name)
            cells.append("" if row is None else f"{format_spread(row.tflops_spread, run.rounds)} ({name})")
        lines.append(cells)
    return ["TFLOP/s", *run.grid.columns], lines


def rich_table(run: Run, ceilings: dict[str, float]) -> Table:
    caption = escape(f"{run.environment.get('device', '')}\n{legend(run)}")
    table = Table(title=shape_title(run.shape), caption=caption)
    for i, column in enumerate(COLUMNS):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=True)
    for row, cells in zip(run.rows, table_cells(run, ceilings), strict=True):
        cells = [escape(cell) for cell in cells]
        if row.ok is not None:
            cells[-1] = "[green]pass[/]" if row.ok else "[bold red]FAIL[/]"
        table.add_row(*cells, style="dim" if row.kind == "reference" else None)
    return table


def rich_grid(run: Run) -> Table:
    headers, lines = grid_cells(run)
    table = Table(title=escape(run.grid.title))
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right")
    for cells in lines:
        table.add_row(*(escape(cell) for cell in cells))
    return table


def markdown(headers: list[str], lines: list[list[str]]) -> str:
    return tabulate(lines, headers=headers, tablefmt="github", disable_numparse=True)


def markdown_table(run: Run, ceilings: dict[str, float]) -> str:
    return markdown(COLUMNS, table_cells(run, ceilings))


def markdown_grid(run: Run) -> str:
    return markdown(*grid_cells(run))


def print_runs(runs: list[Run], *, markdown: bool = False, ceilings: dict[str, float], note: str | None) -> None:
    """Each run's table (and grid, for an ablation), then why "% of peak" is empty if it is."""
    console = stdout_console()
    for run in runs:
        if markdown:
            print(f"**{shape_title(run.shape)}** on {run.environment.get('device', '?')}\n")
            print(markdown_table(run, ceilings) + "\n")
            print(f"{legend(run)}\n")
            if run.grid is not None:
                print(f"**{run.grid.title}**\n\n{markdown_grid(run)}\n")
        else:
            console.print(rich_table(run, ceilings))
            if run.grid is not None:
                console.print(rich_grid(run))
    if note:
        print(f"% of peak: empty, {note}")
