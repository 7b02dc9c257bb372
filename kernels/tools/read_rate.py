"""How fast one GPU reads a decode KV cache, by five copy mechanisms: what bounds a decoding kernel's copies.

    python runner.py read_rate [--rounds 5] [--json results/read_rate.json] [--markdown]

At each shape of `runner.py decode` (its batch, kv_len and kv_heads; head_dim 128, bf16), fresh random K and V are
read whole, once per launch, by each reader of peak/read_rate.cu: the TMA as chapter 19 copies (one box per 64-column
plane) and with one box per 256-byte row; cp.async by the 128 threads of the producer warpgroup instead, each
block taking one contiguous chunk of the tile list or items of 4 tiles dealt round; and plain 16-byte loads by every
thread, the read ceiling. Before it is timed, each reader's XOR of every word it received is checked against torch's.
The rounds are interleaved as in `runner.py peak`: each times every reader once, in an order that rotates; a sample is
the mean of several launches, and the table shows GB/s of K and V as the median and [min–max] over the rounds.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from rich.table import Table
from tabulate import tabulate

from kernels.build import nvrtc_version
from kernels.launch import DTYPES, KernelError, gpu_arch, kernel_constants, load_function
from kernels.tma import ELEMENT_TYPES, TensorMapError, tensor_map
from kernels.tools.cli import ToolError
from kernels.tools.commands import DECODE_SHAPES
from kernels.tools.peak import PEAK_DIR, PeakSource
from kernels.tools.progress import Progress
from kernels.tools.side_by_side import stdout_console
from kernels.tools.sources import source_hashes
from kernels.tools.stats import Spread, ratio_spread, rotated, spread
from kernels.tools.tables import format_spread


@dataclass(frozen=True)
class Reader:
    """One way to read K and V: its name in the table and the JSON, its kernel, and what it stands for."""

    name: str
    kernel: str  # a name expression of peak/read_rate.cu; {checksum} where the instance takes the flag
    what: str

    def entry(self, checksum: bool) -> str:
        """The kernel instance: the one that XORs every word it receives, or the one that is timed."""
        return self.kernel.format(checksum=str(checksum).lower())


# The launch shape, from the .cu (its one home): tile rows, block sizes, shared memory, the loads' grid, the items.
CU = PEAK_DIR / "read_rate.cu"
CONSTANTS = kernel_constants(CU)
HEAD_DIM, BLOCK_KV, N_THREADS = CONSTANTS["HEAD_DIM"], CONSTANTS["BLOCK_KV"], CONSTANTS["N_THREADS"]
SMEM_BYTES, VECTOR_BYTES = CONSTANTS["SMEM_BYTES"], CONSTANTS["CHUNK_BYTES"]
LOAD_THREADS, LOAD_BLOCKS_PER_SM = CONSTANTS["LOAD_THREADS"], CONSTANTS["LOAD_BLOCKS_PER_SM"]
CONTIGUOUS, ITEM_TILES = CONSTANTS["CONTIGUOUS"], CONSTANTS["ITEM_TILES"]

TMA_PLANES = Reader(
    "TMA, one box per 64-column plane",
    "tma_read<2, {checksum}>",
    "chapter 19's copies: one thread issues two 128-byte-swizzled boxes per tile of K or V, 2 stages ahead",
)
TMA_ROWS = Reader(
    "TMA, one box per 256-byte row",
    "tma_read<1, {checksum}>",
    "the same with one unswizzled box of all 128 columns per tile: whether splitting a row into planes matters",
)
CP_ASYNC = Reader(
    "cp.async by the producer warpgroup",
    f"cp_async_read<{CONTIGUOUS}, {{checksum}}>",
    "the producer's 128 threads copy 16-byte chunks into the swizzled layout, mbarrier completion",
)
CP_ASYNC_ITEMS = Reader(
    f"cp.async, work dealt in items of {ITEM_TILES} tiles",
    f"cp_async_read<{ITEM_TILES}, {{checksum}}>",
    f"the same, block b taking items b, b + G, ... of {ITEM_TILES} tiles: the blocks at work at once read "
    "neighbouring keys",
)
LOADS = Reader(
    "16-byte loads, every thread",
    "load_read",
    f"ld.global.cs by {LOAD_BLOCKS_PER_SM} blocks of {LOAD_THREADS} threads per SM, grid-stride, nothing in shared "
    "memory: the read ceiling",
)
READERS = (TMA_PLANES, TMA_ROWS, CP_ASYNC, CP_ASYNC_ITEMS, LOADS)
TMA_READERS = {TMA_PLANES.name: 2, TMA_ROWS.name: 1}  # the boxes per row of a tile: the map each one takes

SOURCE = PeakSource(
    CU.name,
    tuple(dict.fromkeys(reader.entry(checksum) for reader in READERS for checksum in (False, True))),
    arch="sm_90a",  # the TMA and mbarrier's transaction counts exist on Hopper alone
)

# The shapes: the decode shapes' K and V, which are all any decoding kernel must read.
SHAPES = tuple(
    {key: shape[key] for key in ("batch", "kv_len", "kv_heads", "head_dim", "dtype")} for shape in DECODE_SHAPES
)
REPEATS = 10  # launches per sample: each reads over a GB, so a sample lasts milliseconds
WARMUP = 3  # untimed launches of each reader before the first round

NO_GPU = "No CUDA GPU found: the read rates are measured on an NVIDIA Hopper GPU (sm_90)."


# ---------------------------------------------------------------------------------------------------
# Launch a reader
# ---------------------------------------------------------------------------------------------------


def check_kv(k: torch.Tensor, v: torch.Tensor) -> None:
    """A ValueError naming the problem unless k and v are contiguous CUDA tensors of one (batch, kv_len, kv_heads, 128)
    shape, bf16 or fp16, kv_len a whole number of tiles."""
    for name, tensor in (("k", k), ("v", v)):
        if tensor.dim() != 4 or tensor.shape[-1] != HEAD_DIM or tensor.dtype not in ELEMENT_TYPES:
            got = f"{tuple(tensor.shape)} {tensor.dtype}"
            raise ValueError(f"{name} must be (batch, kv_len, kv_heads, {HEAD_DIM}), bf16 or fp16; got {got}")
        if not tensor.is_cuda or not tensor.is_contiguous() or tensor.data_ptr() % 16:
            raise ValueError(f"{name} must be a contiguous, 16-byte aligned CUDA tensor")
    if k.shape != v.shape or k.dtype != v.dtype or k.device != v.device:
        raise ValueError(f"k and v must match: {k.shape} {k.dtype} on {k.device}, {v.shape} {v.dtype} on {v.device}")
    if k.shape[1] % BLOCK_KV:
        raise ValueError(f"kv_len must be a multiple of {BLOCK_KV} (the readers copy whole tiles), got {k.shape[1]}")


@functools.cache
def _function(entry: str, device_index: int, smem_bytes: int):
    """One kernel of peak/read_rate.cu, compiled for sm_90a and loaded on the device once."""
    try:
        arch = SOURCE.build_arch(gpu_arch(device_index))
    except ValueError as error:
        raise KernelError(str(error)) from error
    return load_function(
        SOURCE.source, arch, entry, device_index, smem_bytes, label=f"peak/{SOURCE.file}", instances=SOURCE.entries
    )


@dataclass(frozen=True)
class Launch:
    """One reader's kernel over one K and V, made once and launched again and again on torch's current stream."""

    label: str
    device_index: int
    function: object
    grid: int
    n_threads: int
    smem_bytes: int
    args: tuple
    maps: tuple  # the tensor maps that args point to: they must live as long as the launch can run
    stream: object

    def __call__(self) -> None:
        import cupy

        try:
            with cupy.cuda.Device(self.device_index):
                self.function(
                    (self.grid,), (self.n_threads,), self.args, shared_mem=self.smem_bytes, stream=self.stream
                )
        except Exception as error:
            message = f"peak/{SOURCE.file}: launch of {self.label} on {self.grid} blocks failed: {error}"
            raise KernelError(message) from error


def reader_launch(
    reader: Reader,
    k: torch.Tensor,
    v: torch.Tensor,
    xor_out: torch.Tensor,
    *,
    checksum: bool = False,
    grid: int | None = None,
) -> Launch:
    """The reader's launch over k and v: its checksum instance (which XORs its words into xor_out) or its timed one.

    grid: the blocks (default one per SM, and LOAD_BLOCKS_PER_SM per SM for the loads); a test may give fewer.
    """
    import cupy
    from cupy.cuda.function import CPointer

    check_kv(k, v)
    if xor_out.dtype != torch.int32 or xor_out.numel() != 1 or xor_out.device != k.device:
        raise ValueError(f"xor_out must be one int32 on {k.device}")
    device_index = k.device.index
    batch, kv_len, kv_heads, _ = k.shape
    sms = torch.cuda.get_device_properties(k.device).multi_processor_count
    out = np.uint64(xor_out.data_ptr())
    maps: tuple = ()
    if reader is LOADS:
        n_threads, smem_bytes, blocks = LOAD_THREADS, 0, sms * LOAD_BLOCKS_PER_SM
        args = (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), np.int64(k.nbytes // VECTOR_BYTES), out)
    else:
        n_threads, smem_bytes, blocks = N_THREADS, SMEM_BYTES, sms
        if reader.name in TMA_READERS:
            planes = TMA_READERS[reader.name]
            # One box per plane takes the 128-byte swizzle; one box of a whole 256-byte row cannot, and goes without.
            maps = tuple(tensor_map(t, BLOCK_KV, HEAD_DIM // planes, swizzle=planes > 1) for t in (k, v))
            tensors = tuple(CPointer(encoded.getPtr()) for encoded in maps)  # CuPy passes the bytes pointed to
        else:
            tensors = (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()))
        args = (*tensors, np.int32(batch), np.int32(kv_len), np.int32(kv_heads), out)
    entry = reader.entry(checksum)
    function = _function(entry, device_index, smem_bytes)
    stream = cupy.cuda.Stream.from_external(torch.cuda.current_stream(device_index))  # ordered with torch's work
    return Launch(entry, device_index, function, grid or blocks, n_threads, smem_bytes, args, maps, stream)


def read_xor(reader: Reader, k: torch.Tensor, v: torch.Tensor, *, grid: int | None = None) -> int:
    """The XOR of every 32-bit word the reader received from k and v (its checksum instance), as an unsigned int."""
    xor_out = torch.zeros(1, dtype=torch.int32, device=k.device)
    reader_launch(reader, k, v, xor_out, checksum=True, grid=grid)()
    return int(xor_out.item()) & 0xFFFFFFFF


def xor_of_words(tensor: torch.Tensor) -> int:
    """The XOR of every 32-bit word of a contiguous tensor, folded in halves on its GPU, as an unsigned int."""
    words = tensor.reshape(-1).view(torch.int32)
    while words.numel() > 1:
        half = words.numel() // 2
        folded = words[:half] ^ words[half : 2 * half]
        if words.numel() % 2:
            folded[:1] ^= words[-1:]
        words = folded
    return int(words.item()) & 0xFFFFFFFF if words.numel() else 0


# ---------------------------------------------------------------------------------------------------
# The measurement: at each shape, every reader checked, then timed in interleaved rounds
# ---------------------------------------------------------------------------------------------------


def random_kv(shape: dict, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random K and V of the shape: together over a GB at each decode shape, far more than L2 holds."""
    dims = (shape["batch"], shape["kv_len"], shape["kv_heads"], shape["head_dim"])
    k, v = (torch.randn(dims, device="cuda", dtype=DTYPES[shape["dtype"]], generator=generator) for _ in range(2))
    return k, v


