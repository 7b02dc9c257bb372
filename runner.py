"""Run every chapter on one Q, K, V and print the ladder next to torch's attention.

python runner.py                        # the headline shape: batch 16, seq 4096, 16 heads, bf16
python runner.py --causal --seq-len 1024,16384 --kernels 3,4
python runner.py --markdown --json run.json --plot ladder.png
python runner.py inspect | diff 3 4 | profile 5     (see `python runner.py inspect --help`, ...)
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import math
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from kernels import DTYPES, chapters, select
from kernels.launch import gpu_arch
from kernels.report import Row, Run, load_runs, plot_ladder, print_runs, save_runs
from reference import (
    REFERENCE,
    SDPA_BACKENDS,
    attention_error,
    attention_flops,
    exact_attention,
    sdpa_available,
    sdpa_function,
)

NO_GPU = (
    "No CUDA GPU found: the ladder runs on an NVIDIA GPU (sm_80 or newer). "
    "`python runner.py inspect` works without one."
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="runner.py",
        description="Time every chapter and torch's attention on the same Q, K, V and print the ladder.",
        epilog="Other commands: `runner.py inspect`, `runner.py diff A B`, `runner.py profile N` (each has --help).",
    )
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", default="4096", help="one length, or several separated by commas (a sweep)")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128, choices=[128], help="the kernels support 128 only")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--causal", action="store_true", help="mask keys after each query")
    parser.add_argument("--kernels", help="chapters to run, by number or slug: '1,3' or 'naive,swizzle' (default: all)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs; the median is shown (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="print GitHub Markdown tables instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also save the measurements as JSON")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the ladder (needs matplotlib)")
    parser.add_argument("--from-json", type=Path, metavar="FILE", help="show a saved run instead of measuring")
    args = parser.parse_args(argv)
    try:
        args.seq_lens = [int(s) for s in args.seq_len.split(",")]
    except ValueError:
        parser.error(f"--seq-len takes integers separated by commas, got {args.seq_len!r}")
    if min(args.seq_lens) < 1 or args.batch < 1 or args.heads < 1:
        parser.error("--batch, --heads and every --seq-len must be at least 1")
    try:
        args.chapters = select(chapters(), args.kernels)
    except ValueError as error:
        parser.error(f"--kernels: {error}")
    return args


def median_ms(fn: Callable[[int], object], warmup: int, repeats: int) -> float:
    """Median time of ``fn(i)`` in ms, each run between its own pair of CUDA events, after warm-up."""
    for i in range(warmup):
        fn(i)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(warmup + i)
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def make_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator
) -> list[tuple[torch.Tensor, ...]]:
    """Fresh random Q, K, V; several sets when one would fit in L2, so timed runs rotate through memory."""
    set_bytes = 3 * math.prod(shape) * torch.finfo(dtype).bits // 8
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    n_sets = min(8, max(1, math.ceil(4 * l2_bytes / set_bytes)))
    return [
        tuple(torch.randn(shape, dtype=dtype, device="cuda", generator=generator) for _ in range(3))
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


def run_ladder(args: argparse.Namespace, seq_len: int, progress) -> Run:
    """Measure the references and the chosen chapters at one shape."""
    dtype = DTYPES[args.dtype]
    shape = (args.batch, seq_len, args.heads, args.head_dim)
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    inputs = make_inputs(shape, dtype, generator)
    q, k, v = inputs[0]
    flops = attention_flops(*shape, causal=args.causal)
    exact = exact_attention(q, k, v, causal=args.causal)
    run = Run(
        {
            "batch": args.batch,
            "seq_len": seq_len,
            "heads": args.heads,
            "head_dim": args.head_dim,
            "dtype": args.dtype,
            "causal": args.causal,
        },
        environment(),
    )

    def measure(name: str, kind: str, attention: Callable, output: torch.Tensor) -> Row:
        task = progress.add_task(f"timing {name} at seq_len {seq_len}", total=None)
        ms = median_ms(lambda i: attention(*inputs[i % len(inputs)], causal=args.causal), args.warmup, args.repeats)
        progress.remove_task(task)
        error = attention_error(output, exact)
        return Row(name, kind, ms, flops / ms / 1e9, error.max_abs, error.rel_l2)

    references = {}
    for name, backend in SDPA_BACKENDS.items():
        if sdpa_available(backend, q, causal=args.causal):
            attention = sdpa_function(backend)
            references[name] = measure(name, "reference", attention, attention(q, k, v, causal=args.causal))
    run.rows += references.values()
    baseline = references.get(REFERENCE) or next(iter(references.values()))
    baseline_error = attention_error(sdpa_function(SDPA_BACKENDS[baseline.name])(q, k, v, causal=args.causal), exact)

    previous = None
    for chapter in args.chapters:
        try:
            chapter.kernel.build_arch(gpu_arch(q.device.index))
        except ValueError as error:  # a chapter written for another GPU (wgmma: Hopper only)
            progress.console.print(f"left out: {error}")
            continue
        task = progress.add_task(f"compiling {chapter.name}", total=None)
        poisoned = torch.full_like(q, math.nan)  # every element must be written, or NaN shows in the error
        output = chapter.attention(q, k, v, causal=args.causal, out=poisoned)
        torch.cuda.synchronize()
        progress.remove_task(task)
        row = measure(chapter.name, "chapter", chapter.attention, output)
        row.ok = attention_error(output, exact).within(baseline_error)
        if REFERENCE in references:
            row.pct_of_reference = 100 * references[REFERENCE].ms / row.ms
        if previous is not None:
            row.speedup = previous.ms / row.ms
        run.rows.append(row)
        previous = row
    return run


# The other commands, each a module of kernels/ with its own --help: name -> module, whose main() takes the rest.
COMMANDS = {
    "inspect": "kernels.inspect",
    "diff": "kernels.diff",
    "profile": "kernels.profile",
    "peak": "kernels.peak",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    args = parse_args(argv)
    if args.from_json:
        runs = load_runs(args.from_json)
    else:
        if not torch.cuda.is_available():
            print(NO_GPU, file=sys.stderr)
            return 1
        from rich.progress import Progress, SpinnerColumn, TextColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True) as progress:
            runs = [run_ladder(args, seq_len, progress) for seq_len in args.seq_lens]
    print_runs(runs, markdown=args.markdown)
    if args.json:
        save_runs(runs, args.json)
    if args.plot:
        plot_ladder(runs[0], args.plot)
    failed = [row.name for run in runs for row in run.rows if row.ok is False]
    if failed:
        print(f"error check failed: {', '.join(failed)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
