"""The tile loop of a Hopper attention kernel, taken apart in its SASS: what one tile issues, by kind, and in what
order its products, waits, exponentials and barriers come. For chapters (compiled here, bf16, not causal) and for
any other kernel's cubin, such as the one FlashAttention-4's CuTe DSL keeps with ``CUTE_DSL_KEEP=cubin``:

    python -m kernels.tools.loop_anatomy 16 19 --cubin flash_fwd_sm90.cubin --cubin-name flash-attn-4

The loop is the shortest backward branch around one tile's two products (``--products`` wgmma). The steady path
leaves out every block that a forward branch inside the loop can jump over: in a tile that needs no mask, the
masking code is such a block. A static reading: it counts instructions in the machine code, not how often they run.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path

from tabulate import tabulate

from kernels.build import Cubin
from kernels.tools.ablations import chapter_or_variant
from kernels.tools.opcodes import INTEGER_ALU, group_counts
from kernels.tools.sass import INSTRUCTION, disassemble, instance_sass, opcodes

ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")
BRANCH = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?BRA(?:\.\w+)* (0x[0-9a-f]+)")
PRODUCTS_PER_TILE = 2 * 128 // 16  # S and O += P V over a 128-key tile, one wgmma per 16 columns each
UNIFORM = "uniform datapath (U*)"

# The table's rows: mnemonics (kernels.tools.opcodes), in the order a tile runs them.
GROUPS = {
    "HGMMA (wgmma)": ("HGMMA",),
    "MUFU.EX2 (exp2)": ("MUFU.EX2",),
    "FMNMX (max)": ("FMNMX",),
    "FADD": ("FADD",),
    "FMUL": ("FMUL",),
    "FFMA": ("FFMA",),
    "F2FP (to bf16)": ("F2FP",),
    "FSEL / ISETP (masks)": ("FSEL", "ISETP"),
    "integer ALU": INTEGER_ALU,
    UNIFORM: (),  # every mnemonic of the warp-wide U* datapath: counted apart, by prefix
    "SHFL": ("SHFL",),
    "BAR (named barriers)": ("BAR",),
    "SYNCS (mbarriers)": ("SYNCS",),
    "WARPGROUP (fence, wait)": ("WARPGROUP",),
    "BRA": ("BRA",),
}


def addressed(sass: str) -> list[tuple[int, str]]:
    """The instruction lines of a SASS listing with their addresses."""
    return [(int(at.group(1), 16), line) for line in sass.splitlines() if (at := ADDRESS.search(line))]


def loops(sass: str) -> list[tuple[int, int]]:
    """Every loop of a listing, as (the branch's target, the branch), in code order.

    Only branches before the last EXIT count: ptxas moves the retry of an mbarrier wait out of line, past the
    end of the kernel, and branches back from there into the loop.
    """
    last_exit = max(address for address, line in addressed(sass) if re.search(r"\bEXIT\b", line))
    branches = sorted((int(target, 16), int(at, 16)) for at, target in BRANCH.findall(sass))
    return [(start, end) for start, end in branches if start < end <= last_exit]


def tile_loop_lines(sass: str, products: int | None = None) -> list[str]:
    """The SASS lines of the tile loop: the shortest loop (see ``loops``) around the most HGMMA (or exactly
    ``products`` of them, for a loop nested in another), from its target to the branch.

    Not every HGMMA is in the loop: kernel 14 issues tile 0's S before its loop and the last P V after it, and
    kernel 15 runs kernel 14's tile loop inside its loop over query tiles.
    """
    lines = addressed(sass)
    hgmma = [address for address, line in lines if "HGMMA" in line]
    inside = {loop: sum(loop[0] <= address <= loop[1] for address in hgmma) for loop in loops(sass)}
    wanted = max(inside.values()) if products is None else products
    start, end = min((loop for loop in inside if inside[loop] == wanted), key=lambda loop: loop[1] - loop[0])
    return [line for address, line in lines if start <= address <= end]


def steady_lines(loop: list[str]) -> list[str]:
    """The loop less every block a forward branch inside it can jump over (from after the branch to its target)."""
    lines = addressed("\n".join(loop))
    end = lines[-1][0]
    skippable = [
        (int(at, 16), int(target, 16))
        for at, target in BRANCH.findall("\n".join(loop))
        if int(at, 16) < int(target, 16) <= end
    ]
    return [line for address, line in lines if not any(at < address < target for at, target in skippable)]


def the_waits(steady: list[str]) -> tuple[int, int]:
    """Where a Hopper steady tile path waits for S (wgmma groups in flight <= 1) and for P V (<= 0)."""
    first = next(i for i, line in enumerate(steady) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line)
    second = next(i for i, line in enumerate(steady) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line)
    return first, second


def tile_counts(lines: list[str]) -> dict[str, int]:
    """Instructions per row of GROUPS, then the rest and the total (NOP padding left out)."""
    counts = opcodes("\n".join(lines))
    del counts["NOP"]
    rows = group_counts(counts, GROUPS)
    rows[UNIFORM] = sum(n for opcode, n in counts.items() if opcode.startswith("U"))
    rows["other"] = sum(counts.values()) - sum(rows.values())
    rows["total"] = sum(counts.values())
    return rows


def event(line: str) -> str | None:
    """What the order shows of one instruction: a product, an exp2, a wait or arrive, or None for the rest."""
    opcode = INSTRUCTION.search(line).group(1)
    if opcode.startswith(("HGMMA", "MUFU.EX2", "BAR")):
        return opcode.split(".")[0] if opcode.startswith("HGMMA") else ".".join(opcode.split(".")[:2])
    if opcode == "WARPGROUP.DEPBAR.LE":  # wait until at most N wgmma groups are in flight
        return f"wait(≤{int(line.split(',')[-1].split(';')[0], 16)})"
    if opcode.startswith("SYNCS.PHASECHK"):  # TRYWAIT retries until the phase completes; without it, one look
        return "mbarrier wait" if "TRYWAIT" in opcode else "mbarrier test"
    if opcode.startswith("SYNCS.ARRIVE"):
        return "mbarrier arrive"
    return None


def event_order(lines: list[str]) -> str:
    """The events of the lines in order, repeats run together: "HGMMA×8 → wait(≤1) → MUFU.EX2×31 → …"."""
    runs: list[list] = []
    for name in filter(None, map(event, lines)):
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return " → ".join(f"{name}×{n}" if n > 1 else name for name, n in runs)


def cubin_sass(path: Path) -> str:
    """The SASS of the kernel in a cubin that holds the most HGMMA."""
    functions = disassemble(Cubin(image=path.read_bytes(), lowered_names={}, arch="sm_90a", log=""))
    return max(functions.values(), key=lambda sass: sass.count("HGMMA"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "chapters", nargs="*", help="Hopper chapters by number or name, e.g. 16 19, or ablation variants, e.g. k19_lean"
    )
    parser.add_argument("--cubin", type=Path, help="another kernel's cubin: its kernel with the most wgmma")
    parser.add_argument("--cubin-name", help="what the table calls that kernel (default: the file's name)")
    parser.add_argument("--products", type=int, default=PRODUCTS_PER_TILE, help="wgmma in one tile's loop")
    args = parser.parse_args(argv)
    from kernels.build import nvrtc_version
    from kernels.tools.sources import sources_line_of

    picked = [chapter_or_variant(token) for token in args.chapters]
    kernels = [(chapter.name, instance_sass(chapter.kernel)) for chapter in picked]
    if args.cubin:
        kernels.append((args.cubin_name or args.cubin.name, cubin_sass(args.cubin)))
        print(f"# cubin: {args.cubin.name}, sha256:{hashlib.sha256(args.cubin.read_bytes()).hexdigest()}")
    if picked:
        print(sources_line_of(chapter.kernel.source for chapter in picked))
    print(f"# chapters compiled by NVRTC {nvrtc_version()} for sm_90a, bf16, not causal")
    loops = {name: tile_loop_lines(sass, args.products) for name, sass in kernels}
    columns = {}
    for name, loop in loops.items():
        columns[f"{name}: loop"] = tile_counts(loop)
        columns[f"{name}: steady"] = tile_counts(steady_lines(loop))
    rows = [[group, *(column[group] for column in columns.values())] for group in next(iter(columns.values()))]
    print(tabulate(rows, headers=["SASS instructions of one tile", *columns], tablefmt="github"))
    for name, loop in loops.items():
        print(f"\n{name}, steady path: {event_order(steady_lines(loop))}")


if __name__ == "__main__":
    main()
