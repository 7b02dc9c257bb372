"""`runner.py stalls`: where a kernel's warps wait, instruction by instruction (Nsight Compute's source counters).

    python runner.py stalls 19 fa4                          # chapter 19 next to FlashAttention-4
    python runner.py stalls 19 fa4 --json stalls.json       # the samples of every instruction saved
    python runner.py stalls --from-json stalls.json         # the tables again, from the saved file

Each target runs once under ncu (kernels/tools/run_once.py, the first launch of its kernel, clocks left as they are)
with the SourceCounters section, which samples every warp at a fixed interval and records the instruction it is at
and why it did not issue. The table sums the samples by kind of instruction: a warp sampled at its wgmma wait is
waiting for the tensor cores' results, one at an HGMMA is waiting to hand them more work, one at an mbarrier wait or
the branch that retries it is waiting for a copy or for a free stage.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernels.chapters import ROOT
from kernels.tools.cli import ToolError, UsageError, names
from kernels.tools.profiling import (
    NO_COUNTERS,
    NO_NCU,
    child_command,
    chosen_targets,
    compiled_by,
    failure_reason,
    profile_title,
)
from kernels.tools.progress import Progress
from kernels.tools.run_once import Target
from kernels.tools.side_by_side import Cell, Row, SideBySide, print_side_by_side
from kernels.tools.sources import source_hashes

ALL_SAMPLES = "Warp Stall Sampling (All Samples)"
NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"
EXECUTED = "Instructions Executed"
REASON = "stall_"  # ncu's per-reason sample columns: stall_wait, stall_barrier, stall_long_sb, ...
# The kinds of instruction the table sums samples over, by the start of their opcode; the first that matches.
KINDS = {
    "HGMMA (issuing products)": ("HGMMA",),
    "wgmma waits (WARPGROUP.DEPBAR)": ("WARPGROUP.DEPBAR",),
    "other WARPGROUP (fences, arrives)": ("WARPGROUP",),
    "mbarrier waits and arrivals (SYNCS)": ("SYNCS",),
    "retries (YIELD, NANOSLEEP)": ("YIELD", "NANOSLEEP"),
    "named barriers (BAR)": ("BAR",),
    "branches (BRA)": ("BRA",),
    "exponentials (MUFU.EX2)": ("MUFU.EX2",),
    "softmax arithmetic (FMNMX, FADD, FMUL, FFMA, F2FP)": ("FMNMX", "FADD", "FMUL", "FFMA", "F2FP", "FSEL", "FSETP"),
    "uniform datapath (U*, R2UR)": ("U", "R2UR", "S2UR", "VOTEU"),
}
OTHER = "everything else"
TOP = 12  # the instructions listed with the most samples, per target


@dataclass
class Instruction:
    """One SASS instruction as the source counters saw it: its offset in the kernel, its text, the warps sampled
    there (all, and those not issuing), how often a warp executed it, and the samples by stall reason."""

    offset: int
    sass: str
    samples: int
    not_issued: int
    executed: int
    reasons: dict[str, int] = field(default_factory=dict)

    @property
    def opcode(self) -> str:
        """The opcode with its modifiers, past any predicate: "WARPGROUP.DEPBAR.LE", "MUFU.EX2"."""
        words = self.sass.split()
        return (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).rstrip(";")


@dataclass
class Stalls:
    """One target's source counters: what it is, the kernel ncu matched, and its instructions."""

    target: str
    kernel: str
    instructions: list[Instruction]


def kind(instruction: Instruction) -> str:
    """The table row an instruction's samples add to: the first whose opcode names (or "U", the uniform datapath's
    prefix) start the instruction's opcode."""
    opcode = instruction.opcode
    for row, prefixes in KINDS.items():
        if any(opcode == p or opcode.startswith(p + ".") or (p == "U" and opcode.startswith("U")) for p in prefixes):
            return row
    return OTHER


