"""The ladder as a bar chart (`runner.py --plot`): a bar per kernel, torch's attention as lines across; a long
ladder in stacked rows of at most nine bars on one TFLOP/s scale, so it stays legible at a page's width."""

from __future__ import annotations

import math
from pathlib import Path

from kernels.tools.runs import Run, shape_title

BARS_PER_ROW = 9  # two rows for up to eighteen chapters, three for more: each legible at a page's width


def plot_ladder(run: Run, path: Path) -> None:
    """Bar per kernel (median TFLOP/s, min–max as error bars) in rows of at most BARS_PER_ROW sharing the y axis,
    the torch references as lines with a band across every row."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise SystemExit("plotting needs matplotlib: pip install matplotlib") from error
    kernels = [r for r in run.rows if r.kind != "reference"]
    references = [r for r in run.rows if r.kind == "reference"]
    n_rows = max(1, math.ceil(len(kernels) / BARS_PER_ROW))
    per_row = max(1, math.ceil(len(kernels) / n_rows))
    fig, axes = plt.subplots(
        n_rows, 1, figsize=(max(6, 1.05 * per_row + 2.2), 3.4 * n_rows + 0.8), sharey=True, squeeze=False
    )
    top = max(r.tflops_spread.high for r in run.rows)
    colors = ["#c44e52", "#55a868", "#8172b2"]
    label_heights = _spread([r.tflops for r in references], gap=0.06 * top)
    for row_index, ax in enumerate(axes[:, 0]):
        row_kernels = kernels[row_index * per_row : (row_index + 1) * per_row]
        spreads = [r.tflops_spread for r in row_kernels]
        errors = [[s.median - s.low for s in spreads], [s.high - s.median for s in spreads]]
        bars = ax.bar(
            [r.name for r in row_kernels],
            [s.median for s in spreads],
            color="#4c72b0",
            yerr=errors if run.rounds > 1 else None,
            capsize=4,
            error_kw={"elinewidth": 1.2},
        )
        # inside the bar: the error bar is on top
        ax.bar_label(bars, fmt="%.0f", padding=-15, color="white", fontsize=11)
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
                fontsize=11,
            )
        ax.set_xlim(-0.6, per_row - 0.4)  # the same bar width in a shorter last row
        ax.set_ylabel("TFLOP/s", fontsize=11)
        ax.tick_params(axis="x", rotation=20, labelsize=11)
        ax.tick_params(axis="y", labelsize=11)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    axes[0, 0].set_ylim(0, 1.12 * top)
    spread_words = f", bars and bands: min–max over {run.rounds} rounds" if run.rounds > 1 else ""
    fig.suptitle(f"{shape_title(run.shape)}\n{run.environment.get('device', '')}{spread_words}", fontsize=12)
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
