"""What a lane holds of a warp's fp32 accumulators: chapter 1's block of four warps with a warp's S and O
(block_rows.png), and chapter 8's 128-key tile of S (kv128_scores.png). Computed from mma.sync's C layout; no
results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import C_HUES, FOLLOWED_LANE, HUES, box, caption, coarse_axes, outline, save, shade

# ---------------------------------------------------------------------------------------------------
# Shared: mma.sync's C layout, a warp's accumulator drawn lane by lane.
# ---------------------------------------------------------------------------------------------------


def lane_pairs(lane: int, n_tiles: int) -> list[tuple[int, int]]:
    """Where one lane's value pairs sit in a warp's (16, 8 * n_tiles) accumulator: rows g and g + 8,
    columns 8n + 2t and 8n + 2t + 1 of every n-tile n (the C layout of mma.m16n8k16)."""
    g, t = lane // 4, lane % 4
    return [(row, 8 * n + 2 * t) for n in range(n_tiles) for row in (g, g + 8)]


def draw_accumulator(ax: plt.Axes, n_tiles: int, title: str, col_label: str, *, first_new: int | None = None) -> None:
    """A warp's (16, 8 * n_tiles) fp32 accumulator: rows g and g + 8 in two hues, the four lanes of a row in
    four shades, n-tile borders in black, and FOLLOWED_LANE's pairs outlined. Columns from first_new on are
    drawn darker (what a bigger tile adds)."""
    cols = 8 * n_tiles
    coarse_axes(
        ax,
        16,
        cols,
        title,
        col_step=8 if cols <= 64 else 16,
        row_step=4,
        col_label=col_label,
        row_label="query row of the warp",
    )
    for row in range(16):
        for col in range(cols):
            color = shade(C_HUES[row // 8], 0.06 * (col % 8 // 2))
            if first_new is not None and col >= first_new:
                color = shade(C_HUES[row // 8], 0.25 + 0.06 * (col % 8 // 2))
            box(ax, row, col, 1, color, edge="white", linewidth=0.3)
    for n in range(n_tiles + 1):
        ax.plot([8 * n, 8 * n], [0, 16], color="black", linewidth=0.9, zorder=4)
    for row, col in lane_pairs(FOLLOWED_LANE, n_tiles):
        outline(ax, row, col, 2, linewidth=1.8)


# ---------------------------------------------------------------------------------------------------
# block_rows.png (chapter 1): which warp owns which query rows, which elements of S and O a lane holds.
# ---------------------------------------------------------------------------------------------------


def figure_block_rows(path: Path) -> None:
    """Chapter 1: a block's warps split the query rows, and a lane holds fixed rows and columns of S and O."""
    fig, axes = plt.subplot_mosaic(
        [["q", "s"], ["q", "o"]], figsize=(16, 8.6), layout="constrained", width_ratios=[1, 4.2]
    )
    q_ax, s_ax, o_ax = axes["q"], axes["s"], axes["o"]

    # The block's Q tile, by 16-byte chunks: four bands of 16 rows, one per warp.
    coarse_axes(
        q_ax,
        64,
        16,
        "the block's Q tile (64, 128):\nwarp w owns rows 16w ... 16w + 15",
        col_step=4,
        row_step=8,
        col_label="16-byte chunk (8 dims)",
        row_label="query row of the block",
    )
    for warp in range(4):
        box(
            q_ax,
            16 * warp,
            0,
            16,
            HUES[warp],
            f"warp {warp}\nrows {16 * warp}-{16 * warp + 15}\n8 A fragments\nin registers",
            height=16,
            fontsize=9,
        )
    caption(q_ax, 8, 66, "K and V tiles (64 keys, 128 dims)\nare read by all four warps;\nrows never cross warps")

    g, t = FOLLOWED_LANE // 4, FOLLOWED_LANE % 4
    draw_accumulator(
        s_ax,
        8,
        f"S = Q Kᵀ of one warp: 16 rows x 64 keys, 8 n-tiles of 8 keys (s_acc[8][4]); "
        f"lane {FOLLOWED_LANE} holds 32 floats",
        "key in the tile",
    )
    caption(
        s_ax,
        32,
        17.2,
        f"lane {FOLLOWED_LANE}: g = {g}, t = {t}  ->  rows g = {g} and g + 8 = {g + 8}, keys "
        f"8 mma_n + 2t, 8 mma_n + 2t + 1 of every n-tile mma_n;\ns_acc[mma_n][0], [1] on row g, "
        f"s_acc[mma_n][2], [3] on row g + 8.  "
        f"Row {g} is spread over lanes {4 * g}-{4 * g + 3} (the four shades): its max takes two shuffles.",
    )
    draw_accumulator(
        o_ax,
        16,
        f"O of the same warp: 16 rows x 128 dims, 16 n-tiles (o_acc[16][4]); lane {FOLLOWED_LANE} holds 64 floats",
        "head dim",
    )
    caption(o_ax, 64, 17.2, "the same map: P = S in 16 bits is the A operand of O += P V without leaving the registers")
    fig.suptitle(
        f"Kernel 1's block: 4 warps x 16 query rows; what lane {FOLLOWED_LANE} of a warp holds "
        "(outlined in red; g = lane / 4, t = lane % 4)",
        fontsize=12,
    )
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# kv128_scores.png (chapter 8): a 128-key tile, and the scores one lane holds for it.
# ---------------------------------------------------------------------------------------------------


def figure_kv128_scores(path: Path) -> None:
    """Chapter 8: a 128-key tile doubles a lane's scores; the per-tile costs stay one per tile."""
    fig, ax = plt.subplots(figsize=(17, 4.9))
    draw_accumulator(
        ax,
        16,
        f"S = Q Kᵀ of one warp for a 128-key tile: 16 rows x 128 keys, 16 n-tiles "
        f"(s_acc[16][4]); lane {FOLLOWED_LANE} holds 64 floats, twice kernel 7's 32",
        "key in the tile",
        first_new=64,
    )
    for n in range(16):
        caption(ax, 8 * n + 4, 16.6, f"n={n}", fontsize=8)
    for block in range(8):  # the A fragment of P for 16 keys is the accumulators of n-tiles 2 block, 2 block + 1
        ax.annotate(
            "",
            xy=(16 * block + 0.3, 18.2),
            xytext=(16 * block + 15.7, 18.2),
            arrowprops={"arrowstyle": "|-|", "lw": 1.0, "color": "black", "shrinkA": 0, "shrinkB": 0},
        )
        caption(ax, 16 * block + 8, 18.6, f"p_frag[{block}]", fontsize=8)
    ax.text(32, -2.6, "keys 0-63: a 64-key tile (kernel 7)", ha="center", fontsize=9)
    ax.text(96, -2.6, "keys 64-127: what kernel 8 adds (darker)", ha="center", fontsize=9)
    caption(
        ax,
        64,
        20.2,
        "paid once per tile, however many keys it holds: the wait and the barrier, the row-max shuffles, "
        "the rescale of o_acc[16][4];\nper key: the HMMAs, the ldmatrix of K and V, one FFMA + MUFU.EX2 per score. "
        "A 128-key tile pays the first line half as often.",
    )
    ax.set_ylim(22.5, -3.4)
    fig.tight_layout()
    save(fig, path)
