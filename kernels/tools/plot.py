"""The ladder as a bar chart (`runner.py --plot`): a bar per kernel, torch's attention as lines across."""

from __future__ import annotations

from pathlib import Path

from kernels.tools.runs import Run, shape_title


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
    bars = ax.bar(
        [r.name for r in kernels],
        [s.median for s in spreads],
        color="#4c72b0",
        yerr=errors if run.rounds > 1 else None,
        capsize=4,
        error_kw={"elinewidth": 1.2},
    )
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
