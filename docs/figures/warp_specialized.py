"""Chapter 12: kernel 11's warpgroups in lockstep against kernel 12's producer warpgroup and per-stage barriers
(warp_specialized.png). A schematic in arbitrary units; no results file."""

from __future__ import annotations

from pathlib import Path

from .pipeline import STEP_COLORS
from .style import Bar, draw_timelines

COPY_TILE = 0.9  # one tile's K and V (arbitrary units: a schematic, not a measurement)
# The two consumer warpgroups' time per tile: the same on average, uneven from tile to tile.
GROUP_TILE_TIMES = ((1.0, 1.4, 1.0, 1.4, 1.0, 1.4), (1.4, 1.0, 1.4, 1.0, 1.4, 1.0))


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
    """Kernel 11's lockstep against a producer warpgroup and per-stage barriers, two stages, uneven tiles."""
    scenarios = [
        ("kernel 11: one block barrier per tile, thread 0 copies after it", schedule_lockstep()),
        ("kernel 12: a producer warpgroup, a filled and a free mbarrier per stage", schedule_producer()),
    ]
    colors = {"copies": STEP_COLORS["copy K"], "warpgroup 0": "#dd8452", "warpgroup 1": "#c44e52"}
    draw_timelines(
        path,
        scenarios,
        [(name, (name,)) for name in colors],
        colors,
        height=4.6,
        title="One block's tile loop with two stages: the warpgroups in lockstep, then each at its own pace\n"
        "schematic: copies of one tile after another, each warpgroup's tile as one bar",
        xlabel="time (schematic units; numbers in the bars are K/V tile indices; the warpgroups' tiles "
        "take 1.0 or 1.4 in turn)",
        done_at=(0.1, 2.1),
    )
