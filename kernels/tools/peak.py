"""The ceilings the ladder is held against: tensor-core rates per instruction family, L2 and DRAM bandwidth.

    python runner.py peak [--rounds 50] [--json results/peak.json] [--markdown]

The kernels in peak/ each run one thing flat out: mma.sync (chapters 1-8), wgmma in the two forms chapter 9
issues it, and reads of a buffer that stays in L2. torch's bf16 matrix product and a DRAM copy stand beside
them. The rounds are interleaved, each timing every benchmark once in a rotating order, so a drift of clocks
or temperature spreads over all of them instead of favouring one; the median and the min-max are reported.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from rich.table import Table
from tabulate import tabulate

from kernels.build import Cubin, compile_nvrtc
from kernels.chapters import ROOT
from kernels.launch import KernelError, gpu_arch, load_function
from kernels.tools.cli import ToolError
from kernels.tools.progress import Progress
from kernels.tools.side_by_side import stdout_console
from kernels.tools.sources import source_hashes
from reference import attention_flops

PEAK_DIR = ROOT / "peak"
HEADLINE_SHAPE = (16, 4096, 16, 128)  # batch, seq_len, heads, head_dim: the ladder's headline, in bf16
HEADLINE_FLOPS = attention_flops(*HEADLINE_SHAPE)

# The measurements by the names the table and the JSON file give them.
MMA_SYNC, WGMMA = "mma.sync", "wgmma"
WGMMA_SS, WGMMA_RS = "wgmma A,B in shared memory", "wgmma A in registers, B transposed"
MATMUL = "torch.matmul 8192^3 bf16"
DRAM_COPY, L2_READ = "dram copy", "l2 read"
FAMILIES = (MMA_SYNC, WGMMA)
INSTRUCTIONS = {
    MMA_SYNC: "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    WGMMA: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
}
DESCRIPTIONS = {
    MMA_SYNC: "m16n8k16, operands in registers: the instruction of chapters 1-8",
    WGMMA: "the slower of the two forms below: chapter 9 issues half of its FLOPs in each",
    WGMMA_SS: "m64n128k16, A and B from shared memory: chapter 9's S = Q K^T",
    WGMMA_RS: "m64n128k16, A from registers, B transposed from shared memory: chapter 9's O += P V",
    MATMUL: "cuBLAS through torch, random inputs: the library's rate",
    DRAM_COPY: "torch's copy_ between two 2 GiB buffers: bytes read + bytes written",
    L2_READ: "16-byte loads, again and again, of a buffer under half the L2",
}

# The constants of each .cu that its launch must agree with (a CPU test compares them).
MMA_N_WARPS, MMA_CHAINS, MMA_UNROLL = 16, 8, 8
MMA_M, MMA_N, MMA_K = 16, 8, 16
WGMMA_THREADS, WGMMA_BLOCKS_PER_SM, WGMMA_TILE, WGMMA_BATCH = 256, 2, 128, 8
WGMMA_M, WGMMA_N, WGMMA_K = 64, 128, 16
L2_THREADS, L2_LOADS, VECTOR_BYTES = 256, 4, 16

MATMUL_SIZE = 8192
DRAM_BUFFER_BYTES = 2 << 30  # far larger than any L2, so every byte of the copy goes to DRAM and back
L2_BYTES_PER_RUN = 16e9  # enough passes that one run lasts milliseconds, not microseconds, on any recent GPU


# ---------------------------------------------------------------------------------------------------
# Build and launch the kernels of peak/
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeakSource:
    """One .cu file of peak/: the kernels it holds, and the one architecture it needs, if any."""

    file: str
    entries: tuple[str, ...]
    arch: str | None = None  # "sm_90a": wgmma exists on Hopper alone; None: built for the GPU it runs on

    @property
    def source(self) -> Path:
        """The .cu file itself."""
        return PEAK_DIR / self.file

    def build_archs(self) -> tuple[str, ...]:
        """The architectures it must compile for: those the ladder is measured on, or its one architecture."""
        return (self.arch,) if self.arch else ("sm_80", "sm_90")

    def build_arch(self, gpu: str) -> str:
        """The architecture to compile for on a GPU of architecture ``gpu`` (e.g. "sm_90"), or a ValueError."""
        if self.arch and self.arch.removesuffix("a") != gpu:
            hardware = self.arch.removesuffix("a")
            raise ValueError(
                f"peak/{self.file} is built for {self.arch} and runs on {hardware} GPUs only; this is {gpu}"
            )
        return self.arch or gpu

    def compile(self, arch: str) -> Cubin:
        """Every kernel of the file, compiled by NVRTC for ``arch`` (cached)."""
        return compile_nvrtc(self.source, arch, instances=self.entries)


MMA_SYNC_CU = PeakSource("mma_sync.cu", ("mma_sync_peak",))
WGMMA_CU = PeakSource("wgmma.cu", ("wgmma_smem_smem_peak", "wgmma_regs_smem_peak"), arch="sm_90a")
L2_READ_CU = PeakSource("l2_read.cu", ("l2_read",))
SOURCES = (MMA_SYNC_CU, WGMMA_CU, L2_READ_CU)


@functools.cache
def _function(source: PeakSource, entry: str, device_index: int, smem_bytes: int):
    """One kernel of ``source``, compiled for the device's architecture and loaded on it once, as a chapter's is."""
    arch = source.build_arch(gpu_arch(device_index))  # a ValueError on a GPU the file is not written for
    return load_function(
        source.source, arch, entry, device_index, smem_bytes, label=f"peak/{source.file}", instances=source.entries
    )


def launch(source: PeakSource, entry: str, grid: int, n_threads: int, args: tuple, smem_bytes: int = 0) -> None:
    """Launch ``entry`` on torch's current stream; tensors are passed as pointers, ints as 32-bit ints."""
    import cupy

    device_index = next(arg.device.index for arg in args if isinstance(arg, torch.Tensor))
    function = _function(source, entry, device_index, smem_bytes)
    values = tuple(np.uint64(arg.data_ptr()) if isinstance(arg, torch.Tensor) else np.int32(arg) for arg in args)
    stream = cupy.cuda.Stream.from_external(torch.cuda.current_stream(device_index))
    try:
        with cupy.cuda.Device(device_index):
            function((grid,), (n_threads,), values, shared_mem=smem_bytes, stream=stream)
    except Exception as error:
        raise KernelError(f"peak/{source.file}: launch of {entry} on {grid} blocks failed: {error}") from error


