"""Look inside the chapters: what each compiles to, what changed between two, and what Nsight Compute sees.

    python runner.py inspect [3,4] [--arch sm_90] [--causal] [--dtype fp16] [--markdown]   # no GPU needed
    python runner.py diff 3 4 [--no-color]
    python runner.py profile 5 [--seq-len 4096 --batch 16 --heads 16 --causal --dtype bf16]
"""

from __future__ import annotations

import argparse
import csv
import difflib
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

from kernels.build import BuildError, compile_nvrtc, name_expression, ptxas_resources
from kernels.chapters import ROOT, Chapter, chapters, select
from kernels.launch import DTYPES, HEAD_DIM
from kernels.sass import disassemble, opcodes, resource_usage


class UsageError(ValueError):
    """The command line named a chapter that does not exist, or several where one is wanted."""


def pick(wanted: str | None) -> list[Chapter]:
    """Chapters by number or slug, as `--kernels` takes them ("1,3", "naive,swizzle"); None: all."""
    try:
        return select(chapters(), wanted)
    except ValueError as error:
        raise UsageError(str(error)) from error


def one_chapter(token: str) -> Chapter:
    """The chapter named by one number or slug ("3", "03", "ldmatrix", "k03_ldmatrix")."""
    picked = pick(token)
    if len(picked) != 1:
        raise UsageError(f"name one chapter, got {token!r}")
    return picked[0]


# ---------------------------------------------------------------------------------------------------
# inspect: resources and SASS instruction counts, one column per chapter
# ---------------------------------------------------------------------------------------------------

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
SASS_ROWS = (
    "HMMA", "HGMMA", "LDSM", "LDSM.MT88", "LDGSTS", "LDG", "STG", "LDS", "STS", "LDL", "STL", "BAR", "MUFU.EX2", "FMUL",
    "FFMA", "SHFL", "integer ALU",
)  # fmt: skip
INTEGER_ALU = ("IMAD", "IADD3", "VIADD", "LEA", "LOP3", "SHF")
TOTAL = "total"


def sass_row(opcode: str) -> str | None:
    """The row an opcode counts towards (LDSM.16.MT88.4 -> "LDSM.MT88", LDGSTS.E.128 -> "LDGSTS"), or None."""
    mnemonic, *modifiers = opcode.split(".")
    if mnemonic == "LDSM" and "MT88" in modifiers:
        return "LDSM.MT88"
    if mnemonic == "MUFU" and modifiers:
        mnemonic = f"MUFU.{modifiers[0]}"
    if mnemonic in INTEGER_ALU:
        return "integer ALU"
    return mnemonic if mnemonic in SASS_ROWS else None


def sass_counts(counts: Counter[str]) -> dict[str, int]:
    """Full-opcode counts folded into SASS_ROWS, plus the total (NOP padding left out)."""
    rows = dict.fromkeys(SASS_ROWS, 0)
    for opcode, n in counts.items():
        if (row := sass_row(opcode)) is not None:
            rows[row] += n
    rows[TOTAL] = sum(n for opcode, n in counts.items() if opcode != "NOP")
    return rows


@dataclass(frozen=True)
class Inspection:
    """One chapter's kernel instance as compiled: its resources and its SASS, row label -> count."""

    chapter: Chapter
    instance: str
    rows: dict[str, int]


def inspect_chapter(
    chapter: Chapter, arch: str, dtype: torch.dtype = torch.bfloat16, causal: bool = False
) -> Inspection:
    """Compile the chapter with NVRTC (no GPU needed) and read one instance's resources and SASS.

    ``arch`` is the GPU's: a chapter built for that chip's own instructions compiles for its variant (sm_90a).
    """
    instance = name_expression(dtype, causal)
    cubin = compile_nvrtc(chapter.source, chapter.kernel.build_arch(arch))
    mangled = cubin.lowered_names[instance]
    usage = resource_usage(cubin)[mangled]
    # NVRTC 13.0 leaves the ptxas report out of its log (13.5 includes it); where it is missing, the local
    # memory in the cubin stands in (spilled registers live there, and these kernels keep no arrays there).
    ptxas = ptxas_resources(cubin.log).get(mangled)
    rows = {
        "registers / thread": usage["REG"],
        "static smem (B)": usage["SHARED"],
        "dynamic smem (B)": chapter.kernel.smem_bytes,
        "stack (B)": usage["STACK"],
        "local memory (B)": usage["LOCAL"],
        "spill stores (B)": ptxas.spill_stores if ptxas else usage["LOCAL"],
        "spill loads (B)": ptxas.spill_loads if ptxas else usage["LOCAL"],
    }
    rows |= sass_counts(opcodes(disassemble(cubin)[mangled]))
    return Inspection(chapter, instance, rows)


