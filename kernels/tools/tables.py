"""The ladder's tables, computed from a run's samples: a rich table on the terminal, GitHub Markdown, and an
ablation's grid. "% of FA2" and "step" are medians of per-round ratios; "% of peak" is against the ceilings. A
memory-bound run (one query row per sequence: decoding) shows GB/s and "% of DRAM" instead of TFLOP/s and "% of peak".
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from tabulate import tabulate

from kernels.tools.ceilings import MEMORY_BOUND_BELOW, Ceilings, memory_bound, pct_of_dram, pct_of_peak
from kernels.tools.runs import Row, Run, shape_title
from kernels.tools.side_by_side import stdout_console
from kernels.tools.stats import Spread, ratio_spread, spread
from kernels.tools.timing import LAUNCH_MS
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
    """ "307.2 [301.0–310.4]": the median and, when there were several rounds, the min–max."""
    text = f"{value.median:.{digits}f}{unit}"
    return text if rounds < 2 else f"{text} [{value.low:.{digits}f}–{value.high:.{digits}f}]"


def format_step(step: Spread, rounds: int) -> str:
    """ "1.10× [1.08–1.12]", or "1.01× ~ [0.99–1.03]" when the rounds disagree on the sign of the step."""
    mark = " ~" if rounds > 1 and step.within_noise else ""
    text = f"{step.median:.2f}×{mark}"
    return text if rounds < 2 else f"{text} [{step.low:.2f}–{step.high:.2f}]"


def legend(run: Run, ceilings: Ceilings) -> str:
    """How to read the table's numbers; for a memory-bound run, what its GB/s count and why it is shown in them."""
    if run.rounds < 2:
        text = "one round: every number is the median of its repeats, with no spread to judge noise by"
    else:
        text = (
            f"medians over {run.rounds} rounds [min–max]; % of FA2 and step: medians of per-round ratios; "
            "~: the step's min–max includes 1.00, within noise"
        )
    fastest = min(row.ms for row in run.rows)
    if fastest < LAUNCH_MS:
        text += (
            f"\nsome calls take under {LAUNCH_MS} ms, about what launching one from Python costs the CPU: "
            "their times may include the launch"
        )
    if any(row.clocks for row in run.rows):
        text += (
            "\nSM MHz and W: the SM clock and the board's power, read by NVML every few ms while each contender's "
            "timed calls ran (kernels/tools/clocks.py), the median of each round's readings"
        )
    if run.splits:
        counts = ", ".join(f"{name} {n}" for name, n in run.splits.items())
        rules = "split_count, and decode_split_count where a decode kernel runs, kernels/launch.py"
        text += f"\nsplit-KV splits, each query tile's keys dealt to: {counts} (rules: {rules})"
    if run.tails:
        tails = ", ".join(
            f"{name} {tiles} tiles in {pieces} pieces each" for name, (tiles, pieces) in run.tails.items()
        )
        text += f"\nthe last wave split along the keys: {tails} (rule: tail_split, kernels/launch.py)"
    return text if not memory_bound(run) else f"{text}\n{memory_legend(run, ceilings)}"


def memory_legend(run: Run, ceilings: Ceilings) -> str:
    """The rule that made the run memory-bound, and what its GB/s and % of DRAM divide."""
    ridge, dram = "the ridge point of the GPUs measured", ""
    if ceilings.dram_tbps is not None:
        dram = (
            f"; % of DRAM: of the DRAM copy rate, {ceilings.dram_tbps:.2f} TB/s, which a call that only reads "
            "can pass (a copy's bytes are half writes)"
        )
        if ceilings.tflops:
            ridge = f"this GPU's ridge point, {min(ceilings.tflops.values()) / ceilings.dram_tbps:.0f}"
    return (
        f"memory-bound: {run.intensity:.1f} FLOP per byte moved, below {MEMORY_BOUND_BELOW} (under {ridge}), so in "
        f"GB/s: the fewest bytes a call must move through DRAM, {run.bytes_moved / 1e9:.3f} GB (Q, K and V read "
        f"once, K and V once per K/V head, O written once), over its time{dram}"
    )


COLUMNS = ["", "ms", "TFLOP/s", "% of FA2", "% of peak", "step", "max err", "rel L2", "check"]
# A memory-bound run trades the tensor cores' columns for DRAM's; "% of DRAM" is left out without a DRAM ceiling.
MEMORY_COLUMNS = ["", "ms", "GB/s", "% of DRAM", "% of FA2", "step", "max err", "rel L2", "check"]


# A run timed with --clocks: each row's SM clock and board power while its calls ran, after its step.
CLOCK_COLUMNS = ["SM MHz", "W"]