def integer(cell: str) -> int:
    """ncu's count ("1,234", "-", "") as an int."""
    cell = cell.replace(",", "").strip()
    return int(float(cell)) if cell and cell not in ("-", "n/a") else 0


def parse_source_csv(text: str, target: str) -> Stalls | None:
    """The instructions of ncu's source page (``--page source --csv --print-source sass``): a "Kernel Name" line,
    a header, then one row per instruction with its absolute address. None where it holds no instruction."""
    lines = list(csv.reader(io.StringIO(text)))
    header_at = next((i for i, line in enumerate(lines) if line[:2] == ["Address", "Source"]), None)
    if header_at is None:
        return None
    kernel = next((line[1] for line in lines[:header_at] if line and line[0] == "Kernel Name"), "")
    header = lines[header_at]
    column = {name: i for i, name in enumerate(header)}
    reasons = [name for name in header if name.startswith(REASON) and "(Not Issued)" not in name]
    rows = [line for line in lines[header_at + 1 :] if len(line) == len(header) and line[0].startswith("0x")]
    if not rows:
        return None
    base = int(rows[0][0], 16)
    instructions = [
        Instruction(
            offset=int(row[0], 16) - base,
            sass=row[column["Source"]].strip(),
            samples=integer(row[column[ALL_SAMPLES]]),
            not_issued=integer(row[column[NOT_ISSUED]]),
            executed=integer(row[column[EXECUTED]]),
            reasons={name[len(REASON) :]: n for name in reasons if (n := integer(row[column[name]]))},
        )
        for row in rows
    ]
    return Stalls(target, kernel, instructions)


def ncu_command(ncu: str, target: Target, args: argparse.Namespace, report: Path) -> list[str]:
    """ncu on a child that runs the target once (the first launch of its kernel, clocks left alone), with the source
    counters, into a report file."""
    return [
        ncu, "--clock-control", "none", "-k", f"regex:{target.kernel}", "-c", "1", "--section", "SourceCounters",
        "--section", "WarpStateStats", "-f", "-o", str(report), *child_command(target, args),
    ]  # fmt: skip


