"""Show a ladder run: a rich table on the terminal, Markdown, JSON, and a plot."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tabulate import tabulate


@dataclass
class Row:
    """One line of the ladder: a torch reference or a chapter, timed and checked on the same input."""

    name: str
    kind: str  # "reference" or "chapter"
    ms: float
    tflops: float
    max_abs: float
    rel_l2: float
    ok: bool | None = None  # chapters only: within the error tolerance
    pct_of_reference: float | None = None
    speedup: float | None = None  # over the previous chapter


@dataclass
class Run:
    """Everything one ladder run measured, with what it ran on."""

    shape: dict
    environment: dict
    rows: list[Row] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"shape": self.shape, "environment": self.environment, "rows": [asdict(r) for r in self.rows]}

    @classmethod
    def from_json(cls, data: dict) -> Run:
        return cls(data["shape"], data["environment"], [Row(**r) for r in data["rows"]])


def save_runs(runs: list[Run], path: Path) -> None:
    path.write_text(json.dumps([run.to_json() for run in runs], indent=1) + "\n")


def load_runs(path: Path) -> list[Run]:
    return [Run.from_json(data) for data in json.loads(path.read_text())]


def shape_title(shape: dict) -> str:
    return (
        f"batch {shape['batch']}, seq_len {shape['seq_len']}, heads {shape['heads']}, head_dim {shape['head_dim']}, "
        f"{shape['dtype']}{', causal' if shape['causal'] else ''}"
    )


COLUMNS = ["", "ms", "TFLOP/s", "% of FA2", "step", "max err", "rel L2", "check"]


def _cells(row: Row) -> list[str]:
    check = {True: "pass", False: "FAIL", None: ""}[row.ok]
    return [
        row.name,
        f"{row.ms:.3f}",
        f"{row.tflops:.1f}",
        "" if row.pct_of_reference is None else f"{row.pct_of_reference:.1f}%",
        "" if row.speedup is None else f"{row.speedup:.2f}x",
        f"{row.max_abs:.1e}",
        f"{row.rel_l2:.1e}",
        check,
    ]


def rich_table(run: Run) -> Table:
    table = Table(title=shape_title(run.shape), caption=run.environment.get("device", ""))
    for i, column in enumerate(COLUMNS):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in run.rows:
        cells = _cells(row)
        if row.ok is not None:
            cells[-1] = "[green]pass[/]" if row.ok else "[bold red]FAIL[/]"
        table.add_row(*cells, style="dim" if row.kind == "reference" else None)
    return table


def markdown_table(run: Run) -> str:
    return tabulate([_cells(row) for row in run.rows], headers=COLUMNS, tablefmt="github", disable_numparse=True)


def print_runs(runs: list[Run], *, markdown: bool = False) -> None:
    # Piped output (a log file) gets a fixed width wide enough for the whole table.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    for run in runs:
        if markdown:
            print(f"**{shape_title(run.shape)}** on {run.environment.get('device', '?')}\n")
            print(markdown_table(run) + "\n")
        else:
            console.print(rich_table(run))


def plot_ladder(run: Run, path: Path) -> None:
    """Bar per chapter (TFLOP/s) with the torch references as horizontal lines."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise SystemExit("plotting needs matplotlib: pip install matplotlib") from error
    chapters = [r for r in run.rows if r.kind == "chapter"]
    references = [r for r in run.rows if r.kind == "reference"]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(chapters) + 2), 4.5))
    bars = ax.bar([r.name for r in chapters], [r.tflops for r in chapters], color="#4c72b0")
    ax.bar_label(bars, fmt="%.0f", padding=2)
    colors = ["#c44e52", "#55a868", "#8172b2"]
    label_heights = _spread([r.tflops for r in references], gap=0.04 * max(r.tflops for r in run.rows))
    for reference, color, height in zip(references, colors, label_heights, strict=False):
        ax.axhline(reference.tflops, color=color, linestyle="--", linewidth=1.2)
        ax.annotate(
            f"{reference.name} {reference.tflops:.0f}",
            (1.0, height),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            color=color,
            fontsize=9,
        )
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{shape_title(run.shape)}\n{run.environment.get('device', '')}", fontsize=10)
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
