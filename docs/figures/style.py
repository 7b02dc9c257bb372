"""The look every figure shares and the helpers that draw it: element grids with row 0 on top, one rectangle per
run of elements a lane owns, schedules as rows of bars, and one way to save."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch, Rectangle

DPI = 140
# One hue per register / matrix / lane group; light enough that black text on top stays legible.
HUES = ["#8fb8de", "#f4b183", "#a9d18e", "#d9a3d6"]
C_HUES = ["#ffe699", "#9dd9d2"]  # accumulators: fp32, so not to be confused with A's registers
PLANE_HUES = ["#8fb8de", "#f4b183"]  # the two 64-column planes of a Hopper tile: dims 0-63, dims 64-127
HIGHLIGHT = "#c00000"  # the one lane a figure follows
FOLLOWED_LANE = 5  # g = 1, t = 1: neither coordinate is 0, so a reader can check both formulas


# ---------------------------------------------------------------------------------------------------
# Element grids: one unit per element (or per 16-byte chunk), row 0 at the top.
# ---------------------------------------------------------------------------------------------------


def grid_axes(ax: plt.Axes, rows: int, cols: int, title: str, *, col_label: str = "", row_label: str = "") -> None:
    """An empty (rows, cols) element grid, row 0 at the top, one unit per element."""
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=7)
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r) for r in range(rows)], fontsize=7)
    ax.tick_params(length=0, labeltop=True, labelbottom=False)
    ax.set_xlabel(col_label, fontsize=9)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel(row_label, fontsize=9)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10, pad=22 if col_label else 8)


def coarse_axes(
    ax: plt.Axes,
    rows: int,
    cols: int,
    title: str,
    *,
    col_step: int,
    row_step: int,
    col_label: str = "",
    row_label: str = "",
) -> None:
    """Like grid_axes, for grids too large to label every element: a tick every col_step / row_step."""
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, cols + 1, col_step), [str(c) for c in range(0, cols + 1, col_step)], fontsize=7)
    ax.set_yticks(range(0, rows + 1, row_step), [str(r) for r in range(0, rows + 1, row_step)], fontsize=7)
    ax.tick_params(length=2, top=True, bottom=False, labeltop=True, labelbottom=False)
    ax.set_xlabel(col_label, fontsize=9)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel(row_label, fontsize=9)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10, pad=8)


def box(
    ax: plt.Axes,
    row: float,
    col: float,
    width: float,
    color,
    text: str = "",
    *,
    height: float = 1,
    fontsize: float = 7,
    edge: str = "white",
    linewidth: float = 1.0,
    zorder: int = 1,
) -> None:
    """One rectangle of elements, top-left at (row, col), with a centred label."""
    ax.add_patch(
        Rectangle((col, row), width, height, facecolor=color, edgecolor=edge, linewidth=linewidth, zorder=zorder)
    )
    if text:
        ax.text(col + width / 2, row + height / 2, text, ha="center", va="center", fontsize=fontsize, zorder=zorder + 1)


def outline(
    ax: plt.Axes,
    row: float,
    col: float,
    width: float,
    height: float = 1,
    *,
    color: str = HIGHLIGHT,
    linewidth: float = 2.2,
) -> None:
    """A frame around (height, width) elements from (row, col), above the boxes: by default, the followed lane's."""
    ax.add_patch(Rectangle((col, row), width, height, fill=False, edgecolor=color, linewidth=linewidth, zorder=5))


def shade(color: str, amount: float) -> tuple[float, float, float]:
    """Mix a colour with white (amount < 0) or black (amount > 0)."""
    r, g, b = to_rgb(color)
    target = 0.0 if amount > 0 else 1.0
    a = abs(amount)
    return (r + (target - r) * a, g + (target - g) * a, b + (target - b) * a)


def draw_fragment_pairs(ax: plt.Axes, row0: int, col0: int, color, *, follow: bool = True) -> None:
    """The 32 lanes' element pairs of one (8, 8) fragment placed at (row0, col0)."""
    for lane in range(32):
        row, col = lane // 4, (lane % 4) * 2
        box(ax, row0 + row, col0 + col, 2, color, f"T{lane}")
        if follow and lane == FOLLOWED_LANE:
            outline(ax, row0 + row, col0 + col, 2)


def caption(ax: plt.Axes, x: float, y: float, text: str, *, fontsize: float = 9, **options) -> None:
    """Text centred on x, hanging from y: under a grid whose row 0 is on top, a note below the grid."""
    ax.text(x, y, text, ha="center", va="top", fontsize=fontsize, **options)


def patch_legend(ax: plt.Axes, entries: list[tuple], *, top: float, ncol: int = 1, **options) -> None:
    """A frameless legend of (colour, label) patches centred under or in an axis, its top at `top` (a fraction of
    the axis' height: below 0 is under it); colour "none" makes a line of plain text."""
    handles = [Patch(color=color, label=label) for color, label in entries]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, top), ncol=ncol, frameon=False, **options)


# ---------------------------------------------------------------------------------------------------
# Schedules: scenarios stacked top-down, a row per unit that works, a bar per step.
# ---------------------------------------------------------------------------------------------------

Bar = tuple[str, int, float, float]  # what runs (a kind of step), the K/V tile, start, length


def draw_timelines(
    path: Path,
    scenarios: list[tuple[str, list[Bar]]],
    rows: list[tuple[str, tuple[str, ...]]],
    colors: dict[str, str],
    *,
    height: float,
    title: str,
    xlabel: str,
    done_at: tuple[float, float],
    dark_labels: tuple[str, ...] = (),
    legend_top: float | None = None,
) -> None:
    """A schedule figure: each scenario (title, bars) a block of rows, the first on top; rows are (label, the kinds
    of bar they show), top-down. A bar is labelled with its tile, in black on the kinds in dark_labels, white on the
    others; "done at" stands at done_at = (right of the last bar, below the block's top); the colours' legend, if
    legend_top is given, hangs from there under the axis."""
    fig, ax = plt.subplots(figsize=(13, height))
    labels, y = [], 0.0
    for scenario, bars in reversed(scenarios):
        for label, kinds in reversed(rows):
            for kind, tile, start, length in bars:
                if kind in kinds:
                    ax.broken_barh([(start, length)], (y, 0.8), facecolors=colors[kind], edgecolor="white")
                    ax.text(
                        start + length / 2,
                        y + 0.4,
                        str(tile),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="black" if kind in dark_labels else "white",
                    )
            labels.append((y + 0.4, label))
            y += 1.0
        end = max(start + length for _, _, start, length in bars)
        ax.text(end + done_at[0], y - done_at[1], f"done at {end:.1f}", va="center", fontsize=9)
        ax.text(0, y + 0.05, scenario, fontsize=10, fontweight="bold", va="bottom")
        y += 0.9
    ax.set_yticks([pos for pos, _ in labels], [label for _, label in labels], fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylim(-0.3, y)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    if legend_top is not None:
        patch_legend(ax, [(color, kind) for kind, color in colors.items()], top=legend_top, ncol=4, fontsize=9)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    save(fig, path)


def save(fig: plt.Figure, path: Path) -> None:
    """Write a figure at the shared resolution, free it, and say where it went."""
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path}")
