"""The ldmatrix figures of page 0 and chapter 3: the addresses and results of ldmatrix.x4 (ldmatrix_x4.png), which
lanes' addresses each width reads (ldmatrix_lanes.png), and V turned into a B operand by .trans
(v_transpose.png). Computed from the instruction's lane formulas; no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import HUES, box, caption, draw_fragment_pairs, grid_axes, outline, patch_legend, save, shade

# ---------------------------------------------------------------------------------------------------
# Shared by ldmatrix_x4.png and ldmatrix_lanes.png.
# ---------------------------------------------------------------------------------------------------


# Lane 8m + j names row j of matrix m, which lands in register r_m of every lane.
LANE_GROUPS = [(HUES[m], f"lanes {8 * m}-{8 * m + 7}: matrix {m} -> register r{m}") for m in range(4)]


# ---------------------------------------------------------------------------------------------------
# ldmatrix_x4.png: each lane names one 16-byte row; every lane receives its mma pairs.
# ---------------------------------------------------------------------------------------------------


def figure_ldmatrix_x4(path: Path) -> None:
    """ldmatrix.x4: each lane names one 16-byte row; every lane receives its mma pairs."""
    fig, axes = plt.subplot_mosaic(
        [["addresses", "received"], ["addresses", "notes"]],
        figsize=(15, 8.2),
        layout="constrained",
        width_ratios=[16, 9],
        height_ratios=[3, 2],
    )
    addresses, received, notes = axes["addresses"], axes["received"], axes["notes"]

    grid_axes(
        addresses,
        16,
        16,
        "ldmatrix.x4 on a (16, 16) block: lane l points at\nrow l % 16, col (l / 16) * 8 (one 16-byte row of 8 values)",
        col_label="col",
        row_label="row",
    )
    for lane in range(32):
        row, col = lane % 16, (lane // 16) * 8
        box(addresses, row, col, 8, HUES[lane // 8], f"lane {lane}", fontsize=9)
    for matrix in range(4):
        outline(addresses, 8 * (matrix % 2), 8 * (matrix // 2), 8, 8, color="black", linewidth=1.6)
    patch_legend(addresses, LANE_GROUPS, top=-0.01, ncol=2, fontsize=10)

    grid_axes(
        received,
        8,
        8,
        "what arrives: register r0 of every lane\nholds that lane's mma pair of matrix 0",
        col_label="col",
        row_label="row",
    )
    draw_fragment_pairs(received, 0, 0, HUES[0])

    notes.axis("off")
    caption(
        notes,
        0.5,
        1.0,
        "r1, r2, r3 likewise from matrices 1, 2, 3.\n\n"
        "A operand: (a0, a1, a2, a3) = (r0, r1, r2, r3).\n"
        "K as B (rows = keys), two n-tiles of 8 keys:\n"
        "n-tile 0 = (r0, r2), n-tile 1 = (r1, r3).\n\n"
        "One instruction replaces 4 32-bit loads per lane (8 16-bit\n"
        "loads for V), yet the same 4 x 8 rows of 16 bytes\n"
        "still pass through the shared-memory banks.",
        fontsize=10,
        transform=notes.transAxes,
    )

    fig.suptitle("ldmatrix: the addresses follow shared-memory rows, the results follow the mma fragments", fontsize=13)
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# ldmatrix_lanes.png: which lanes' addresses count, and that each row is named on its own.
# ---------------------------------------------------------------------------------------------------


# (first row of each of the 8 rows, column) of four matrices anywhere in a (24, 32) region: matrix 2's
# rows are every other row, to show that a matrix's rows need not be neighbours either.
SCATTERED_ROWS = {0: (range(0, 8), 0), 1: (range(0, 8), 24), 2: (range(9, 24, 2), 8), 3: (range(12, 20), 16)}


def figure_ldmatrix_lanes(path: Path) -> None:
    """Which lanes' addresses each ldmatrix width reads, and four (8, 8) matrices with rows anywhere."""
    fig, (lanes, region) = plt.subplots(
        1, 2, figsize=(17, 6.6), layout="constrained", gridspec_kw={"width_ratios": [32, 32]}
    )
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
    lanes.set_title(
        "whose address counts: lane 8i + j names row j of matrix i\n"
        "(grey: ignored, but every lane must still execute the instruction)",
        fontsize=11,
    )
    patch_legend(lanes, LANE_GROUPS, top=0.08, ncol=2, fontsize=10)

    grid_axes(
        region,
        24,
        32,
        ".x4 on four matrices anywhere: each lane names one 16-byte row\n"
        "(8 values, 16-byte aligned); the rows of a matrix need not be neighbours",
        col_label="col (16-bit elements)",
        row_label="row",
    )
    for matrix, (rows, col) in SCATTERED_ROWS.items():
        for j, row in enumerate(rows):
            box(region, row, col, 8, HUES[matrix], f"lane {8 * matrix + j}", fontsize=7)
    region.set_xticks(range(0, 33, 8), [str(c) for c in range(0, 33, 8)], fontsize=7)
    caption(
        region,
        16,
        25.2,
        "register r_i of lane l receives row l / 4, columns 2(l % 4), 2(l % 4) + 1 of matrix i;\n"
        "with .trans, column l / 4, rows 2(l % 4), 2(l % 4) + 1",
        fontsize=10,
    )
    fig.suptitle("ldmatrix.m8n8: one address per lane, one (8, 8) matrix per 8 lanes", fontsize=13)
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# v_transpose.png: .trans turns each (8, 8), swapping r1 and r2 turns the (2, 2) arrangement.
# ---------------------------------------------------------------------------------------------------