def changed_style(value: int, previous: int | None) -> str | None:
    """Green where a count fell from the chapter to the left, red where it rose, None where it held."""
    if previous is None or value == previous:
        return None
    return "green" if value < previous else "red"


def inspect_table(inspections: list[Inspection], title: str, compact: bool = False) -> Table:
    """A rich table: resources, then SASS counts, one column per chapter, changed cells coloured.

    ``compact`` heads each column "k05" over "pipelining", for terminals too narrow for the full names.
    """
    table = Table(
        title=title,
        caption="green: fewer than the chapter to the left, red: more. SASS counts are instructions in the code, "
        f"not executed; integer ALU is {', '.join(INTEGER_ALU)}. sm_90+ reserves 1 KB of static smem per block.",
    )
    table.add_column("", no_wrap=True)
    for inspection in inspections:
        name = inspection.chapter.name
        table.add_column(name.replace("_", "\n", 1) if compact else name, justify="right", no_wrap=True)
    for row in (*RESOURCE_ROWS, *SASS_ROWS, TOTAL):
        if row in (SASS_ROWS[0], TOTAL):
            table.add_section()
        cells, previous = [], None
        for inspection in inspections:
            value = inspection.rows[row]
            style = changed_style(value, previous)
            cells.append(Text(str(value), style=style or ""))
            previous = value
        table.add_row(row, *cells)
    return table


def inspect_markdown(inspections: list[Inspection], title: str) -> str:
    """The same table in GitHub Markdown, changed cells in bold."""
    lines = []
    for row in (*RESOURCE_ROWS, *SASS_ROWS, TOTAL):
        cells, previous = [row], None
        for inspection in inspections:
            value = inspection.rows[row]
            cells.append(f"**{value}**" if changed_style(value, previous) else str(value))
            previous = value
        lines.append(cells)
    headers = ["", *(inspection.chapter.name for inspection in inspections)]
    table = tabulate(lines, headers=headers, tablefmt="github", colalign=("left", *["right"] * len(inspections)))
    return f"**{title}**\n\n{table}"


def table_width(console: Console, table: Table) -> int:
    """The width the table takes unsqueezed."""
    return console.measure(table, options=console.options.update_width(10_000)).maximum


