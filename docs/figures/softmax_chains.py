"""Chapter 16: one thread's sum over a row's probabilities, as one chain (kernel 15) or as several joined pairwise
(kernel 16) (softmax_chains.png). A dependency model of the source; no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from .style import patch_legend, save

Addition = tuple[int, int, str]  # (row in the figure, step on the dependent path, what it adds)


def sum_in_one_chain(values: int) -> list[Addition]:
    """Kernel 15: row_sum += p, value after value: each addition waits for the one before."""
    return [(0, step, "p") for step in range(1, values + 1)]


def sum_in_chains(values: int, chains: int) -> list[Addition]:
    """Kernel 16: value i goes to chain i % chains; the chains are joined pairwise, then added to row_sum."""
    additions = [(i % chains, i // chains + 1, "p") for i in range(values)]
    step, width = values // chains, chains // 2
    while width:
        step += 1
        additions += [(chain, step, "join") for chain in range(width)]
        width //= 2
    return additions + [(0, step + 1, "row_sum")]


def figure_softmax_chains(path: Path, values: int = 32, chains: int = 8) -> None:
    """Chapter 16: one thread's sum over a row's probabilities, as one chain or as several joined pairwise."""
    scenarios = [
        ("kernel 15: one chain", sum_in_one_chain(values)),
        (f"kernel 16: {chains} chains, joined pairwise", sum_in_chains(values, chains)),
    ]
    colors = {"p": "#8fb8de", "join": "#f4b183", "row_sum": "#a9d18e"}
    names = {"p": "adds one probability", "join": "joins two chains", "row_sum": "adds the total to row_sum"}
    fig, axes = plt.subplots(2, 1, figsize=(12, 4.8), gridspec_kw={"height_ratios": [1, chains]}, sharex=True)
    for ax, (title, additions) in zip(axes, scenarios, strict=True):
        rows = max(row for row, _, _ in additions) + 1
        for row, step, kind in additions:
            ax.add_patch(Rectangle((step - 1, rows - 1 - row), 0.9, 0.8, facecolor=colors[kind], edgecolor="white"))
        depth = max(step for _, step, _ in additions)
        ax.text(depth + 0.2, rows - 0.6, f"{depth} steps", va="center", fontsize=9)
        ax.set_xlim(0, values + 4)
        ax.set_ylim(-0.2, rows)
        ax.set_yticks(
            [rows - 1 - r + 0.4 for r in range(rows)],
            [f"chain {r}" for r in range(rows)] if rows > 1 else ["row_sum"],
            fontsize=8,
        )
        ax.set_title(f"{title}: {len(additions)} additions", fontsize=10, loc="left")
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="y", length=0)
    axes[-1].set_xlabel("step on the dependent path: an addition cannot start before the one it reads has ended")
    patch_legend(axes[-1], [(c, names[k]) for k, c in colors.items()], top=-0.35, ncol=3, fontsize=9)
    fig.suptitle(f"One thread's sum over its {values} probabilities of a row in a tile", fontsize=11)
    fig.tight_layout()
    save(fig, path)