def check_readers(k: torch.Tensor, v: torch.Tensor, readers: Iterable[Reader] = READERS) -> None:
    """A ToolError naming every reader whose XOR of the words it received differs from torch's XOR of k and v."""
    expected = xor_of_words(k) ^ xor_of_words(v)
    wrong = [f"{reader.name} read {got:#010x}" for reader in readers if (got := read_xor(reader, k, v)) != expected]
    if wrong:
        shape = "x".join(str(n) for n in k.shape)
        raise ToolError(f"at K and V of {shape}, the XOR of every word is {expected:#010x}, but {'; '.join(wrong)}")


def measure(
    k: torch.Tensor,
    v: torch.Tensor,
    rounds: int,
    readers: Iterable[Reader] = READERS,
    repeats: int = REPEATS,
    warmup: int = WARMUP,
) -> dict[str, list[float]]:
    """GB/s of K and V that each reader reads, one sample per round: the mean over ``repeats`` launches.

    Each round times every reader once, in an order that rotates from round to round (stats.rotated), so that a
    drift of clocks or temperature spreads over all of them instead of favouring one.
    """
    xor_out = torch.zeros(1, dtype=torch.int32, device=k.device)
    launches = {reader.name: reader_launch(reader, k, v, xor_out) for reader in readers}
    for launch in launches.values():
        for _ in range(warmup):
            launch()
    torch.cuda.synchronize()
    events: dict[str, list] = {name: [] for name in launches}
    for round_index in range(rounds):
        for name in rotated(list(launches), round_index):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeats):
                launches[name]()
            end.record()
            events[name].append((start, end))
        torch.cuda.synchronize()
    n_bytes = k.nbytes + v.nbytes
    return {
        name: [n_bytes * repeats / (start.elapsed_time(end) * 1e6) for start, end in pairs]  # ms -> GB/s
        for name, pairs in events.items()
    }


