"""Page 0's mma.sync figures: which lane holds which elements of an m16n8k16's operands (mma_fragments.png), and
the same registers drawn where Q, K and V lie in shared memory (operand_registers.png). Computed from the
fragment formulas (row = lane / 4, col = (lane % 4) * 2); no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import C_HUES, FOLLOWED_LANE, HUES, box, draw_fragment_pairs, grid_axes, outline, patch_legend, save, shade

# ---------------------------------------------------------------------------------------------------
# mma_fragments.png: who holds what in an mma.m16n8k16.
# ---------------------------------------------------------------------------------------------------


def figure_mma_fragments(path: Path) -> None:
    """Who holds what in an mma.m16n8k16: the basic (8, 8) fragment, then A, B and C / D built from it."""
    fig, axes = plt.subplots(
        1, 4, figsize=(19, 8.4), layout="constrained", gridspec_kw={"width_ratios": [8, 16, 16, 8]}
    )
    fragment, a_ax, b_ax, c_ax = axes

    # The basic (8, 8) fragment in greys: the four lanes of a row (t = 0..3) get four shades.
    grid_axes(
        fragment,
        8,
        8,
        "one (8, 8) fragment of 16-bit values\nrow = lane / 4, col = (lane % 4) * 2",
        col_label="col",
        row_label="row",
    )
    for lane in range(32):
        row, col = lane // 4, (lane % 4) * 2
        box(fragment, row, col, 2, shade("#ffffff", 0.12 + 0.08 * (lane % 4)), f"T{lane}", fontsize=8)
    outline(fragment, FOLLOWED_LANE // 4, (FOLLOWED_LANE % 4) * 2, 2)
    fragment.set_xlabel("col\n", fontsize=9)
    patch_legend(
        fragment,
        [
            ("none", "a lane holds 2 adjacent values = one 32-bit register;"),
            ("none", "4 lanes share a row, 8 rows = 32 lanes"),
        ],
        top=-0.02,
        fontsize=8,
        handlelength=0,
    )

    # A (16, 16): register i is fragment (i % 2, i / 2): a0 top-left, a1 bottom-left, a2 top-right, a3 bottom-right.
    grid_axes(a_ax, 16, 16, "A operand (m, k) = (16, 16): 4 registers per lane", col_label="k", row_label="m")
    for reg in range(4):
        draw_fragment_pairs(a_ax, 8 * (reg % 2), 8 * (reg // 2), HUES[reg])
    patch_legend(
        a_ax,
        [
            (HUES[r], label)
            for r, label in enumerate(
                [
                    "a0: row g, cols 2t, 2t+1",
                    "a1: row g+8, cols 2t, 2t+1",
                    "a2: row g, cols 2t+8, 2t+9",
                    "a3: row g+8, cols 2t+8, 2t+9",
                ]
            )
        ],
        top=-0.01,
        ncol=2,
        fontsize=9,
    )

    # B (k, n) = (16, 8), stored as its transpose (n, k) = (8, 16): the same fragment map as A's top row.
    grid_axes(
        b_ax,
        8,
        16,
        "B operand, given as (n, k) = (8, 16): 2 registers per lane\nthe instruction computes D = A · Bᵀ + C",
        col_label="k",
        row_label="n",
    )
    for reg in range(2):
        draw_fragment_pairs(b_ax, 0, 8 * reg, HUES[reg])
    patch_legend(
        b_ax,
        [
            (HUES[0], "b0: row n = g, cols k = 2t, 2t+1"),
            (HUES[1], "b1: row n = g, cols k = 2t+8, 2t+9"),
            ("none", ""),
            ("none", "K is stored (key, dim) = (n, k) already,"),
            ("none", "so its rows feed B as they are"),
        ],
        top=-0.02,
        fontsize=9,
    )

    # C/D (16, 8) fp32: each lane's pair is two floats, so two registers per (8, 8) fragment.
    grid_axes(c_ax, 16, 8, "C / D (m, n) = (16, 8), fp32:\n4 registers per lane", col_label="n", row_label="m")
    for half in range(2):
        draw_fragment_pairs(c_ax, 8 * half, 0, C_HUES[half])
    patch_legend(c_ax, [(C_HUES[0], "c0, c1: row g"), (C_HUES[1], "c2, c3: row g+8")], top=-0.01, fontsize=9)

    fig.suptitle(
        f"mma.sync.m16n8k16: which lane holds which elements (g = lane / 4, t = lane % 4; "
        f"lane {FOLLOWED_LANE} outlined in red)",
        fontsize=13,
    )
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# operand_registers.png: the three operands where they lie, which lane holds which elements of Q, K, V.
# ---------------------------------------------------------------------------------------------------


def draw_operand(ax: plt.Axes, registers: int, place, **box_options) -> None:
    """Every lane's pair in each of its registers, at place(g, t, reg) = (row, col, width, height) with g = lane / 4,
    t = lane % 4; FOLLOWED_LANE's pairs outlined."""
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(registers):
            row, col, width, height = place(g, t, reg)
            box(ax, row, col, width, HUES[reg], f"T{lane}", height=height, **box_options)
            if lane == FOLLOWED_LANE:
                outline(ax, row, col, width, height)


