"""Chapters 9 and 10 on wgmma: kernel 9's two 64-column planes in the 128-byte swizzle and what a descriptor reads
(wgmma_layout.png), and one wgmma of O += P·V with P from registers and V from both planes (wgmma_pv.png).
Computed from the kernels' layouts; no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import FOLLOWED_LANE, HIGHLIGHT, HUES, PLANE_HUES, box, caption, coarse_axes, outline, save, shade

# ---------------------------------------------------------------------------------------------------
# wgmma_layout.png (chapter 9): two 64-column planes in wgmma's 128-byte swizzle, what a descriptor reads.
# ---------------------------------------------------------------------------------------------------


SHOWN_ROWS = 16  # of a tile's 128: two 8-row atoms


def figure_wgmma_layout(path: Path) -> None:
    """Chapter 9: kernel 8's 256-byte rows against two 64-column planes in wgmma's 128-byte swizzle."""
    fig, (before, after) = plt.subplots(1, 2, figsize=(12, 7.2), gridspec_kw={"width_ratios": [16, 9]})
    # Kernel 8: 256-byte rows, chunk c of row r at position c ^ (r % 8) (the low 3 bits of c).
    before.set_xlim(0, 16)
    before.set_ylim(SHOWN_ROWS, 0)
    for row in range(SHOWN_ROWS):
        for chunk in range(16):
            box(before, row, chunk ^ (row % 8), 1, PLANE_HUES[chunk // 8], str(chunk), fontsize=8)
    before.set_title("kernel 8: one 256-byte row per key\nchunk c of row r at position c ^ (r % 8)", fontsize=10)
    # Kernel 9: plane p holds chunks 8p ... 8p + 7 of every row, 128 bytes per row.
    gap = 1.5
    after.set_xlim(0, 8)
    after.set_ylim(2 * SHOWN_ROWS + gap, 0)
    for plane in range(2):
        top = plane * (SHOWN_ROWS + gap)
        for row in range(SHOWN_ROWS):
            for chunk in range(8):
                logical = 8 * plane + chunk
                box(after, top + row, chunk ^ (row % 8), 1, PLANE_HUES[plane], str(logical), fontsize=8)
                if logical in (2, 3):  # the 16 dims (32 bytes) one Q K^T step reads: kk = 1
                    outline(after, top + row, chunk ^ (row % 8), 1, color=HIGHLIGHT, linewidth=1.6)
        for atom in range(SHOWN_ROWS // 8):
            outline(after, top + 8 * atom, 0, 8, 8, color="black", linewidth=1.4)
        after.text(
            8.2,
            top + 4,
            f"plane {plane}: dims {64 * plane}-{64 * plane + 63}\n1 KB atom (8 rows)",
            va="center",
            fontsize=8,
        )
        after.text(8.2, top + 12, "+ 1 KB: the next atom\n(stride byte offset)", va="center", fontsize=8)
    after.text(
        8.2, SHOWN_ROWS + gap / 2, "+ 16 KB: the next plane\n(leading byte offset; V only)", va="center", fontsize=8
    )
    after.set_title(
        "kernel 9: two planes of 128-byte rows (wgmma's 128-byte swizzle)\n"
        "red: what the descriptor of S's step kk = 1 reads (dims 16-31)",
        fontsize=10,
    )
    for ax in (before, after):
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_visible(False)
    before.set_yticks([r + 0.5 for r in range(SHOWN_ROWS)], [str(r) for r in range(SHOWN_ROWS)], fontsize=7)
    before.set_ylabel("row (key) r; rows 16-127 repeat the pattern", fontsize=9)
    fig.suptitle("The same 16 rows of a K tile, by stored position (label = logical 16-byte chunk)", fontsize=12)
    fig.tight_layout()
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# wgmma_pv.png (chapter 10): one P·V step of a warpgroup, P from its threads' registers, V from both planes.
# ---------------------------------------------------------------------------------------------------


GROUP_ROWS, STEP_KEYS = 64, 16  # a warpgroup's rows, the keys of one wgmma step (its K)


def a_fragment_cells(lane: int) -> list[tuple[int, int]]:
    """The (row, col) elements one lane holds of a warp's (16, 16) A block, in register order: rows g and g + 8,
    columns 2t, 2t + 1 and 2t + 8, 2t + 9 (mma.sync's A fragment, which wgmma takes from registers)."""
    g, t = lane // 4, lane % 4
    return [
        (row, col + i)
        for row, col in ((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))
        for i in range(2)
    ]


def figure_wgmma_pv(path: Path) -> None:
    """Chapter 10: what one wgmma of O += P V reads: P from 128 threads' registers, V from shared memory."""
    fig, (p_ax, v_ax) = plt.subplots(1, 2, figsize=(13, 6.4), gridspec_kw={"width_ratios": [16, 128]})
    coarse_axes(p_ax, GROUP_ROWS, STEP_KEYS, "A = P (64, 16), registers", col_step=8, row_step=16, col_label="key (k)")
    for row in range(GROUP_ROWS):
        for col in range(STEP_KEYS):
            box(p_ax, row, col, 1, shade(HUES[row // 16], 0.08 * (col % 8 // 2)), edge="white", linewidth=0.2)
    for row, col in a_fragment_cells(FOLLOWED_LANE):
        outline(p_ax, row, col, 1, linewidth=1.4)
    for warp in range(4):
        p_ax.text(
            -5, 16 * warp + 8, f"warp {warp}\nrows\n{16 * warp}-{16 * warp + 15}", va="center", ha="center", fontsize=8
        )
    # V: 16 keys of all 128 dims, stored as two planes; a chunk is 8 dims (16 bytes).
    coarse_axes(
        v_ax,
        STEP_KEYS,
        128,
        "B = V rows 16 mma_kv ... + 15, all 128 dims (16, 128), shared memory\n"
        "one descriptor: plane 0 at the start address, plane 1 one leading byte offset (16 KB) further",
        col_step=16,
        row_step=8,
        col_label="head dim (n); read transposed: tnspB",
        row_label="key (k)",
    )
    for row in range(STEP_KEYS):
        for chunk in range(128 // 8):
            plane = chunk // 8
            box(v_ax, row, 8 * chunk, 8, shade(PLANE_HUES[plane], 0.06 * (row // 8)), str(chunk % 8), fontsize=6)
    for plane in range(2):
        for atom in range(2):
            outline(v_ax, 8 * atom, 64 * plane, 64, 8, color="black", linewidth=1.2)
        caption(
            v_ax,
            64 * plane + 32,
            STEP_KEYS + 1.6,
            f"plane {plane}: dims {64 * plane}-{64 * plane + 63}, "
            f"{'start address' if plane == 0 else '+ 16 KB'}; rows 8-15 + 1 KB (stride byte offset)",
            fontsize=8,
        )
    caption(
        v_ax,
        64,
        STEP_KEYS + 4.5,
        "every warp's P meets the same 16 keys of V; O (64, 128) stays in the 128 threads' "
        "registers, in the layout of S",
    )
    fig.suptitle(
        "One wgmma of O += P·V (m64n128k16): the warpgroup's 128 threads hand in P, the tensor cores "
        "read V\nP: lane 5 of warp 0's eight values (its four A registers) outlined; "
        "V: labels are the 16-byte chunks of a plane's row",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    save(fig, path)