# ---------------------------------------------------------------------------------------------------
# A run: its samples, JSON, and the tables
# ---------------------------------------------------------------------------------------------------


@dataclass
class ShapeRates:
    """The rates measured at one shape: GB/s per round for each reader."""

    shape: dict  # batch, kv_len, kv_heads, head_dim, dtype
    n_bytes: int  # of K and V: what every launch reads
    samples: dict[str, list[float]]

    def rate(self, name: str) -> Spread:
        """A reader's GB/s: the median over the rounds, and their range."""
        return spread(self.samples[name])

    def of_loads(self, name: str) -> Spread | None:
        """A reader's rate over the 16-byte loads', taken round by round; None without the loads."""
        if LOADS.name not in self.samples:
            return None
        return ratio_spread(self.samples[name], self.samples[LOADS.name])


@dataclass
class ReadRateRun:
    """What one `runner.py read_rate` measured, and on what."""

    environment: dict
    timing: dict  # rounds, repeats (launches per sample), warmup
    shapes: list[ShapeRates]

    def to_json(self) -> dict:
        """The format of results/read_rate.json: each reader's median GB/s, its range and every sample, per shape."""
        names = [name for name in (reader.name for reader in READERS) if any(name in s.samples for s in self.shapes)]
        return {
            "environment": self.environment,
            "timing": self.timing,
            "readers": {reader.name: reader.what for reader in READERS if reader.name in names},
            "shapes": [
                {
                    "shape": entry.shape,
                    "bytes": entry.n_bytes,
                    "rates": {
                        name: {"gbps": entry.rate(name).median, "spread": [min(gbps), max(gbps)], "samples": gbps}
                        for name, gbps in entry.samples.items()
                    },
                }
                for entry in self.shapes
            ],
        }

    @classmethod
    def from_json(cls, data: dict) -> ReadRateRun:
        """The run back from its JSON."""
        shapes = [
            ShapeRates(entry["shape"], entry["bytes"], {name: rate["samples"] for name, rate in entry["rates"].items()})
            for entry in data["shapes"]
        ]
        return cls(data["environment"], data["timing"], shapes)


