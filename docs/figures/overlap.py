"""Chapter 14: one consumer warpgroup's tile loop, each product waited for (kernel 13) or S and P·V skewed by one
tile (kernel 14) (overlap.png). A schematic in arbitrary units; no results file."""

from __future__ import annotations

from pathlib import Path

from .style import Bar, draw_timelines

# A warpgroup's work per tile (arbitrary units: a schematic, not a measurement). The softmax runs on the warps'
# own units; S and P·V on the tensor cores; O's rescale and P's packing come after P·V of the tile before.
PRODUCT, SOFTMAX, PACK = 1.0, 1.2, 0.3
SCORES, PRODUCTS, SOFTMAXES, PACKS = "S = Q·Kᵀ", "O += P·V", "softmax", "pack P (kernel 14: and rescale O)"


def schedule_waiting(n_tiles: int) -> list[Bar]:
    """Kernel 13: S_j, wait, softmax_j, pack P_j, then P_j V_j, wait; the next tile starts when P·V is done."""
    steps, now = [], 0.0
    for j in range(n_tiles):
        steps += [
            (SCORES, j, now, PRODUCT),
            (SOFTMAXES, j, now + PRODUCT, SOFTMAX),
            (PACKS, j, now + PRODUCT + SOFTMAX, PACK),
            (PRODUCTS, j, now + PRODUCT + SOFTMAX + PACK, PRODUCT),
        ]
        now += 2 * PRODUCT + SOFTMAX + PACK
    return steps


def schedule_skewed(n_tiles: int) -> list[Bar]:
    """Kernel 14: tile 0's S alone; then iteration j issues S_j and P_{j-1} V_{j-1} back to back, runs softmax_j
    once S_j is in, while P·V runs, and rescales O and packs P_j once both are done; the last P·V after the loop."""
    steps = [(SCORES, 0, 0.0, PRODUCT), (SOFTMAXES, 0, PRODUCT, SOFTMAX), (PACKS, 0, PRODUCT + SOFTMAX, PACK)]
    now = PRODUCT + SOFTMAX + PACK
    for j in range(1, n_tiles):
        scores_done = now + PRODUCT
        steps += [
            (SCORES, j, now, PRODUCT),
            (PRODUCTS, j - 1, scores_done, PRODUCT),
            (SOFTMAXES, j, scores_done, SOFTMAX),
        ]
        now = max(scores_done + SOFTMAX, scores_done + PRODUCT)  # wgmma_wait<0>: P·V has landed too
        steps.append((PACKS, j, now, PACK))
        now += PACK
    steps.append((PRODUCTS, n_tiles - 1, now, PRODUCT))
    return steps


def figure_overlap(path: Path, n_tiles: int = 4) -> None:
    """One consumer warpgroup's loop: each product waited for (kernel 13), or S and P·V skewed by a tile (14)."""
    scenarios = [
        ("kernel 13: wait for each product", schedule_waiting(n_tiles)),
        (
            "kernel 14: S of tile j and P·V of tile j − 1 issued together, the softmax of tile j under P·V",
            schedule_skewed(n_tiles),
        ),
    ]
    colors = {SCORES: "#dd8452", PRODUCTS: "#c44e52", SOFTMAXES: "#4c72b0", PACKS: "#8fb8de"}
    units = [("tensor cores", (SCORES, PRODUCTS)), ("the warpgroup's threads", (SOFTMAXES, PACKS))]
    draw_timelines(
        path,
        scenarios,
        units,
        colors,
        height=4.6,
        title="One consumer warpgroup's tile loop, alone on the tensor cores\n"
        "schematic: the other warpgroup, which fills some of these gaps, is left out",
        xlabel=f"time (schematic units: a product {PRODUCT}, a softmax {SOFTMAX}, rescale and pack {PACK}; "
        "numbers in the bars are K/V tile indices)",
        done_at=(0.1, 1.5),
        dark_labels=(PACKS,),
        legend_top=-0.2,
    )
