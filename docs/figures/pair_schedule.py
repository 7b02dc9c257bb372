"""Chapter 15: the causal query tiles each block of a persistent grid takes, in pairs or strided, against kernel
14's blocks in launch order, and the heads at work at once (pair_schedule.png). A model of work_at at the causal
headline shape; no results file."""

from __future__ import annotations

import heapq
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt

from .style import save

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
    return [
        (t // q_tiles // heads, t // q_tiles % heads, t % q_tiles) for t in range(block, q_tiles * heads * batch, grid)
    ]


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
    fig.suptitle(
        f"Causal, {shape['q_tiles']} query tiles per head, {shape['heads']} heads, batch {shape['batch']}, "
        f"{SMS} SMs; a model: a query tile takes as long as its key tiles, nothing else",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save(fig, path)