def save_read_rate(run: ReadRateRun, path: Path) -> None:
    """Write the run as JSON (``load_read_rate`` reads it back)."""
    path.write_text(json.dumps(run.to_json(), indent=1) + "\n")


def load_read_rate(path: Path) -> ReadRateRun:
    """A run saved by `runner.py read_rate --json`, or a ValueError naming the file and what is wrong with it."""
    try:
        return ReadRateRun.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a run saved by `runner.py read_rate --json` ({error!r})") from error


COLUMNS = ["reader", "GB/s", "% of loads"]


def shape_title(entry: ShapeRates) -> str:
    """E.g. "batch 64, kv_len 8192, kv_heads 8, head_dim 128, bf16: 2.15 GB of K and V"."""
    shape = entry.shape
    return (
        f"batch {shape['batch']}, kv_len {shape['kv_len']}, kv_heads {shape['kv_heads']}, "
        f"head_dim {shape['head_dim']}, {shape['dtype']}: {entry.n_bytes / 1e9:.2f} GB of K and V"
    )


def rate_rows(entry: ShapeRates) -> list[list[str]]:
    """One row per reader: its GB/s, median [min–max], and its rate as a share of the loads'."""
    rows = []
    for name, samples in entry.samples.items():
        share = entry.of_loads(name)
        rows.append(
            [
                name,
                format_spread(entry.rate(name), len(samples), 0),
                "" if share is None else f"{100 * share.median:.0f}%",
            ]
        )
    return rows


