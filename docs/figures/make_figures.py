"""Draw every figure in docs/: the thread maps (a block's rows, the tile copy, kernel 7's addresses, a 128-key
tile's scores), the layouts (fragments, ldmatrix, the V transpose, the swizzle, kernel 9's planes), the
schedules (the pipeline, chapter 12's roles, chapter 14's skewed loop, chapter 15's pairs of query tiles,
chapter 16's chains), and the ladder plot from results/headline.json.

    python docs/figures/make_figures.py          # rewrites docs/figures/*.png

The layout figures are computed from the same formulas the kernels use (row = lane / 4, ...), so a
figure cannot drift from the code by a redrawn typo.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

FIGURES = Path(__file__).resolve().parent
ROOT = FIGURES.parent.parent
DPI = 140
# One hue per register / matrix / lane group; light enough that black text on top stays legible.
HUES = ["#8fb8de", "#f4b183", "#a9d18e", "#d9a3d6"]
C_HUES = ["#ffe699", "#9dd9d2"]  # accumulators: fp32, so not to be confused with A's registers
HIGHLIGHT = "#c00000"  # the one lane a figure follows
FOLLOWED_LANE = 5  # g = 1, t = 1: neither coordinate is 0, so a reader can check both formulas


# ---------------------------------------------------------------------------------------------------
# Drawing helpers: a grid axis with row 0 on top, and one rectangle per owned run of elements.
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


def box(ax: plt.Axes, row: float, col: float, width: float, color, text: str = "", *, height: float = 1,
        fontsize: float = 7, edge: str = "white", linewidth: float = 1.0, zorder: int = 1) -> None:
    """One rectangle of elements, top-left at (row, col), with a centred label."""
    ax.add_patch(Rectangle((col, row), width, height, facecolor=color, edgecolor=edge, linewidth=linewidth,
                           zorder=zorder))
    if text:
        ax.text(col + width / 2, row + height / 2, text, ha="center", va="center", fontsize=fontsize, zorder=zorder + 1)


def outline(ax: plt.Axes, row: float, col: float, width: float, height: float = 1, *, color: str = HIGHLIGHT,
            linewidth: float = 2.2) -> None:
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


# ---------------------------------------------------------------------------------------------------
# (a) Who holds what in an mma.m16n8k16.
# ---------------------------------------------------------------------------------------------------


def figure_mma_fragments(path: Path) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(19, 8.4), layout="constrained",
                             gridspec_kw={"width_ratios": [8, 16, 16, 8]})
    fragment, a_ax, b_ax, c_ax = axes

    # The basic (8, 8) fragment in greys: the four lanes of a row (t = 0..3) get four shades.
    grid_axes(fragment, 8, 8, "one (8, 8) fragment of 16-bit values\nrow = lane / 4, col = (lane % 4) * 2",
              col_label="col", row_label="row")
    for lane in range(32):
        row, col = lane // 4, (lane % 4) * 2
        box(fragment, row, col, 2, shade("#ffffff", 0.12 + 0.08 * (lane % 4)), f"T{lane}", fontsize=8)
    outline(fragment, FOLLOWED_LANE // 4, (FOLLOWED_LANE % 4) * 2, 2)
    fragment.set_xlabel("col\n", fontsize=9)
    fragment.legend(handles=[Patch(color="none", label="a lane holds 2 adjacent values = one 32-bit register;"),
                             Patch(color="none", label="4 lanes share a row, 8 rows = 32 lanes")],
                    loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=8, frameon=False, handlelength=0)

    # A (16, 16): register i is fragment (i % 2, i / 2): a0 top-left, a1 bottom-left, a2 top-right, a3 bottom-right.
    grid_axes(a_ax, 16, 16, "A operand (m, k) = (16, 16): 4 registers per lane", col_label="k", row_label="m")
    for reg in range(4):
        draw_fragment_pairs(a_ax, 8 * (reg % 2), 8 * (reg // 2), HUES[reg])
    a_ax.legend(handles=[Patch(color=HUES[r], label=label) for r, label in enumerate(
        ["a0: row g, cols 2t, 2t+1", "a1: row g+8, cols 2t, 2t+1",
         "a2: row g, cols 2t+8, 2t+9", "a3: row g+8, cols 2t+8, 2t+9"])],
        loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2, fontsize=9, frameon=False)

    # B (k, n) = (16, 8), stored as its transpose (n, k) = (8, 16): the same fragment map as A's top row.
    grid_axes(b_ax, 8, 16, "B operand, given as (n, k) = (8, 16): 2 registers per lane\n"
              "the instruction computes D = A · Bᵀ + C", col_label="k", row_label="n")
    for reg in range(2):
        draw_fragment_pairs(b_ax, 0, 8 * reg, HUES[reg])
    b_ax.legend(handles=[Patch(color=HUES[0], label="b0: row n = g, cols k = 2t, 2t+1"),
                         Patch(color=HUES[1], label="b1: row n = g, cols k = 2t+8, 2t+9"),
                         Patch(color="none", label=""),
                         Patch(color="none", label="K is stored (key, dim) = (n, k) already,"),
                         Patch(color="none", label="so its rows feed B as they are")],
                loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=9, frameon=False)

    # C/D (16, 8) fp32: each lane's pair is two floats, so two registers per (8, 8) fragment.
    grid_axes(c_ax, 16, 8, "C / D (m, n) = (16, 8), fp32:\n4 registers per lane", col_label="n", row_label="m")
    for half in range(2):
        draw_fragment_pairs(c_ax, 8 * half, 0, C_HUES[half])
    c_ax.legend(handles=[Patch(color=C_HUES[0], label="c0, c1: row g"),
                         Patch(color=C_HUES[1], label="c2, c3: row g+8")],
                loc="upper center", bbox_to_anchor=(0.5, -0.01), fontsize=9, frameon=False)

    fig.suptitle(f"mma.sync.m16n8k16: which lane holds which elements (g = lane / 4, t = lane % 4; "
                 f"lane {FOLLOWED_LANE} outlined in red)", fontsize=13)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (b) ldmatrix x4: each lane names one 16-byte row; every lane receives its mma pairs.
# ---------------------------------------------------------------------------------------------------


def figure_ldmatrix(path: Path) -> None:
    fig, axes = plt.subplot_mosaic([["addresses", "received"], ["addresses", "notes"]], figsize=(15, 8.2),
                                   layout="constrained", width_ratios=[16, 9], height_ratios=[3, 2])
    addresses, received, notes = axes["addresses"], axes["received"], axes["notes"]

    grid_axes(addresses, 16, 16, "ldmatrix.x4 on a (16, 16) block: lane l points at\n"
              "row l % 16, col (l / 16) * 8 (one 16-byte row of 8 values)", col_label="col", row_label="row")
    for lane in range(32):
        row, col = lane % 16, (lane // 16) * 8
        box(addresses, row, col, 8, HUES[lane // 8], f"lane {lane}", fontsize=9)
    for matrix in range(4):
        outline(addresses, 8 * (matrix % 2), 8 * (matrix // 2), 8, 8, color="black", linewidth=1.6)
    addresses.legend(handles=[Patch(color=HUES[m], label=f"lanes {8 * m}-{8 * m + 7}: matrix {m} -> register r{m}")
                              for m in range(4)],
                     loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2, fontsize=10, frameon=False)

    grid_axes(received, 8, 8, "what arrives: register r0 of every lane\nholds that lane's mma pair of matrix 0",
              col_label="col", row_label="row")
    draw_fragment_pairs(received, 0, 0, HUES[0])

    notes.axis("off")
    notes.text(0.5, 1.0, "r1, r2, r3 likewise from matrices 1, 2, 3.\n\n"
               "A operand: (a0, a1, a2, a3) = (r0, r1, r2, r3).\n"
               "K as B (rows = keys), two n-tiles of 8 keys:\n"
               "n-tile 0 = (r0, r2), n-tile 1 = (r1, r3).\n\n"
               "One instruction replaces 4 32-bit loads per lane (8 16-bit\n"
               "loads for V), yet the same 4 x 8 rows of 16 bytes\n"
               "still pass through the shared-memory banks.",
               ha="center", va="top", fontsize=10, transform=notes.transAxes)

    fig.suptitle("ldmatrix: the addresses follow shared-memory rows, the results follow the mma fragments", fontsize=13)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (c) V as a B operand: .trans turns each (8, 8), swapping r1 and r2 turns the (2, 2) arrangement.
# ---------------------------------------------------------------------------------------------------


def draw_v_block(ax: plt.Axes, placement: dict[tuple[int, int], int], transposed: bool, title: str,
                 row_label: str, col_label: str, names: dict[int, str]) -> None:
    """A (16, 16) block made of the four matrices: placement maps (quadrant row, col) -> register.

    Each cell's shade follows its key (row of V), so V's stripes are horizontal and Vᵀ's vertical.
    """
    grid_axes(ax, 16, 16, title, col_label=col_label, row_label=row_label)
    for (qr, qc), reg in placement.items():
        for i in range(8):
            for j in range(8):
                key = j if transposed else i
                box(ax, 8 * qr + i, 8 * qc + j, 1, shade(HUES[reg], 0.45 * key / 7), edge=(1, 1, 1, 0.5),
                    linewidth=0.4)
        ax.text(8 * qc + 4, 8 * qr + 4, names[reg], ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "linewidth": 0})
        outline(ax, 8 * qr, 8 * qc, 8, 8, color="black", linewidth=1.4)


def figure_v_transpose(path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(18, 7.4))
    # As ldmatrix loads them (same addresses as K): r0 top-left, r1 bottom-left, r2 top-right, r3 bottom-right.
    loaded = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 3}
    v_names = {0: "r0\nkeys 0-7\ndims 0-7", 1: "r1\nkeys 8-15\ndims 0-7",
               2: "r2\nkeys 0-7\ndims 8-15", 3: "r3\nkeys 8-15\ndims 8-15"}
    draw_v_block(axes[0], loaded, False, "1. V in shared memory is (key, dim) = (k, n):\n"
                 "the wrong way round for B, which wants (n, k)", "key (k)", "dim (n)", v_names)
    draw_v_block(axes[1], loaded, True, "2. ldmatrix .trans: each (8, 8) arrives transposed\n"
                 "(stripes turn), but r1 and r2 still sit crosswise", "", "", v_names)
    # Vᵀ: its top-right quadrant is V's bottom-left (r1), its bottom-left is V's top-right (r2).
    swapped = {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3}
    vt_names = {0: "r0 = b0\nof n-tile 0", 1: "r1 = b1\nof n-tile 0",
                2: "r2 = b0\nof n-tile 1", 3: "r3 = b1\nof n-tile 1"}
    draw_v_block(axes[2], swapped, True, "3. use r1 and r2 the other way round (compared with K):\n"
                 "the whole block is Vᵀ, (dim, key) = (n, k)", "dim (n)", "key (k)", vt_names)
    axes[2].text(8, 17.2, "n-tile 0 = dims 0-7 = (r0, r1);  n-tile 1 = dims 8-15 = (r2, r3)\n"
                 "code: ldmatrix_x4_trans(frag[0][0], frag[0][1], frag[1][0], frag[1][1], ...)",
                 ha="center", va="top", fontsize=9)
    axes[0].text(8, 17.2, "shade = key: a row of V is one key", ha="center", va="top", fontsize=9)
    for left in axes[:2]:
        left.annotate("", xy=(1.09, 0.5), xytext=(1.02, 0.5), xycoords="axes fraction",
                      arrowprops={"arrowstyle": "-|>", "lw": 2, "color": "black"})
    fig.suptitle("V as the B operand of P · V: a transpose inside each matrix, and one between them", fontsize=12)
    fig.tight_layout(w_pad=7)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (d) The swizzle: 16-byte chunk c of row r stored at chunk c ^ (r % 8).
# ---------------------------------------------------------------------------------------------------

BANK_COLORS = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"]


def draw_chunk_grid(ax: plt.Axes, swizzled: bool, read_chunk: int) -> None:
    """8 rows x 16 chunks of one 256-byte-row tile, by stored position; the label is the logical chunk."""
    ax.set_xlim(0, 16)
    ax.set_ylim(8, 0)
    ax.set_aspect("equal")
    ax.set_xticks([p + 0.5 for p in range(16)], [f"{4 * (p % 8)}-{4 * (p % 8) + 3}" for p in range(16)],
                  fontsize=7, rotation=90)
    ax.set_yticks([r + 0.5 for r in range(8)], [str(r) for r in range(8)], fontsize=8)
    ax.tick_params(length=0, labeltop=True, labelbottom=False)
    ax.set_xlabel("stored position: banks of each 16-byte chunk (a 256-byte row wraps the 32 banks twice)", fontsize=9)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("row r", fontsize=9)
    for side in ax.spines.values():
        side.set_visible(False)
    for row in range(8):
        for chunk in range(16):
            stored = chunk ^ row if swizzled else chunk
            box(ax, row, stored, 1, BANK_COLORS[stored % 8], str(chunk), fontsize=9, edge="white")
            if chunk == read_chunk:
                outline(ax, row, stored, 1, color="black", linewidth=2.6)


def figure_swizzle(path: Path) -> None:
    fig, (plain, swizzled) = plt.subplots(2, 1, figsize=(11, 9.6))
    draw_chunk_grid(plain, False, 0)
    plain.set_title("plain (kernels 1-3): chunk c of every row at position c", fontsize=11, pad=10)
    plain.text(8, 8.5, "one ldmatrix phase reads chunk 0 of rows 0-7 (outlined): all in banks 0-3\n"
               "-> 8-way conflict, 8 wavefronts for 128 bytes", ha="center", va="top", fontsize=10)
    draw_chunk_grid(swizzled, True, 0)
    swizzled.set_title("swizzled (kernel 4): chunk c of row r at position c XOR (r % 8)", fontsize=11, pad=10)
    swizzled.text(8, 8.5, "the same 8 reads land in 8 different bank groups\n"
                  "-> no conflict, 1 wavefront; chunks stay whole, so 16-byte copies and ldmatrix rows still work",
                  ha="center", va="top", fontsize=10)
    fig.suptitle("The XOR swizzle (label = logical chunk, colour = the 4 banks it occupies)", fontsize=12)
    fig.tight_layout(h_pad=3)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (g) Chapter 1: which warp owns which query rows, and which elements of S and O one lane holds.
# ---------------------------------------------------------------------------------------------------


def coarse_axes(ax: plt.Axes, rows: int, cols: int, title: str, *, col_step: int, row_step: int,
                col_label: str = "", row_label: str = "") -> None:
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
    coarse_axes(ax, 16, cols, title, col_step=8 if cols <= 64 else 16, row_step=4, col_label=col_label,
                row_label="query row of the warp")
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


def figure_block_rows(path: Path) -> None:
    """Chapter 1: a block's warps split the query rows, and a lane holds fixed rows and columns of S and O."""
    fig, axes = plt.subplot_mosaic([["q", "s"], ["q", "o"]], figsize=(16, 8.6), layout="constrained",
                                   width_ratios=[1, 4.2])
    q_ax, s_ax, o_ax = axes["q"], axes["s"], axes["o"]

    # The block's Q tile, by 16-byte chunks: four bands of 16 rows, one per warp.
    coarse_axes(q_ax, 64, 16, "the block's Q tile (64, 128):\nwarp w owns rows 16w ... 16w + 15",
                col_step=4, row_step=8, col_label="16-byte chunk (8 dims)", row_label="query row of the block")
    for warp in range(4):
        box(q_ax, 16 * warp, 0, 16, HUES[warp], f"warp {warp}\nrows {16 * warp}-{16 * warp + 15}\n8 A fragments\n"
            "in registers", height=16, fontsize=9)
    q_ax.text(8, 66, "K and V tiles (64 keys, 128 dims)\nare read by all four warps;\n"
              "rows never cross warps", ha="center", va="top", fontsize=9)

    g, t = FOLLOWED_LANE // 4, FOLLOWED_LANE % 4
    draw_accumulator(s_ax, 8, f"S = Q Kᵀ of one warp: 16 rows x 64 keys, 8 n-tiles of 8 keys (s_acc[8][4]); "
                     f"lane {FOLLOWED_LANE} holds 32 floats", "key in the tile")
    s_ax.text(32, 17.2, f"lane {FOLLOWED_LANE}: g = {g}, t = {t}  ->  rows g = {g} and g + 8 = {g + 8}, keys "
              f"8 mma_n + 2t, 8 mma_n + 2t + 1 of every n-tile mma_n;\ns_acc[mma_n][0], [1] on row g, "
              f"s_acc[mma_n][2], [3] on row g + 8.  "
              f"Row {g} is spread over lanes {4 * g}-{4 * g + 3} (the four shades): its max takes two shuffles.",
              ha="center", va="top", fontsize=9)
    draw_accumulator(o_ax, 16, f"O of the same warp: 16 rows x 128 dims, 16 n-tiles (o_acc[16][4]); "
                     f"lane {FOLLOWED_LANE} holds 64 floats", "head dim")
    o_ax.text(64, 17.2, "the same map: P = S in 16 bits is the A operand of O += P V without leaving the registers",
              ha="center", va="top", fontsize=9)
    fig.suptitle(f"Kernel 1's block: 4 warps x 16 query rows; what lane {FOLLOWED_LANE} of a warp holds "
                 "(outlined in red; g = lane / 4, t = lane % 4)", fontsize=12)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (h) Chapter 2: which thread copies which 16-byte chunk of a tile (load_tile, 128 threads).