def draw_v_block(
    ax: plt.Axes,
    placement: dict[tuple[int, int], int],
    transposed: bool,
    title: str,
    row_label: str,
    col_label: str,
    names: list[str],
) -> None:
    """A (16, 16) block made of the four matrices: placement maps (quadrant row, col) -> register.

    Each cell's shade follows its key (row of V), so V's stripes are horizontal and Vᵀ's vertical.
    """
    grid_axes(ax, 16, 16, title, col_label=col_label, row_label=row_label)
    for (qr, qc), reg in placement.items():
        for i in range(8):
            for j in range(8):
                key = j if transposed else i
                box(ax, 8 * qr + i, 8 * qc + j, 1, shade(HUES[reg], 0.45 * key / 7), edge=(1, 1, 1, 0.5), linewidth=0.4)
        ax.text(
            8 * qc + 4,
            8 * qr + 4,
            names[reg],
            ha="center",
            va="center",
            fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "linewidth": 0},
        )
        outline(ax, 8 * qr, 8 * qc, 8, 8, color="black", linewidth=1.4)


def figure_v_transpose(path: Path) -> None:
    """V as a B operand: .trans turns each (8, 8), swapping r1 and r2 turns the (2, 2) arrangement."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 7.4))
    # As ldmatrix loads them (same addresses as K): r0 top-left, r1 bottom-left, r2 top-right, r3 bottom-right.
    loaded = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 3}
    v_names = [
        "r0\nkeys 0-7\ndims 0-7",
        "r1\nkeys 8-15\ndims 0-7",
        "r2\nkeys 0-7\ndims 8-15",
        "r3\nkeys 8-15\ndims 8-15",
    ]
    # Vᵀ: its top-right quadrant is V's bottom-left (r1), its bottom-left is V's top-right (r2).
    swapped = {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3}
    vt_names = ["r0 = b0\nof n-tile 0", "r1 = b1\nof n-tile 0", "r2 = b0\nof n-tile 1", "r3 = b1\nof n-tile 1"]
    panels = [
        (
            loaded,
            False,
            "1. V in shared memory is (key, dim) = (k, n):\nthe wrong way round for B, which wants (n, k)",
            "key (k)",
            "dim (n)",
            v_names,
        ),
        (
            loaded,
            True,
            "2. ldmatrix .trans: each (8, 8) arrives transposed\n(stripes turn), but r1 and r2 still sit crosswise",
            "",
            "",
            v_names,
        ),
        (
            swapped,
            True,
            "3. use r1 and r2 the other way round (compared with K):\nthe whole block is Vᵀ, (dim, key) = (n, k)",
            "dim (n)",
            "key (k)",
            vt_names,
        ),
    ]
    for ax, panel in zip(axes, panels, strict=True):
        draw_v_block(ax, *panel)
    caption(
        axes[2],
        8,
        17.2,
        "n-tile 0 = dims 0-7 = (r0, r1);  n-tile 1 = dims 8-15 = (r2, r3)\n"
        "code: ldmatrix_x4_trans(frag[0][0], frag[0][1], frag[1][0], frag[1][1], ...)",
    )
    caption(axes[0], 8, 17.2, "shade = key: a row of V is one key")
    for left in axes[:2]:
        left.annotate(
            "",
            xy=(1.09, 0.5),
            xytext=(1.02, 0.5),
            xycoords="axes fraction",
            arrowprops={"arrowstyle": "-|>", "lw": 2, "color": "black"},
        )
    fig.suptitle("V as the B operand of P · V: a transpose inside each matrix, and one between them", fontsize=12)
    fig.tight_layout(w_pad=7)
    save(fig, path)