def print_table(table: Table, narrow: Table | None = None) -> None:
    """Print a rich table: ``narrow`` instead where it fits a terminal better; a pipe or a file gets full width."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, table_width(console, table))
    elif narrow is not None and table_width(console, table) > console.width:
        table = narrow
    console.print(table)


def run_inspect(args: argparse.Namespace) -> int:
    """`runner.py inspect`: compile the chosen chapters and print their resources and SASS side by side."""
    picked = pick(",".join(args.chapters) or None)
    dtype = DTYPES[args.dtype]
    for chapter in [c for c in picked if not c.kernel.runs_on(args.arch)]:
        print(f"{chapter.name} left out: it is built for {chapter.kernel.arch} only", file=sys.stderr)
        picked.remove(chapter)
    if not picked:
        raise UsageError(f"none of the chosen chapters builds for {args.arch}")
    with Console(stderr=True).status(f"compiling {len(picked)} chapters for {args.arch}"):
        inspections = [inspect_chapter(chapter, args.arch, dtype, args.causal) for chapter in picked]
    title = f"{inspections[0].instance} for {args.arch}"
    if args.markdown:
        print(inspect_markdown(inspections, title))
    else:
        print_table(inspect_table(inspections, title), narrow=inspect_table(inspections, title, compact=True))
    return 0


# ---------------------------------------------------------------------------------------------------
# diff: what one chapter changes in the next
# ---------------------------------------------------------------------------------------------------

DIFFED_FILES = ("flash_attention.cu", "loader.py")
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def unified_diff(a: Path, b: Path, context: int) -> list[str]:
    """The unified diff of two files, labelled chapter/file, without line endings."""
    return list(
        difflib.unified_diff(
            a.read_text().splitlines(),
            b.read_text().splitlines(),
            f"{a.parent.name}/{a.name}",
            f"{b.parent.name}/{b.name}",
            n=context,
            lineterm="",
        )
    )


def diff_style(line: str) -> str:
    """The colour of one diff line: headers bold, hunks cyan, additions green, removals red."""
    return next((style for prefix, style in DIFF_STYLES if line.startswith(prefix)), "")


def print_diff(lines: list[str], color: bool) -> None:
    """Print diff lines, coloured unless asked not to (or not on a terminal)."""
    if not color:
        print("\n".join(lines))
        return
    text = Text()
    for line in lines:
        text.append(line + "\n", style=diff_style(line))
    Console(highlight=False).print(text, soft_wrap=True, end="")


def run_diff(args: argparse.Namespace) -> int:
    """`runner.py diff A B`: the kernel's diff, then the loader's."""
    a, b = one_chapter(args.a), one_chapter(args.b)
    for i, file_name in enumerate(DIFFED_FILES):
        if i:
            print()
        lines = unified_diff(a.source.with_name(file_name), b.source.with_name(file_name), args.context)
        print_diff(lines or [f"{a.name} and {b.name} have the same {file_name}"], color=not args.no_color)
    return 0


# ---------------------------------------------------------------------------------------------------
# profile: one run under Nsight Compute, clocks left as they are
# ---------------------------------------------------------------------------------------------------

PROFILE_METRICS = {
    "gpu__time_duration.sum": "duration",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "smem bank conflicts, loads",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "smem bank conflicts, stores",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "smem load wavefronts",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe busy",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue slots busy",
}
# Nsight Compute's "Warp State" breakdown: cycles a warp spends in each stall, per issued instruction.
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "short_scoreboard",
    "sleeping", "tex_throttle", "wait",
)  # fmt: skip
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALL_METRICS = {STALL_METRIC.format(reason): reason for reason in STALL_REASONS}
TOP_STALLS = 5
MAX_NCU_RUNS = 4  # each run without the metrics the one before could not find
NO_NCU = (
    "Nsight Compute (ncu) is not on PATH: install it (it comes with the CUDA toolkit, e.g. /usr/local/cuda/bin) "
    "and add its folder to PATH to profile"
)
NO_COUNTERS = (
    "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): profile as root, or have an "
    "administrator allow it for all users, see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
# The child ncu profiles: runs one chapter once (see run_once), from the project root.
CHILD = "import sys; from kernels.tools import run_once; sys.exit(run_once(sys.argv[1:]))"


@dataclass(frozen=True)
class Reading:
    """One metric as ncu reported it: the number (None for "n/a" or unparseable) and its unit."""

    value: float | None
    unit: str


def parse_number(text: str) -> float | None:
    """ncu's number ("1,234.5", "621.15") as a float, or None for "n/a" and anything else."""
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> dict[str, Reading]:
    """The first profiled kernel's metrics from ncu's --csv output, details or raw page; {} if none."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    header_at = next((i for i, row in enumerate(rows) if row[:1] == ["ID"]), None)
    if header_at is None:
        return {}
    header = rows[header_at]
    body = [row for row in rows[header_at + 1 :] if len(row) == len(header)]
    if "Metric Name" in header and "Metric Value" in header:
        return _details_page(header, body)
    return _raw_page(header, body)


def _details_page(header: list[str], body: list[list[str]]) -> dict[str, Reading]:
    """Long format: one row per (kernel, metric), with Metric Name, Metric Unit and Metric Value columns."""
    name, unit, value = (header.index(column) for column in ("Metric Name", "Metric Unit", "Metric Value"))
    first = body[0][0] if body else None
    return {row[name]: Reading(parse_number(row[value]), row[unit]) for row in body if row[0] == first}


def _raw_page(header: list[str], body: list[list[str]]) -> dict[str, Reading]:
    """Wide format: one column per metric, a row of units (no ID), then one row per kernel."""
    units = next((row for row in body if row[0] == ""), [""] * len(header))
    kernel = next((row for row in body if row[0] != ""), None)
    if kernel is None:
        return {}
    return {name: Reading(parse_number(value), unit) for name, unit, value in zip(header, units, kernel, strict=True)}


def format_reading(reading: Reading | None) -> str:
    """A reading for the table: durations in ms, percentages with %, counts with thousands separators."""
    if reading is None or reading.value is None:
        return "n/a"
    value, unit = reading.value, reading.unit
    scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}
    if unit in scale:
        return f"{value * scale[unit]:.3f} ms"
    if unit == "%":
        return f"{value:.1f}%"
    number = f"{value:,.0f}" if value.is_integer() and abs(value) >= 100 else f"{value:,.2f}"
    return f"{number} {unit}".strip()


def top_stalls(readings: dict[str, Reading]) -> list[tuple[str, Reading]]:
    """The largest stall reasons that came back as numbers, largest first."""
    found = [(reason, readings[m]) for m, reason in STALL_METRICS.items() if m in readings]
    found = [(reason, reading) for reason, reading in found if reading.value is not None]
    return sorted(found, key=lambda item: -item[1].value)[:TOP_STALLS]


def unknown_metrics(output: str, metrics: list[str]) -> set[str]:
    """Those of ``metrics`` this ncu does not know, from its "Failed to find metric [regex:^]name..." errors."""
    found = re.findall(r"Failed to find metric (?:regex:\^?)?([\w\\.]+)", output)
    names = {name.replace("\\", "").strip(".") for name in found}
    return {metric for metric in metrics if metric in names or metric.split(".")[0] in names}


def ncu_command(ncu: str, metrics: list[str], args: argparse.Namespace, chapter: Chapter) -> list[str]:
    """ncu on the child, one flash_attention launch, never touching the clocks."""
    child = [sys.executable, "-c", CHILD, chapter.name, str(args.batch), str(args.seq_len), str(args.heads)]
    child += [args.dtype, "causal" if args.causal else "full"]
    return [
        ncu, "--clock-control", "none", "-k", "regex:flash_attention", "-c", "1",
        "--metrics", ",".join(metrics), "--csv", "--page", "details", "--print-units", "base", *child,
    ]  # fmt: skip


def run_ncu(ncu: str, args: argparse.Namespace, chapter: Chapter) -> subprocess.CompletedProcess:
    """Profile the chapter once; where this ncu lacks some metrics, again without them (they show as n/a)."""
    metrics = [*PROFILE_METRICS, *STALL_METRICS]
    with Console(stderr=True).status(f"profiling {chapter.name} under Nsight Compute"):
        for _ in range(MAX_NCU_RUNS):
            command = ncu_command(ncu, metrics, args, chapter)
            result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            unknown = unknown_metrics(result.stdout + result.stderr, metrics)
            if not unknown or unknown == set(metrics):
                break
            metrics = [metric for metric in metrics if metric not in unknown]
    return result


def profile_title(args: argparse.Namespace, chapter: Chapter) -> str:
    """What was profiled, and that the clocks were not locked."""
    shape = f"batch {args.batch}, seq_len {args.seq_len}, heads {args.heads}, {args.dtype}"
    return f"{chapter.name}: {shape}{', causal' if args.causal else ''} (Nsight Compute, clocks not locked)"


def profile_table(readings: dict[str, Reading], title: str) -> Table:
    """The headline metrics, then the top stall reasons."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("ncu name", style="dim")
    for metric, label in PROFILE_METRICS.items():
        table.add_row(label, format_reading(readings.get(metric)), metric)
    table.add_section()
    stalls = top_stalls(readings)
    for reason, reading in stalls:
        label = f"stall: {reason.replace('_', ' ')}"
        table.add_row(label, f"{reading.value:.2f} cycles/inst", STALL_METRIC.format(reason))
    if not stalls:
        table.add_row("stall reasons", "n/a", STALL_METRIC.format("*"))
    return table


