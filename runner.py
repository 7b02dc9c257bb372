"""Time every chapter and torch's attention on the same Q, K, V, in interleaved rounds, and print the ladder.

python runner.py                        # the headline shape: batch 16, seq 4096, 16 heads, bf16
python runner.py --causal --seq-len 1024,16384 --kernels 3,4
python runner.py --markdown --json run.json --plot ladder.png
python runner.py ablate 5               # one step of the ladder taken apart (a grid of kernels)
python runner.py inspect | diff 3 4 | profile 5     (see `python runner.py inspect --help`, ...)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import math
import platform
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from kernels import DTYPES, Chapter, chapters, select
from kernels.launch import gpu_arch
from kernels.tools.ceilings import instruction_family, load_ceilings
from kernels.tools.plot import plot_ladder
from kernels.tools.runs import Grid, Row, Run, RunFileError, load_runs, save_runs, shape_title
from kernels.tools.stats import rotated
from kernels.tools.tables import print_runs
from reference import (
    REFERENCE,
    SDPA_BACKENDS,
    attention_error,
    attention_flops,
    exact_attention,
    sdpa_available,
    sdpa_function,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from kernels.tools.ablations import Ablation

ROOT = Path(__file__).resolve().parent
NO_GPU = (
    "No CUDA GPU found: the ladder runs on an NVIDIA GPU (sm_80 or newer). "
    "`python runner.py inspect` works without one."
)
PEAK = ROOT / "results" / "peak.json"
# What shapes and times a measurement: --from-json shows a saved run as it was measured, so it takes none of them.
MEASURING_OPTIONS = ("--batch", "--seq-len", "--heads", "--kv-heads", "--kv-len", "--head-dim", "--dtype", "--causal",
                     "--warmup", "--repeats", "--rounds", "--seed")


# --- the command line ---------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def at_least_one(text: str) -> int:
    """An argparse type: an integer of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_measuring_options(parser: argparse.ArgumentParser) -> None:
    """The options the ladder and ``ablate`` share: the shape, the rounds of timing, and the outputs."""
    parser.add_argument("--batch", type=at_least_one, default=16)
    parser.add_argument("--seq-len", default="4096", help="one length, or several separated by commas (a sweep)")
    parser.add_argument("--heads", type=at_least_one, default=16)
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--causal", action="store_true", help="mask keys after each query")
    parser.add_argument("--rounds", type=at_least_one, default=5,
                        help="rounds, each timing every contender once, in an order that rotates (default 5)")
    parser.add_argument("--warmup", type=at_least_one, default=10, help="untimed runs before each timing (default 10)")
    parser.add_argument("--repeats", type=at_least_one, default=30,
                        help="timed runs per contender per round; the round's value is their median (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="print GitHub Markdown tables instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save every timed sample as JSON")
    parser.add_argument("--peak", type=Path, default=PEAK, metavar="FILE",
                        help="the ceilings for %% of peak, from `runner.py peak` (default results/peak.json)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = Parser(
        prog="runner.py",
        allow_abbrev=False,  # --from-json refuses the measuring options by name
        description="Time every chapter and torch's attention on the same Q, K, V, in interleaved rounds, "
        "and print the ladder.",
        epilog="Other commands: `runner.py ablate N`, `runner.py peak`, `runner.py inspect`, `runner.py diff A B`, "
        "`runner.py profile N [fa2|cudnn]` (each has --help).",
    )
    add_measuring_options(parser)
    parser.add_argument("--head-dim", type=int, default=128, choices=[128], help="the kernels support 128 only")
    parser.add_argument("--kv-heads", type=at_least_one, help="K and V heads, dividing --heads (default: --heads)")
    parser.add_argument("--kv-len", type=at_least_one, help="keys per sequence (default: each --seq-len)")
    parser.add_argument("--kernels", help="chapters to run, by number or slug: '1,3' or 'naive,swizzle' (default: all)")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the ladder (needs matplotlib)")
    parser.add_argument("--from-json", type=Path, metavar="FILE",
                        help="show a saved run instead of measuring; --kernels picks its rows, the options that "
                        "shape or time a run are refused")
    args = parser.parse_args(argv)
    check_shape(parser, args)
    try:
        args.chapters = select(chapters(), args.kernels)
    except ValueError as error:
        parser.error(f"--kernels: {error}")
    if args.from_json:
        args.runs = saved_runs(parser, args, argv)
    check_outputs(parser, args)
    return args


def check_shape(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The sequence lengths as integers, and K/V heads that divide the query heads."""
    try:
        args.seq_lens = [int(s) for s in args.seq_len.split(",")]
    except ValueError:
        parser.error(f"--seq-len takes integers separated by commas, got {args.seq_len!r}")
    if min(args.seq_lens) < 1:
        parser.error(f"every --seq-len must be at least 1, got {args.seq_len}")
    if args.kv_heads and args.heads % args.kv_heads:
        parser.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")


def saved_runs(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> list[Run]:
    """The runs of --from-json, with only the chapters --kernels names (and the references)."""
    given = [option for option in MEASURING_OPTIONS if any(a == option or a.startswith(f"{option}=") for a in argv)]
    if given:
        parser.error(f"--from-json shows the saved run as it was measured; leave out {', '.join(given)}")
    try:
        runs = load_runs(args.from_json)
    except RunFileError as error:
        parser.error(f"--from-json: {error}")
    if args.kernels:
        wanted = [chapter.name for chapter in args.chapters]
        for run in runs:
            missing = [name for name in wanted if name not in {row.name for row in run.rows}]
            if missing:
                parser.error(f"--kernels: {args.from_json} holds no {', '.join(missing)}")
            run.rows = [row for row in run.rows if row.kind == "reference" or row.name in wanted]
    return runs


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every file the run will write can be written, before any GPU time is spent."""
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None and not path.parent.is_dir():
            parser.error(f"{option}: the folder {path.parent} does not exist")
        if path is not None and path.is_dir():
            parser.error(f"{option}: {path} is a folder; give a file name")
    if args.plot is not None:
        try:
            from matplotlib.backend_bases import FigureCanvasBase
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib")
        formats = FigureCanvasBase.get_supported_filetypes()
        if args.plot.suffix[1:].lower() not in formats:
            parser.error(f"--plot: matplotlib cannot write {args.plot.name!r}; end it in one of {', '.join(formats)}")


# --- measuring ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Contender:
    """Anything timed: a torch reference or a kernel, called as ``attention(q, k, v, causal=...)``."""

    name: str
    kind: str  # "reference", "chapter" or "variant"
    attention: Callable[..., torch.Tensor]
    family: str | None = None  # kernels: the tensor-core instruction family


@contextlib.contextmanager
def showing(progress: Progress, text: str) -> Iterator[None]:
    """A spinner line saying what runs now, gone when it ends."""
    task = progress.add_task(text, total=None)
    try:
        yield
    finally:
        progress.remove_task(task)


def time_ms(fn: Callable[[int], object], warmup: int, repeats: int) -> list[float]:
    """Time of each of ``repeats`` calls ``fn(i)`` in ms, each between its own pair of CUDA events, after warm-up."""
    for i in range(warmup):
        fn(i)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(warmup + i)
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def make_inputs(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator
) -> list[tuple[torch.Tensor, ...]]:
    """Fresh random Q, K, V; several sets when one would fit in L2, so timed runs rotate through memory."""
    set_bytes = (math.prod(q_shape) + 2 * math.prod(kv_shape)) * torch.finfo(dtype).bits // 8
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    n_sets = min(8, max(1, math.ceil(4 * l2_bytes / set_bytes)))
    return [
        tuple(torch.randn(shape, dtype=dtype, device="cuda", generator=generator)
              for shape in (q_shape, kv_shape, kv_shape))
        for _ in range(n_sets)
    ]


def environment() -> dict:
    import cupy

    props = torch.cuda.get_device_properties(0)
    return {
        "device": f"{props.name} ({props.multi_processor_count} SMs)",
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "command": "python runner.py " + " ".join(sys.argv[1:]),
    }


def references(q: torch.Tensor, k: torch.Tensor, causal: bool) -> list[Contender]:
    """Torch's SDPA backends that run on these inputs (grouped heads and a longer K/V included)."""
    return [Contender(name, "reference", sdpa_function(backend))
            for name, backend in SDPA_BACKENDS.items() if sdpa_available(backend, q, k, causal=causal)]


def kernel_contenders(kernels: list[Chapter], device_index: int, progress: Progress) -> list[Contender]:
    """The kernels that run on this GPU, compiled; a ladder chapter or, if not one, an ablation variant."""
    ladder = {chapter.name for chapter in chapters()}
    found = []
    for kernel in kernels:
        try:
            kernel.kernel.build_arch(gpu_arch(device_index))
        except ValueError as error:  # a kernel written for another GPU (wgmma: Hopper only)
            progress.console.print(f"left out: {error}")
            continue
        kind = "chapter" if kernel.name in ladder else "variant"
        found.append(Contender(kernel.name, kind, kernel.attention, instruction_family(kernel.source)))
    return found


def checked_output(contender: Contender, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool):
    """One call whose output is checked; a kernel writes into NaN, so an element it misses shows in the error."""
    if contender.kind == "reference":
        return contender.attention(q, k, v, causal=causal)
    return contender.attention(q, k, v, causal=causal, out=torch.full_like(q, math.nan))


def on_input_sets(attention: Callable, inputs: list[tuple[torch.Tensor, ...]], causal: bool) -> Callable[[int], object]:
    """``call(i)``: the i-th call runs on the input sets in turn, so consecutive calls do not share L2."""
    return lambda i: attention(*inputs[i % len(inputs)], causal=causal)


def checked_rows(contenders: list[Contender], inputs: tuple[torch.Tensor, ...], exact: torch.Tensor, causal: bool,
                 flops: float, progress: Progress) -> dict[str, Row]:
    """A row per contender that takes these inputs, with its error; a kernel passes if it is no worse than about
    twice torch's own (FA2's, or the first reference's)."""
    rows, errors = {}, {}
    for contender in contenders:
        try:
            with showing(progress, f"checking {contender.name}"):
                errors[contender.name] = attention_error(checked_output(contender, *inputs, causal), exact)
        except (TypeError, ValueError) as error:  # a kernel that refuses these shapes names why
            progress.console.print(f"left out: {contender.name}: {error}")
            continue
        rows[contender.name] = Row(contender.name, contender.kind, [], errors[contender.name].max_abs,
                                   errors[contender.name].rel_l2, flops, family=contender.family)
    baseline = REFERENCE if REFERENCE in rows else next((n for n, r in rows.items() if r.kind == "reference"), None)
    for name, row in rows.items():
        if row.kind != "reference" and baseline is not None:
            row.ok = errors[name].within(errors[baseline])
    return rows


def timed_rounds(contenders: list[Contender], rows: dict[str, Row], inputs: list[tuple[torch.Tensor, ...]],
                 args: argparse.Namespace, progress: Progress) -> list[list[str]]:
    """Time every row's contender once per round, in an order that rotates; returns each round's order."""
    attention = {contender.name: contender.attention for contender in contenders}
    order = []
    for round_index in range(args.rounds):
        order.append(rotated(list(rows), round_index))
        for name in order[-1]:
            with showing(progress, f"round {round_index + 1} of {args.rounds}: timing {name}"):
                call = on_input_sets(attention[name], inputs, args.causal)
                rows[name].samples_ms.append(time_ms(call, args.warmup, args.repeats))
    return order


def measure_run(args: argparse.Namespace, seq_len: int, kernels: list[Chapter], progress: Progress) -> Run:
    """Torch's references and the kernels at one shape: each output checked, then all timed in interleaved rounds."""
    kv_len, kv_heads = args.kv_len or seq_len, args.kv_heads or args.heads
    shape = {"batch": args.batch, "seq_len": seq_len, "heads": args.heads, "kv_heads": kv_heads, "kv_len": kv_len,
             "head_dim": args.head_dim, "dtype": args.dtype, "causal": args.causal}
    q_shape = (args.batch, seq_len, args.heads, args.head_dim)
    kv_shape = (args.batch, kv_len, kv_heads, args.head_dim)
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    inputs = make_inputs(q_shape, kv_shape, DTYPES[args.dtype], generator)
    flops = attention_flops(*q_shape, seq_len_k=kv_len, causal=args.causal)

    with showing(progress, f"exact attention at {shape_title(shape)}"):
        exact = exact_attention(*inputs[0], causal=args.causal)  # once per shape: every contender is checked on it
    q, k, _ = inputs[0]
    contenders = references(q, k, args.causal) + kernel_contenders(kernels, q.device.index, progress)
    rows = checked_rows(contenders, inputs[0], exact, args.causal, flops, progress)
    del exact  # as large as the output in float32: free before timing
    order = timed_rounds(contenders, rows, inputs, args, progress)
    return Run(shape, environment(), flops, list(rows.values()), order)


def measure_runs(args: argparse.Namespace, kernels: list[Chapter]) -> list[Run]:
    """One run per sequence length, with a spinner saying what is being timed."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    # On stderr: stdout carries only the tables, the same as --from-json prints them.
    spinner = Progress(SpinnerColumn(), TextColumn("{task.description}"), console=Console(stderr=True), transient=True)
    with spinner as progress:
        return [measure_run(args, seq_len, kernels, progress) for seq_len in args.seq_lens]


def measure_and_show(args: argparse.Namespace, kernels: list[Chapter], grid: Grid | None = None) -> int:
    """Measure the kernels next to torch's attention at every shape asked for, then show the runs."""
    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 1
    runs = measure_runs(args, kernels)
    for run in runs:
        run.grid = grid
    return show(runs, args)


# --- showing --------------------------------------------------------------------------------------------------


def show(runs: list[Run], args: argparse.Namespace) -> int:
    """Print the tables, write the JSON and the plot; exit status 2 if a kernel failed its error check."""
    try:
        ceilings, note = load_ceilings(args.peak, runs[0].environment.get("device", "?")), None
    except ValueError as why:
        ceilings, note = {}, str(why)
    print_runs(runs, markdown=args.markdown, ceilings=ceilings, note=note)
    if args.json:
        save_runs(runs, args.json)
    if args.plot:
        plot_ladder(runs[0], args.plot)
    failed = list(dict.fromkeys(row.name for run in runs for row in run.rows if row.ok is False))
    if failed:
        print(f"error check failed: {', '.join(failed)}", file=sys.stderr)
        return 2
    return 0


# --- ablate: one step of the ladder taken apart -------------------------------------------------------------


def parse_ablate_args(argv: list[str]) -> argparse.Namespace:
    from kernels.tools.ablations import ablations, find_ablation

    sets = ", ".join(f"{ablation.number} ({ablation.name})" for ablation in ablations())
    parser = Parser(
        prog="runner.py ablate",
        allow_abbrev=False,
        description="Time the kernels of one ablation set, a grid that takes one step of the ladder apart, next to "
        "torch's attention in interleaved rounds; print the table and the grid.",
    )
    parser.add_argument("set", metavar="N", help=f"the chapter whose step the set splits: {sets}")
    add_measuring_options(parser)
    parser.set_defaults(head_dim=128, kv_heads=None, kv_len=None, plot=None)
    args = parser.parse_args(argv)
    check_shape(parser, args)
    try:
        args.ablation = find_ablation(args.set)
    except ValueError as error:
        parser.error(str(error))
    check_outputs(parser, args)
    return args


def grid_of(ablation: Ablation) -> Grid:
    """What a saved run keeps of an ablation set: its grid, by contender name."""
    return Grid(ablation.name, ablation.title, tuple(ablation.rows), tuple(ablation.columns), dict(ablation.cells))


def ablate(argv: list[str]) -> int:
    args = parse_ablate_args(argv)
    return measure_and_show(args, args.ablation.contenders, grid_of(args.ablation))


# The other commands, each a module of kernels/ with its own --help: name -> module, whose main() takes the rest.
COMMANDS = {
    "inspect": "kernels.tools.inspection",
    "diff": "kernels.tools.chapter_diff",
    "profile": "kernels.tools.profiling",
    "peak": "kernels.tools.peak",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    if argv and argv[0] == "ablate":
        return ablate(argv[1:])
    args = parse_args(argv)
    if args.from_json:
        return show(args.runs, args)
    return measure_and_show(args, args.chapters)


if __name__ == "__main__":
    sys.exit(main())
