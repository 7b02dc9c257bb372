"""Who copies which 16-byte chunk of a tile: load_tile's 128 threads in kernels 1-4 (copy_map.png, chapter 2), and
kernel 10's 256 threads against kernel 11's two TMA copies (tma_copy.png, chapter 11). Computed from the kernels'
copy loops; no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import HUES, PLANE_HUES, box, caption, coarse_axes, outline, patch_legend, save, shade

# ---------------------------------------------------------------------------------------------------
# copy_map.png (chapter 2): which thread copies which 16-byte chunk of a tile (load_tile, 128 threads).
# ---------------------------------------------------------------------------------------------------


COPY_THREADS = 128  # kernels 1-4: 4 warps
CHUNKS_PER_ROW = 16  # a 256-byte row of 128 16-bit values
SHOWN_COPY_ROWS = 16  # two steps of the copy loop; the other six repeat them


def figure_copy_map(path: Path) -> None:
    """Chapter 2: the thread -> 16-byte chunk map of load_tile, which cp.async keeps from kernel 1."""
    fig, ax = plt.subplots(figsize=(11, 9.6))
    coarse_axes(
        ax,
        SHOWN_COPY_ROWS,
        CHUNKS_PER_ROW,
        "",
        col_step=1,
        row_step=1,
        col_label="16-byte chunk c of the row (dims 8c ... 8c + 7)",
        row_label="tile row",
    )
    ax.set_xticks([c + 0.5 for c in range(CHUNKS_PER_ROW)], [str(c) for c in range(CHUNKS_PER_ROW)], fontsize=8)
    ax.set_yticks([r + 0.5 for r in range(SHOWN_COPY_ROWS)], [str(r) for r in range(SHOWN_COPY_ROWS)], fontsize=8)
    ax.tick_params(length=0)
    for row in range(SHOWN_COPY_ROWS):
        for col in range(CHUNKS_PER_ROW):
            index = row * CHUNKS_PER_ROW + col  # = step * COPY_THREADS + threadIdx.x
            thread = index % COPY_THREADS
            warp, quarter = thread // 32, thread % 32 // 8
            box(ax, row, col, 1, shade(HUES[warp], 0.08 * quarter), f"T{thread}", fontsize=8)
    for row in range(SHOWN_COPY_ROWS):  # a quarter-warp's 8 chunks: one 128-byte line of global memory
        for half in range(2):
            outline(ax, row, 8 * half, 8, color="black", linewidth=1.0)
    for step in range(SHOWN_COPY_ROWS * CHUNKS_PER_ROW // COPY_THREADS):
        top = step * COPY_THREADS // CHUNKS_PER_ROW
        ax.text(16.3, top + 4, f"step {step}:\nrows {top}-{top + 7}", va="center", fontsize=10)
        ax.plot([0, 16], [top, top], color="black", linewidth=2.4, zorder=6)
    caption(
        ax,
        8,
        SHOWN_COPY_ROWS + 0.4,
        "thread T (0-127) at loop step s copies chunk index i = 128 s + T: row i / 16, chunk i % 16\n"
        "8 threads = one 128-byte line (boxed), a warp = 2 rows = 4 whole lines per instruction;\n"
        "steps 2-7 repeat the pattern for rows 16-63 (a 64-row tile is 8 chunks per thread).\n"
        "A row at or past seq_len gets zeros: kernel 1 stores them from registers, and from kernel 2 on\n"
        "cp.async copies 0 source bytes, which fills the 16 bytes with zeros.",
        fontsize=10,
    )
    patch_legend(ax, [(HUES[w], f"warp {w}") for w in range(4)], top=-0.2, ncol=4, fontsize=10)
    ax.set_title(
        "load_tile in kernels 1-4: which thread copies which 16-byte chunk of a (64, 128) tile (first 16 rows)",
        fontsize=12,
        pad=30,
    )
    fig.tight_layout()
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# tma_copy.png (chapter 11): who copies a K tile: 256 threads with cp.async, or two TMA copies.
# ---------------------------------------------------------------------------------------------------


TILE_ROWS, WARPS_THAT_COPY = 128, 8  # a K tile; kernel 10's block
ROWS_IN_SEQUENCE = 100  # a last tile cut short: rows from here on are past seq_len


def cp_async_thread(row: int, chunk: int) -> int:
    """Kernel 10's load_tile: the thread that copies 16-byte chunk `chunk` of tile row `row` (chunk index
    i = step * N_THREADS + threadIdx.x, row = i / 16, chunk = i % 16)."""
    return (row * CHUNKS_PER_ROW + chunk) % (WARPS_THAT_COPY * 32)


def figure_tma_copy(path: Path) -> None:
    """Chapter 11: the chunks of a K tile by the warp whose cp.async copies them, then by the TMA copy."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 7.6))
    titles = (
        "kernel 10: 256 threads, 8 cp.async each\ncolour: the warp that copies the 16-byte chunk",
        "kernel 11: thread 0 asks for two TMA copies\ncolour: the copy, one (128, 64) box = one plane",
    )
    for ax, title in zip(axes, titles, strict=True):
        coarse_axes(
            ax,
            TILE_ROWS,
            8 * CHUNKS_PER_ROW,
            title,
            col_step=16,
            row_step=16,
            col_label="head dim (a box: 8 dims, one 16-byte chunk)",
            row_label="tile row (key)",
        )
    warp_colors = [shade(HUES[w % 4], 0.3 * (w // 4)) for w in range(WARPS_THAT_COPY)]
    for row in range(TILE_ROWS):
        for chunk in range(CHUNKS_PER_ROW):
            faded = -0.6 if row >= ROWS_IN_SEQUENCE else 0
            warp = cp_async_thread(row, chunk) // 32
            box(axes[0], row, 8 * chunk, 8, shade(warp_colors[warp], faded), edge="white", linewidth=0.2)
            box(axes[1], row, 8 * chunk, 8, shade(PLANE_HUES[chunk // 8], faded), edge="white", linewidth=0.2)
    notes = (
        "rows past seq_len: each thread's cp.async\ncopies 0 source bytes and zero-fills",
        "rows past seq_len: zeros from the copy engine\n(seq_len is a dimension of the map)",
    )
    for ax, note in zip(axes, notes, strict=True):
        ax.plot([0, 128], [ROWS_IN_SEQUENCE, ROWS_IN_SEQUENCE], color="black", linewidth=1.6, zorder=6)
        ax.text(64, (ROWS_IN_SEQUENCE + TILE_ROWS) / 2, note, ha="center", va="center", fontsize=9, zorder=7)
    for plane in range(2):
        outline(axes[1], 0, 64 * plane, 64, TILE_ROWS, color="black", linewidth=1.6)
        axes[1].text(
            64 * plane + 32,
            ROWS_IN_SEQUENCE / 2,
            f"copy {plane}\nbox (64, 1, 128, 1)\nat ({64 * plane}, kv_head, kv0, batch)",
            ha="center",
            va="center",
            fontsize=9,
            zorder=7,
        )
    patch_legend(
        axes[0], [(warp_colors[w], f"warp {w}") for w in range(WARPS_THAT_COPY)], top=-0.02, ncol=4, fontsize=8
    )
    fig.suptitle(
        f"A K tile whose sequence ends at row {ROWS_IN_SEQUENCE}, by logical position (both kernels "
        "swizzle it the same way)\nkernel 11's two copies, and V's two, count their 64 KB into the "
        "stage's mbarrier, which the warps wait on",
        fontsize=11,
    )
    fig.tight_layout()
    save(fig, path)