def stalls_of(ncu: str, target: Target, args: argparse.Namespace) -> Stalls:
    """Profile one target and read its report's source page."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report"
        result = subprocess.run(ncu_command(ncu, target, args, report), capture_output=True, text=True, cwd=ROOT)
        if "ERR_NVGPUCTRPERM" in result.stdout + result.stderr:
            raise ToolError(NO_COUNTERS)
        source = subprocess.run(
            [ncu, "-i", f"{report}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"],
            capture_output=True,
            text=True,
        )
    stalls = parse_source_csv(source.stdout, target.name)
    if stalls is None:
        raise ToolError(
            f"ncu sampled no instruction of {target.name} (regex:{target.kernel}, exit code {result.returncode}): "
            + failure_reason(result)
        )
    return stalls


def shares(stalls: Stalls) -> dict[str, tuple[float, float, float]]:
    """Per kind of instruction: its % of all samples, its % of them while not issuing, and the warp instructions of
    that kind executed (millions)."""
    total = sum(i.samples for i in stalls.instructions) or 1
    table = {row: [0, 0, 0] for row in [*KINDS, OTHER]}
    for instruction in stalls.instructions:
        row = table[kind(instruction)]
        row[0] += instruction.samples
        row[1] += instruction.not_issued
        row[2] += instruction.executed
    return {row: (a / total * 100, n / total * 100, e / 1e6) for row, (a, n, e) in table.items()}


def stalls_table(all_stalls: list[Stalls], title: str) -> SideBySide:
    """The samples by kind of instruction, side by side: % of samples [% while not issuing], instructions run."""
    by_target = [shares(stalls) for stalls in all_stalls]
    rows: list[Row] = [
        (row, [Cell(f"{s[row][0]:.1f}% [{s[row][1]:.1f}%], {s[row][2]:,.1f} M") for s in by_target])
        for row in [*KINDS, OTHER]
    ]
    caption = (
        "Warp samples at each kind of instruction: % of all the kernel's samples [% taken while the warp was not "
        "issuing], and the warp instructions of that kind executed, in millions (Nsight Compute's SourceCounters)."
    )
    heads = [stalls.target for stalls in all_stalls]
    return SideBySide(title, heads, [head.split("_")[0] for head in heads], [rows], caption)


def top_lines(stalls: Stalls) -> list[str]:
    """The instructions with the most samples: offset, share, executions, the largest stall reasons, the SASS."""
    total = sum(i.samples for i in stalls.instructions) or 1
    lines = [f"{stalls.target}: the {TOP} instructions with the most samples ({stalls.kernel[:80]})"]
    for i in sorted((i for i in stalls.instructions if i.samples), key=lambda i: -i.samples)[:TOP]:
        reasons = ", ".join(
            f"{name} {n / total * 100:.1f}%" for name, n in sorted(i.reasons.items(), key=lambda r: -r[1])[:2]
        )
        lines.append(f"  {i.offset:#7x}  {i.samples / total * 100:5.1f}%  {i.executed:>11,}  [{reasons}]  {i.sass}")
    return lines


def title_of(record: dict) -> str:
    """The shape (K/V heads and length too, where given), the compiler, and the GPU, in words."""
    title = profile_title(argparse.Namespace(**record["shape"]), record.get("nvrtc"))
    return f"{title} on {record['device']}" if record.get("device") else title


def show(record: dict, all_stalls: list[Stalls], markdown: bool) -> None:
    """Print the table and each target's top instructions."""
    table = stalls_table(all_stalls, title_of(record))
    if markdown:
        print(table.markdown())
    else:
        print_side_by_side(table)
    for stalls in all_stalls:
        print("\n".join(["", *top_lines(stalls)]))


def load_stalls(path: Path) -> tuple[dict, list[Stalls]]:
    """A file saved by --json: its record and the targets' stalls; a ValueError naming the file otherwise."""
    try:
        record = json.loads(Path(path).read_text())
        all_stalls = [
            Stalls(s["target"], s["kernel"], [Instruction(**i) for i in s["instructions"]]) for s in record["stalls"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not stalls saved by `runner.py stalls --json` ({error!r})") from error
    return record, all_stalls


def run_stalls(args: argparse.Namespace) -> int:
    """`runner.py stalls`: each target under ncu's source counters, then where its warps waited (and saved)."""
    if args.from_json:
        try:
            record, all_stalls = load_stalls(args.from_json)
        except ValueError as error:
            raise UsageError(str(error)) from error
        show(record, all_stalls, args.markdown)
        return 0
    chosen = chosen_targets(args.targets)
    ncu = shutil.which("ncu")
    if ncu is None:
        raise ToolError(NO_NCU.format(what=names([target.name for target in chosen])))
    all_stalls = []
    with Progress() as progress:
        for target in chosen:
            with progress.step(f"sampling {target.name}'s warps under Nsight Compute"):
                all_stalls.append(stalls_of(ncu, target, args))
    record = {
        "shape": {"batch": args.batch, "seq_len": args.seq_len, "heads": args.heads, "dtype": args.dtype}
        | {"causal": args.causal}
        | {name: getattr(args, name) for name in ("kv_heads", "kv_len") if getattr(args, name)},
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "nvrtc": compiled_by(chosen),
        "sources": source_hashes(target.chapter.source for target in chosen if target.chapter),
        "command": args.command_line,
        # Only the instructions some warp was sampled at or executed: the rest of the kernel is never reached.
        "stalls": [
            asdict(stalls) | {"instructions": [asdict(i) for i in stalls.instructions if i.samples or i.executed]}
            for stalls in all_stalls
        ],
    }
    show(record, all_stalls, args.markdown)
    if args.json:
        args.json.write_text(json.dumps(record) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
