"""Chapter 17: the query tiles of one K/V group at the first decode shape, one head per tile (kernel 16) or the
group's heads packed as the rows of one tile (kernel 17), and a group of 3 that leaves two rows empty
(packed_gqa.png). The rows are placed by the kernel's own rule; no results file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import ConnectionPatch, Rectangle

from kernels.launch import kernel_constants
from kernels.tools.commands import DECODE_SHAPES

from .style import HUES, box, save

KERNEL_SOURCE = Path(__file__).resolve().parents[2] / "k17_packed_gqa" / "flash_attention.cu"
BLOCK_Q, BLOCK_KV = (kernel_constants(KERNEL_SOURCE)[name] for name in ("BLOCK_Q", "BLOCK_KV"))
DECODE = DECODE_SHAPES[0]  # 64 sequences of one query, 8,192 keys, 32 query heads on 8 K/V heads
THREE = {"seq_len_q": 42, "heads": 12, "kv_heads": 4}  # a group of 3, at as many positions as one tile holds
PADDING, EMPTY, KV_COLOR = "#e4e4e4", "white", "#c9c9e8"


@dataclass(frozen=True)
class QueryTile:
    """One work item's query tile: positions p0 ..., heads head0 ... head_end - 1 of K/V head kv_head."""

    kv_head: int
    p0: int
    head0: int
    head_end: int
    tile_heads: int
    tile_positions: int


