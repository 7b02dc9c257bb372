"""Show a ladder run: a rich table on the terminal, Markdown, JSON, a grid for an ablation, and a plot.

A run keeps every timed sample (per round, per repeat, in ms); everything a table shows is computed from them
here, so a saved run shows exactly what the live one did.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from tabulate import tabulate

from kernels.tools.stats import Spread, ratio_spread, round_medians, spread
from reference import REFERENCE

ROOT = Path(__file__).resolve().parents[2]


class RunFileError(ValueError):
    """A file that is not a run saved by ``runner.py --json``."""


@dataclass
class Row:
    """One contender of a run: a torch reference, a ladder chapter or an ablation variant, timed and checked."""

    name: str
    kind: str  # "reference", "chapter" (a rung of the ladder) or "variant" (a kernel of an ablation set)
    samples_ms: list[list[float]]  # per round, the time of each repeat
    max_abs: float
    rel_l2: float
    flops: float  # of one call: the same for every row of a run
    ok: bool | None = None  # kernels only: within the error tolerance
    family: str | None = None  # kernels only: the tensor-core instruction family, "mma.sync" or "wgmma"

    @property
    def round_ms(self) -> list[float]:
        """One time per round: the median of its repeats."""
        return round_medians(self.samples_ms)

    @property
    def ms(self) -> float:
        """The median over the rounds."""
        return spread(self.round_ms).median

    @property
    def tflops_spread(self) -> Spread:
        """TFLOP/s of each round, summarised."""
        return spread([self.flops / ms / 1e9 for ms in self.round_ms])

    @property
    def tflops(self) -> float:
        """The median TFLOP/s over the rounds."""
        return self.tflops_spread.median

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "family": self.family, "max_abs": self.max_abs,
                "rel_l2": self.rel_l2, "ok": self.ok, "samples_ms": self.samples_ms}


@dataclass(frozen=True)
class Grid:
    """An ablation set's grid: which contender fills each (row, column) cell."""

    name: str  # the set's folder, e.g. "ch03_ldmatrix"
    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: dict[tuple[str, str], str]

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "rows": list(self.rows), "columns": list(self.columns),
                "cells": [[row, column, name] for (row, column), name in self.cells.items()]}

    @classmethod
    def from_json(cls, data: dict) -> Grid:
        cells = {(row, column): name for row, column, name in data["cells"]}
        return cls(data["name"], data["title"], tuple(data["rows"]), tuple(data["columns"]), cells)


SHAPE_KEYS = ("batch", "seq_len", "heads", "head_dim", "dtype", "causal")  # kv_heads, kv_len: heads, seq_len if absent


@dataclass
class Run:
    """Everything one run measured at one shape, with what it ran on and the order of each round."""

    shape: dict
    environment: dict
    flops: float
    rows: list[Row] = field(default_factory=list)
    order: list[list[str]] = field(default_factory=list)  # the contenders' order in each round
    grid: Grid | None = None  # an ablation's grid; None for the ladder

    @property
    def rounds(self) -> int:
        return len(self.order)

    def to_json(self) -> dict:
        data = {"shape": self.shape, "environment": self.environment, "flops": self.flops, "order": self.order,
                "rows": [row.to_json() for row in self.rows]}
        if self.grid is not None:
            data["grid"] = self.grid.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict) -> Run:
        """A saved run; one saved before rounds existed (one ``ms`` per row) reads as a single round."""
        if not data["rows"]:
            raise ValueError("a run with no rows")
        old = "samples_ms" not in data["rows"][0]
        flops = data["rows"][0]["tflops"] * data["rows"][0]["ms"] * 1e9 if old else float(data["flops"])
        rows = [_row_from_json(row, flops) for row in data["rows"]]
        order = [[row.name for row in rows]] if old else [list(names) for names in data["order"]]
        if any(len(row.samples_ms) != len(order) for row in rows):
            raise ValueError(f"every row needs one sample list per round ({len(order)} rounds)")
        missing = [key for key in SHAPE_KEYS if key not in data["shape"]]
        if missing:
            raise ValueError(f"the shape has no {', '.join(missing)}")
        shape = {"kv_heads": data["shape"]["heads"], "kv_len": data["shape"]["seq_len"], **data["shape"]}
        grid = Grid.from_json(data["grid"]) if data.get("grid") else None
        return cls(shape, dict(data["environment"]), flops, rows, order, grid)


def _row_from_json(data: dict, flops: float) -> Row:
    samples = data["samples_ms"] if "samples_ms" in data else [[data["ms"]]]
    if not samples or not all(repeats and all(float(ms) > 0 for ms in repeats) for repeats in samples):
        raise ValueError(f"{data['name']}: samples_ms must hold, per round, a non-empty list of positive times")
    if data.get("ok") not in (True, False, None) or not isinstance(data.get("family"), str | None):
        raise ValueError(f"{data['name']}: ok must be true, false or null and family a string or null")
    return Row(str(data["name"]), str(data["kind"]), [[float(ms) for ms in repeats] for repeats in samples],
               float(data["max_abs"]), float(data["rel_l2"]), flops, data.get("ok"), data.get("family"))


