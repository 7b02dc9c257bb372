"""The XOR swizzle of chapter 4 (swizzle.png), and chapter 7's addresses in that layout: one XOR per column block,
one immediate per row block (block_address.png). Computed from kernel 4's smem_index; no results file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .style import HIGHLIGHT, box, caption, grid_axes, outline, patch_legend, save

# One colour per group of four banks (a 16-byte chunk), by stored position; block_address.png reuses them per
# 16-column block.
BANK_COLORS = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"]


# ---------------------------------------------------------------------------------------------------
# swizzle.png (chapter 4): 16-byte chunk c of row r stored at chunk c ^ (r % 8).
# ---------------------------------------------------------------------------------------------------


def draw_chunk_grid(ax: plt.Axes, swizzled: bool, read_chunk: int) -> None:
    """8 rows x 16 chunks of one 256-byte-row tile, by stored position; the label is the logical chunk."""
    ax.set_xlim(0, 16)
    ax.set_ylim(8, 0)
    ax.set_aspect("equal")
    ax.set_xticks(
        [p + 0.5 for p in range(16)], [f"{4 * (p % 8)}-{4 * (p % 8) + 3}" for p in range(16)], fontsize=7, rotation=90
    )
    ax.set_yticks([r + 0.5 for r in range(8)], [str(r) for r in range(8)], fontsize=8)
    ax.tick_params(length=0, labeltop=True, labelbottom=False)
    ax.set_xlabel("stored position: banks of each 16-byte chunk (a 256-byte row wraps the 32 banks twice)", fontsize=9)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("row r", fontsize=9)
    for side in ax.spines.values():
        side.set_visible(False)
    for row in range(8):
        for chunk in range(16):
            stored = chunk ^ row if swizzled else chunk
            box(ax, row, stored, 1, BANK_COLORS[stored % 8], str(chunk), fontsize=9, edge="white")
            if chunk == read_chunk:
                outline(ax, row, stored, 1, color="black", linewidth=2.6)


def figure_swizzle(path: Path) -> None:
    """Chapter 4: 16-byte chunk c of row r stored at chunk c ^ (r % 8), against the plain layout."""
    fig, (plain, swizzled) = plt.subplots(2, 1, figsize=(11, 9.6))
    panels = [
        (
            plain,
            False,
            "plain (kernels 1-3): chunk c of every row at position c",
            "one ldmatrix phase reads chunk 0 of rows 0-7 (outlined): all in banks 0-3\n"
            "-> 8-way conflict, 8 wavefronts for 128 bytes",
        ),
        (
            swizzled,
            True,
            "swizzled (kernel 4): chunk c of row r at position c XOR (r % 8)",
            "the same 8 reads land in 8 different bank groups\n"
            "-> no conflict, 1 wavefront; chunks stay whole, so 16-byte copies and ldmatrix rows still work",
        ),
    ]
    for ax, swizzle, title, note in panels:
        draw_chunk_grid(ax, swizzle, 0)
        ax.set_title(title, fontsize=11, pad=10)
        caption(ax, 8, 8.5, note, fontsize=10)
    fig.suptitle("The XOR swizzle (label = logical chunk, colour = the 4 banks it occupies)", fontsize=12)
    fig.tight_layout(h_pad=3)
    save(fig, path)


# ---------------------------------------------------------------------------------------------------
# block_address.png (chapter 7): a lane's address in block (0, 0), and how col0 and row0 move it.
# ---------------------------------------------------------------------------------------------------


ADDRESS_LANE = 21  # row 5, lane / 16 = 1: its chunk in block (0, 0) is 1 ^ 5 = 4, so the XOR is visible
ADDRESS_BITS = 16  # a 64-row K tile is 16 KB: bits 0-13 inside it, 14-15 the stage


def lane_block_address(lane: int, row0: int, col0: int) -> int:
    """Byte offset in a tile of this lane's ldmatrix row in block (row0, col0): kernel 4's smem_index."""
    row, col = row0 + lane % 16, col0 + lane // 16 * 8
    return 256 * row + 16 * ((col // 8) ^ (row % 8))


def draw_bit_rows(ax: plt.Axes, rows: list[tuple[str, int, int]]) -> None:
    """One row of address bits per (label, value, bits that changed), bit 15 on the left."""
    for i, (label, value, changed) in enumerate(rows):
        y = 2.2 + 1.3 * i
        for bit in range(ADDRESS_BITS):
            x = ADDRESS_BITS - 1 - bit
            on = value >> bit & 1
            color = HIGHLIGHT if changed >> bit & 1 else ("#404040" if on else "#f2f2f2")
            box(ax, y, x, 1, color, str(on), fontsize=9, edge="white")
            if on or changed >> bit & 1:
                ax.texts[-1].set_color("white")
        ax.text(ADDRESS_BITS + 0.3, y + 0.5, label, va="center", fontsize=9)


def figure_block_address(path: Path) -> None:
    """Chapter 7: why a block's ldmatrix address is one XOR (column) and one immediate (row) from block (0, 0)."""
    fig, (tile_ax, bits_ax) = plt.subplots(1, 2, figsize=(19, 10), gridspec_kw={"width_ratios": [10, 21]})

    # The K tile's first 32 rows by stored position; colour = the 16-column block (two chunks) a chunk belongs to.
    grid_axes(
        tile_ax,
        32,
        16,
        f"a K tile, rows 0-31, by stored 16-byte position (label = logical chunk)\n"
        f"red: lane {ADDRESS_LANE}'s ldmatrix row in each (16, 16) block (thick: block (0, 0))",
        col_label="stored chunk",
        row_label="row",
    )
    for row in range(32):
        for stored in range(16):
            chunk = stored ^ (row % 8)
            box(tile_ax, row, stored, 1, BANK_COLORS[chunk // 2], str(chunk), fontsize=7)
    for row0 in (0, 16):
        for col0 in range(0, 128, 16):
            address = lane_block_address(ADDRESS_LANE, row0, col0)
            outline(tile_ax, address // 256, address % 256 // 16, 1, linewidth=4.2 if (row0, col0) == (0, 0) else 2.4)
    blocks = [(BANK_COLORS[b], f"dims {16 * b}-{16 * b + 15}: col0 = {16 * b}") for b in range(8)]
    patch_legend(tile_ax, blocks, top=-0.01, ncol=4, fontsize=8)

    # The same addresses as bits: col0 flips bits 5-7, row0 adds to bits 12-13, the stage sits above.
    bits_ax.set_xlim(-0.2, ADDRESS_BITS + 12.5)
    bits_ax.set_ylim(16.5, -1.2)
    bits_ax.set_aspect("equal")
    bits_ax.axis("off")
    fields = [(0, 4, "byte: 0"), (4, 4, "chunk\n(l / 16) ^ (l % 8)"), (8, 6, "row\nl % 16 + row0"), (14, 2, "stage")]
    for low, width, label in fields:
        box(bits_ax, -0.3, ADDRESS_BITS - low - width, width, "#dddddd", label, fontsize=9, height=1.4, edge="black")
    for bit in range(ADDRESS_BITS):
        bits_ax.text(ADDRESS_BITS - 0.5 - bit, 1.6, str(bit), ha="center", va="center", fontsize=7)
    a00 = lane_block_address(ADDRESS_LANE, 0, 0)
    rows = [(f"block (0, 0): {a00:#06x}, computed once per tile", a00, 0)]
    for col0 in (16, 32, 48):
        address = lane_block_address(ADDRESS_LANE, 0, col0)
        assert address == a00 ^ 2 * col0  # the identity the kernel relies on
        rows.append((f"block (0, {col0}): {a00:#06x} XOR {2 * col0:#04x} = {address:#06x}", address, a00 ^ address))
    for row0, col0 in ((16, 0), (16, 16), (48, 32)):
        address = lane_block_address(ADDRESS_LANE, row0, col0)
        assert address == (a00 ^ 2 * col0) + 256 * row0
        moved = f"{a00:#06x}" if col0 == 0 else f"({a00:#06x} XOR {2 * col0:#04x})"
        rows.append((f"block ({row0}, {col0}): {moved} + {256 * row0:#06x} = {address:#06x}", address, a00 ^ address))
    draw_bit_rows(bits_ax, rows)
    caption(
        bits_ax,
        ADDRESS_BITS / 2,
        12.8,
        "addr(row0, col0) = (addr(0, 0) XOR 2 col0) + 256 row0,  for row0 a multiple of 8, col0 of 16\n"
        "2 col0 only has bits 5-7, which lie inside the chunk field: one LOP3 per column block.\n"
        "256 row0 only has bits 8 and up: an immediate offset in the ldmatrix instruction.\n"
        "Bits 0-7 of the tile's start must be 0 (a 256-byte aligned tile), or the XOR would reach\n"
        "into the start address instead of the chunk: hence the kernel aligns its shared memory.",
    )
    bits_ax.set_title(
        f"lane {ADDRESS_LANE}'s byte offset in the tile, bit by bit (red: the bits a block changes)", fontsize=10
    )
    fig.suptitle(
        "Kernel 7's addressing: one address per lane and tile, a XOR per column block, an immediate per row block",
        fontsize=12,
    )
    fig.tight_layout()
    save(fig, path)