def output_tail(result: subprocess.CompletedProcess, lines: int = 12) -> str:
    """The last lines ncu and the child printed, CSV left out: where the reason for a failure is."""
    text = [line for line in (result.stdout + result.stderr).splitlines() if line and not line.startswith('"')]
    return "\n".join(text[-lines:])


def run_profile(args: argparse.Namespace) -> int:
    """`runner.py profile N`: one run of chapter N under ncu, and a short table of what it measured."""
    chapter = one_chapter(args.chapter)
    ncu = shutil.which("ncu")
    if ncu is None:
        print(NO_NCU, file=sys.stderr)
        return 1
    result = run_ncu(ncu, args, chapter)
    if "ERR_NVGPUCTRPERM" in result.stdout + result.stderr:
        print(NO_COUNTERS, file=sys.stderr)
        return 1
    readings = parse_ncu_csv(result.stdout)
    if not readings:
        print(f"ncu profiled no flash_attention kernel (exit code {result.returncode}):", file=sys.stderr)
        print(output_tail(result), file=sys.stderr)
        return 1
    print_table(profile_table(readings, profile_title(args, chapter)))
    return 0


def run_once(argv: list[str]) -> int:
    """The profiled child: run one chapter once at one shape, so ncu sees exactly one kernel of ours."""
    name, batch, seq_len, heads, dtype, mask = argv
    if not torch.cuda.is_available():
        print("No CUDA GPU found: profiling needs one", file=sys.stderr)
        return 1
    chapter = one_chapter(name)
    shape = (int(batch), int(seq_len), int(heads), HEAD_DIM)
    q, k, v = (torch.randn(shape, dtype=DTYPES[dtype], device="cuda") for _ in range(3))
    chapter.attention(q, k, v, causal=mask == "causal")
    torch.cuda.synchronize()
    print(f"ran {chapter.name} on {shape}, {dtype}, {mask}")
    return 0


