"""Chapter 21: one consumer warpgroup's tile loop as the SASS orders it, the whole softmax after the wait for P·V
(kernel 20) or the row maxima between the two waits (kernel 21) (maxima_first.png). A schematic in arbitrary
units; no results file."""

from __future__ import annotations

from pathlib import Path

from .style import Bar, draw_timelines

# A warpgroup's work per tile (arbitrary units: a schematic, not a measurement). The maxima need S alone; the
# exponentials and sums follow them; O's rescale and P's packing need P·V of the tile before to have landed.
PRODUCT, MAXIMA, EXPONENTIALS, PACK = 1.0, 0.3, 0.9, 0.3
SCORES, PRODUCTS = "S = Q·Kᵀ", "O += P·V"
MAXIMA_STEP, EXPONENTIALS_STEP, PACKS = "row maxima", "exponentials and sums", "rescale O, pack P"


def schedule(n_tiles: int, *, maxima_first: bool) -> list[Bar]:
    """Iteration j issues S_j and P_{j-1} V_{j-1} back to back. Kernel 20 waits for both before any of tile j's
    softmax; kernel 21 takes the maxima as soon as S_j lands, under P·V, and the exponentials once P·V has landed
    too (its fence). The last P·V follows the loop."""
    steps = [(SCORES, 0, 0.0, PRODUCT)]
    now = PRODUCT  # tile 0 waits for S alone
    for j in range(n_tiles):
        scores_done = now if j == 0 else now + PRODUCT
        both_done = scores_done if j == 0 else scores_done + PRODUCT
        if j > 0:
            steps += [(SCORES, j, now, PRODUCT), (PRODUCTS, j - 1, scores_done, PRODUCT)]
        maxima_start = scores_done if maxima_first else both_done
        exponentials_start = max(maxima_start + MAXIMA, both_done)
        steps += [
            (MAXIMA_STEP, j, maxima_start, MAXIMA),
            (EXPONENTIALS_STEP, j, exponentials_start, EXPONENTIALS),
            (PACKS, j, exponentials_start + EXPONENTIALS, PACK),
        ]
        now = exponentials_start + EXPONENTIALS + PACK
    steps.append((PRODUCTS, n_tiles - 1, now, PRODUCT))
    return steps


def figure_maxima_first(path: Path, n_tiles: int = 4) -> None:
    """One consumer warpgroup's loop in the order of its SASS: kernel 20 against kernel 21."""
    scenarios = [
        (
            "kernel 20: the wait for P·V right after the wait for S, the whole softmax after both",
            schedule(n_tiles, maxima_first=False),
        ),
        ("kernel 21: the row maxima between the two waits, under P·V", schedule(n_tiles, maxima_first=True)),
    ]
    colors = {
        SCORES: "#dd8452",
        PRODUCTS: "#c44e52",
        MAXIMA_STEP: "#55a868",
        EXPONENTIALS_STEP: "#4c72b0",
        PACKS: "#8fb8de",
    }
    units = [("tensor cores", (SCORES, PRODUCTS)), ("the warpgroup's threads", (MAXIMA_STEP, EXPONENTIALS_STEP, PACKS))]
    draw_timelines(
        path,
        scenarios,
        units,
        colors,
        height=4.6,
        title="One consumer warpgroup's tile loop as the SASS orders it, alone on the tensor cores\n"
        "schematic: the other warpgroup, which fills some of these gaps, is left out",
        xlabel=f"time (schematic units: a product {PRODUCT}, the maxima {MAXIMA}, the exponentials {EXPONENTIALS}, "
        f"rescale and pack {PACK}; numbers in the bars are K/V tile indices)",
        done_at=(0.1, 1.5),
        dark_labels=(PACKS,),
        legend_top=-0.2,
    )