def expect(name: str, tensor: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    """A ValueError naming the problem unless ``tensor`` is a contiguous CUDA tensor of this shape and dtype."""
    if tensor.shape != shape or tensor.dtype != dtype or not tensor.is_cuda or not tensor.is_contiguous():
        raise ValueError(
            f"{name} must be a contiguous CUDA tensor of shape {shape} and {dtype}; "
            f"got {tuple(tensor.shape)}, {tensor.dtype} on {tensor.device}"
        )


def sm_count(device: torch.device) -> int:
    """The grids are sized by it: one or two blocks on every SM."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def mma_sync_peak(a: torch.Tensor, b_t: torch.Tensor, n_steps: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """peak/mma_sync.cu, one block per SM: each warp's (16, 8) of out is CHAINS * UNROLL * n_steps * a @ b_t.T."""
    expect("a", a, (MMA_M, MMA_K), torch.bfloat16)
    expect("b_t", b_t, (MMA_N, MMA_K), torch.bfloat16)
    grid = sm_count(a.device)
    if out is None:
        out = torch.empty(grid * MMA_N_WARPS, MMA_M, MMA_N, device=a.device)
    expect("out", out, (grid * MMA_N_WARPS, MMA_M, MMA_N), torch.float32)
    launch(MMA_SYNC_CU, "mma_sync_peak", grid, MMA_N_WARPS * 32, (a, b_t, out, n_steps))
    return out


def wgmma_peak(
    entry: str, a: torch.Tensor, b: torch.Tensor, n_batches: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """peak/wgmma.cu, 2 blocks/SM: out[block] = a @ b.T (smem_smem) or n_batches * a @ b (regs_smem)."""
    tile = (WGMMA_TILE, WGMMA_TILE)
    expect("a", a, tile, torch.bfloat16)
    expect("b", b, tile, torch.bfloat16)
    grid = sm_count(a.device) * WGMMA_BLOCKS_PER_SM
    if out is None:
        out = torch.empty(grid, *tile, device=a.device)
    expect("out", out, (grid, *tile), torch.float32)
    tiles_in_smem = {"wgmma_smem_smem_peak": 2, "wgmma_regs_smem_peak": 1}[entry]
    smem_bytes = tiles_in_smem * WGMMA_TILE * WGMMA_TILE * a.element_size()
    launch(WGMMA_CU, entry, grid, WGMMA_THREADS, (a, b, out, n_batches), smem_bytes)
    return out


def l2_read_peak(buffer: torch.Tensor, n_passes: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """peak/l2_read.cu: n_passes reads of ``buffer`` (bytes); out holds each thread's sum of the words it read."""
    block_bytes = L2_THREADS * L2_LOADS * VECTOR_BYTES
    if buffer.dtype != torch.uint8 or buffer.dim() != 1 or buffer.numel() % block_bytes:
        raise ValueError(f"buffer must be uint8 bytes, a whole number of {block_bytes}-byte blocks; got {buffer.shape}")
    grid = buffer.numel() // block_bytes
    if out is None:
        out = torch.empty(grid * L2_THREADS, dtype=torch.int32, device=buffer.device)
    expect("out", out, (grid * L2_THREADS,), torch.int32)
    launch(L2_READ_CU, "l2_read", grid, L2_THREADS, (buffer, out, n_passes))
    return out


# ---------------------------------------------------------------------------------------------------
# The benchmarks: data, one run, and the work (FLOP or bytes) it does
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """One measurement: its name, the work one run does (FLOP or bytes), and the run."""

    name: str
    work: float
    run: Callable[[], object]


def repeats_for(work_per_repeat: float) -> int:
    """How many repeats make about the headline attention's FLOPs, so a run lasts as long as the kernels it bounds."""
    return max(1, round(HEADLINE_FLOPS / work_per_repeat))


def random_bf16(*shape: int, generator: torch.Generator) -> torch.Tensor:
    """Random normal bf16: the tensor cores draw more power on random data than on zeros, as in real use."""
    return torch.randn(shape, device="cuda", generator=generator).to(torch.bfloat16)


def mma_sync_benchmark(generator: torch.Generator) -> Benchmark:
    """mma.sync from registers on every SM: the ceiling of chapters 1-8."""
    a, b_t = random_bf16(MMA_M, MMA_K, generator=generator), random_bf16(MMA_N, MMA_K, generator=generator)
    out = mma_sync_peak(a, b_t, 1)
    flops_per_step = out.shape[0] * MMA_CHAINS * MMA_UNROLL * 2 * MMA_M * MMA_N * MMA_K
    n_steps = repeats_for(flops_per_step)
    return Benchmark(MMA_SYNC, n_steps * flops_per_step, lambda: mma_sync_peak(a, b_t, n_steps, out))


def wgmma_benchmark(name: str, entry: str, generator: torch.Generator) -> Benchmark:
    """One of chapter 9's two wgmma forms on every SM."""
    a, b = (random_bf16(WGMMA_TILE, WGMMA_TILE, generator=generator) for _ in range(2))
    out = wgmma_peak(entry, a, b, 1)
    warpgroups = out.shape[0] * WGMMA_THREADS // 128
    flops_per_batch = warpgroups * WGMMA_BATCH * 2 * WGMMA_M * WGMMA_N * WGMMA_K
    n_batches = repeats_for(flops_per_batch)
    return Benchmark(name, n_batches * flops_per_batch, lambda: wgmma_peak(entry, a, b, n_batches, out))


def matmul_benchmark(generator: torch.Generator) -> Benchmark:
    """torch's bf16 matrix product, 8192^3: what the vendor library reaches with the same tensor cores."""
    a, b = (random_bf16(MATMUL_SIZE, MATMUL_SIZE, generator=generator) for _ in range(2))
    c = torch.empty_like(a)
    return Benchmark(MATMUL, 2.0 * MATMUL_SIZE**3, lambda: torch.matmul(a, b, out=c))


def random_bytes(n_bytes: int, generator: torch.Generator) -> torch.Tensor:
    """Random bytes, so that nothing about the data could make moving it cheaper."""
    return torch.randint(0, 256, (n_bytes,), dtype=torch.uint8, device="cuda", generator=generator)


def dram_copy_benchmark(generator: torch.Generator) -> Benchmark:
    """torch's copy_ of one contiguous buffer into another: a device-to-device cudaMemcpyAsync."""
    source = random_bytes(DRAM_BUFFER_BYTES, generator)
    target = torch.empty_like(source)
    return Benchmark(DRAM_COPY, 2.0 * DRAM_BUFFER_BYTES, lambda: target.copy_(source))


def l2_read_benchmark(generator: torch.Generator) -> Benchmark:
    """As many blocks as fill every SM, or fewer where their buffer would take more than half the L2."""
    props = torch.cuda.get_device_properties(0)
    block_bytes = L2_THREADS * L2_LOADS * VECTOR_BYTES
    full = props.multi_processor_count * (props.max_threads_per_multi_processor // L2_THREADS)
    grid = min(full, props.L2_cache_size // 2 // block_bytes)
    buffer = random_bytes(grid * block_bytes, generator)
    n_passes = max(1, round(L2_BYTES_PER_RUN / buffer.numel()))
    out = l2_read_peak(buffer, 1)
    return Benchmark(L2_READ, float(n_passes * buffer.numel()), lambda: l2_read_peak(buffer, n_passes, out))


def all_benchmarks(seed: int = 0) -> tuple[list[Benchmark], list[str]]:
    """Every benchmark this GPU runs (each compiled and run once), and a note for each one it cannot."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    benchmarks, notes = [mma_sync_benchmark(generator)], []
    try:
        WGMMA_CU.build_arch(gpu_arch(0))
        benchmarks += [
            wgmma_benchmark(WGMMA_SS, "wgmma_smem_smem_peak", generator),
            wgmma_benchmark(WGMMA_RS, "wgmma_regs_smem_peak", generator),
        ]
    except ValueError as error:
        notes.append(f"the wgmma rows are left out: {error}")
    benchmarks += [matmul_benchmark(generator), dram_copy_benchmark(generator), l2_read_benchmark(generator)]
    return benchmarks, notes


def measure(benchmarks: list[Benchmark], rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    """Rate of every benchmark in every round, in TFLOP/s or TB/s (work / ms / 1e9 = work / s / 1e12).

    Each round times every benchmark once, in an order that rotates from round to round, and each timed run
    comes right after an untimed one of the same benchmark: L2 then holds its data, not the previous one's.
    """
    for benchmark in benchmarks:
        for _ in range(warmup):
            benchmark.run()
    torch.cuda.synchronize()
    events = {benchmark.name: [] for benchmark in benchmarks}
    for round_index in range(rounds):
        shift = round_index % len(benchmarks)
        for benchmark in benchmarks[shift:] + benchmarks[:shift]:
            benchmark.run()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            benchmark.run()
            end.record()
            events[benchmark.name].append((start, end))
        torch.cuda.synchronize()
    return {
        benchmark.name: [benchmark.work / (start.elapsed_time(end) * 1e9) for start, end in events[benchmark.name]]
        for benchmark in benchmarks
    }


# ---------------------------------------------------------------------------------------------------
# A run: its samples, the ceilings derived from them, JSON, and the tables
# ---------------------------------------------------------------------------------------------------


def summary(samples: list[float], unit: str) -> dict:
    """The median (under ``unit``: "tflops" or "tbps"), the min-max spread and every sample."""
    return {unit: statistics.median(samples), "spread": [min(samples), max(samples)], "samples": list(samples)}


@dataclass
class PeakRun:
    """What one `runner.py peak` measured: a rate per round for each benchmark, and what it ran on."""

    environment: dict
    samples: dict[str, list[float]]  # name -> TFLOP/s (tensor cores) or TB/s (memory), one per round

    def median(self, name: str) -> float:
        """A benchmark's rate, the median over the rounds."""
        return statistics.median(self.samples[name])

    def family_source(self, family: str) -> str | None:
        """The benchmark a family's ceiling is: mma.sync itself, the slower wgmma form; None if not measured."""
        if family == WGMMA:
            forms = [form for form in (WGMMA_SS, WGMMA_RS) if form in self.samples]
            return min(forms, key=self.median) if len(forms) == 2 else None
        return family if family in self.samples else None

    def ceiling(self, family: str) -> float:
        """The family's ceiling in TFLOP/s (median), or a KeyError naming what is missing."""
        if (source := self.family_source(family)) is None:
            raise KeyError(f"no {family} ceiling in this run (device {self.environment.get('device', '?')})")
        return self.median(source)

    def fastest_ms(self, family: str, flops: float = HEADLINE_FLOPS) -> float:
        """The time ``flops`` take at the family's ceiling: no kernel on that instruction can be faster."""
        return flops / self.ceiling(family) / 1e9

    def to_json(self) -> dict:
        """The format of results/peak.json: environment, ceilings, details, memory; medians, spreads, samples."""
        ceilings = {
            family: {**summary(self.samples[source], "tflops"), "instruction": INSTRUCTIONS[family]}
            for family in FAMILIES
            if (source := self.family_source(family))
        }
        details = {
            name: {**summary(self.samples[name], "tflops"), "what": DESCRIPTIONS[name]}
            for name in (WGMMA_SS, WGMMA_RS, MATMUL)
            if name in self.samples
        }
        memory = {name: summary(self.samples[name], "tbps") for name in (DRAM_COPY, L2_READ) if name in self.samples}
        return {"environment": self.environment, "ceilings": ceilings, "details": details, "memory": memory}

    @classmethod
    def from_json(cls, data: dict) -> PeakRun:
        """The run back from its JSON: the wgmma ceiling is derived again from its two forms in details."""
        samples = {MMA_SYNC: data["ceilings"][MMA_SYNC]["samples"]} if MMA_SYNC in data["ceilings"] else {}
        for section in ("details", "memory"):
            samples |= {name: entry["samples"] for name, entry in data[section].items()}
        return cls(data["environment"], samples)


def save_peak(run: PeakRun, path: Path) -> None:
    """Write the run as JSON (``load_peak`` reads it back)."""
    path.write_text(json.dumps(run.to_json(), indent=1) + "\n")


def load_peak(path: Path) -> PeakRun:
    """A run saved by `runner.py peak --json`, or a ValueError naming the file and what is wrong with it."""
    try:
        return PeakRun.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a run saved by `runner.py peak --json` ({error!r})") from error


COLUMNS = ["", "median", "min - max", "unit", "what"]


def rate(value: float, unit: str) -> str:
    """TFLOP/s to one decimal, TB/s to two: the digits that the spread between rounds leaves meaningful."""
    return f"{value:.1f}" if unit == "tflops" else f"{value:.2f}"


def ceiling_rows(run: PeakRun) -> list[list[str]]:
    """One row per measurement: the two ceilings, the forms and the library's rate, then memory."""
    data = run.to_json()
    rows = []
    for section, unit in (("ceilings", "tflops"), ("details", "tflops"), ("memory", "tbps")):
        for name, entry in data[section].items():
            low, high = (rate(value, unit) for value in entry["spread"])
            label = "TFLOP/s" if unit == "tflops" else "TB/s"
            rows.append([name, rate(entry[unit], unit), f"{low} - {high}", label, DESCRIPTIONS[name]])
    return rows


def fastest_rows(run: PeakRun) -> list[list[str]]:
    """The fastest possible time at the headline shape, per family measured."""
    return [
        [family, f"{run.fastest_ms(family):.3f}", f"{run.ceiling(family):.1f}"]
        for family in FAMILIES
        if run.family_source(family)
    ]


FASTEST = "fastest possible time at the headline shape"


def headline_shape() -> str:
    """The headline shape and its FLOPs, e.g. "batch 16, seq_len 4096, ..., bf16: 2.20 TFLOP of matrix products"."""
    batch, seq_len, heads, head_dim = HEADLINE_SHAPE
    return (
        f"batch {batch}, seq_len {seq_len}, heads {heads}, head_dim {head_dim}, bf16: "
        f"{HEADLINE_FLOPS / 1e12:.2f} TFLOP of matrix products"
    )


FASTEST_COLUMNS = ["family", "ms", "at TFLOP/s"]


def markdown_tables(run: PeakRun) -> str:
    """Both tables in GitHub Markdown, each under its bold title: what `--markdown` prints."""
    return (
        f"**Ceilings** on {run.environment.get('device', '?')}\n\n"
        f"{tabulate(ceiling_rows(run), headers=COLUMNS, tablefmt='github', disable_numparse=True)}\n\n"
        f"**{FASTEST}** ({headline_shape()})\n\n"
        f"{tabulate(fastest_rows(run), headers=FASTEST_COLUMNS, tablefmt='github', disable_numparse=True)}\n"
    )


def print_run(run: PeakRun, *, markdown: bool = False) -> None:
    """Both tables: as rich tables on the terminal, or as GitHub Markdown."""
    device = run.environment.get("device", "?")
    if markdown:
        print(markdown_tables(run))
        return
    console = stdout_console()
    ceilings = Table(title="Ceilings", caption=device)
    fastest = Table(title=FASTEST, caption=headline_shape(), min_width=len(FASTEST) + 4)  # title on one line
    for table, columns in ((ceilings, COLUMNS), (fastest, FASTEST_COLUMNS)):
        for i, column in enumerate(columns):
            table.add_column(column, justify="right" if 0 < i < 4 else "left", no_wrap=i == 0)
    for row in ceiling_rows(run):
        ceilings.add_row(*row)
    for row in fastest_rows(run):
        fastest.add_row(*row)
    console.print(ceilings)
    console.print(fastest)


# ---------------------------------------------------------------------------------------------------
# The command: python runner.py peak
# ---------------------------------------------------------------------------------------------------

NO_GPU = "No CUDA GPU found: the ceilings are measured on an NVIDIA GPU (sm_80 or newer)."


def environment(command: str) -> dict:
    """What the run was measured on, with the command that reruns it."""
    import cupy

    props = torch.cuda.get_device_properties(0)
    return {
        "device": f"{props.name} ({props.multi_processor_count} SMs)",
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "sources": source_hashes(source.source for source in SOURCES),  # the kernels of peak/ it timed
        "date": datetime.date.today().isoformat(),
        "command": command,
    }


def run_peak(args: argparse.Namespace) -> int:
    """`runner.py peak`: measure, print the tables, save the JSON; a ToolError naming why it cannot."""
    if not torch.cuda.is_available():
        raise ToolError(NO_GPU)
    if torch.cuda.get_device_capability(0)[0] < 8:
        raise ToolError(f"{torch.cuda.get_device_name(0)} is {gpu_arch(0)}; the ceilings need sm_80 or newer")
    try:
        with Progress() as progress:
            with progress.step("compiling the kernels of peak/ and running each once"):
                benchmarks, notes = all_benchmarks()
            with progress.step(f"measuring the ceilings: {args.rounds} rounds of {len(benchmarks)} benchmarks"):
                samples = measure(benchmarks, args.rounds)
    except (KernelError, OSError) as error:
        raise ToolError(str(error)) from error
    run = PeakRun(environment(args.command_line), samples)
    for note in notes:
        print(note)
    print_run(run, markdown=args.markdown)
    if args.json:
        save_peak(run, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
