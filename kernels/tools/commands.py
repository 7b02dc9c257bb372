"""`runner.py` and its commands: each command's options, and the module whose handler does its work.

    python runner.py [options]            the ladder                   kernels.tools.ladder
    python runner.py ablate N             one ablation set             kernels.tools.ladder
    python runner.py decode               the ladder at decode shapes  kernels.tools.ladder
    python runner.py inspect [N ...]      registers, smem, SASS        kernels.tools.inspection
    python runner.py diff A B             the idea between chapters    kernels.tools.chapter_diff
    python runner.py profile [N|fa2 ...]  Nsight Compute, side by side kernels.tools.profiling
    python runner.py stalls [N|fa4 ...]   where the warps wait         kernels.tools.stalls
    python runner.py timeline N ...       the tile loop, stamped       kernels.tools.timeline
    python runner.py peak                 the GPU's ceilings           kernels.tools.peak
    python runner.py read_rate            reading a decode KV cache    kernels.tools.read_rate

Every option is parsed here, before torch is imported: --help and a mistake answer at once, and a handler's
module (which imports torch) is imported only to run the command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernels.tools.cli import DTYPE_NAMES, Parser, add_instance_options, gpu_arch, positive_int, run

ROOT = Path(__file__).resolve().parents[2]
PEAK = ROOT / "results" / "peak.json"
# What shapes and times a measurement: --from-json shows a saved run as it was measured, so it takes none of them.
MEASURING_OPTIONS = (
    "--batch",
    "--seq-len",
    "--heads",
    "--kv-heads",
    "--kv-len",
    "--head-dim",
    "--dtype",
    "--causal",
    "--warmup",
    "--repeats",
    "--rounds",
    "--seed",
    "--clocks",
)
SHAPE_DEFAULTS = {"batch": 16, "seq_len": 4096, "heads": 16}  # the headline shape
SHAPE_OPTIONS = ("--batch", "--heads", "--seq-len", "--dtype", "--causal")  # what a preset's shapes fix
# `runner.py decode`: one new query row per sequence against a KV cache, as a run records its shape. Not causal: the
# bottom-right causal mask lets the last query see every key, so with one query it would hide nothing.
DECODE_SHAPES = tuple(
    {
        "batch": batch,
        "seq_len": 1,
        "heads": heads,
        "kv_heads": kv_heads,
        "kv_len": kv_len,
        "head_dim": 128,
        "dtype": "bf16",
        "causal": False,
    }
    for batch, kv_len, heads, kv_heads in (  # sequences, keys per sequence, query heads, K/V heads
        (64, 8192, 32, 8),
        (8, 32768, 32, 8),
        (128, 2048, 16, 16),
    )
)


# --- checks after parsing: each one line through parser.error ------------------------------------------------


def check_shape(parser: Parser, args: argparse.Namespace, argv: list[str]) -> None:
    """The sequence lengths as integers, and K/V heads that divide the query heads."""
    try:
        args.seq_lens = [int(s) for s in args.seq_len.split(",")]
    except ValueError:
        parser.error(f"--seq-len takes integers separated by commas, got {args.seq_len!r}")
    if min(args.seq_lens) < 1:
        parser.error(f"every --seq-len must be at least 1, got {args.seq_len}")
    if args.kv_heads and args.heads % args.kv_heads:
        parser.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")


def check_outputs(parser: Parser, args: argparse.Namespace, argv: list[str]) -> None:
    """Every file the command will write can be written, before any GPU time is spent."""
    for option in ("json", "plot"):
        path = getattr(args, option, None)
        if path is not None and not path.parent.is_dir():
            parser.error(f"--{option}: the folder {path.parent} does not exist")
        if path is not None and path.is_dir():
            parser.error(f"--{option}: {path} is a folder; give a file name")
    if getattr(args, "plot", None) is not None:
        try:
            from matplotlib.backend_bases import FigureCanvasBase
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib")
        formats = FigureCanvasBase.get_supported_filetypes()
        if args.plot.suffix[1:].lower() not in formats:
            parser.error(f"--plot: matplotlib cannot write {args.plot.name!r}; end it in one of {', '.join(formats)}")


def check_from_json(parser: Parser, args: argparse.Namespace, argv: list[str]) -> None:
    """--from-json shows a run as it was measured: the options that shape or time a run have no say."""
    if args.from_json:
        given = [option for option in MEASURING_OPTIONS if any(a == option or a.startswith(f"{option}=") for a in argv)]
        if given:
            parser.error(f"--from-json shows the saved run as it was measured; leave out {', '.join(given)}")


# --- the parsers ---------------------------------------------------------------------------------------------


def add_shape_options(parser: Parser) -> None:
    """--batch and --heads, defaulting to the headline shape's."""
    parser.add_argument("--batch", type=positive_int, default=SHAPE_DEFAULTS["batch"], help="sequences per batch")
    parser.add_argument("--heads", type=positive_int, default=SHAPE_DEFAULTS["heads"], help="query heads")


