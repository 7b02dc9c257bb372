"""Chapters 2 and 5: one block's main loop as copies against math, synchronous, with V copied under S, and with two
stages (pipeline.png). A schematic in arbitrary units; no results file."""

from __future__ import annotations

from pathlib import Path

from .style import Bar, draw_timelines

COPY_K, COPY_V, MATH_S, MATH_PV = 1.0, 1.0, 1.3, 1.0  # arbitrary units: a schematic, not a measurement
STEP_COLORS = {"copy K": "#4c72b0", "copy V": "#8fb8de", "S = Q·Kᵀ, softmax": "#dd8452", "O += P·V": "#c44e52"}


def schedule_synchronous(n_tiles: int) -> list[Bar]:
    """Kernel 1: copy K and V, wait, then all the math; nothing overlaps."""
    steps, now = [], 0.0
    for j in range(n_tiles):
        steps += [("copy K", j, now, COPY_K), ("copy V", j, now + COPY_K, COPY_V)]
        now += COPY_K + COPY_V
        steps += [("S = Q·Kᵀ, softmax", j, now, MATH_S), ("O += P·V", j, now + MATH_S, MATH_PV)]
        now += MATH_S + MATH_PV
    return steps


def schedule_v_overlap(n_tiles: int) -> list[Bar]:
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


def schedule_two_stages(n_tiles: int) -> list[Bar]:
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
    """When the copies of each K/V tile run against the math, in three schedules of one block's main loop."""
    scenarios = [
        ("kernel 1: synchronous copies", schedule_synchronous(n_tiles)),
        ("kernels 2-4: V copied under S and softmax", schedule_v_overlap(n_tiles)),
        ("two stages (chapter 5): tile j+1 copied under tile j", schedule_two_stages(n_tiles)),
    ]
    rows = [("copy", ("copy K", "copy V")), ("math", ("S = Q·Kᵀ, softmax", "O += P·V"))]
    draw_timelines(
        path,
        scenarios,
        rows,
        STEP_COLORS,
        height=5.2,
        title="One block's main loop: copies (global -> shared) against math (tensor cores, softmax)\n"
        "schematic, for a block alone on its SM: a second resident block can fill the gaps as well",
        xlabel="time (schematic units; numbers in the bars are K/V tile indices)",
        done_at=(0.15, 1.1),
        dark_labels=("copy V",),
        legend_top=-0.16,
    )
