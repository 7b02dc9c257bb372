"""`runner.py profile`: chapters and torch's own kernels, each run once under Nsight Compute, side by side.

    python runner.py profile 8 fa2                      # chapter 8 next to torch's FA2 kernel
    python runner.py profile 9 cudnn --json run.json    # chapter 9 next to cuDNN's, the readings saved
    python runner.py profile 5 6 7 --causal --markdown

Each target is one child process (kernels/tools/run_once.py) under ncu, which profiles the first launch of the target's
kernel with the clocks left as they are (--clock-control none). The table shows the time, how busy the tensor pipe
and the issue slots were, the traffic through L2 and DRAM, shared-memory bank conflicts, the instructions executed
per kind of opcode, and the largest warp stalls.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kernels.build import nvrtc_version
from kernels.chapters import ROOT
from kernels.launch import gpu_arch
from kernels.tools.cli import ToolError, UsageError, names
from kernels.tools.opcodes import INTEGER_ALU, group_counts
from kernels.tools.progress import Progress
from kernels.tools.run_once import REFERENCES, Target, runnable, targets
from kernels.tools.side_by_side import Cell, Row, SideBySide, print_side_by_side
from kernels.tools.sources import source_hashes

HEADLINE = {
    "gpu__time_duration.sum": "duration",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe busy",
    "sm__inst_issued.avg.pct_of_peak_sustained_active": "issue slots busy",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
    "smsp__inst_executed.sum": "warp instructions",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2 throughput",
    "lts__t_bytes.sum": "L2 bytes",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput",
    "dram__bytes.sum": "DRAM bytes",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "smem bank conflicts, loads",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "smem bank conflicts, stores",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "smem load wavefronts",
}
# Warp instructions executed, one instance per opcode with its modifiers (HMMA.16816.F32.BF16, MUFU.EX2, ...).
PER_OPCODE = "sass__inst_executed_per_opcode_with_modifier_all"
# The executed instructions in groups, each a sum of rows of `runner.py inspect`: tensor cores (mma.sync, wgmma),
# ldmatrix, copies into shared memory (cp.async, TMA), shared loads and stores (stmatrix too), global loads and
# stores (TMA's stores too), the softmax's exp2, float and integer arithmetic, shuffles, synchronisation (barriers,
# and the mbarriers TMA and wgmma pipelines wait on), and wgmma's fences and waits. Local memory (there should be
# none) and setmaxnreg (once per warp) are left to "other".
EXECUTED_ROWS = {
    "HMMA / HGMMA": ("HMMA", "HGMMA"),
    "LDSM": ("LDSM", "LDSM.MT88"),
    "LDGSTS / UTMALDG": ("LDGSTS", "UTMALDG"),
    "LDS / STS / STSM": ("LDS", "STS", "STSM"),
    "LDG / STG / UTMASTG": ("LDG", "STG", "UTMASTG"),
    "MUFU.EX2": ("MUFU.EX2",),
    "FFMA": ("FFMA",),
    "FMUL": ("FMUL",),
    "FADD": ("FADD",),
    "integer ALU": INTEGER_ALU,
    "SHFL": ("SHFL",),
    "BAR / SYNCS": ("BAR", "SYNCS"),
    "WARPGROUP": ("WARPGROUP",),
}
# Nsight Compute's "Warp State" breakdown: cycles a warp spends in each stall, per issued instruction.
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "short_scoreboard",
    "sleeping", "tex_throttle", "wait",
)  # fmt: skip
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALL_METRICS = {STALL_METRIC.format(reason): reason for reason in STALL_REASONS}
TOP_STALLS = 5  # per target; the table shows each one that is among the largest of any target
MAX_NCU_RUNS = 4  # each run without the metrics the one before could not find
NO_NCU = (
    "Nsight Compute (ncu) is not on PATH: profiling {what} runs it; install it (it comes with the CUDA toolkit, "
    "e.g. /usr/local/cuda/bin) and add its folder to PATH"
)
NO_COUNTERS = (
    "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): profile as root, or have an "
    "administrator allow it for all users, see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
NO_OPCODE_NAMES = (
    f"ncu printed {PER_OPCODE} without opcode names (it needs --print-metric-instances details): "
    "the executed instructions show as n/a"
)


@dataclass(frozen=True)
class Reading:
    """One metric as ncu reported it: the number (None for "n/a" or unparseable) and its unit."""

    value: float | None
    unit: str


@dataclass(frozen=True)
class Profile:
    """What ncu measured for one target: the kernel it matched, its launch, its metrics by ncu name, and the warp
    instructions it executed per opcode ({} where ncu printed no opcode names)."""

    target: str
    kernel: str
    block: str
    grid: str
    readings: dict[str, Reading]
    executed: dict[str, float]


def parse_number(text: str) -> float | None:
    """ncu's number ("1,234.5", "621.15") as a float, or None for "n/a" and anything else."""
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


