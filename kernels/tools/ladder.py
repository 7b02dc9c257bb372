"""The ladder, measured: every chapter (or an ablation set's kernels) and torch's attention on the same Q, K, V,
each output checked against exact attention, then all timed in interleaved rounds; `runner.py` and
`runner.py ablate` print the tables and save the runs.

Each round times every contender once, in an order that rotates from round to round, so a slow drift of the GPU
(clocks, heat) touches all of them alike; every timed sample is kept (``kernels.tools.runs``).
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kernels.build import nvrtc_version
from kernels.chapters import Chapter, chapters, select
from kernels.launch import DTYPES, gpu_arch
from kernels.tools.ceilings import Ceilings, instruction_family, load_ceilings
from kernels.tools.cli import ToolError, UsageError, names
from kernels.tools.clocks import ClockSampler, median_reading
from kernels.tools.progress import Progress
from kernels.tools.runs import Grid, Row, Run, RunFileError, load_runs, save_runs, shape_title
from kernels.tools.sources import source_hashes
from kernels.tools.stats import rotated
from kernels.tools.tables import print_runs
from kernels.tools.timing import time_ms
from reference import (
    FA4,
    REFERENCE,
    SDPA_BACKENDS,
    attention_error,
    attention_flops,
    exact_attention,
    fa4,
    fa4_unavailable,
    fa4_version,
    sdpa_available,
    sdpa_function,
)

if TYPE_CHECKING:
    from kernels.tools.ablations import Ablation


def no_gpu(what: str) -> str:
    """Why nothing was measured, naming what the command line asked for."""
    return (
        f"No CUDA GPU found: timing {what} needs an NVIDIA GPU (sm_80 or newer); "
        "`python runner.py inspect` works without one."
    )


@dataclass(frozen=True)
class Contender:
    """Anything timed: a torch reference or a kernel, called as ``attention(q, k, v, causal=...)``."""

    name: str
    kind: str  # "reference", "chapter" or "variant"
    attention: Callable[..., torch.Tensor]
    family: str | None = None  # kernels: the tensor-core instruction family


def make_inputs(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator
) -> list[tuple[torch.Tensor, ...]]:
    """Fresh random Q, K, V; several sets when one would fit in L2, so timed runs rotate through memory."""
    set_bytes = (math.prod(q_shape) + 2 * math.prod(kv_shape)) * torch.finfo(dtype).bits // 8
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    n_sets = min(8, max(1, math.ceil(4 * l2_bytes / set_bytes)))
    return [
        tuple(
            torch.randn(shape, dtype=dtype, device="cuda", generator=generator)
            for shape in (q_shape, kv_shape, kv_shape)
        )
        for _ in range(n_sets)
    ]


def environment(command: str) -> dict:
    """What the run was measured on, with the command that measured it."""
    import cupy

    props = torch.cuda.get_device_properties(0)
    return {
        "device": f"{props.name} ({props.multi_processor_count} SMs)",
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "nvrtc": nvrtc_version(),  # it compiled the chapters: another version emits other code
        **({"flash_attn_4": version} if (version := fa4_version()) else {}),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "command": command,
    }


def references(q: torch.Tensor, k: torch.Tensor, causal: bool, progress: Progress) -> list[Contender]:
    """Torch's SDPA backends that run on these inputs (grouped heads and a longer K/V included), and FlashAttention-4
    where it is installed; one line says why it is not there otherwise."""
    found = [
        Contender(name, "reference", sdpa_function(backend))
        for name, backend in SDPA_BACKENDS.items()
        if sdpa_available(backend, q, k, causal=causal)
    ]
    if (why := fa4_unavailable(q)) is None:
        found.append(Contender(FA4, "reference", fa4))
    else:
        progress.note(f"no {FA4} row: {why}")
    return found


def kernel_contenders(kernels: list[Chapter], device_index: int, progress: Progress) -> list[Contender]:
    """The kernels that run on this GPU; a ladder chapter or, if not one, an ablation variant."""
    ladder = {chapter.name for chapter in chapters()}
    found = []
    for kernel in kernels:
        try:
            kernel.kernel.build_arch(gpu_arch(device_index))
        except ValueError as error:  # a kernel written for another GPU (wgmma: Hopper only)
            progress.note(f"left out: {error}")
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


def checked_rows(
    contenders: list[Contender],
    inputs: tuple[torch.Tensor, ...],
    exact: torch.Tensor,
    causal: bool,
    flops: float,
    progress: Progress,
) -> dict[str, Row]:
    """A row per contender that takes these inputs, with its error; a kernel passes if it is no worse than about
    twice torch's own (FA2's, or the first reference's). A kernel's first call compiles it."""
    rows, errors = {}, {}
    for contender in contenders:
        try:
            with progress.step(f"checking {contender.name}"):
                errors[contender.name] = attention_error(checked_output(contender, *inputs, causal), exact)
        except (TypeError, ValueError) as error:  # a kernel that refuses these shapes names why
            progress.note(f"left out: {contender.name}: {error}")
            continue
        rows[contender.name] = Row(
            contender.name,
            contender.kind,
            [],
            errors[contender.name].max_abs,
            errors[contender.name].rel_l2,
            flops,
            family=contender.family,
        )
    baseline = REFERENCE if REFERENCE in rows else next((n for n, r in rows.items() if r.kind == "reference"), None)
    for name, row in rows.items():
        if row.kind != "reference" and baseline is not None:
            row.ok = errors[name].within(errors[baseline])
    return rows


def timed_rounds(
    contenders: list[Contender],
    rows: dict[str, Row],
    inputs: list[tuple[torch.Tensor, ...]],
    causal: bool,
    args: argparse.Namespace,
    progress: Progress,
) -> list[list[str]]:
    """Time every row's contender once per round, in an order that rotates; returns each round's order. With
    ``args.clocks``, each row also gets the SM clock and power NVML read while its calls ran, per round."""
    attention = {contender.name: contender.attention for contender in contenders}
    sampler = ClockSampler(inputs[0][0].device.index) if args.clocks else None
    order = []
    for round_index in range(args.rounds):
        order.append(rotated(list(rows), round_index))
        with progress.step(f"round {round_index + 1} of {args.rounds}: timing {len(rows)} kernels and references"):
            for name in order[-1]:
                with progress.detail(f"timing {name}"):
                    call = on_input_sets(attention[name], inputs, causal)
                    sampling = sampler.sampling() if sampler else None
                    rows[name].samples_ms.append(time_ms(call, args.warmup, args.repeats, during=sampling))
                    if sampler:
                        rows[name].clocks.append(median_reading(sampling.samples))
    return order


def shapes_asked(args: argparse.Namespace) -> list[dict]:
    """The shapes the ladder's and ablate's options name, one per --seq-len, as a run records its shape."""
    return [
        {
            "batch": args.batch,
            "seq_len": seq_len,
            "heads": args.heads,
            "kv_heads": args.kv_heads or args.heads,
            "kv_len": args.kv_len or seq_len,
            "head_dim": args.head_dim,
            "dtype": args.dtype,
            "causal": args.causal,
        }
        for seq_len in args.seq_lens
    ]


def measure_run(args: argparse.Namespace, shape: dict, kernels: list[Chapter], progress: Progress) -> Run:
    """Torch's references and the kernels at one shape: each output checked, then all timed in interleaved rounds."""
    causal = shape["causal"]
    q_shape = (shape["batch"], shape["seq_len"], shape["heads"], shape["head_dim"])
    kv_shape = (shape["batch"], shape["kv_len"], shape["kv_heads"], shape["head_dim"])
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    inputs = make_inputs(q_shape, kv_shape, DTYPES[shape["dtype"]], generator)
    flops = attention_flops(*q_shape, seq_len_k=shape["kv_len"], causal=causal)

    with progress.step(f"exact attention at {shape_title(shape)}"):
        exact = exact_attention(*inputs[0], causal=causal)  # once per shape: every contender is checked on it
    q, k, _ = inputs[0]
    contenders = references(q, k, causal, progress) + kernel_contenders(kernels, q.device.index, progress)
    rows = checked_rows(contenders, inputs[0], exact, causal, flops, progress)
    del exact  # as large as the output in float32: free before timing
    order = timed_rounds(contenders, rows, inputs, causal, args, progress)
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    splits = {c.name: c.kernel.splits(q_shape, kv_shape, sms) for c in kernels if c.kernel.kv_cache}
    tails = {c.name: list(tail) for c in kernels if (tail := c.kernel.tail(q_shape, kv_shape, sms, causal))[0]}
    measured = source_hashes(kernel.source for kernel in kernels if kernel.name in rows)
    environment_now = environment(args.command_line) | {"sources": measured}
    return Run(shape, environment_now, flops, list(rows.values()), order, splits=splits, tails=tails)