def packed_tile(n_heads: int, n_kv_heads: int, *, packed: bool = True, block_q: int = BLOCK_Q) -> tuple[int, int]:
    """(tile_heads, tile_positions) as kernel 17 derives them: the group's heads, at most block_q, at
    block_q // tile_heads positions; unpacked (kernel 16) one head at block_q positions."""
    tile_heads = min(n_heads // n_kv_heads, block_q) if packed else 1
    return tile_heads, block_q // tile_heads


def query_tiles(seq_len_q: int, n_heads: int, n_kv_heads: int, *, packed: bool, block_q: int = BLOCK_Q) -> list:
    """One sequence's query tiles, as the work list walks them: per K/V head, per chunk of its group's heads (a
    group larger than a tile takes several), per tile_positions positions."""
    group = n_heads // n_kv_heads
    tile_heads, tile_positions = packed_tile(n_heads, n_kv_heads, packed=packed, block_q=block_q)
    return [
        QueryTile(kv_head, p0, head0, min(head0 + tile_heads, (kv_head + 1) * group), tile_heads, tile_positions)
        for kv_head in range(n_kv_heads)
        for head0 in range(kv_head * group, (kv_head + 1) * group, tile_heads)
        for p0 in range(0, seq_len_q, tile_positions)
    ]


def row_of(tile: QueryTile, position: int, head: int) -> int:
    """The row a (position, head) takes in its tile: (position - p0) × tile_heads + (head - head0)."""
    return (position - tile.p0) * tile.tile_heads + (head - tile.head0)


def row_slot(tile: QueryTile, row: int) -> tuple[int, int] | None:
    """The (position, head) a row of the tile's Q box holds, as the epilogue reads it back (position = p0 + row /
    tile_heads, head = head0 + row % tile_heads); None past tile_heads × tile_positions rows, which no box fills."""
    if row // tile.tile_heads >= tile.tile_positions:
        return None
    return tile.p0 + row // tile.tile_heads, tile.head0 + row % tile.tile_heads


def holds_a_query(tile: QueryTile, row: int, seq_len_q: int) -> bool:
    """Whether the epilogue writes the row: a position of q and a head of the tile's group."""
    slot = row_slot(tile, row)
    return slot is not None and slot[0] < seq_len_q and slot[1] < tile.head_end


def kv_reads(tiles: list[QueryTile], kv_head: int) -> int:
    """How often each K/V tile of a K/V head is read (non-causal): once by every query tile of its group."""
    return sum(tile.kv_head == kv_head for tile in tiles)


# ---------------------------------------------------------------------------------------------------
# Drawing: a tile is a column of BLOCK_Q rows, row 0 on top, a query's row in the hue of its head.
# ---------------------------------------------------------------------------------------------------


def row_color(tile: QueryTile, row: int, seq_len_q: int) -> str:
    """A query's row in its head's hue (by its place in the group), a row of the box past q grey, no row white."""
    slot = row_slot(tile, row)
    if slot is None:
        return EMPTY
    return HUES[(slot[1] - tile.head0) % len(HUES)] if holds_a_query(tile, row, seq_len_q) else PADDING


def draw_tile(ax: plt.Axes, tile: QueryTile, seq_len_q: int, x: float, width: float) -> None:
    """A tile's BLOCK_Q rows as a column at x, framed; empty rows hatched."""
    for row in range(BLOCK_Q):
        color = row_color(tile, row, seq_len_q)
        ax.add_patch(Rectangle((x, row), width, 1, facecolor=color, edgecolor="none", hatch="///" * (color == EMPTY)))
    ax.add_patch(Rectangle((x, 0), width, BLOCK_Q, fill=False, edgecolor="black", linewidth=0.8))


def zoom_label(tile: QueryTile, row: int, seq_len_q: int, *, short: bool) -> str:
    """What a row holds, in words: its (position, head), or past q, or nothing."""
    slot = row_slot(tile, row)
    if slot is None:
        return f"row {row}: empty"
    if short:
        return f"{row}: position {slot[0]}"
    past = "" if holds_a_query(tile, row, seq_len_q) else ", past q"
    return f"row {row}: position {slot[0]}, head {slot[1]}{past}"


def draw_zoom(
    ax: plt.Axes,
    tile: QueryTile,
    seq_len_q: int,
    rows: range,
    x_tile: float,
    at: tuple[float, float, float],
    row_height: float,
    *,
    short: bool = False,
) -> None:
    """Rows of a tile enlarged, at (x, y) and width, each labelled with what it holds, joined to where they lie."""
    x, y, width = at
    for i, row in enumerate(rows):
        color = row_color(tile, row, seq_len_q)
        text = zoom_label(tile, row, seq_len_q, short=short)
        box(ax, y + i * row_height, x, width, color, text, height=row_height, fontsize=9, edge="black", linewidth=0.5)
    for corner_row, corner_y in ((rows.start, y), (rows.stop, y + len(rows) * row_height)):
        ax.add_artist(ConnectionPatch((x_tile, corner_row), (x, corner_y), "data", "data", color="grey", linewidth=0.6))


def draw_kv(ax: plt.Axes, x: float, width: float, y: float, key_tiles: int, kv_head: int) -> None:
    """The K/V tiles of one K/V head, a row of key_tiles cells."""
    for t in range(key_tiles):
        ax.add_patch(Rectangle((x + t * width / key_tiles, y), width / key_tiles, 6, facecolor=KV_COLOR, lw=0.2))
    ax.add_patch(Rectangle((x, y), width, 6, fill=False, edgecolor="black", linewidth=0.8))
    ax.text(x + width / 2, y + 8, f"K and V of K/V head {kv_head}: {key_tiles} tiles", ha="center", va="top")


def read_arrow(ax: plt.Axes, x: float, y_from: float, y_to: float) -> None:
    """An arrow from a query tile down to the K/V tiles it reads."""
    ax.annotate("", (x, y_to), (x, y_from), arrowprops={"arrowstyle": "<-", "color": "#555555", "linewidth": 1.2})


def figure_packed_gqa(path: Path) -> None:
    """Chapter 17: one K/V group's query tiles at the first decode shape, one head per tile or packed; a group of 3."""
    seq_len_q, heads, kv_heads = DECODE["seq_len"], DECODE["heads"], DECODE["kv_heads"]
    key_tiles = DECODE["kv_len"] // BLOCK_KV
    unpacked = [t for t in query_tiles(seq_len_q, heads, kv_heads, packed=False) if t.kv_head == 0]
    packed = [t for t in query_tiles(seq_len_q, heads, kv_heads, packed=True) if t.kv_head == 0]
    three = query_tiles(THREE["seq_len_q"], THREE["heads"], THREE["kv_heads"], packed=True)[0]
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(12, 6.2), gridspec_kw={"width_ratios": [19.4, 12.6, 10.6]})
    kv_y, zoom_y, zoom_row = BLOCK_Q + 14, 4, 8
    for ax in (left, middle, right):
        ax.set_ylim(kv_y + 14, -22)
        ax.axis("off")

    left.set_xlim(-0.3, 19.1)
    zoomed = range(3)
    for i, tile in enumerate(unpacked):
        x = 4.8 * i
        draw_tile(left, tile, seq_len_q, x, 0.8)
        draw_zoom(left, tile, seq_len_q, zoomed, x + 0.8, (x + 1.05, zoom_y, 3.55), zoom_row, short=True)
        left.text(x + 2.3, -3, f"head {tile.head0}", ha="center", va="bottom", fontsize=10, fontweight="bold")
        read_arrow(left, x + 0.4, BLOCK_Q, kv_y)
    draw_kv(left, 0, 15.4, kv_y, key_tiles, 0)
    left.text(
        9.4, -13, f"row = position − p0; rows {zoomed.stop}–{BLOCK_Q - 1}: positions past q", ha="center", fontsize=10
    )
    left.set_title(
        f"kernel 16: a tile per query head, one real row in each\n{len(unpacked)} work items: "
        f"each K/V tile read {kv_reads(unpacked, 0)} times",
        fontsize=11,
    )

    tile = packed[0]
    shown = range(2 * tile.tile_heads)
    middle.set_xlim(-0.3, 12.7)
    draw_tile(middle, tile, seq_len_q, 0, 1)
    read_arrow(middle, 0.5, BLOCK_Q, kv_y)
    draw_kv(middle, 0, 12, kv_y, key_tiles, 0)
    draw_zoom(middle, tile, seq_len_q, shown, 1, (1.4, zoom_y, 10.9), zoom_row)
    middle.text(
        6.85,
        zoom_y + len(shown) * zoom_row + 5,
        f"rows {shown.stop}–{BLOCK_Q - 1}: positions {row_slot(tile, shown.stop)[0]}–"
        f"{row_slot(tile, BLOCK_Q - 1)[0]}, past q",
        ha="center",
        va="top",
        fontsize=9,
    )
    middle.text(6.2, -13, "row = (position − p0) × tile_heads + (head − head0)", ha="center", fontsize=10)
    middle.set_title(
        f"kernel 17: the group's {tile.tile_heads} heads packed in one tile\n{len(packed)} work item: "
        f"each K/V tile read {kv_reads(packed, 0)} time",
        fontsize=11,
    )

    right.set_xlim(-0.3, 10.3)
    draw_tile(right, three, THREE["seq_len_q"], 0, 1)
    first, last = range(three.tile_heads), range(BLOCK_Q - 5, BLOCK_Q)
    draw_zoom(right, three, THREE["seq_len_q"], first, 1, (1.4, zoom_y, 8.6), zoom_row)
    draw_zoom(right, three, THREE["seq_len_q"], last, 1, (1.4, BLOCK_Q - len(last) * zoom_row, 8.6), zoom_row)
    held = sum(holds_a_query(three, row, THREE["seq_len_q"]) for row in range(BLOCK_Q))
    right.text(
        5.85,
        62,
        f"tile_heads = {three.tile_heads},\ntile_positions = {three.tile_positions}\n\n"
        f"rows {first.stop}–{last.start - 1}: positions {row_slot(three, first.stop)[0]}–"
        f"{row_slot(three, last.start - 1)[0]},\nheads {', '.join(map(str, range(three.head0, three.head_end)))} "
        f"in turn\n\n{held} rows hold queries,\n{BLOCK_Q - held} stay empty",
        ha="center",
        va="center",
        fontsize=9,
    )
    right.set_title(
        f"kernel 17, a group of {three.tile_heads}: {THREE['heads']} heads\non {THREE['kv_heads']} K/V heads, "
        f"{THREE['seq_len_q']} queries",
        fontsize=11,
    )
    fig.suptitle(
        f"The query tiles of K/V head 0 at {DECODE['batch']} × {DECODE['kv_len']:,} keys, {heads} query heads on "
        f"{kv_heads} K/V heads, one query per sequence\n{BLOCK_Q} rows a tile; a row's colour: its head's place in "
        "the group",
        fontsize=11,
    )
    fig.tight_layout()
    save(fig, path)