# ---------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_instance_options(parser: argparse.ArgumentParser) -> None:
    """--dtype and --causal: which kernel instance to look at or run."""
    parser.add_argument("--dtype", choices=DTYPES, default="bf16", help="element type (default bf16)")
    parser.add_argument("--causal", action="store_true", help="the causal instance (default: not causal)")


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per tool, each with its own --help."""
    parser = argparse.ArgumentParser(prog="runner.py", description="Look inside the chapters.")
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser(
        "inspect", help="registers, shared memory and SASS counts per chapter (no GPU needed)",
        description="Compile chapters with NVRTC and show registers, shared memory, spills and SASS instruction "
        "counts side by side. Needs no GPU.",
    )  # fmt: skip
    inspect.add_argument("chapters", nargs="*", help="by number or slug: '3 4', '1,3', 'naive,swizzle' (default: all)")
    inspect.add_argument("--arch", default="sm_90", help="compile for this architecture (default sm_90)")
    add_instance_options(inspect)
    inspect.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    inspect.set_defaults(handler=run_inspect)

    diff = commands.add_parser(
        "diff", help="what chapter B changes in chapter A",
        description="Unified diff of two chapters' kernel, then of their loader.",
    )  # fmt: skip
    diff.add_argument("a", help="first chapter, by number or slug")
    diff.add_argument("b", help="second chapter, by number or slug")
    diff.add_argument("-U", "--context", type=int, default=3, help="lines of context (default 3)")
    diff.add_argument("--no-color", action="store_true", help="plain text, no colours")
    diff.set_defaults(handler=run_diff)

    profile = commands.add_parser(
        "profile", help="one run of a chapter under Nsight Compute (ncu)",
        description="Run one chapter once under Nsight Compute (clocks left as they are: --clock-control none) and "
        "show its duration, bank conflicts, tensor-pipe use, DRAM throughput, occupancy and top warp stalls.",
    )  # fmt: skip
    profile.add_argument("chapter", help="by number or slug")
    profile.add_argument("--seq-len", type=positive_int, default=4096, help="default 4096")
    profile.add_argument("--batch", type=positive_int, default=16, help="default 16")
    profile.add_argument("--heads", type=positive_int, default=16, help="default 16")
    add_instance_options(profile)
    profile.set_defaults(handler=run_profile)
    return parser


def main(argv: list[str]) -> int:
    """Run one tool; a missing tool or a bad chapter name is one line on stderr, not a traceback."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except UsageError as error:
        print(f"runner.py {args.command}: error: {error}", file=sys.stderr)
        return 2