def save_runs(runs: list[Run], path: Path) -> None:
    path.write_text(json.dumps([run.to_json() for run in runs], indent=1) + "\n")


def load_runs(path: Path) -> list[Run]:
    """The runs saved in a file; a RunFileError that names the problem if it holds none."""
    if not path.is_file():
        raise RunFileError(f"{path}: no such file")
    text = path.read_text()
    if not text.strip():
        raise RunFileError(f"{path} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunFileError(f"{path} is not JSON: {error}") from error
    if not isinstance(data, list) or not data:
        raise RunFileError(f"{path}: expected a list of runs as runner.py --json writes it")
    try:
        return [Run.from_json(run) for run in data]
    except KeyError as error:
        raise RunFileError(f"{path}: not a run saved by runner.py --json: no field {error}") from error
    except (TypeError, ValueError, AttributeError) as error:
        raise RunFileError(f"{path}: not a run saved by runner.py --json: {error}") from error


def shape_title(shape: dict) -> str:
    """The shape in words; the K/V heads and length only where they differ from the queries'."""
    kv = ""
    if shape.get("kv_heads", shape["heads"]) != shape["heads"]:
        kv += f", kv_heads {shape['kv_heads']}"
    if shape.get("kv_len", shape["seq_len"]) != shape["seq_len"]:
        kv += f", kv_len {shape['kv_len']}"
    return (
        f"batch {shape['batch']}, seq_len {shape['seq_len']}, heads {shape['heads']}{kv}, "
        f"head_dim {shape['head_dim']}, {shape['dtype']}{', causal' if shape['causal'] else ''}"
    )


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


def pct_of_peak(row: Row, ceilings: dict[str, float]) -> float | None:
    """The row's median TFLOP/s over the ceiling of the instruction family it uses."""
    ceiling = ceilings.get(row.family or "")
    return None if ceiling is None else 100 * row.tflops / ceiling


def instruction_family(source: Path) -> str:
    """The tensor-core instructions a kernel's source issues: "wgmma" (Hopper) or "mma.sync" (Ampere on)."""
    return "wgmma" if "wgmma.mma_async" in source.read_text() else "mma.sync"


def load_ceilings(path: Path, device: str) -> dict[str, float]:
    """TFLOP/s ceiling per instruction family from ``runner.py peak``'s JSON; a ValueError saying why not."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.is_file():
        raise ValueError(f"no {shown} (python runner.py peak --json {shown} measures it)")
    try:
        peak = json.loads(path.read_text())
        measured_on = peak["environment"]["device"]
        ceilings = {family: float(ceiling["tflops"]) for family, ceiling in peak["ceilings"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{shown} is not a ceilings file written by runner.py peak ({error!r})") from error
    if measured_on != device:
        raise ValueError(f"{shown} was measured on {measured_on}, this run on {device}")
    return ceilings


# --- formatting -------------------------------------------------------------------------------------------


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
    # Piped output (a log file) gets a fixed width wide enough for the whole table.
    console = Console() if sys.stdout.isatty() else Console(width=140)
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


def plot_ladder(run: Run, path: Path) -> None:
    """Bar per chapter (median TFLOP/s, min–max as error bars), the torch references as lines with a band."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise SystemExit("plotting needs matplotlib: pip install matplotlib") from error
    kernels = [r for r in run.rows if r.kind != "reference"]
    references = [r for r in run.rows if r.kind == "reference"]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(kernels) + 2), 4.5))
    spreads = [r.tflops_spread for r in kernels]
    errors = [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]
    bars = ax.bar([r.name for r in kernels], [s.median for s in spreads], color="#4c72b0",
                  yerr=errors if run.rounds > 1 else None, capsize=4, error_kw={"elinewidth": 1.2})
    ax.bar_label(bars, fmt="%.0f", padding=-14, color="white", fontsize=9)  # inside the bar: the error bar is on top
    colors = ["#c44e52", "#55a868", "#8172b2"]
    label_heights = _spread([r.tflops for r in references], gap=0.04 * max(r.tflops for r in run.rows))
    for reference, color, height in zip(references, colors, label_heights, strict=False):
        band = reference.tflops_spread
        ax.axhline(band.median, color=color, linestyle="--", linewidth=1.2)
        ax.axhspan(band.low, band.high, color=color, alpha=0.15, linewidth=0)
        ax.annotate(
            f"{reference.name} {band.median:.0f}",
            (1.0, height),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            color=color,
            fontsize=9,
        )
    ax.set_ylabel("TFLOP/s")
    spread_words = f", bars and bands: min–max over {run.rounds} rounds" if run.rounds > 1 else ""
    ax.set_title(f"{shape_title(run.shape)}\n{run.environment.get('device', '')}{spread_words}", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    ax.margins(y=0.12)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _spread(values: list[float], gap: float) -> list[float]:
    """Label heights near ``values`` but at least ``gap`` apart, so close reference lines stay readable."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    heights = list(values)
    for previous, current in zip(order, order[1:], strict=False):
        heights[current] = max(heights[current], heights[previous] + gap)
    return heights
