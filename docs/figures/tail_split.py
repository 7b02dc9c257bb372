"""The split tail: the end of a full-attention run at 4 × 16,384 keys, each SM's last work items, with whole tiles
(kernel 29) and with the last wave split along its keys (k29_tail_split), as the work list deals them
(tail_split.png). A model: no results file."""

from __future__ import annotations

import heapq
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from kernels.launch import tail_split

from .style import save

# 4 × 16,384 keys, 16 heads: 128 query tiles per (batch, head), each of 128 key tiles, on the H200's 132 SMs. Time is
# counted in key tiles; a work item costs one more for its start and end (Q's load, the first tile's scores alone,
# the epilogue), and the merge of a split tile, read back from its pieces, one more after its last piece.
QUERY_TILES, KEY_TILES, SMS = 4 * 16 * 128, 128, 132
START, MERGE = 1, 1
Item = tuple[int, str, int, int]  # SM, kind ("tile", "piece", "merge"), start, end


def work_list(split: bool) -> list[tuple[str, int, int]]:
    """The items in the order the counter deals them: (kind, query tile, cost); with ``split``, the last wave's
    tiles once per piece, as tail_split cuts them."""
    tail, pieces = tail_split(QUERY_TILES, KEY_TILES, SMS) if split else (0, 1)
    items = [("tile", tile, KEY_TILES + START) for tile in range(QUERY_TILES - tail)]
    for tile in range(QUERY_TILES - tail, QUERY_TILES):
        items += [("piece", tile, KEY_TILES // pieces + START)] * pieces
    return items


def run(split: bool) -> list[Item]:
    """Each SM takes the next item as soon as its last one ends; a tile's last piece to end merges them all."""
    free_at = [(0, sm) for sm in range(SMS)]
    runs, last_piece = [], {}
    for kind, tile, cost in work_list(split):
        start, sm = heapq.heappop(free_at)
        end = start + cost
        if kind == "piece" and end >= last_piece.get(tile, (-1, 0))[0]:
            last_piece[tile] = (end, len(runs))
        runs.append((sm, kind, start, end))
        heapq.heappush(free_at, (end, sm))
    # The tail's pieces are the list's last items: no item waits behind a merge.
    for end, index in last_piece.values():
        sm = runs[index][0]
        runs.append((sm, "merge", end, end + MERGE))
    return runs


def finish(runs: list[Item]) -> int:
    """When the last SM is done: the run's time."""
    return max(end for *_, end in runs)


def idle_share(runs: list[Item]) -> float:
    """The share of the SMs' time, up to the run's end, in which they have no work."""
    return 1 - sum(end - start for _, _, start, end in runs) / (SMS * finish(runs))


COLORS = {"tile": "#4c72b0", "piece": "#dd8452", "merge": "#c44e52"}


def figure_tail_split(path: Path) -> None:
    """The split tail: the last two tiles' time of the run, SM by SM, whole tiles against a split last wave."""
    whole, split = run(split=False), run(split=True)
    window_start = finish(whole) - 2 * (KEY_TILES + START)
    tail, pieces = tail_split(QUERY_TILES, KEY_TILES, SMS)
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    titles = [
        f"kernel 29: whole tiles, a last wave of {tail}",
        f"k29_tail_split: the last wave's {tail} tiles split into {pieces} pieces each, merged by the last piece",
    ]
    for ax, runs, title in zip(axes, (whole, split), titles, strict=True):
        for sm, kind, start, end in runs:
            if end > window_start:
                ax.barh(
                    sm,
                    end - max(start, window_start),
                    left=max(start, window_start),
                    height=1.0,
                    color=COLORS[kind],
                    linewidth=0,
                )
        ax.axvline(finish(runs), color="black", linestyle="--", linewidth=1)
        ax.set_title(
            f"{title}: ends at {finish(runs):,}, the SMs idle {100 * idle_share(runs):.1f}% of the run", fontsize=10
        )
        ax.set_ylabel("SM")
        ax.set_ylim(SMS, 0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[-1].set_xlabel("time, counted in key tiles (a tile: 128 and 1 for its start and end)")
    axes[-1].set_xlim(window_start, finish(whole) + 4)
    labels = {"tile": "a whole query tile", "piece": "a piece of a tail tile", "merge": "the merge of its pieces"}
    fig.legend(
        [Patch(color=COLORS[k]) for k in labels], labels.values(), loc="lower center", ncol=3, fontsize=9, frameon=False
    )
    fig.suptitle(
        f"4 × 16,384 keys, 16 heads: {QUERY_TILES:,} query tiles on {SMS} SMs, dealt from a counter, all of one"
        " length; a model, not a measurement",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save(fig, path)