def figure_operand_registers(path: Path) -> None:
    """Q as A, K as B and V as B of one mma, each drawn as it lies in shared memory, every pair labelled by lane."""
    fig, (q_ax, k_ax, v_ax) = plt.subplots(
        1, 3, figsize=(17, 9.8), layout="constrained", gridspec_kw={"width_ratios": [16, 16, 8]}
    )
    grid_axes(
        q_ax,
        16,
        16,
        "Q as A of S = Q·Kᵀ, stored (query, dim):\nread as it lies (ldmatrix.x4)",
        col_label="dim (k)",
        row_label="query (m)",
    )
    draw_operand(q_ax, 4, lambda g, t, reg: (g + 8 * (reg % 2), 2 * t + 8 * (reg // 2), 2, 1))
    patch_legend(
        q_ax,
        [
            (HUES[0], "a0: Q[g][2t], Q[g][2t+1]"),
            (HUES[1], "a1: Q[g+8][2t], Q[g+8][2t+1]"),
            (HUES[2], "a2: Q[g][2t+8], Q[g][2t+9]"),
            (HUES[3], "a3: Q[g+8][2t+8], Q[g+8][2t+9]"),
        ],
        top=-0.01,
        ncol=2,
        fontsize=9,
    )

    # One n-tile of K: 8 keys (n) x 16 dims (k). B "col" wants (n, k) rows, which is how K lies.
    grid_axes(
        k_ax,
        8,
        16,
        "K as B of S = Q·Kᵀ, stored (key, dim) = (n, k):\nread as it lies (ldmatrix.x4, no .trans)",
        col_label="dim (k)",
        row_label="key (n)",
    )
    draw_operand(k_ax, 2, lambda g, t, reg: (g, 2 * t + 8 * reg, 2, 1))
    patch_legend(
        k_ax,
        [
            (HUES[0], "b0: K[g][2t], K[g][2t+1]"),
            (HUES[1], "b1: K[g][2t+8], K[g][2t+9]"),
            ("none", "a pair is two neighbours in one row:"),
            ("none", "one 32-bit word of shared memory"),
        ],
        top=-0.02,
        fontsize=9,
    )

    # One n-tile of V: 16 keys (k) x 8 dims (n). B wants each lane's pair along k = key, a column of V.
    grid_axes(
        v_ax,
        16,
        8,
        "V as B of O = P·V, stored (key, dim) = (k, n):\na pair is a column (ldmatrix.x4.trans)",
        col_label="dim (n)",
        row_label="key (k)",
    )
    draw_operand(v_ax, 2, lambda g, t, reg: (2 * t + 8 * reg, g, 1, 2), fontsize=6)
    patch_legend(
        v_ax,
        [
            (HUES[0], "b0: V[2t][g], V[2t+1][g]"),
            (HUES[1], "b1: V[2t+8][g], V[2t+9][g]"),
            ("none", "a pair sits in two rows of memory:"),
            ("none", ".trans gathers them"),
        ],
        top=-0.01,
        fontsize=9,
    )

    fig.suptitle(
        f"Each lane's operand registers, drawn where the values lie in shared memory "
        f"(g = lane / 4, t = lane % 4; lane {FOLLOWED_LANE} outlined in red)",
        fontsize=13,
    )
    save(fig, path)
