"""Draw the figures in docs/figures/, all of them or those named:

    python docs/figures/make_figures.py                    # rewrites every docs/figures/*.png
    python docs/figures/make_figures.py swizzle pipeline   # only swizzle.png and pipeline.png
    python docs/figures/make_figures.py --out /tmp/figures # the same files, somewhere else

Each figure is drawn by a module of this folder (the package `figures`), named in `drawings` below. The layout
figures are computed from the same formulas the kernels use (row = lane / 4, ...), so a figure cannot drift from
the code by a redrawn typo; the ladder and the roofline read results/headline.json and results/peak.json.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if __package__ in (None, ""):  # run as a script: import this folder as the package `figures`, the kernels beside it
    sys.path[:0] = [str(HERE.parent), str(ROOT)]

from figures import (  # noqa: E402
    accumulators,
    fragments,
    ladder,
    ldmatrix,
    maxima_first,
    overlap,
    packed_gqa,
    pair_schedule,
    pipeline,
    roofline,
    softmax_chains,
    split_kv,
    swizzle,
    tail_split,
    tile_copies,
    warp_specialized,
    wgmma,
)


def drawings(results: Path, peak: Path) -> dict[str, Callable[[Path], None]]:
    """Every figure by the name of its PNG, as a function that draws it to a path: page 0's layouts, the chapters'
    figures in chapter order, then the two plots of measured results."""
    return {
        "mma_fragments": fragments.figure_mma_fragments,
        "operand_registers": fragments.figure_operand_registers,
        "ldmatrix_x4": ldmatrix.figure_ldmatrix_x4,
        "ldmatrix_lanes": ldmatrix.figure_ldmatrix_lanes,
        "v_transpose": ldmatrix.figure_v_transpose,
        "block_rows": accumulators.figure_block_rows,
        "copy_map": tile_copies.figure_copy_map,
        "swizzle": swizzle.figure_swizzle,
        "pipeline": pipeline.figure_pipeline,
        "block_address": swizzle.figure_block_address,
        "kv128_scores": accumulators.figure_kv128_scores,
        "wgmma_layout": wgmma.figure_wgmma_layout,
        "wgmma_pv": wgmma.figure_wgmma_pv,
        "tma_copy": tile_copies.figure_tma_copy,
        "warp_specialized": warp_specialized.figure_warp_specialized,
        "overlap": overlap.figure_overlap,
        "pair_schedule": pair_schedule.figure_pair_schedule,
        "softmax_chains": softmax_chains.figure_softmax_chains,
        "packed_gqa": packed_gqa.figure_packed_gqa,
        "split_kv": split_kv.figure_split_kv,
        "maxima_first": maxima_first.figure_maxima_first,
        "tail_split": tail_split.figure_tail_split,
        "ladder": lambda path: ladder.figure_ladder(path, results),
        "roofline": lambda path: roofline.figure_roofline(path, peak, results),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Regenerate the PNG figures under docs/figures/.")
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="the figures to draw, by PNG name without .png (default: all)"
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=ROOT / "results" / "headline.json",
        help="the saved run the ladder and the roofline show (default: results/headline.json)",
    )
    parser.add_argument(
        "--peak",
        type=Path,
        default=ROOT / "results" / "peak.json",
        help="the ceilings the roofline draws (default: results/peak.json)",
    )
    parser.add_argument("--out", type=Path, default=HERE, help="the folder the PNGs go to (default: docs/figures/)")
    args = parser.parse_args(argv)
    draw = drawings(args.results, args.peak)
    unknown = [name for name in args.names if name not in draw]
    if unknown:
        parser.error(f"no figure named {', '.join(unknown)}; the figures are {', '.join(draw)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or draw:
        draw[name](args.out / f"{name}.png")


if __name__ == "__main__":
    main()