def add_measuring_options(parser: Parser) -> None:
    """The options the ladder and ``ablate`` share: the shape, the rounds of timing, and the outputs."""
    add_shape_options(parser)
    parser.add_argument(
        "--seq-len",
        default=str(SHAPE_DEFAULTS["seq_len"]),
        help="queries per sequence: one length, or several separated by commas (a sweep)",
    )
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="bf16", help="element type of q, k, v and out")
    parser.add_argument("--causal", action="store_true", help="mask keys after each query (default: not causal)")
    add_timing_options(parser)


def add_timing_options(parser: Parser) -> None:
    """The options the ladder, ``ablate`` and ``decode`` share: the rounds of timing, and the outputs."""
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=5,
        help="rounds, each timing every contender once, in an order that rotates",
    )
    parser.add_argument(
        "--warmup",
        type=positive_int,
        default=10,
        help="untimed runs before each timing, and more until they have kept the GPU busy for WARMUP_MS "
        "(kernels/tools/timing.py), so that each contender is timed at the clocks its own work sets",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=30,
        help="timed runs per contender per round; the round's value is their median",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random q, k and v")
    parser.add_argument(
        "--clocks",
        action="store_true",
        help="also read the SM clock and the board's power through NVML while each contender's calls are timed, "
        "as two more columns",
    )
    parser.add_argument("--markdown", action="store_true", help="print GitHub Markdown tables instead of rich ones")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save every timed sample as JSON")
    parser.add_argument(
        "--peak",
        type=Path,
        default=PEAK,
        metavar="FILE",
        help="the ceilings for %% of peak and %% of DRAM, from `runner.py peak` (default results/peak.json)",
    )


def add_kernels_option(parser: Parser) -> None:
    """--kernels: which chapters run."""
    parser.add_argument("--kernels", help="chapters to run, by number or slug: '1,3' or 'naive,swizzle' (default: all)")


def ladder_parser() -> Parser:
    """`runner.py`: the ladder."""
    parser = Parser(
        prog="runner.py",
        description="Time every chapter and torch's attention on the same Q, K, V, in interleaved rounds, "
        "and print the ladder.",
        epilog="Other commands: `runner.py ablate N`, `runner.py decode`, `runner.py peak`, `runner.py read_rate`, "
        "`runner.py inspect`, `runner.py diff A B`, `runner.py profile N [fa2|cudnn|fa4]`, `runner.py stalls N [fa4]` "
        "(each has --help).",
        checks=(check_shape, check_from_json, check_outputs),
    )
    add_measuring_options(parser)
    parser.add_argument("--head-dim", type=int, default=128, choices=[128], help="the kernels support 128 only")
    parser.add_argument("--kv-heads", type=positive_int, help="K and V heads, dividing --heads (default: --heads)")
    parser.add_argument("--kv-len", type=positive_int, help="keys per sequence (default: each --seq-len)")
    add_kernels_option(parser)
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the ladder (needs matplotlib)")
    parser.add_argument(
        "--from-json",
        type=Path,
        metavar="FILE",
        help="show a saved run instead of measuring (with --json or --plot: write it there); "
        "--kernels picks its rows, the options that shape or time a run are refused",
    )
    return parser


def ablate_parser() -> Parser:
    """`runner.py ablate N`: one ablation set."""
    from kernels.tools.ablations import ABLATIONS_DIR, set_folders, set_number

    folders = set_folders()
    numbers = [str(set_number(folder)) for folder in folders]
    where = ABLATIONS_DIR.relative_to(ROOT)
    parser = Parser(
        prog="runner.py ablate",
        description="Time the kernels of one ablation set, a grid that takes one step of the ladder apart, next to "
        "torch's attention in interleaved rounds; print the table and the grid.",
        epilog=f"The sets: {', '.join(f'{n} ({where}/{f.name}/)' for n, f in zip(numbers, folders, strict=True))}.",
        checks=(check_shape, check_decode, check_outputs),
    )
    parser.add_argument(
        "set", metavar="N", help=f"the set, by the chapter whose step it takes apart: one of {', '.join(numbers)}"
    )
    parser.add_argument(
        "--decode",
        action="store_true",
        help="at `runner.py decode`'s shapes (one query row per sequence against a long KV cache), in GB/s",
    )
    add_measuring_options(parser)
    parser.set_defaults(head_dim=128, kv_heads=None, kv_len=None, plot=None, from_json=None, kernels=None)
    return parser


def check_decode(parser: Parser, args: argparse.Namespace, argv: list[str]) -> None:
    """With --decode, the decode shapes, which no shape option may change."""
    if not args.decode:
        return
    given = [option for option in SHAPE_OPTIONS if any(a == option or a.startswith(f"{option}=") for a in argv)]
    if given:
        parser.error(f"--decode times the decode shapes; it takes no {', '.join(given)}")
    set_decode_shapes(parser, args, argv)


def set_decode_shapes(parser: Parser, args: argparse.Namespace, argv: list[str]) -> None:
    """The preset's shapes, and what the ladder's engine reads that the preset fixes."""
    args.shapes = [dict(shape) for shape in DECODE_SHAPES]
    args.causal, args.plot, args.from_json = False, None, None


def decode_parser() -> Parser:
    """`runner.py decode`: the ladder at the decode shapes."""
    from kernels.tools.runs import shape_title

    shapes = "; ".join(f"({shape_title(shape)})" for shape in DECODE_SHAPES)
    parser = Parser(
        prog="runner.py decode",
        description="Decoding: one new query row per sequence attends to a long KV cache with grouped-query heads. "
        "Time every chapter and torch's attention at the decode shapes, in interleaved rounds, as the ladder does; "
        "memory-bound, so shown in GB/s of the bytes a call must move and % of the DRAM ceiling. Not causal: with "
        "one query the bottom-right causal mask hides no key.",
        epilog=f"The shapes: {shapes}. `runner.py --from-json FILE` shows a saved run again.",
        checks=(set_decode_shapes, check_outputs),
    )
    add_kernels_option(parser)
    add_timing_options(parser)
    return parser


def inspect_parser() -> Parser:
    """`runner.py inspect`."""
    parser = Parser(
        prog="runner.py inspect",
        description="Compile chapters with NVRTC and show registers, shared memory, spills and SASS instruction "
        "counts side by side. Needs no GPU; compiled chapters are cached on disk.",
    )
    parser.add_argument("chapters", nargs="*", help="by number or slug: '3 4', '1,3', 'naive,swizzle' (default: all)")
    parser.add_argument(
        "--arch",
        type=gpu_arch,
        default="sm_90",
        help="the GPU to compile for: sm_80 or newer; the Hopper chapters (sm_90a) on sm_90 only",
    )
    add_instance_options(parser)
    parser.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    return parser


def context_lines(text: str) -> int:
    """argparse type: lines of context, 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def diff_parser() -> Parser:
    """`runner.py diff A B`."""
    parser = Parser(
        prog="runner.py diff", description="Unified diff of two chapters' kernel (or variants'), then of their loader."
    )
    parser.add_argument("a", help="first chapter, by number or slug, or an ablation variant by name")
    parser.add_argument("b", help="second chapter, by number or slug, or an ablation variant by name")
    parser.add_argument("-U", "--context", type=context_lines, default=3, help="lines of context")
    parser.add_argument(
        "-w",
        "--ignore-indent",
        action="store_true",
        help="lines that differ only in indentation count as unchanged (code moved into a loop)",
    )
    parser.add_argument("--no-color", action="store_true", help="plain text, no colours (as in a pipe)")
    return parser


def add_target_options(parser: Parser, what: str) -> None:
    """The kernels to run once (chapters, fa2, cudnn, fa4) and the one shape and instance they run at."""
    parser.add_argument(
        "targets",
        nargs="*",
        help=f"{what}: chapters by number or slug, ablation variants by name, 'fa2' and 'cudnn' for "
        "torch's kernels, 'fa4' for FlashAttention-4's: '8 fa2', '9,cudnn', '16 fa4', '28 k28_one_head' "
        "(default: every chapter, then fa2 and cudnn)",
    )
    add_shape_options(parser)
    parser.add_argument(
        "--seq-len", type=positive_int, default=SHAPE_DEFAULTS["seq_len"], help="queries and keys per sequence"
    )
    parser.add_argument("--kv-heads", type=positive_int, help="K and V heads, dividing --heads (default: --heads)")
    parser.add_argument("--kv-len", type=positive_int, help="keys per sequence (default: --seq-len)")
    add_instance_options(parser)


def profile_parser() -> Parser:
    """`runner.py profile`."""
    parser = Parser(
        prog="runner.py profile",
        description="Run chapters and torch's attention kernels once each under Nsight Compute (clocks left as they "
        "are: --clock-control none) and show side by side their duration, tensor-pipe use, L2 and DRAM traffic, "
        "bank conflicts, occupancy, the instructions they executed per opcode, and their largest warp stalls.",
        checks=(check_outputs,),
    )
    add_target_options(parser, "the kernels to profile")
    parser.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save every reading as JSON")
    return parser


def stalls_parser() -> Parser:
    """`runner.py stalls`."""
    parser = Parser(
        prog="runner.py stalls",
        description="Run chapters and other attention kernels once each under Nsight Compute's source counters "
        "(clocks left as they are) and show where their warps were sampled: at which kind of instruction, waiting "
        "for what, and the instructions with the most samples.",
        checks=(check_outputs,),
    )
    add_target_options(parser, "the kernels to sample")
    parser.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save every instruction's samples as JSON")
    parser.add_argument("--from-json", type=Path, metavar="FILE", help="show a file saved by --json instead")
    return parser


def timeline_parser() -> Parser:
    """`runner.py timeline`."""
    parser = Parser(
        prog="runner.py timeline",
        description="Stamp the tile loop of Hopper kernels (chapters 15 on, or their ablation variants) with the SM's "
        "cycle counter in every consumer warp, run each at one shape and show how long its warps wait for K and V, "
        "for S and for P V, what they run between and after the two waits, and for how much of the loop neither "
        "warpgroup, one or both have products on the tensor cores; beside it, the stamped build's time and the "
        "kernel's own. Needs an sm_90 GPU.",
        checks=(check_outputs,),
    )
    parser.add_argument("targets", nargs="+", help="chapters by number or slug, or variants by name: '16 21 k19_lean'")
    add_shape_options(parser)
    parser.add_argument(
        "--seq-len", type=positive_int, default=SHAPE_DEFAULTS["seq_len"], help="queries and keys per sequence"
    )
    add_instance_options(parser)
    parser.add_argument("--rounds", type=positive_int, default=3, help="interleaved rounds timing each kernel")
    parser.add_argument("--markdown", action="store_true", help="print a GitHub Markdown table instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save the summaries as JSON")
    return parser


def peak_parser() -> Parser:
    """`runner.py peak`."""
    parser = Parser(
        prog="runner.py peak",
        description="Measure the ceilings: mma.sync and wgmma rates, torch.matmul, DRAM and L2 bandwidth.",
        checks=(check_outputs,),
    )
    parser.add_argument("--rounds", type=positive_int, default=50, help="interleaved rounds; medians are shown")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save the measurements as JSON")
    parser.add_argument("--markdown", action="store_true", help="print GitHub Markdown tables instead")
    return parser


def read_rate_parser() -> Parser:
    """`runner.py read_rate`."""
    parser = Parser(
        prog="runner.py read_rate",
        description="Measure how fast the GPU reads a decode KV cache: K and V at the decode shapes' batch, kv_len and "
        "kv_heads (head_dim 128, bf16), read by the TMA as chapter 19 copies and with one box per 256-byte row, by "
        "cp.async from the producer warpgroup's threads (contiguous chunks of tiles per block, or items of 4 "
        "tiles dealt round), and by 16-byte loads from every thread; each reader's XOR of the words it received is "
        "checked first. In GB/s of K and V, interleaved rounds. Needs a Hopper GPU (sm_90).",
        checks=(check_outputs,),
    )
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds; medians are shown")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save every sample as JSON")
    parser.add_argument("--markdown", action="store_true", help="print GitHub Markdown tables instead")
    return parser


def run_once_parser(prog: str) -> Parser:
    """`python -m kernels.tools.run_once`: the program `runner.py profile` runs under ncu."""
    parser = Parser(prog=prog, description="Run attention kernels once each at one shape.")
    add_target_options(parser, "the kernels to run")
    return parser


# --- the commands --------------------------------------------------------------------------------------------


def later(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A command's handler, imported when the command runs: after its arguments parsed."""
    return lambda args: getattr(importlib.import_module(module), function)(args)


@dataclass(frozen=True)
class Command:
    """A command: its parser, and the handler that runs it on the parsed arguments."""

    parser: Callable[[], Parser]
    handler: Callable[[argparse.Namespace], int]


LADDER = Command(ladder_parser, later("kernels.tools.ladder", "run_ladder"))
COMMANDS = {
    "ablate": Command(ablate_parser, later("kernels.tools.ladder", "run_ablate")),
    "decode": Command(decode_parser, later("kernels.tools.ladder", "run_decode")),
    "inspect": Command(inspect_parser, later("kernels.tools.inspection", "run_inspect")),
    "diff": Command(diff_parser, later("kernels.tools.chapter_diff", "run_diff")),
    "profile": Command(profile_parser, later("kernels.tools.profiling", "run_profile")),
    "stalls": Command(stalls_parser, later("kernels.tools.stalls", "run_stalls")),
    "timeline": Command(timeline_parser, later("kernels.tools.timeline", "run_timeline")),
    "peak": Command(peak_parser, later("kernels.tools.peak", "run_peak")),
    "read_rate": Command(read_rate_parser, later("kernels.tools.read_rate", "run_read_rate")),
}


def main(argv: list[str] | None = None) -> int:
    """`python runner.py [command] ...`: the command's exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and argv[0] in COMMANDS else None
    command, rest = (COMMANDS[name], argv[1:]) if name else (LADDER, argv)
    parser = command.parser()
    parser.set_defaults(command_line=" ".join(["python runner.py", *argv]))  # kept in what a run saves
    return run(parser, command.handler, rest)