def measure_and_show(
    args: argparse.Namespace, kernels: list[Chapter], what: str, shapes: list[dict], grid: Grid | None = None
) -> int:
    """Measure the kernels next to torch's attention at every shape asked for, then show the runs."""
    if not torch.cuda.is_available():
        raise ToolError(no_gpu(what))
    with Progress() as progress:  # on stderr: stdout carries only the tables, as --from-json prints them
        runs = [measure_run(args, shape, kernels, progress) for shape in shapes]
    for run in runs:
        run.grid = grid
    return show(runs, args)


def show(runs: list[Run], args: argparse.Namespace) -> int:
    """Print the tables, write the JSON and the plot, saying where; exit status 2 if a kernel failed its check.

    A saved run (--from-json) written to a file (--json, --plot) is not printed again, unless --markdown asks.
    """
    if not (args.from_json and (args.json or args.plot) and not args.markdown):
        try:
            ceilings, note = load_ceilings(args.peak, runs[0].environment.get("device", "?")), None
        except ValueError as why:
            ceilings, note = Ceilings(), str(why)
        print_runs(runs, markdown=args.markdown, ceilings=ceilings, note=note)
    if args.json:
        save_runs(runs, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        from kernels.tools.plot import plot_ladder

        plot_ladder(runs[0], args.plot)
        first = f" (the run at {shape_title(runs[0].shape)}, the first of {len(runs)})" if len(runs) > 1 else ""
        print(f"wrote {args.plot}{first}", file=sys.stderr)
    failed = list(dict.fromkeys(row.name for run in runs for row in run.rows if row.ok is False))
    if failed:
        print(f"error check failed: {', '.join(failed)}", file=sys.stderr)
        return 2
    return 0


def chosen_chapters(kernels: str | None) -> list[Chapter]:
    """The chapters --kernels names (all of them by default), or a UsageError naming the unknown one."""
    try:
        return select(chapters(), kernels)
    except ValueError as error:
        raise UsageError(f"--kernels: {error}") from error


def saved_runs(args: argparse.Namespace, kept: list[Chapter]) -> list[Run]:
    """The runs of --from-json, with only the chapters --kernels names (and the references)."""
    try:
        runs = load_runs(args.from_json)
    except RunFileError as error:
        raise UsageError(f"--from-json: {error}") from error
    if args.kernels:
        wanted = [chapter.name for chapter in kept]
        for run in runs:
            missing = [name for name in wanted if name not in {row.name for row in run.rows}]
            if missing:
                raise UsageError(f"--kernels: {args.from_json} holds no {', '.join(missing)}")
            run.rows = [row for row in run.rows if row.kind == "reference" or row.name in wanted]
    return runs


def run_ladder(args: argparse.Namespace) -> int:
    """`runner.py`: measure the chapters --kernels names and show them, or show a saved run."""
    kept = chosen_chapters(args.kernels)
    if args.from_json:
        return show(saved_runs(args, kept), args)
    what = names([chapter.name for chapter in kept]) if args.kernels else "the ladder"
    return measure_and_show(args, kept, what, shapes_asked(args))


def grid_of(ablation: Ablation) -> Grid:
    """What a saved run keeps of an ablation set: its grid, by contender name."""
    return Grid(ablation.name, ablation.title, tuple(ablation.rows), tuple(ablation.columns), dict(ablation.cells))


def run_ablate(args: argparse.Namespace) -> int:
    """`runner.py ablate N`: measure the kernels of one ablation set and show its table and grid."""
    from kernels.tools.ablations import ABLATIONS_DIR, find_ablation

    try:
        ablation = find_ablation(args.set)
    except ValueError as error:
        raise UsageError(str(error)) from error
    folder = (ABLATIONS_DIR / ablation.name).relative_to(ABLATIONS_DIR.parents[1])
    what = f"ablation set {ablation.number} ({folder})"
    shapes = args.shapes if args.decode else shapes_asked(args)
    return measure_and_show(args, ablation.contenders, what, shapes, grid_of(ablation))


def run_decode(args: argparse.Namespace) -> int:
    """`runner.py decode`: the chapters --kernels names (all by default) and the references at the decode shapes."""
    kept = chosen_chapters(args.kernels)
    what = names([chapter.name for chapter in kept]) if args.kernels else "the ladder"
    return measure_and_show(args, kept, f"{what} at the {len(args.shapes)} decode shapes", args.shapes)
