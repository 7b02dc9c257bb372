"""Chapter 18: the second decode shape's work items on the SMs, unsplit (kernel 17) or with the key tiles of each
query tile split as kernels/launch.py's split_count decides (kernel 18), and how combine_splits merges a row's
splits (split_kv.png). A model of work_at and combine_splits; no results file."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch, Rectangle

from kernels.launch import kernel_constants, split_count
from kernels.tools.commands import DECODE_SHAPES

from .packed_gqa import query_tiles
from .style import C_HUES, HUES, save

KERNEL_SOURCE = Path(__file__).resolve().parents[2] / "k18_split_kv" / "flash_attention.cu"
BLOCK_Q, BLOCK_KV = (kernel_constants(KERNEL_SOURCE)[name] for name in ("BLOCK_Q", "BLOCK_KV"))
DECODE = DECODE_SHAPES[1]  # 8 sequences of one query, 32,768 keys, 32 query heads on 8 K/V heads
SMS = 132  # the H200's, one block per SM in the persistent grid
SM_COLUMNS = 22  # the SMs drawn as 6 rows of 22
WorkItem = tuple[int, int, int, int]  # query tile, split, first key tile, key tiles


def decode_tiles(shape: dict) -> tuple[int, int]:
    """(query tiles of the call, key tiles of each), with kernel 17's packed tiles: one per (sequence, K/V group)
    at one query."""
    per_sequence = query_tiles(shape["seq_len"], shape["heads"], shape["kv_heads"], packed=True, block_q=BLOCK_Q)
    return shape["batch"] * len(per_sequence), math.ceil(shape["kv_len"] / BLOCK_KV)


def splits_of(shape: dict, sms: int = SMS) -> int:
    """The splits kernel 18 deals each query tile's keys to at this shape: kernels/launch.py's split_count."""
    return split_count(*decode_tiles(shape), sms)


def block_work(block: int, grid: int, q_tiles: int, n_splits: int, key_tiles: int) -> list[WorkItem]:
    """Kernel 18's work_at for one block when every query tile is alone in its group (a decode call): items b,
    b + grid, ..., item i the query tile i // n_splits and its split i % n_splits, a run of consecutive key tiles."""
    split_tiles = (key_tiles - 1) // n_splits + 1
    work = []
    for item in range(block, q_tiles * n_splits, grid):
        split = item % n_splits
        first = split * split_tiles
        if (n_tiles := min(split_tiles, key_tiles - first)) > 0:
            work.append((item // n_splits, split, first, n_tiles))
    return work


def sm_work(q_tiles: int, n_splits: int, key_tiles: int, sms: int = SMS) -> list[list[WorkItem]]:
    """Every SM's work items: the persistent grid has a block per work item, at most one per SM."""
    grid = min(q_tiles * n_splits, sms)
    return [block_work(sm, grid, q_tiles, n_splits, key_tiles) if sm < grid else [] for sm in range(sms)]


def split_rows(scores: np.ndarray, values: np.ndarray, stops: list[int]) -> list[tuple[np.ndarray, float]]:
    """One row's splits: each split's output normalised by its own sum, and its log-sum-exp (-inf if it saw no
    key); the keys of split s are stops[s - 1] ... stops[s] - 1."""
    parts, start = [], 0
    for stop in stops:
        s = scores[start:stop]
        if len(s) == 0:
            parts.append((np.zeros(values.shape[1]), -math.inf))
        else:
            m = s.max()
            p = np.exp(s - m)
            parts.append((p @ values[start:stop] / p.sum(), m + math.log(p.sum())))
        start = stop
    return parts


def combine(parts: list[tuple[np.ndarray, float]]) -> tuple[np.ndarray, float]:
    """combine_splits for one row: weights exp(lse_s - max lse), splits that saw nothing passed over."""
    lse_max = max(lse for _, lse in parts)
    kept = [(o, math.exp(lse - lse_max)) for o, lse in parts if lse != -math.inf]
    total = sum(weight for _, weight in kept)
    if total == 0:
        return np.zeros_like(parts[0][0]), -math.inf
    return sum(weight * o for o, weight in kept) / total, lse_max + math.log(total)


# ---------------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------------


def draw_sms(ax: plt.Axes, work: list[list[WorkItem]], title: str) -> None:
    """The SMs as a grid, SM 0 top left: a busy one in its split's hue and labelled with its query tile."""
    rows = math.ceil(len(work) / SM_COLUMNS)
    ax.set_xlim(-0.1, SM_COLUMNS + 0.1)
    ax.set_ylim(rows + 0.1, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    for sm, items in enumerate(work):
        x, y = sm % SM_COLUMNS, sm // SM_COLUMNS
        color = HUES[items[0][1] % len(HUES)] if items else "white"
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=color, edgecolor="#999999", linewidth=0.6))
        if items:
            ax.text(x + 0.5, y + 0.5, str(items[0][0]), ha="center", va="center", fontsize=8)
    ax.set_title(title, fontsize=10, loc="left")


def flow_box(ax: plt.Axes, x: float, y: float, width: float, height: float, text: str, color: str) -> None:
    """A rounded box centred on (x, y) with its text."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02",
            facecolor=color,
            edgecolor="#555555",
            linewidth=0.8,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def arrow(ax: plt.Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    """An arrow from one box to the next."""
    ax.annotate("", end, start, arrowprops={"arrowstyle": "->", "color": "#555555", "linewidth": 1.2})


def draw_combine(ax: plt.Axes, n_splits: int, key_tiles: int) -> None:
    """One row's splits, each a run of key tiles that writes (O_s, lse_s), merged by combine_splits."""
    ax.set_xlim(0, 10)
    ax.set_ylim(10, 0)
    ax.axis("off")
    split_tiles = (key_tiles - 1) // n_splits + 1
    xs = [10 * (s + 0.5) / n_splits for s in range(n_splits)]
    for s, x in enumerate(xs):
        first, last = s * split_tiles, min((s + 1) * split_tiles, key_tiles) - 1
        flow_box(ax, x, 1.0, 4.3, 1.2, f"split {s}\nkey tiles {first}–{last}", HUES[s % len(HUES)])
        flow_box(ax, x, 3.2, 4.3, 1.4, f"O_{s}: fp32, by its own sum\nlse_{s} = ln Σ exp(scale · s_j)", "#f2f2f2")
        arrow(ax, (x, 1.6), (x, 2.5))
        arrow(ax, (x, 3.9), (5 + (x - 5) * 0.3, 5.1))
    terms = " + ".join(f"w_{s}·O_{s}" for s in range(n_splits))
    weights = " + ".join(f"w_{s}" for s in range(n_splits))
    flow_box(
        ax,
        5,
        6.9,
        9.4,
        3.4,
        f"combine_splits, one warp per row:\n\nm = max_s lse_s,   w_s = exp(lse_s − m)\n\n"
        f"O = ({terms}) / ({weights})\nlse = m + ln({weights})",
        C_HUES[0],  # fp32, as the accumulators
    )
    ax.text(
        5,
        9.0,
        "w_s ≤ 1, and the split that holds m has w_s = 1:\n"
        "the division is safe; a split with lse_s = −∞ is passed over",
        ha="center",
        va="top",
        fontsize=9,
    )
    ax.set_title("Each row merged from its splits' (O_s, lse_s)", fontsize=10)


def figure_split_kv(path: Path) -> None:
    """Chapter 18: the second decode shape's work items on the SMs, unsplit and split, and one row's combine."""
    q_tiles, key_tiles = decode_tiles(DECODE)
    n_splits = splits_of(DECODE)
    unsplit, split = sm_work(q_tiles, 1, key_tiles), sm_work(q_tiles, n_splits, key_tiles)
    fig = plt.figure(figsize=(12, 5.6))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.25, 1])
    for row, (work, name) in enumerate([(unsplit, "kernel 17: no split"), (split, f"kernel 18: {n_splits} splits")]):
        busy = [items for items in work if items]
        longest = max(n for items in busy for *_, n in items)
        draw_sms(
            fig.add_subplot(grid[row, 0]),
            work,
            f"{name}: {sum(map(len, busy))} work items of {longest} key tiles on {SMS} SMs, {SMS - len(busy)} idle",
        )
    draw_combine(fig.add_subplot(grid[:, 1]), n_splits, key_tiles)
    fig.suptitle(
        f"{DECODE['batch']} × {DECODE['kv_len']:,} keys, {DECODE['heads']} query heads on {DECODE['kv_heads']} K/V "
        f"heads: {q_tiles} packed query tiles of {key_tiles} key tiles; split_count({q_tiles}, {key_tiles}, {SMS}) "
        f"= {n_splits}\n(an SM's number: the query tile it runs; its colour: the split)",
        fontsize=11,
    )
    fig.tight_layout()
    save(fig, path)
