"""`runner.py inspect`: what each chapter compiles to, side by side, without a GPU.

    python runner.py inspect [3 4] [--arch sm_90] [--causal] [--dtype fp16] [--markdown]

Registers, shared memory, stack and spills, and how many SASS instructions of each kind the kernel holds.
NVRTC takes about a second per chapter, and cuobjdump another to disassemble it, so what one kernel instance
compiled to is kept on disk (under CACHE_DIR), keyed by its compile (kernels.build.nvrtc_key) and the instance:
a second `inspect` compiles and disassembles nothing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from rich.console import Console

from kernels.build import cache_key, compile_nvrtc, disk_cached, name_expression, nvrtc_key, ptxas_resources
from kernels.chapters import Chapter
from kernels.launch import DTYPES
from kernels.tools.cli import Cell, Parser, SideBySide, UsageError, add_instance_options, pick, print_side_by_side, run
from kernels.tools.opcodes import INTEGER_ALU, group_counts
from kernels.tools.sass import disassemble, opcodes, resource_usage

RESOURCE_ROWS = (
    "registers / thread",
    "static smem (B)",
    "dynamic smem (B)",
    "stack (B)",
    "local memory (B)",
    "spill stores (B)",
    "spill loads (B)",
)
# Rows for the ideas the chapters introduce: tensor cores (mma.sync, then Hopper's wgmma), cp.async, ldmatrix
# (plain for Q and K, transposed for V), global and shared loads and stores, local memory (there should be
# none), barriers, the softmax's exp2, multiplies and FMAs, shuffles, and the integer arithmetic of addresses.
SASS_ROWS = {
    **{name: (name,) for name in (
        "HMMA", "HGMMA", "LDSM", "LDSM.MT88", "LDGSTS", "LDG", "STG", "LDS", "STS", "LDL", "STL", "BAR", "MUFU.EX2",
        "FMUL", "FFMA", "SHFL",
    )},
    "integer ALU": INTEGER_ALU,
}  # fmt: skip
TOTAL = "total"


def sass_counts(counts: dict[str, int]) -> dict[str, int]:
    """Counts per full opcode summed into SASS_ROWS, plus the total (NOP padding left out)."""
    return group_counts(counts, SASS_ROWS) | {TOTAL: sum(n for opcode, n in counts.items() if opcode != "NOP")}


@dataclass(frozen=True)
class Compiled:
    """What one kernel instance compiled to: cuobjdump's resource usage (REG, SHARED, STACK, LOCAL, ...), the
    spills ptxas reported (None where NVRTC's log leaves its report out), and each SASS opcode's count."""

    usage: dict[str, int]
    spill_stores: int | None
    spill_loads: int | None
    opcodes: dict[str, int]


def compile_instance(source: Path, arch: str, instance: str) -> Compiled:
    """Compile the source with NVRTC and read one instance's resources and SASS."""
    cubin = compile_nvrtc(source, arch)
    mangled = cubin.lowered_names[instance]
    ptxas = ptxas_resources(cubin.log).get(mangled)
    return Compiled(
        usage=resource_usage(cubin)[mangled],
        spill_stores=ptxas.spill_stores if ptxas else None,
        spill_loads=ptxas.spill_loads if ptxas else None,
        opcodes=dict(opcodes(disassemble(cubin)[mangled])),
    )


def compiled(source: Path, arch: str, instance: str) -> Compiled:
    """The instance as compiled: from the disk cache where an earlier run left it, else from NVRTC, then kept."""
    key = cache_key(nvrtc_key(source, arch), instance)
    return disk_cached("inspect", key, lambda: asdict(compile_instance(source, arch, instance)),
                       lambda data: Compiled(**data))


@dataclass(frozen=True)
class Inspection:
    """One chapter's kernel instance as compiled: row label -> count."""

    chapter: Chapter
    instance: str
    rows: dict[str, int]


def inspect_chapter(
    chapter: Chapter, arch: str, dtype: torch.dtype = torch.bfloat16, causal: bool = False
) -> Inspection:
    """One instance's resources and SASS counts (no GPU needed).

    ``arch`` is the GPU's: a chapter built for that chip's own instructions compiles for its variant (sm_90a).
    """
    instance = name_expression(dtype, causal)
    kernel = compiled(chapter.source, chapter.kernel.build_arch(arch), instance)
    # NVRTC 13.0 leaves the ptxas report out of its log (13.5 includes it); where it is missing, the local
    # memory in the cubin stands in (spilled registers live there, and these kernels keep no arrays there).
    local = kernel.usage["LOCAL"]
    rows = {
        "registers / thread": kernel.usage["REG"],
        "static smem (B)": kernel.usage["SHARED"],
        "dynamic smem (B)": chapter.kernel.smem_bytes,
        "stack (B)": kernel.usage["STACK"],
        "local memory (B)": local,
        "spill stores (B)": local if kernel.spill_stores is None else kernel.spill_stores,
        "spill loads (B)": local if kernel.spill_loads is None else kernel.spill_loads,
    }
    return Inspection(chapter, instance, rows | sass_counts(kernel.opcodes))


def changed_style(value: int, previous: int | None) -> str:
    """Green where a count fell from the chapter to the left, red where it rose, no style where it held."""
    if previous is None or value == previous:
        return ""
    return "green" if value < previous else "red"


def inspect_table(inspections: list[Inspection], title: str) -> SideBySide:
    """Resources, then SASS counts, one column per chapter, each cell marked where it changed from its left."""
    sections = []
    for rows in (RESOURCE_ROWS, (*SASS_ROWS, TOTAL)):
        section = []
        for row in rows:
            values = [inspection.rows[row] for inspection in inspections]
            lefts = [None, *values[:-1]]
            cells = [Cell(str(value), changed_style(value, left)) for value, left in zip(values, lefts, strict=True)]
            section.append((row, cells))
        sections.append(section)
    return SideBySide(
        title=title,
        heads=[inspection.chapter.name for inspection in inspections],
        short_heads=[f"k{inspection.chapter.number:02d}" for inspection in inspections],
        sections=sections,
        caption=f"SASS counts are instructions in the code, not executed; integer ALU is {', '.join(INTEGER_ALU)}. "
        "sm_90+ reserves 1 KB of static smem per block.",
        legend="green: fewer than the chapter to the left, red: more.",
    )


def run_inspect(args: argparse.Namespace) -> int:
    """Compile the chosen chapters and print their resources and SASS side by side."""
    picked = pick(args.chapters)
    for chapter in [c for c in picked if not c.kernel.runs_on(args.arch)]:
        print(f"{chapter.name} left out: it is built for {chapter.kernel.arch} only", file=sys.stderr)
        picked.remove(chapter)
    if not picked:
        raise UsageError(f"none of the chosen chapters builds for {args.arch}")
    dtype = DTYPES[args.dtype]
    with Console(stderr=True).status(f"compiling {len(picked)} chapters for {args.arch}"):
        inspections = [inspect_chapter(chapter, args.arch, dtype, args.causal) for chapter in picked]
    table = inspect_table(inspections, f"{inspections[0].instance} for {args.arch}")
    if args.markdown:
        print(table.markdown())
    else:
        print_side_by_side(table)
    return 0


def build_parser() -> Parser:
    """`runner.py inspect` and its options."""
    parser = Parser(
        prog="runner.py inspect",
        description="Compile chapters with NVRTC and show registers, shared memory, spills and SASS instruction "
        "counts side by side. Needs no GPU; compiled chapters are cached on disk.",
    )
    parser.add_argument("chapters", nargs="*", help="by number or slug: '3 4', '1,3', 'naive,swizzle' (default: all)")
    parser.add_argument("--arch", default="sm_90", help="compile for this architecture (default sm_90)")
    add_instance_options(parser)
    parser.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    return parser


def main(argv: list[str]) -> int:
    """Run `runner.py inspect` with the arguments after the command's name."""
    return run(build_parser(), run_inspect, argv)