def legend(run: ReadRateRun) -> str:
    """How to read the tables."""
    rounds, repeats = run.timing["rounds"], run.timing["repeats"]
    spread_words = f"the median [min–max] over {rounds} rounds" if rounds > 1 else "one round, so no spread"
    return (
        f"GB/s: bytes of K and V read per second, each sample the mean of {repeats} launches, {spread_words}; "
        "% of loads: the rate over the 16-byte loads', the median of per-round ratios."
    )


def reader_lines(run: ReadRateRun) -> list[str]:
    """What each reader is, one line each."""
    return [f"{name}: {what}" for name, what in run.to_json()["readers"].items()]


def markdown_tables(run: ReadRateRun) -> str:
    """Every shape's table in GitHub Markdown under its bold title, the legend and the readers: what `--markdown`
    prints."""
    parts = [
        f"**{shape_title(entry)}** on {run.environment.get('device', '?')}\n\n"
        f"{tabulate(rate_rows(entry), headers=COLUMNS, tablefmt='github', disable_numparse=True)}\n"
        for entry in run.shapes
    ]
    readers = "\n".join(f"- {line}" for line in reader_lines(run))
    return "\n".join(parts) + f"\n{legend(run)}\n\n{readers}\n"


def print_run(run: ReadRateRun, *, markdown: bool = False) -> None:
    """Every shape's table: as rich tables on the terminal, or as GitHub Markdown."""
    if markdown:
        print(markdown_tables(run))
        return
    console = stdout_console()
    for entry in run.shapes:
        table = Table(title=shape_title(entry), caption=run.environment.get("device", "?"))
        for i, column in enumerate(COLUMNS):
            table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for row in rate_rows(entry):
            table.add_row(*row)
        console.print(table)
    console.print(legend(run), highlight=False, markup=False)  # "[min–max]" is text, not a style
    for line in reader_lines(run):
        console.print(f"  {line}", highlight=False, markup=False)


# ---------------------------------------------------------------------------------------------------
# The command: python runner.py read_rate
# ---------------------------------------------------------------------------------------------------


def environment(command: str) -> dict:
    """What the run was measured on, with the command that reruns it."""
    import cupy

    props = torch.cuda.get_device_properties(0)
    return {
        "device": f"{props.name} ({props.multi_processor_count} SMs)",
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "nvrtc": nvrtc_version(),  # it compiled the readers: another version emits other code
        "python": platform.python_version(),
        "sources": source_hashes([SOURCE.source]),
        "date": datetime.date.today().isoformat(),
        "command": command,
    }


def run_read_rate(args: argparse.Namespace) -> int:
    """`runner.py read_rate`: at each shape check and time every reader, print the tables, save the JSON; a ToolError
    naming why it cannot."""
    if not torch.cuda.is_available():
        raise ToolError(NO_GPU)
    try:
        SOURCE.build_arch(gpu_arch(0))
    except ValueError as error:
        raise ToolError(f"{torch.cuda.get_device_name(0)}: {error}") from error
    generator = torch.Generator(device="cuda").manual_seed(0)
    measured = []
    try:
        with Progress() as progress:
            with progress.step(f"compiling peak/{SOURCE.file}"):
                SOURCE.compile(SOURCE.arch)
            for shape in SHAPES:
                k, v = random_kv(shape, generator)
                title = f"batch {shape['batch']}, kv_len {shape['kv_len']}, kv_heads {shape['kv_heads']}"
                with progress.step(f"{title}: checking that every reader receives every word"):
                    check_readers(k, v)
                with progress.step(f"{title}: {args.rounds} rounds of {len(READERS)} readers"):
                    samples = measure(k, v, args.rounds)
                measured.append(ShapeRates(shape, k.nbytes + v.nbytes, samples))
                del k, v
                torch.cuda.empty_cache()  # the next shape's K and V take the room
    except (KernelError, TensorMapError, OSError) as error:
        raise ToolError(str(error)) from error
    timing = {"rounds": args.rounds, "repeats": REPEATS, "warmup": WARMUP}
    run = ReadRateRun(environment(args.command_line), timing, measured)
    print_run(run, markdown=args.markdown)
    if args.json:
        save_read_rate(run, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
