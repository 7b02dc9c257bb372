"""`runner.py inspect`: what each chapter compiles to, side by side, without a GPU.

    python runner.py inspect [3 4] [--arch sm_90] [--causal] [--dtype fp16] [--markdown]

Registers, shared memory, stack and spills, and how many SASS instructions of each kind the kernel holds.
NVRTC takes about a second per chapter, and cuobjdump another to disassemble it, so what one kernel instance
compiled to is kept on disk (under CACHE_DIR), keyed by its compile (kernels.build.nvrtc_key) and the instance:
a second `inspect` compiles and disassembles nothing.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kernels.build import (
    cache_key,
    compile_nvrtc,
    disk_cached,
    name_expression,
    nvrtc_key,
    nvrtc_version,
    ptxas_resources,
)
from kernels.chapters import Chapter
from kernels.launch import DTYPES
from kernels.tools.cli import UsageError, pick
from kernels.tools.opcodes import INTEGER_ALU, group_counts
from kernels.tools.progress import Progress
from kernels.tools.sass import disassemble, opcodes, resource_usage
from kernels.tools.side_by_side import Cell, SideBySide, print_side_by_side

RESOURCE_ROWS = (
    "registers / thread",
    "static smem (B)",
    "dynamic smem (B)",
    "stack (B)",
    "local memory (B)",
    "spill stores (B)",
    "spill loads (B)",
)
# Rows for the ideas the chapters introduce: tensor cores (mma.sync, then Hopper's wgmma) and ldmatrix (plain for
# Q and K, transposed for V); copies into shared memory (cp.async, then TMA) and global loads and stores (TMA's
# stores with them); shared loads and stores (stmatrix with them); local memory (there should be none); the
# synchronisation: barriers, mbarriers (SYNCS: init, arrive, wait), wgmma's fence and wait (WARPGROUP.ARRIVE,
# WARPGROUP.DEPBAR) and the warpgroups' register budgets (USETMAXREG: setmaxnreg); the softmax's exp2, multiplies,
# adds and FMAs, shuffles, and the integer arithmetic of addresses.
SASS_ROWS = {
    **{name: (name,) for name in (
        "HMMA", "HGMMA", "LDSM", "LDSM.MT88", "LDGSTS", "UTMALDG", "LDG", "STG", "UTMASTG", "LDS", "STS", "STSM",
        "LDL", "STL", "BAR", "SYNCS", "WARPGROUP", "USETMAXREG", "MUFU.EX2", "FMUL", "FADD", "FFMA", "SHFL",
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


def compiled(source: Path, arch: str, instance: str, progress: Progress | None = None) -> Compiled:
    """The instance as compiled: from the disk cache where an earlier run left it, else from NVRTC, then kept.

    ``progress`` shows when it compiles (seconds, where the cache answers at once).
    """

    def compile_now() -> dict:
        showing = progress.step(f"compiling {source.parent.name} for {arch}") if progress else contextlib.nullcontext()
        with showing:
            return asdict(compile_instance(source, arch, instance))

    key = cache_key(nvrtc_key(source, arch), instance)
    return disk_cached("inspect", key, compile_now, lambda data: Compiled(**data))


@dataclass(frozen=True)
class Inspection:
    """One chapter's kernel instance as compiled: row label -> count."""

    chapter: Chapter
    instance: str
    rows: dict[str, int]


def inspect_chapter(
    chapter: Chapter,
    arch: str,
    dtype: torch.dtype = torch.bfloat16,
    causal: bool = False,
    progress: Progress | None = None,
) -> Inspection:
    """One instance's resources and SASS counts (no GPU needed).

    ``arch`` is the GPU's: a chapter built for that chip's own instructions compiles for its variant (sm_90a).
    """
    instance = name_expression(dtype, causal)
    kernel = compiled(chapter.source, chapter.kernel.build_arch(arch), instance, progress)
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
        caption=f"SASS counts are instructions in the code, not executed; integer ALU is {', '.join(INTEGER_ALU)}; "
        "UTMALDG and UTMASTG are TMA copies, SYNCS mbarrier operations, WARPGROUP wgmma's fences and waits, "
        "USETMAXREG setmaxnreg, STSM stmatrix. sm_90+ reserves 1 KB of static smem per block.",
        legend="green: fewer than the chapter to the left, red: more.",
    )


def inspect_title(instance: str, arch: str) -> str:
    """The instance, the GPU and the compiler: another NVRTC emits other SASS and other register counts."""
    return f"{instance} for {arch}, NVRTC {nvrtc_version()}"


def run_inspect(args: argparse.Namespace) -> int:
    """`runner.py inspect`: compile the chosen chapters and print their resources and SASS side by side."""
    picked = pick(args.chapters)
    left_out = [chapter for chapter in picked if not chapter.kernel.runs_on(args.arch)]
    if len(left_out) == len(picked):
        built_for = ", ".join(f"{chapter.name} for {chapter.kernel.arch} only" for chapter in left_out)
        raise UsageError(f"none of the chosen chapters builds for {args.arch} ({built_for})")
    with Progress() as progress:
        for chapter in left_out:
            progress.note(f"{chapter.name} left out: it is built for {chapter.kernel.arch} only")
        dtype = DTYPES[args.dtype]
        kept = [chapter for chapter in picked if chapter not in left_out]
        inspections = [inspect_chapter(chapter, args.arch, dtype, args.causal, progress) for chapter in kept]
    table = inspect_table(inspections, inspect_title(inspections[0].instance, args.arch))
    if args.markdown:
        print(table.markdown())
    else:
        print_side_by_side(table)
    return 0