# One "name: value" pair of an instanced metric, e.g. "HMMA.16816.F32.BF16: 44,023,808".
INSTANCE = re.compile(r"([A-Za-z_][\w.]*)\s*:\s*(\d[\d,]*(?:\.\d+)?)")


def parse_instances(cell: str) -> dict[str, float]:
    """An instanced metric's values by instance name, from ncu's "total (name: value; name: value; ...)" cell.

    Pairs may be split by ';' or ','; values may carry thousands separators. {} where the cell has values only.
    """
    inside = cell.partition("(")[2] or cell
    values: dict[str, float] = {}
    for name, text in INSTANCE.findall(inside):
        if (value := parse_number(text.rstrip(","))) is not None:
            values[name] = values.get(name, 0) + value
    return values


def parse_ncu_csv(text: str, target: str) -> Profile | None:
    """The first profiled kernel in ncu's --csv --page raw output (a header, a row of units, a row per kernel)."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    header_at = next((i for i, row in enumerate(rows) if row[:1] == ["ID"]), None)
    if header_at is None:
        return None
    header = rows[header_at]
    body = [row for row in rows[header_at + 1 :] if len(row) == len(header)]
    units = dict(zip(header, next((row for row in body if row[0] == ""), [""] * len(header)), strict=True))
    kernel = next((dict(zip(header, row, strict=True)) for row in body if row[0] != ""), None)
    if kernel is None:
        return None
    metrics = [name for name in header if "__" in name and name != PER_OPCODE]  # the rest describe the launch
    return Profile(
        target=target,
        kernel=kernel.get("Kernel Name", ""),
        block=kernel.get("Block Size", ""),
        grid=kernel.get("Grid Size", ""),
        readings={name: Reading(parse_number(kernel[name]), units[name]) for name in metrics},
        executed=parse_instances(kernel.get(PER_OPCODE, "")),
    )


def unknown_metrics(output: str, metrics: list[str]) -> set[str]:
    """Those of ``metrics`` this ncu does not know, from its "Failed to find metric [regex:^]name..." errors."""
    found = re.findall(r"Failed to find metric (?:regex:\^?)?([\w\\.]+)", output)
    names = {name.replace("\\", "").strip(".") for name in found}
    return {metric for metric in metrics if metric in names or metric.split(".")[0] in names}


def child_command(target: Target, args: argparse.Namespace) -> list[str]:
    """The program ncu profiles: kernels/tools/run_once.py running the target once at the shape of ``args``."""
    child = [sys.executable, "-m", "kernels.tools.run_once", target.token, "--batch", str(args.batch)]
    child += ["--seq-len", str(args.seq_len), "--heads", str(args.heads), "--dtype", args.dtype]
    child += ["--causal"] if args.causal else []
    return child + [
        f"--{name.replace('_', '-')}={getattr(args, name)}" for name in ("kv_heads", "kv_len") if getattr(args, name)
    ]


def ncu_command(ncu: str, metrics: list[str], target: Target, args: argparse.Namespace) -> list[str]:
    """ncu on a child that runs the target once: the first launch of its kernel, clocks left alone."""
    child = child_command(target, args)
    return [
        ncu, "--clock-control", "none", "-k", f"regex:{target.kernel}", "-c", "1", "--metrics", ",".join(metrics),
        "--csv", "--page", "raw", "--print-units", "base", "--print-metric-instances", "details", *child,
    ]  # fmt: skip


def failure_reason(result: subprocess.CompletedProcess) -> str:
    """Why ncu profiled nothing, in one line: the child's last words (ncu's own lines start with "==") if any."""
    lines = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith('"')]
    own = [line for line in lines if not line.startswith("==")]
    return (own or lines or [f"exit code {result.returncode}"])[-1]


def profile_target(ncu: str, target: Target, args: argparse.Namespace, metrics: list[str]) -> tuple[Profile, list[str]]:
    """Profile one target; where this ncu lacks some metrics, again without them (they show as n/a).

    Returns the profile and the metrics this ncu knows, for the next target.
    """
    for _ in range(MAX_NCU_RUNS):
        result = subprocess.run(ncu_command(ncu, metrics, target, args), capture_output=True, text=True, cwd=ROOT)
        unknown = unknown_metrics(result.stdout + result.stderr, metrics)
        if not unknown or unknown == set(metrics):
            break
        metrics = [metric for metric in metrics if metric not in unknown]
    if "ERR_NVGPUCTRPERM" in result.stdout + result.stderr:
        raise ToolError(NO_COUNTERS)
    profile = parse_ncu_csv(result.stdout, target.name)
    if profile is None:
        raise ToolError(
            f"ncu profiled no kernel of {target.name} (regex:{target.kernel}, exit code {result.returncode}): "
            + failure_reason(result)
        )
    return profile, metrics


def format_reading(reading: Reading | None) -> str:
    """A reading for the table: durations in ms, percentages with %, bytes in MB or GB, counts with separators."""
    if reading is None or reading.value is None:
        return "n/a"
    value, unit = reading.value, reading.unit
    to_ms = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}
    if unit in to_ms:
        return f"{value * to_ms[unit]:.3f} ms"
    if unit == "%":
        return f"{value:.1f}%"
    if unit in ("byte", "bytes", "B"):
        return f"{value / 1e9:,.2f} GB" if value >= 1e9 else f"{value / 1e6:,.1f} MB"
    number = f"{value:,.0f}" if value.is_integer() and abs(value) >= 100 else f"{value:,.2f}"
    return f"{number} {unit}".strip()


def top_stalls(readings: dict[str, Reading]) -> dict[str, float]:
    """The largest stall reasons that came back as numbers, largest first: reason -> cycles per instruction."""
    found = {reason: readings[m].value for m, reason in STALL_METRICS.items() if m in readings}
    found = {reason: value for reason, value in found.items() if value is not None}
    return dict(sorted(found.items(), key=lambda item: -item[1])[:TOP_STALLS])


def executed_rows(profiles: list[Profile]) -> list[Row]:
    """Warp instructions executed per group of opcodes, then the rest ("other") and the total."""
    columns = []
    for profile in profiles:
        groups = group_counts(profile.executed, EXECUTED_ROWS)
        total = sum(profile.executed.values())
        columns.append(groups | {"other": total - sum(groups.values()), "total": total} if profile.executed else None)
    labels = [*EXECUTED_ROWS, "other", "total"]
    return [(label, [Cell(f"{column[label]:,.0f}" if column else "n/a") for column in columns]) for label in labels]


def stall_rows(profiles: list[Profile]) -> list[Row]:
    """The stall reasons among the largest of any target, largest first, in cycles per issued instruction."""
    stalls = [top_stalls(profile.readings) for profile in profiles]
    largest = {reason: max(top.get(reason, 0) for top in stalls) for top in stalls for reason in top}
    rows = []
    for reason in sorted(largest, key=lambda reason: -largest[reason]):
        cells = [profile.readings.get(STALL_METRIC.format(reason)) for profile in profiles]
        values = [f"{cell.value:.2f}" if cell and cell.value is not None else "n/a" for cell in cells]
        rows.append((f"stall: {reason.replace('_', ' ')}", [Cell(value) for value in values]))
    return rows


def profile_table(profiles: list[Profile], short_heads: list[str], title: str) -> SideBySide:
    """The launch, the headline metrics, the executed instructions and the stalls, one column per target."""
    launch = [("threads / block", [Cell(p.block) for p in profiles]), ("blocks", [Cell(p.grid) for p in profiles])]
    headline = [
        (label, [Cell(format_reading(profile.readings.get(metric))) for profile in profiles])
        for metric, label in HEADLINE.items()
    ]
    return SideBySide(
        title=title,
        heads=[profile.target for profile in profiles],
        short_heads=short_heads,
        sections=[launch + headline, executed_rows(profiles), stall_rows(profiles)],
        caption="Instructions: warp instructions executed, by opcode; integer ALU is "
        f"{', '.join(INTEGER_ALU)}. Stalls: cycles per issued instruction.",
    )


def compiled_by(chosen: list[Target]) -> str | None:
    """The NVRTC version that builds the chosen chapters (their SASS depends on it), or None where none is chosen."""
    return nvrtc_version() if any(target.chapter for target in chosen) else None


def profile_title(args: argparse.Namespace, nvrtc: str | None = None) -> str:
    """What was profiled, that the clocks were not locked, and the NVRTC that built the chapters, if any."""
    shape = f"batch {args.batch}, seq_len {args.seq_len}, heads {args.heads}, {args.dtype}"
    kv_heads, kv_len = getattr(args, "kv_heads", None), getattr(args, "kv_len", None)  # absent in older records
    if kv_heads or kv_len:
        shape += f", kv_len {kv_len or args.seq_len}, kv_heads {kv_heads or args.heads}"
    built = f"; chapters compiled by NVRTC {nvrtc}" if nvrtc else ""
    return f"{shape}{', causal' if args.causal else ''} (Nsight Compute, clocks not locked{built})"


def kernel_readings(profile: Profile) -> dict[str, dict]:
    """The profile's readings of the kernel, without ncu's notes about itself (its profiler__* metrics)."""
    return {name: asdict(reading) for name, reading in profile.readings.items() if not name.startswith("profiler__")}


def save_profiles(
    profiles: list[Profile], args: argparse.Namespace, path: Path, nvrtc: str | None = None, chosen: list[Target] = ()
) -> None:
    """The profiles as JSON, every metric by its ncu name, with the shape, the NVRTC that built the chapters (None
    where only torch's kernels ran), the sha256 of each chosen chapter's source and the command that measured them."""
    record = {
        "shape": {
            name: getattr(args, name, None)
            for name in ("batch", "seq_len", "heads", "kv_heads", "kv_len", "dtype", "causal")
            if getattr(args, name, None) is not None  # K/V heads and keys: only where they differ from the queries'
        },
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "nvrtc": nvrtc,
        "sources": source_hashes(target.chapter.source for target in chosen if target.chapter),
        "command": args.command_line,
        "profiles": [asdict(profile) | {"readings": kernel_readings(profile)} for profile in profiles],
    }
    path.write_text(json.dumps(record, indent=1) + "\n")


def load_profile_table(path: Path) -> SideBySide:
    """The table `runner.py profile` printed, again from the JSON its --json saved; a ValueError naming the file
    where it is not such a JSON."""
    try:
        record = json.loads(Path(path).read_text())
        profiles = [
            Profile(**entry | {"readings": {name: Reading(**r) for name, r in entry["readings"].items()}})
            for entry in record["profiles"]
        ]
        title = profile_title(argparse.Namespace(**record["shape"]), record.get("nvrtc"))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not profiles saved by `runner.py profile --json` ({error!r})") from error
    short = {name: short_name for name, short_name, _ in REFERENCES.values()}
    return profile_table(profiles, [short.get(p.target, p.target.split("_")[0]) for p in profiles], title)


def this_gpu() -> str | None:
    """The architecture of the GPU the kernels would run on ("sm_90"), or None where torch sees no GPU."""
    return gpu_arch(0) if torch.cuda.is_available() else None


def chosen_targets(wanted: list[str]) -> list[Target]:
    """The targets named, less the chapters built for another GPU than the one here; a ToolError without a GPU."""
    chosen = targets(wanted)
    gpu = this_gpu()
    if gpu is None:
        raise ToolError(f"No CUDA GPU found: profiling {names([t.name for t in chosen])} needs an NVIDIA GPU")
    if not any(target.runs_on(gpu) for target in chosen):
        built_for = ", ".join(f"{target.name} for {target.chapter.kernel.arch} only" for target in chosen)
        raise UsageError(f"none of the chosen kernels runs on this {gpu} GPU ({built_for})")
    return runnable(chosen, gpu)


def run_profile(args: argparse.Namespace) -> int:
    """`runner.py profile`: each target under ncu, then the readings side by side (and saved)."""
    chosen = chosen_targets(args.targets)
    ncu = shutil.which("ncu")
    if ncu is None:
        raise ToolError(NO_NCU.format(what=names([target.name for target in chosen])))
    profiles, metrics = [], [*HEADLINE, PER_OPCODE, *STALL_METRICS]
    with Progress() as progress:
        for target in chosen:
            with progress.step(f"profiling {target.name} under Nsight Compute"):
                profile, metrics = profile_target(ncu, target, args, metrics)
            profiles.append(profile)
    if PER_OPCODE in metrics and not any(profile.executed for profile in profiles):
        print(NO_OPCODE_NAMES, file=sys.stderr)
    nvrtc = compiled_by(chosen)
    table = profile_table(profiles, [target.short_name for target in chosen], profile_title(args, nvrtc))
    if args.markdown:
        print(table.markdown())
    else:
        print_side_by_side(table)
    if args.json:
        save_profiles(profiles, args, args.json, nvrtc, chosen)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