# ---------------------------------------------------------------------------------------------------

COPY_THREADS = 128  # kernels 1-4: 4 warps
CHUNKS_PER_ROW = 16  # a 256-byte row of 128 16-bit values
SHOWN_COPY_ROWS = 16  # two steps of the copy loop; the other six repeat them


def figure_copy_map(path: Path) -> None:
    """Chapter 2: the thread -> 16-byte chunk map of load_tile, which cp.async keeps from kernel 1."""
    fig, ax = plt.subplots(figsize=(11, 9.6))
    coarse_axes(ax, SHOWN_COPY_ROWS, CHUNKS_PER_ROW, "", col_step=1, row_step=1,
                col_label="16-byte chunk c of the row (dims 8c ... 8c + 7)", row_label="tile row")
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
    ax.text(8, SHOWN_COPY_ROWS + 0.4,
            "thread T (0-127) at loop step s copies chunk index i = 128 s + T: row i / 16, chunk i % 16\n"
            "8 threads = one 128-byte line (boxed), a warp = 2 rows = 4 whole lines per instruction;\n"
            "steps 2-7 repeat the pattern for rows 16-63 (a 64-row tile is 8 chunks per thread).\n"
            "A row at or past seq_len gets zeros: kernel 1 stores them from registers, and from kernel 2 on\n"
            "cp.async copies 0 source bytes, which fills the 16 bytes with zeros.",
            ha="center", va="top", fontsize=10)
    ax.legend(handles=[Patch(color=HUES[w], label=f"warp {w}") for w in range(4)], loc="upper center",
              bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=10, frameon=False)
    ax.set_title("load_tile in kernels 1-4: which thread copies which 16-byte chunk of a (64, 128) tile "
                 "(first 16 rows)", fontsize=12, pad=30)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (i) Chapter 7: a lane's address in block (0, 0), and how a block's col0 and row0 move it.