def columns(run: Run, ceilings: Ceilings) -> list[str]:
    """The run's table columns: COLUMNS, or MEMORY_COLUMNS for a memory-bound run; CLOCK_COLUMNS where it has them."""
    shown = COLUMNS
    if memory_bound(run):
        shown = [column for column in MEMORY_COLUMNS if column != "% of DRAM" or ceilings.dram_tbps is not None]
    if any(row.clocks for row in run.rows):
        after_step = shown.index("step") + 1
        shown = [*shown[:after_step], *CLOCK_COLUMNS, *shown[after_step:]]
    return shown


def table_cells(run: Run, ceilings: Ceilings) -> list[list[str]]:
    """The ladder table's cells, one list per row, in the order of ``columns(run, ceilings)``."""
    reference, run_steps, lines, shown = reference_row(run), steps(run), [], columns(run, ceilings)
    for row in run.rows:
        kernel = row.kind != "reference"
        pct = pct_of_reference(row, reference).median if kernel and reference else None
        peak = pct_of_peak(row, ceilings) if kernel else None
        dram = pct_of_dram(run, row, ceilings)
        step = run_steps.get(row.name)
        cells = {
            "": row.name,
            "ms": f"{row.ms:.3f}",
            "TFLOP/s": format_spread(row.tflops_spread, run.rounds),
            "GB/s": format_spread(run.gbps_spread(row), run.rounds, digits=0),
            "% of FA2": "" if pct is None else f"{pct:.1f}%",
            "% of peak": "" if peak is None else f"{peak:.1f}%",
            "% of DRAM": "" if dram is None else f"{dram:.1f}%",
            "step": "" if step is None else format_step(step, run.rounds),
            "SM MHz": clock_cell(row, "sm_mhz", run.rounds),
            "W": clock_cell(row, "watts", run.rounds),
            "max err": f"{row.max_abs:.1e}",
            "rel L2": f"{row.rel_l2:.1e}",
            "check": {True: "pass", False: "FAIL", None: ""}[row.ok],
        }
        lines.append([cells[column] for column in shown])
    return lines


def clock_cell(row: Row, reading: str, rounds: int) -> str:
    """The median over the rounds of one of the row's clock readings [min–max], or empty without them."""
    if not row.clocks:
        return ""
    return format_spread(spread([getattr(r, reading) for r in row.clocks]), rounds, digits=0)


def ceiling_notes(runs: list[Run], ceilings: Ceilings, note: str | None) -> list[str]:
    """Why a ceiling's column is empty or left out, for the runs shown; ``note``: why no ceilings were read."""
    notes = []
    if note and any(not memory_bound(run) for run in runs):
        notes.append(f"% of peak: empty, {note}")
    why_no_dram = note or ceilings.no_dram
    if why_no_dram and any(memory_bound(run) for run in runs):
        notes.append(f"% of DRAM: left out, {why_no_dram}")
    return notes


def grid_cells(run: Run) -> tuple[list[str], list[list[str]]]:
    """An ablation's grid: a header and one line per grid row, each cell the median TFLOP/s [min–max], or GB/s
    for a memory-bound run, as its table shows."""
    by_name = {row.name: row for row in run.rows}
    in_bytes = memory_bound(run)

    def rate(row) -> str:
        return (
            format_spread(run.gbps_spread(row), run.rounds, digits=0)
            if in_bytes
            else format_spread(row.tflops_spread, run.rounds)
        )

    lines = []
    for grid_row in run.grid.rows:
        cells = [grid_row]
        for column in run.grid.columns:
            name = run.grid.cells.get((grid_row, column))
            row = by_name.get(name)
            cells.append("" if row is None else f"{rate(row)} ({name})")
        lines.append(cells)
    return ["GB/s" if in_bytes else "TFLOP/s", *run.grid.columns], lines


def rich_table(run: Run, ceilings: Ceilings) -> Table:
    caption = escape(f"{run.environment.get('device', '')}\n{legend(run, ceilings)}")
    table = Table(title=shape_title(run.shape), caption=caption)
    for i, column in enumerate(columns(run, ceilings)):
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


def markdown_table(run: Run, ceilings: Ceilings) -> str:
    return markdown(columns(run, ceilings), table_cells(run, ceilings))


def markdown_grid(run: Run) -> str:
    return markdown(*grid_cells(run))


def print_runs(runs: list[Run], *, markdown: bool = False, ceilings: Ceilings, note: str | None) -> None:
    """Each run's table (and grid, for an ablation), then why "% of peak" is empty or "% of DRAM" left out."""
    console = stdout_console()
    for run in runs:
        if markdown:
            print(f"**{shape_title(run.shape)}** on {run.environment.get('device', '?')}\n")
            print(markdown_table(run, ceilings) + "\n")
            print(f"{legend(run, ceilings)}\n")
            if run.grid is not None:
                print(f"**{run.grid.title}**\n\n{markdown_grid(run)}\n")
        else:
            console.print(rich_table(run, ceilings))
            if run.grid is not None:
                console.print(rich_grid(run))
    for line in ceiling_notes(runs, ceilings, note):
        print(line)