# ---------------------------------------------------------------------------------------------------

ADDRESS_LANE = 21  # row 5, lane / 16 = 1: its chunk in block (0, 0) is 1 ^ 5 = 4, so the XOR is visible
ADDRESS_BITS = 16  # a 64-row K tile is 16 KB: bits 0-13 inside it, 14-15 the stage


def lane_block_address(lane: int, row0: int, col0: int) -> int:
    """Byte offset in a tile of this lane's ldmatrix row in block (row0, col0): kernel 4's smem_index."""
    row, col = row0 + lane % 16, col0 + lane // 16 * 8
    return 256 * row + 16 * ((col // 8) ^ (row % 8))


def draw_bit_rows(ax: plt.Axes, rows: list[tuple[str, int, int]]) -> None:
    """One row of address bits per (label, value, bits that changed), bit 15 on the left."""
    for i, (label, value, changed) in enumerate(rows):
        y = 2.2 + 1.3 * i
        for bit in range(ADDRESS_BITS):
            x = ADDRESS_BITS - 1 - bit
            on = value >> bit & 1
            color = HIGHLIGHT if changed >> bit & 1 else ("#404040" if on else "#f2f2f2")
            box(ax, y, x, 1, color, str(on), fontsize=9, edge="white")
            if on or changed >> bit & 1:
                ax.texts[-1].set_color("white")
        ax.text(ADDRESS_BITS + 0.3, y + 0.5, label, va="center", fontsize=9)


def figure_block_address(path: Path) -> None:
    """Chapter 7: why a block's ldmatrix address is one XOR (column) and one immediate (row) from block (0, 0)."""
    fig, (tile_ax, bits_ax) = plt.subplots(1, 2, figsize=(19, 10), gridspec_kw={"width_ratios": [10, 21]})

    # The K tile's first 32 rows by stored position; colour = the 16-column block (two chunks) a chunk belongs to.
    grid_axes(tile_ax, 32, 16, f"a K tile, rows 0-31, by stored 16-byte position (label = logical chunk)\n"
              f"red: lane {ADDRESS_LANE}'s ldmatrix row in each (16, 16) block (thick: block (0, 0))",
              col_label="stored chunk", row_label="row")
    for row in range(32):
        for stored in range(16):
            chunk = stored ^ (row % 8)
            box(tile_ax, row, stored, 1, BANK_COLORS[chunk // 2], str(chunk), fontsize=7)
    for row0 in (0, 16):
        for col0 in range(0, 128, 16):
            address = lane_block_address(ADDRESS_LANE, row0, col0)
            outline(tile_ax, address // 256, address % 256 // 16, 1,
                    linewidth=4.2 if (row0, col0) == (0, 0) else 2.4)
    tile_ax.legend(handles=[Patch(color=BANK_COLORS[b], label=f"dims {16 * b}-{16 * b + 15}: col0 = {16 * b}")
                            for b in range(8)], loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=4,
                   fontsize=8, frameon=False)

    # The same addresses as bits: col0 flips bits 5-7, row0 adds to bits 12-13, the stage sits above.
    bits_ax.set_xlim(-0.2, ADDRESS_BITS + 12.5)
    bits_ax.set_ylim(16.5, -1.2)
    bits_ax.set_aspect("equal")
    bits_ax.axis("off")
    fields = [(0, 4, "byte: 0"), (4, 4, "chunk\n(l / 16) ^ (l % 8)"), (8, 6, "row\nl % 16 + row0"),
              (14, 2, "stage")]
    for low, width, label in fields:
        box(bits_ax, -0.3, ADDRESS_BITS - low - width, width, "#dddddd", label, fontsize=9, height=1.4, edge="black")
    for bit in range(ADDRESS_BITS):
        bits_ax.text(ADDRESS_BITS - 0.5 - bit, 1.6, str(bit), ha="center", va="center", fontsize=7)
    a00 = lane_block_address(ADDRESS_LANE, 0, 0)
    rows = [(f"block (0, 0): {a00:#06x}, computed once per tile", a00, 0)]
    for col0 in (16, 32, 48):
        address = lane_block_address(ADDRESS_LANE, 0, col0)
        assert address == a00 ^ 2 * col0  # the identity the kernel relies on
        rows.append((f"block (0, {col0}): {a00:#06x} XOR {2 * col0:#04x} = {address:#06x}", address, a00 ^ address))
    for row0, col0 in ((16, 0), (16, 16), (48, 32)):
        address = lane_block_address(ADDRESS_LANE, row0, col0)
        assert address == (a00 ^ 2 * col0) + 256 * row0
        moved = f"{a00:#06x}" if col0 == 0 else f"({a00:#06x} XOR {2 * col0:#04x})"
        rows.append((f"block ({row0}, {col0}): {moved} + {256 * row0:#06x} = {address:#06x}", address,
                     a00 ^ address))
    draw_bit_rows(bits_ax, rows)
    bits_ax.text(ADDRESS_BITS / 2, 12.8,
                 "addr(row0, col0) = (addr(0, 0) XOR 2 col0) + 256 row0,  for row0 a multiple of 8, col0 of 16\n"
                 "2 col0 only has bits 5-7, which lie inside the chunk field: one LOP3 per column block.\n"
                 "256 row0 only has bits 8 and up: an immediate offset in the ldmatrix instruction.\n"
                 "Bits 0-7 of the tile's start must be 0 (a 256-byte aligned tile), or the XOR would reach\n"
                 "into the start address instead of the chunk: hence the kernel aligns its shared memory.",
                 ha="center", va="top", fontsize=9)
    bits_ax.set_title(f"lane {ADDRESS_LANE}'s byte offset in the tile, bit by bit (red: the bits a block changes)",
                      fontsize=10)
    fig.suptitle("Kernel 7's addressing: one address per lane and tile, a XOR per column block, "
                 "an immediate per row block", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (j) Chapter 8: a 128-key tile, and the scores one lane holds for it.
# ---------------------------------------------------------------------------------------------------


def figure_kv128_scores(path: Path) -> None:
    """Chapter 8: a 128-key tile doubles a lane's scores; the per-tile costs stay one per tile."""
    fig, ax = plt.subplots(figsize=(17, 4.9))
    draw_accumulator(ax, 16, f"S = Q Kᵀ of one warp for a 128-key tile: 16 rows x 128 keys, 16 n-tiles "
                     f"(s_acc[16][4]); lane {FOLLOWED_LANE} holds 64 floats, twice kernel 7's 32",
                     "key in the tile", first_new=64)
    for n in range(16):
        ax.text(8 * n + 4, 16.6, f"n={n}", ha="center", va="top", fontsize=8)
    for block in range(8):  # the A fragment of P for 16 keys is the accumulators of n-tiles 2 block, 2 block + 1
        ax.annotate("", xy=(16 * block + 0.3, 18.2), xytext=(16 * block + 15.7, 18.2),
                    arrowprops={"arrowstyle": "|-|", "lw": 1.0, "color": "black", "shrinkA": 0, "shrinkB": 0})
        ax.text(16 * block + 8, 18.6, f"p_frag[{block}]", ha="center", va="top", fontsize=8)
    ax.text(32, -2.6, "keys 0-63: a 64-key tile (kernel 7)", ha="center", fontsize=9)
    ax.text(96, -2.6, "keys 64-127: what kernel 8 adds (darker)", ha="center", fontsize=9)
    ax.text(64, 20.2, "paid once per tile, however many keys it holds: the wait and the barrier, the row-max shuffles, "
            "the rescale of o_acc[16][4];\nper key: the HMMAs, the ldmatrix of K and V, one FFMA + MUFU.EX2 per score. "
            "A 128-key tile pays the first line half as often.", ha="center", va="top", fontsize=9)
    ax.set_ylim(22.5, -3.4)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (f) Kernel 9's tile layout: two 64-column planes in wgmma's 128-byte swizzle, and what a descriptor reads.
# ---------------------------------------------------------------------------------------------------

PLANE_HUES = ["#8fb8de", "#f4b183"]  # dims 0-63, dims 64-127
SHOWN_ROWS = 16  # of a tile's 128: two 8-row atoms


def figure_wgmma_layout(path: Path) -> None:
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
        after.text(8.2, top + 4, f"plane {plane}: dims {64 * plane}-{64 * plane + 63}\n1 KB atom (8 rows)",
                   va="center", fontsize=8)
        after.text(8.2, top + 12, "+ 1 KB: the next atom\n(stride byte offset)", va="center", fontsize=8)
    after.text(8.2, SHOWN_ROWS + gap / 2, "+ 16 KB: the next plane\n(leading byte offset; V only)", va="center",
               fontsize=8)
    after.set_title("kernel 9: two planes of 128-byte rows (wgmma's 128-byte swizzle)\n"
                    "red: what the descriptor of S's step kk = 1 reads (dims 16-31)", fontsize=10)
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
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (e) The pipeline schematic: when the copies of each K/V tile run against the math.
# ---------------------------------------------------------------------------------------------------

COPY_K, COPY_V, MATH_S, MATH_PV = 1.0, 1.0, 1.3, 1.0  # arbitrary units: a schematic, not a measurement
STEP_COLORS = {"copy K": "#4c72b0", "copy V": "#8fb8de", "S = Q·Kᵀ, softmax": "#dd8452", "O += P·V": "#c44e52"}


def schedule_synchronous(n_tiles: int) -> list[tuple[str, int, float, float]]:
    """Kernel 1: copy K and V, wait, then all the math; nothing overlaps."""
    steps, now = [], 0.0
    for j in range(n_tiles):
        steps += [("copy K", j, now, COPY_K), ("copy V", j, now + COPY_K, COPY_V)]
        now += COPY_K + COPY_V
        steps += [("S = Q·Kᵀ, softmax", j, now, MATH_S), ("O += P·V", j, now + MATH_S, MATH_PV)]
        now += MATH_S + MATH_PV
    return steps


def schedule_v_overlap(n_tiles: int) -> list[tuple[str, int, float, float]]:
    """Kernels 2-4: wait only for K; V's copy runs under S and the softmax."""
    steps, now = [], 0.0
    for j in range(n_tiles):
        steps += [("copy K", j, now, COPY_K), ("copy V", j, now + COPY_K, COPY_V)]
        now += COPY_K
        steps.append(("S = Q·Kᵀ, softmax", j, now, MATH_S))
        now = max(now + MATH_S, now + COPY_V)
        steps.append(("O += P·V", j, now, MATH_PV))
        now += MATH_PV
    return steps


def schedule_two_stages(n_tiles: int) -> list[tuple[str, int, float, float]]:
    """Chapter 5: wait once for tile j's K and V (issued a tile earlier), then copy tile j + 1 under tile j's math.

    The wait and the one barrier come first in each tile; the copies of tile j + 1 are issued right after it, into
    the stage tile j - 1 used. Copies queue behind each other (one memory pipe), so a copy starts when it is issued
    and the previous one is done.
    """
    steps, copies_free = [], 0.0

    def copy(kind: str, tile: int, issued: float, length: float) -> float:
        nonlocal copies_free
        start = max(issued, copies_free)
        copies_free = start + length
        steps.append((kind, tile, start, length))
        return copies_free

    copy("copy K", 0, 0.0, COPY_K)
    ready, now = copy("copy V", 0, 0.0, COPY_V), 0.0
    for j in range(n_tiles):
        now = max(now, ready)  # wait_group 0 + the barrier: tile j's K and V are in, the other stage is free
        if j + 1 < n_tiles:
            copy("copy K", j + 1, now, COPY_K)
            ready = copy("copy V", j + 1, now, COPY_V)
        steps += [("S = Q·Kᵀ, softmax", j, now, MATH_S), ("O += P·V", j, now + MATH_S, MATH_PV)]
        now += MATH_S + MATH_PV
    return steps


def figure_pipeline(path: Path, n_tiles: int = 4) -> None:
    scenarios = [
        ("kernel 1: synchronous copies", schedule_synchronous(n_tiles)),
        ("kernels 2-4: V copied under S and softmax", schedule_v_overlap(n_tiles)),
        ("two stages (chapter 5): tile j+1 copied under tile j", schedule_two_stages(n_tiles)),
    ]
    fig, ax = plt.subplots(figsize=(13, 5.2))
    labels, y = [], 0.0
    for title, steps in reversed(scenarios):
        for lane, kinds in (("math", ("S = Q·Kᵀ, softmax", "O += P·V")), ("copy", ("copy K", "copy V"))):
            for kind, tile, start, length in steps:
                if kind in kinds:
                    ax.broken_barh([(start, length)], (y, 0.8), facecolors=STEP_COLORS[kind], edgecolor="white")
                    ax.text(start + length / 2, y + 0.4, str(tile), ha="center", va="center", fontsize=8,
                            color="white" if kind != "copy V" else "black")
            labels.append((y + 0.4, lane))
            y += 1.0
        end = max(start + length for _, _, start, length in steps)
        ax.text(end + 0.15, y - 1.1, f"done at {end:.1f}", va="center", fontsize=9)
        ax.text(0, y + 0.05, title, fontsize=10, fontweight="bold", va="bottom")
        y += 0.9
    ax.set_yticks([pos for pos, _ in labels], [lane for _, lane in labels], fontsize=9)
    ax.set_xlabel("time (schematic units; numbers in the bars are K/V tile indices)")
    ax.set_ylim(-0.3, y)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in STEP_COLORS.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize=9, frameon=False)
    ax.set_title("One block's main loop: copies (global -> shared) against math (tensor cores, softmax)\n"
                 "schematic, for a block alone on its SM: a second resident block can fill the gaps as well",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (f) The ladder: the same plot as `runner.py --from-json results/headline.json --plot ...`.
# ---------------------------------------------------------------------------------------------------


def figure_ladder(path: Path, results: Path) -> None:
    """The headline run's ladder, drawn by kernels.tools.report.plot_ladder (what runner.py --plot calls)."""
    sys.path.insert(0, str(ROOT))
    from kernels.tools.plot import plot_ladder
    from kernels.tools.runs import load_runs

    run = load_runs(results)[0]
    # "torch default" is whichever backend torch picks (cuDNN on the H200): its line would sit on top of
    # that backend's and the two labels would overprint, so a reference within 3% of one kept is dropped.
    kept: list[float] = []
    rows = []
    for row in run.rows:
        if row.kind == "reference":
            if any(abs(row.tflops - other) < 0.03 * other for other in kept):
                continue
            kept.append(row.tflops)
        rows.append(row)
    run.rows = rows
    plot_ladder(run, path)


# ---------------------------------------------------------------------------------------------------
# (g) The three operands in the layout they are stored in: which lane holds which elements of Q, K, V.
# ---------------------------------------------------------------------------------------------------


def figure_operand_registers(path: Path) -> None:
    """Q as A, K as B and V as B of one mma, each drawn as it lies in shared memory, every pair labelled by lane."""
    fig, (q_ax, k_ax, v_ax) = plt.subplots(1, 3, figsize=(17, 9.8), layout="constrained",
                                           gridspec_kw={"width_ratios": [16, 16, 8]})
    grid_axes(q_ax, 16, 16, "Q as A of S = Q·Kᵀ, stored (query, dim):\nread as it lies (ldmatrix.x4)",
              col_label="dim (k)", row_label="query (m)")
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(4):
            row, col = g + 8 * (reg % 2), 2 * t + 8 * (reg // 2)
            box(q_ax, row, col, 2, HUES[reg], f"T{lane}")
            if lane == FOLLOWED_LANE:
                outline(q_ax, row, col, 2)
    q_ax.legend(handles=[Patch(color=HUES[r], label=label) for r, label in enumerate(
        ["a0: Q[g][2t], Q[g][2t+1]", "a1: Q[g+8][2t], Q[g+8][2t+1]",
         "a2: Q[g][2t+8], Q[g][2t+9]", "a3: Q[g+8][2t+8], Q[g+8][2t+9]"])],
        loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2, fontsize=9, frameon=False)

    # One n-tile of K: 8 keys (n) x 16 dims (k). B "col" wants (n, k) rows, which is how K lies.
    grid_axes(k_ax, 8, 16, "K as B of S = Q·Kᵀ, stored (key, dim) = (n, k):\nread as it lies (ldmatrix.x4, no .trans)",
              col_label="dim (k)", row_label="key (n)")
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(2):
            box(k_ax, g, 2 * t + 8 * reg, 2, HUES[reg], f"T{lane}")
            if lane == FOLLOWED_LANE:
                outline(k_ax, g, 2 * t + 8 * reg, 2)
    k_ax.legend(handles=[Patch(color=HUES[0], label="b0: K[g][2t], K[g][2t+1]"),
                         Patch(color=HUES[1], label="b1: K[g][2t+8], K[g][2t+9]"),
                         Patch(color="none", label="a pair is two neighbours in one row:"),
                         Patch(color="none", label="one 32-bit word of shared memory")],
                loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=9, frameon=False)

    # One n-tile of V: 16 keys (k) x 8 dims (n). B wants each lane's pair along k = key, a column of V.
    grid_axes(v_ax, 16, 8, "V as B of O = P·V, stored (key, dim) = (k, n):\na pair is a column (ldmatrix.x4.trans)",
              col_label="dim (n)", row_label="key (k)")
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(2):
            box(v_ax, 2 * t + 8 * reg, g, 1, HUES[reg], f"T{lane}", height=2, fontsize=6)
            if lane == FOLLOWED_LANE:
                outline(v_ax, 2 * t + 8 * reg, g, 1, 2)
    v_ax.legend(handles=[Patch(color=HUES[0], label="b0: V[2t][g], V[2t+1][g]"),
                         Patch(color=HUES[1], label="b1: V[2t+8][g], V[2t+9][g]"),
                         Patch(color="none", label="a pair sits in two rows of memory:"),
                         Patch(color="none", label=".trans gathers them")],
                loc="upper center", bbox_to_anchor=(0.5, -0.01), fontsize=9, frameon=False)

    fig.suptitle(f"Each lane's operand registers, drawn where the values lie in shared memory "
                 f"(g = lane / 4, t = lane % 4; lane {FOLLOWED_LANE} outlined in red)", fontsize=13)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (h) ldmatrix .x1 / .x2 / .x4: which lanes' addresses count, and that each row is named on its own.
# ---------------------------------------------------------------------------------------------------

# (first row of each of the 8 rows, column) of four matrices anywhere in a (24, 32) region: matrix 2's
# rows are every other row, to show that a matrix's rows need not be neighbours either.
SCATTERED_ROWS = {0: (range(0, 8), 0), 1: (range(0, 8), 24), 2: (range(9, 24, 2), 8), 3: (range(12, 20), 16)}


def figure_ldmatrix_lanes(path: Path) -> None:
    """Which lanes' addresses each ldmatrix width reads, and four (8, 8) matrices with rows anywhere."""
    fig, (lanes, region) = plt.subplots(1, 2, figsize=(17, 6.6), layout="constrained",
                                        gridspec_kw={"width_ratios": [32, 32]})
    lanes.set_xlim(0, 32)
    lanes.set_ylim(3.6, -0.2)
    lanes.set_aspect("equal")
    lanes.axis("off")
    for level, count in enumerate((1, 2, 4)):
        y = 1.2 * level
        lanes.text(-0.3, y + 0.5, f".x{count}", ha="right", va="center", fontsize=11)
        for lane in range(32):
            used = lane < 8 * count
            box(lanes, y, lane, 1, HUES[lane // 8] if used else "#e6e6e6", str(lane), fontsize=7)
    lanes.set_title("whose address counts: lane 8i + j names row j of matrix i\n"
                    "(grey: ignored, but every lane must still execute the instruction)", fontsize=11)
    lanes.legend(handles=[Patch(color=HUES[m], label=f"lanes {8 * m}-{8 * m + 7}: matrix {m} -> register r{m}")
                          for m in range(4)],
                 loc="upper center", bbox_to_anchor=(0.5, 0.08), ncol=2, fontsize=10, frameon=False)

    grid_axes(region, 24, 32, ".x4 on four matrices anywhere: each lane names one 16-byte row\n"
              "(8 values, 16-byte aligned); the rows of a matrix need not be neighbours",
              col_label="col (16-bit elements)", row_label="row")
    for matrix, (rows, col) in SCATTERED_ROWS.items():
        for j, row in enumerate(rows):
            box(region, row, col, 8, HUES[matrix], f"lane {8 * matrix + j}", fontsize=7)
    region.set_xticks(range(0, 33, 8), [str(c) for c in range(0, 33, 8)], fontsize=7)
    region.text(16, 25.2, "register r_i of lane l receives row l / 4, columns 2(l % 4), 2(l % 4) + 1 of matrix i;\n"
                "with .trans, column l / 4, rows 2(l % 4), 2(l % 4) + 1", ha="center", va="top", fontsize=10)
    fig.suptitle("ldmatrix.m8n8: one address per lane, one (8, 8) matrix per 8 lanes", fontsize=13)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (i) The roofline with two memory levels, from the measured ceilings (results/peak.json) and the ladder.
# ---------------------------------------------------------------------------------------------------


def l2_bytes(shape: dict, block_q: int) -> int:
    """Bytes all blocks ask of L2: each reads its Q tile and all of its head's K and V, and writes its O tile."""
    tensor_row = shape["head_dim"] * 2  # one 16-bit row of Q, K, V or O
    blocks = shape["batch"] * shape["heads"] * ((shape["seq_len"] + block_q - 1) // block_q)
    return blocks * (2 * block_q * tensor_row + 2 * shape["seq_len"] * tensor_row)


def dram_bytes(shape: dict) -> int:
    """The compulsory bytes: Q, K and V read once, O written once."""
    return 4 * shape["batch"] * shape["seq_len"] * shape["heads"] * shape["head_dim"] * 2


def figure_roofline(path: Path, peak_file: Path, run_file: Path) -> None:
    """Each chapter at its L2 arithmetic intensity against the L2, DRAM and tensor-core ceilings; needs peak.json."""
    if not peak_file.exists():
        print(f"skipped {path}: no {peak_file} yet (python runner.py peak --json results/peak.json writes it)")
        return
    import json

    sys.path.insert(0, str(ROOT))
    from kernels import chapters
    from kernels.tools.runs import load_runs
    from reference import attention_flops

    peak, run = json.loads(peak_file.read_text()), load_runs(run_file)[0]
    if peak["environment"]["device"] != run.environment["device"]:
        print(f"skipped {path}: {peak_file} is from {peak['environment']['device']}, {run_file} from "
              f"{run.environment['device']}")
        return
    shape = run.shape
    flops = attention_flops(shape["batch"], shape["seq_len"], shape["heads"], shape["head_dim"])
    ceilings = {family: ceiling["tflops"] for family, ceiling in peak["ceilings"].items()}
    dram_tbps, l2_tbps = peak["memory"]["dram copy"]["tbps"], peak["memory"]["l2 read"]["tbps"]

    fig, ax = plt.subplots(figsize=(12, 7.4), layout="constrained")
    intensity = [2 ** (i / 8) for i in range(4 * 8, 13 * 8 + 1)]  # 16 ... 8192 FLOP per byte
    ax.plot(intensity, [l2_tbps * x for x in intensity], color="#4c72b0", label=f"L2: {l2_tbps:.2f} TB/s")
    ax.plot(intensity, [dram_tbps * x for x in intensity], color="#8c8c8c",
            label=f"DRAM: {dram_tbps:.2f} TB/s")
    for (family, tflops), style in zip(ceilings.items(), ("--", "-."), strict=False):
        ax.axhline(tflops, color="black", linestyle=style, linewidth=1.2, label=f"{family}: {tflops:.0f} TFLOP/s")
    dram_intensity = flops / dram_bytes(shape)
    ax.axvline(dram_intensity, color="#8c8c8c", linestyle=":", linewidth=1.2)
    ax.text(dram_intensity * 0.93, 1.5 * max(ceilings.values()), f"against DRAM every chapter does\n"
            f"{dram_intensity:.0f} FLOP per byte (hollow)", ha="right", va="top", fontsize=9, color="#555555")

    by_name = {chapter.name: chapter for chapter in chapters()}
    bounds: dict[tuple[str, int], list[str]] = {}
    for index, row in enumerate(r for r in run.rows if r.kind == "chapter"):
        chapter = by_name[row.name]
        block_q = chapter.kernel.block_q
        family = "wgmma" if "wgmma.mma_async" in chapter.source.read_text() else "mma.sync"
        style = {"marker": "os^vD<>ph"[index % 9], "markersize": 8, "linestyle": "none",
                 "color": plt.get_cmap("tab10")(index % 10)}
        ax.plot(flops / l2_bytes(shape, block_q), row.tflops, label=f"{row.name}: {row.tflops:.0f}", **style)
        ax.plot(dram_intensity, row.tflops, markerfacecolor="none", **style)
        bounds.setdefault((family, block_q), []).append(row.name[:3])

    lines = ["fastest possible time at this shape (ms): max(math, L2, DRAM)"]
    for (family, block_q), names in bounds.items():
        if family not in ceilings:
            continue
        terms = (flops / ceilings[family] / 1e9, l2_bytes(shape, block_q) / l2_tbps / 1e9,
                 dram_bytes(shape) / dram_tbps / 1e9)
        lines.append(f"{family}, BLOCK_Q {block_q} ({', '.join(names)}): math {terms[0]:.2f}, L2 {terms[1]:.2f}, "
                     f"DRAM {terms[2]:.2f} -> {max(terms):.2f}")
    ax.text(0.99, 0.02, "\n".join(lines), transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "edgecolor": "#cccccc"})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(intensity[0], intensity[-1])
    ax.set_xticks([2**i for i in range(4, 14)], [str(2**i) for i in range(4, 14)])
    ax.set_ylim(10, 2 * max(ceilings.values()))
    ax.set_xlabel("FLOP per byte moved; filled: per byte the blocks ask of L2 (BLOCK_Q, almost exactly)")
    ax.set_ylabel("TFLOP/s")
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    ax.set_title(f"Roofline with two memory levels, {shape['batch']} x {shape['seq_len']} x {shape['heads']} heads x "
                 f"{shape['head_dim']}, {shape['dtype']} on {run.environment['device']}\n"
                 f"ceilings from {peak_file.name}, chapters from {run_file.name}", fontsize=11)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path}")


# ---------------------------------------------------------------------------------------------------
# (j) Chapter 10: one P·V step of a warpgroup: P from its threads' registers, V from both planes.
# ---------------------------------------------------------------------------------------------------

GROUP_ROWS, STEP_KEYS = 64, 16  # a warpgroup's rows, the keys of one wgmma step (its K)


def a_fragment_cells(lane: int) -> list[tuple[int, int]]:
    """The (row, col) elements one lane holds of a warp's (16, 16) A block, in register order: rows g and g + 8,
    columns 2t, 2t + 1 and 2t + 8, 2t + 9 (mma.sync's A fragment, which wgmma takes from registers)."""
    g, t = lane // 4, lane % 4
    return [(row, col + i) for row, col in ((g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8))
            for i in range(2)]


def figure_wgmma_pv(path: Path) -> None:
    """Chapter 10: what one wgmma of O += P V reads: P from 128 threads' registers, V from shared memory."""
    fig, (p_ax, v_ax) = plt.subplots(1, 2, figsize=(13, 6.4), gridspec_kw={"width_ratios": [16, 128]})
    coarse_axes(p_ax, GROUP_ROWS, STEP_KEYS, "A = P (64, 16), registers", col_step=8, row_step=16,
                col_label="key (k)")
    for row in range(GROUP_ROWS):
        for col in range(STEP_KEYS):
            box(p_ax, row, col, 1, shade(HUES[row // 16], 0.08 * (col % 8 // 2)), edge="white", linewidth=0.2)
    for row, col in a_fragment_cells(FOLLOWED_LANE):
        outline(p_ax, row, col, 1, linewidth=1.4)
    for warp in range(4):
        p_ax.text(-5, 16 * warp + 8, f"warp {warp}\nrows\n{16 * warp}-{16 * warp + 15}", va="center", ha="center",
                  fontsize=8)
    # V: 16 keys of all 128 dims, stored as two planes; a chunk is 8 dims (16 bytes).
    coarse_axes(v_ax, STEP_KEYS, 128, "B = V rows 16 mma_kv ... + 15, all 128 dims (16, 128), shared memory\n"
                "one descriptor: plane 0 at the start address, plane 1 one leading byte offset (16 KB) further",
                col_step=16, row_step=8, col_label="head dim (n); read transposed: tnspB", row_label="key (k)")
    for row in range(STEP_KEYS):
        for chunk in range(128 // 8):
            plane = chunk // 8
            box(v_ax, row, 8 * chunk, 8, shade(PLANE_HUES[plane], 0.06 * (row // 8)), str(chunk % 8), fontsize=6)
    for plane in range(2):
        for atom in range(2):
            outline(v_ax, 8 * atom, 64 * plane, 64, 8, color="black", linewidth=1.2)
        v_ax.text(64 * plane + 32, STEP_KEYS + 1.6, f"plane {plane}: dims {64 * plane}-{64 * plane + 63}, "
                  f"{'start address' if plane == 0 else '+ 16 KB'}; rows 8-15 + 1 KB (stride byte offset)",
                  ha="center", va="top", fontsize=8)
    v_ax.text(64, STEP_KEYS + 4.5, "every warp's P meets the same 16 keys of V; O (64, 128) stays in the 128 threads' "
              "registers, in the layout of S", ha="center", va="top", fontsize=9)
    fig.suptitle("One wgmma of O += P·V (m64n128k16): the warpgroup's 128 threads hand in P, the tensor cores "
                 "read V\nP: lane 5 of warp 0's eight values (its four A registers) outlined; "
                 "V: labels are the 16-byte chunks of a plane's row", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (k) Chapter 11: who copies a K tile: 256 threads with cp.async (kernel 10), or two TMA copies (kernel 11).
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
    titles = ("kernel 10: 256 threads, 8 cp.async each\ncolour: the warp that copies the 16-byte chunk",
              "kernel 11: thread 0 asks for two TMA copies\ncolour: the copy, one (128, 64) box = one plane")
    for ax, title in zip(axes, titles, strict=True):
        coarse_axes(ax, TILE_ROWS, 8 * CHUNKS_PER_ROW, title, col_step=16, row_step=16,
                    col_label="head dim (a box: 8 dims, one 16-byte chunk)", row_label="tile row (key)")
    warp_colors = [shade(HUES[w % 4], 0.3 * (w // 4)) for w in range(WARPS_THAT_COPY)]
    for row in range(TILE_ROWS):
        for chunk in range(CHUNKS_PER_ROW):
            faded = -0.6 if row >= ROWS_IN_SEQUENCE else 0
            warp = cp_async_thread(row, chunk) // 32
            box(axes[0], row, 8 * chunk, 8, shade(warp_colors[warp], faded), edge="white", linewidth=0.2)
            box(axes[1], row, 8 * chunk, 8, shade(PLANE_HUES[chunk // 8], faded), edge="white", linewidth=0.2)
    notes = ("rows past seq_len: each thread's cp.async\ncopies 0 source bytes and zero-fills",
             "rows past seq_len: zeros from the copy engine\n(seq_len is a dimension of the map)")
    for ax, note in zip(axes, notes, strict=True):
        ax.plot([0, 128], [ROWS_IN_SEQUENCE, ROWS_IN_SEQUENCE], color="black", linewidth=1.6, zorder=6)
        ax.text(64, (ROWS_IN_SEQUENCE + TILE_ROWS) / 2, note, ha="center", va="center", fontsize=9, zorder=7)
    for plane in range(2):
        outline(axes[1], 0, 64 * plane, 64, TILE_ROWS, color="black", linewidth=1.6)
        axes[1].text(64 * plane + 32, ROWS_IN_SEQUENCE / 2, f"copy {plane}\nbox (64, 1, 128, 1)\nat ({64 * plane}, "
                     "kv_head, kv0, batch)", ha="center", va="center", fontsize=9, zorder=7)
    axes[0].legend(handles=[Patch(color=warp_colors[w], label=f"warp {w}") for w in range(WARPS_THAT_COPY)],
                   loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"A K tile whose sequence ends at row {ROWS_IN_SEQUENCE}, by logical position (both kernels "
                 "swizzle it the same way)\nkernel 11's two copies, and V's two, count their 64 KB into the "
                 "stage's mbarrier, which the warps wait on", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (l) Chapter 12: kernel 11's lockstep against a producer warpgroup and per-stage barriers (schematic).
# ---------------------------------------------------------------------------------------------------

COPY_TILE = 0.9  # one tile's K and V (arbitrary units: a schematic, not a measurement)
# The two consumer warpgroups' time per tile: the same on average, uneven from tile to tile.
GROUP_TILE_TIMES = ((1.0, 1.4, 1.0, 1.4, 1.0, 1.4), (1.4, 1.0, 1.4, 1.0, 1.4, 1.0))
Bar = tuple[str, int, float, float]  # row, tile, start, length


def schedule_lockstep(times: tuple[tuple[float, ...], ...] = GROUP_TILE_TIMES) -> list[Bar]:
    """Kernel 11: a block barrier at the top of each tile, after which thread 0 asks for the next tile; each
    warpgroup then waits for its tile's copies."""
    n_tiles = len(times[0])
    bars, ready, ends = [("copies", 0, 0.0, COPY_TILE)], [COPY_TILE], [0.0] * len(times)
    for j in range(n_tiles):
        barrier = max(ends)
        if j + 1 < n_tiles:
            start = max(barrier, ready[j])  # the copy engine also finishes tile j's copies first
            bars.append(("copies", j + 1, start, COPY_TILE))
            ready.append(start + COPY_TILE)
        for group, group_times in enumerate(times):
            start = max(barrier, ready[j])
            bars.append((f"warpgroup {group}", j, start, group_times[j]))
            ends[group] = start + group_times[j]
    return bars


def schedule_producer(times: tuple[tuple[float, ...], ...] = GROUP_TILE_TIMES, stages: int = 2) -> list[Bar]:
    """Kernel 12: the producer refills a stage once every consumer freed it (tile j - stages); each warpgroup
    goes on with its next tile as soon as that tile's copies are in."""
    n_tiles = len(times[0])
    bars, ready, ends = [], [], [[] for _ in times]
    copies_done = 0.0
    for j in range(n_tiles):
        free = max(group_ends[j - stages] for group_ends in ends) if j >= stages else 0.0
        start = max(free, copies_done)
        bars.append(("copies", j, start, COPY_TILE))
        copies_done = start + COPY_TILE
        ready.append(copies_done)
        for group, group_times in enumerate(times):
            start = max(ends[group][-1] if ends[group] else 0.0, ready[j])
            bars.append((f"warpgroup {group}", j, start, group_times[j]))
            ends[group].append(start + group_times[j])
    return bars


def figure_warp_specialized(path: Path) -> None:
    scenarios = [("kernel 11: one block barrier per tile, thread 0 copies after it", schedule_lockstep()),
                 ("kernel 12: a producer warpgroup, a filled and a free mbarrier per stage", schedule_producer())]
    colors = {"copies": STEP_COLORS["copy K"], "warpgroup 0": "#dd8452", "warpgroup 1": "#c44e52"}
    fig, ax = plt.subplots(figsize=(13, 4.6))
    labels, y = [], 0.0
    for title, bars in reversed(scenarios):
        for row in reversed(colors):
            for name, tile, start, length in bars:
                if name == row:
                    ax.broken_barh([(start, length)], (y, 0.8), facecolors=colors[row], edgecolor="white")
                    ax.text(start + length / 2, y + 0.4, str(tile), ha="center", va="center", fontsize=8,
                            color="white")
            labels.append((y + 0.4, row))
            y += 1.0
        end = max(start + length for _, _, start, length in bars)
        ax.text(end + 0.1, y - 2.1, f"done at {end:.1f}", va="center", fontsize=9)
        ax.text(0, y + 0.05, title, fontsize=10, fontweight="bold", va="bottom")
        y += 0.9
    ax.set_yticks([pos for pos, _ in labels], [row for _, row in labels], fontsize=9)
    ax.set_xlabel("time (schematic units; numbers in the bars are K/V tile indices; the warpgroups' tiles "
                  "take 1.0 or 1.4 in turn)")
    ax.set_ylim(-0.3, y)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.set_title("One block's tile loop with two stages: the warpgroups in lockstep, then each at its own pace\n"
                 "schematic: copies of one tile after another, each warpgroup's tile as one bar", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)



# ---------------------------------------------------------------------------------------------------
# (m) Chapter 14: one consumer warpgroup's loop, each product waited for (kernel 13) or skewed by one (kernel 14).
# ---------------------------------------------------------------------------------------------------

# A warpgroup's work per tile (arbitrary units: a schematic, not a measurement). The softmax runs on the warps'
# own units; S and P·V on the tensor cores; O's rescale and P's packing come after P·V of the tile before.
PRODUCT, SOFTMAX, PACK = 1.0, 1.2, 0.3
SCORES, PRODUCTS, SOFTMAXES, PACKS = "S = Q·Kᵀ", "O += P·V", "softmax", "pack P (kernel 14: and rescale O)"
Step = tuple[str, int, float, float]  # kind, tile, start, length


def schedule_waiting(n_tiles: int) -> list[Step]:
    """Kernel 13: S_j, wait, softmax_j, pack P_j, then P_j V_j, wait; the next tile starts when P·V is done."""
    steps, now = [], 0.0
    for j in range(n_tiles):
        steps += [(SCORES, j, now, PRODUCT), (SOFTMAXES, j, now + PRODUCT, SOFTMAX),
                  (PACKS, j, now + PRODUCT + SOFTMAX, PACK), (PRODUCTS, j, now + PRODUCT + SOFTMAX + PACK, PRODUCT)]
        now += 2 * PRODUCT + SOFTMAX + PACK
    return steps


def schedule_skewed(n_tiles: int) -> list[Step]:
    """Kernel 14: tile 0's S alone; then iteration j issues S_j and P_{j-1} V_{j-1} back to back, runs softmax_j
    once S_j is in, while P·V runs, and rescales O and packs P_j once both are done; the last P·V after the loop."""
    steps = [(SCORES, 0, 0.0, PRODUCT), (SOFTMAXES, 0, PRODUCT, SOFTMAX), (PACKS, 0, PRODUCT + SOFTMAX, PACK)]
    now = PRODUCT + SOFTMAX + PACK
    for j in range(1, n_tiles):
        scores_done = now + PRODUCT
        steps += [(SCORES, j, now, PRODUCT), (PRODUCTS, j - 1, scores_done, PRODUCT),
                  (SOFTMAXES, j, scores_done, SOFTMAX)]
        now = max(scores_done + SOFTMAX, scores_done + PRODUCT)  # wgmma_wait<0>: P·V has landed too
        steps.append((PACKS, j, now, PACK))
        now += PACK
    steps.append((PRODUCTS, n_tiles - 1, now, PRODUCT))
    return steps


def figure_overlap(path: Path, n_tiles: int = 4) -> None:
    scenarios = [("kernel 13: wait for each product", schedule_waiting(n_tiles)),
                 ("kernel 14: S of tile j and P·V of tile j − 1 issued together, the softmax of tile j under P·V",
                  schedule_skewed(n_tiles))]
    colors = {SCORES: "#dd8452", PRODUCTS: "#c44e52", SOFTMAXES: "#4c72b0", PACKS: "#8fb8de"}
    units = (("tensor cores", (SCORES, PRODUCTS)), ("the warpgroup's threads", (SOFTMAXES, PACKS)))
    fig, ax = plt.subplots(figsize=(13, 4.6))
    labels, y = [], 0.0
    for title, steps in reversed(scenarios):
        for unit, kinds in reversed(units):
            for kind, tile, start, length in steps:
                if kind in kinds:
                    ax.broken_barh([(start, length)], (y, 0.8), facecolors=colors[kind], edgecolor="white")
                    ax.text(start + length / 2, y + 0.4, str(tile), ha="center", va="center", fontsize=8,
                            color="black" if kind == PACKS else "white")
            labels.append((y + 0.4, unit))
            y += 1.0
        end = max(start + length for *_, start, length in steps)
        ax.text(end + 0.1, y - 1.5, f"done at {end:.1f}", va="center", fontsize=9)
        ax.text(0, y + 0.05, title, fontsize=10, fontweight="bold", va="bottom")
        y += 0.9
    ax.set_yticks([pos for pos, _ in labels], [unit for _, unit in labels], fontsize=9)
    ax.set_xlabel(f"time (schematic units: a product {PRODUCT}, a softmax {SOFTMAX}, rescale and pack {PACK}; "
                  "numbers in the bars are K/V tile indices)")
    ax.set_ylim(-0.3, y)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in colors.items()], loc="upper center",
              bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=9, frameon=False)
    ax.set_title("One consumer warpgroup's tile loop, alone on the tensor cores\n"
                 "schematic: the other warpgroup, which fills some of these gaps, is left out", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# (n) Chapter 15: the query tiles each block of a persistent grid takes, and the heads at work at once.
# ---------------------------------------------------------------------------------------------------

# The causal headline shape on the H200: 32 query tiles of 128 rows per (batch, head), 16 heads, batch 16, and
# one block per SM. Time is counted in key tiles: a query tile takes as long as the key tiles it multiplies.
SCHEDULE_SHAPE = {"q_tiles": 32, "heads": 16, "batch": 16}
SMS = 132
Work = tuple[int, int, int]  # batch, head, query tile
Run = tuple[int, int, int, int]  # block (or SM), (batch, head) in list order, start, end


def pair_schedule(block: int, grid: int, q_tiles: int, heads: int, batch: int) -> list[Work]:
    """Kernel 15's work_at, step after step, for one block: query tile i from the end of a head, then tile i from
    its start (the middle one alone when q_tiles is odd); block b takes pairs b, b + grid, ..., head by head."""
    pairs_per_head = (q_tiles + 1) // 2
    n_pairs = pairs_per_head * heads * batch
    work, step = [], 0
    while (pair := block + step // 2 * grid) < n_pairs:
        i = pair % pairs_per_head
        if not (step % 2 == 1 and 2 * i + 1 == q_tiles):  # work.skipped
            q_tile = q_tiles - 1 - i if step % 2 == 0 else i
            work.append((pair // pairs_per_head // heads, pair // pairs_per_head % heads, q_tile))
        step += 1
    return work


def strided_schedule(block: int, grid: int, q_tiles: int, heads: int, batch: int) -> list[Work]:
    """The static schedule without pairs: block b takes query tiles b, b + grid, ..., numbered head by head."""
    return [(t // q_tiles // heads, t // q_tiles % heads, t % q_tiles) for t in range(block, q_tiles * heads * batch,
                                                                                        grid)]


def causal_key_tiles(q_tile: int) -> int:
    """Key tiles a causal query tile multiplies when queries and keys have one length: 1 for tile 0, ..., all."""
    return q_tile + 1


def run_static(schedule, q_tiles: int, heads: int, batch: int, grid: int = SMS) -> list[Run]:
    """Every block works through its own list, one query tile after another, from time 0."""
    runs = []
    for block in range(grid):
        now = 0
        for b, head, q_tile in schedule(block, grid, q_tiles, heads, batch):
            runs.append((block, b * heads + head, now, now + causal_key_tiles(q_tile)))
            now = runs[-1][3]
    return runs


def run_in_launch_order(q_tiles: int, heads: int, batch: int, n_sms: int = SMS) -> list[Run]:
    """Kernel 14: a block per query tile, launched in grid order (query tile, then head, then batch); each SM
    takes the next block as soon as its last one ends."""
    free_at = [(0, sm) for sm in range(n_sms)]
    runs = []
    for t in range(q_tiles * heads * batch):
        start, sm = heapq.heappop(free_at)
        end = start + causal_key_tiles(t % q_tiles)
        runs.append((sm, t // q_tiles, start, end))
        heapq.heappush(free_at, (end, sm))
    return runs


def heads_in_flight(runs: list[Run]) -> list[tuple[int, int]]:
    """(time, how many (batch, head)s have a query tile at work from then on), at every start and end."""
    events = sorted([(end, -1, head) for _, head, _, end in runs] + [(start, 1, head) for _, head, start, _ in runs])
    at_work, steps = Counter(), []
    for time, change, head in events:
        at_work[head] += change
        if at_work[head] == 0:
            del at_work[head]
        if steps and steps[-1][0] == time:
            steps.pop()
        steps.append((time, len(at_work)))
    return steps


def busy_time(runs: list[Run], n: int = SMS) -> list[int]:
    """Key tiles each block (or SM) works through in all."""
    busy = [0] * n
    for who, _, start, end in runs:
        busy[who] += end - start
    return busy


def figure_pair_schedule(path: Path) -> None:
    """Chapter 15: key tiles per block, and the heads at work at once, for three ways to deal causal query tiles."""
    shape = SCHEDULE_SHAPE
    scenarios = [
        ("kernel 14: a block per query tile, in launch order", run_in_launch_order(**shape), "#8c8c8c"),
        ("persistent, tiles b, b + 132, ... (not on the ladder)", run_static(strided_schedule, **shape), "#c44e52"),
        ("kernel 15: persistent, pairs b, b + 132, ...", run_static(pair_schedule, **shape), "#4c72b0"),
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for title, runs, color in scenarios:
        left.plot(range(SMS), busy_time(runs), ".", color=color, markersize=5, label=title)
        steps = heads_in_flight(runs)
        right.step([t for t, _ in steps], [n for _, n in steps], where="post", color=color, linewidth=1.2)
    left.set_xlabel("block of the persistent grid (kernel 14: SM)")
    left.set_ylabel("key tiles multiplied in all (the axis starts at 800)")
    left.set_ylim(800, None)
    left.set_title("Work per block: every pair holds q_tiles + 1 key tiles", fontsize=10)
    right.set_xlabel("time, counted in key tiles")
    right.set_ylabel("(batch, head)s with a query tile at work")
    right.set_ylim(bottom=0)
    right.set_title("Heads whose K and V the blocks read at once", fontsize=10)
    for ax in (left, right):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    fig.legend(*left.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(f"Causal, {shape['q_tiles']} query tiles per head, {shape['heads']} heads, batch {shape['batch']}, "
                 f"{SMS} SMs; a model: a query tile takes as long as its key tiles, nothing else", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# Chapter 16: one thread's sum over a row's probabilities, as one chain or as several joined pairwise.
# ---------------------------------------------------------------------------------------------------

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
    scenarios = [("kernel 15: one chain", sum_in_one_chain(values)),
                 (f"kernel 16: {chains} chains, joined pairwise", sum_in_chains(values, chains))]
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
        ax.set_yticks([rows - 1 - r + 0.4 for r in range(rows)], [f"chain {r}" for r in range(rows)] if rows > 1
                      else ["row_sum"], fontsize=8)
        ax.set_title(f"{title}: {len(additions)} additions", fontsize=10, loc="left")
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="y", length=0)
    axes[-1].set_xlabel("step on the dependent path: an addition cannot start before the one it reads has ended")
    axes[-1].legend(handles=[Patch(color=c, label=names[k]) for k, c in colors.items()], loc="upper center",
                    bbox_to_anchor=(0.5, -0.35), ncol=3, fontsize=9, frameon=False)
    fig.suptitle(f"One thread's sum over its {values} probabilities of a row in a tile", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description="Regenerate the PNG figures under docs/figures/.")
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "headline.json",
                        help="the saved run the ladder plot shows (default: results/headline.json)")
    args = parser.parse_args()
    figures = {
        "block_rows.png": figure_block_rows,
        "copy_map.png": figure_copy_map,
        "block_address.png": figure_block_address,
        "kv128_scores.png": figure_kv128_scores,
        "mma_fragments.png": figure_mma_fragments,
        "ldmatrix_x4.png": figure_ldmatrix,
        "v_transpose.png": figure_v_transpose,
        "swizzle.png": figure_swizzle,
        "pipeline.png": figure_pipeline,
        "wgmma_layout.png": figure_wgmma_layout,
        "operand_registers.png": figure_operand_registers,
        "ldmatrix_lanes.png": figure_ldmatrix_lanes,
        "wgmma_pv.png": figure_wgmma_pv,
        "tma_copy.png": figure_tma_copy,
        "warp_specialized.png": figure_warp_specialized,
        "overlap.png": figure_overlap,
        "pair_schedule.png": figure_pair_schedule,
        "softmax_chains.png": figure_softmax_chains,
    }
    for name, draw in figures.items():
        draw(FIGURES / name)
        print(f"wrote {FIGURES / name}")
    figure_ladder(FIGURES / "ladder.png", args.results)
    print(f"wrote {FIGURES / 'ladder.png'}")
    figure_roofline(FIGURES / "roofline.png", ROOT / "results" / "peak.json", args.results)


if __name__ == "__main__":
    main()
