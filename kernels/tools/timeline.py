"""`runner.py timeline`: when each consumer warp of a Hopper kernel reaches the points of its tile loop, stamped
by the kernel itself.

    python runner.py timeline 16 21                                  # chapters 16 and 21 at the headline shape
    python runner.py timeline 21 k21_split_products --batch 4 --seq-len 16384
    python runner.py timeline 21 --json timeline.json                # the summary saved as well

A copy of the kernel's source (``stamped_source``) reads the SM's cycle counter (``clock64()``) at six points of
its tile loop, in lane 0 of every consumer warp, for a window of the tiles of the first blocks, and writes the
readings to a ``__device__`` array. From them: how long a warp waits for its K and V tiles, how long its products
take to land, what it runs between and after its two waits, how far apart the four warps of a warpgroup start to
issue (``wgmma`` waits for the last of them), for how much of the loop neither warpgroup, one or both have
products on the tensor cores, and what a warp spends between two query tiles, where the loop stops and starts
again (``seam_cycles``). The stamps cost instructions in the loop: the stamped kernel is timed beside the kernel
itself, so the table shows how much it was slowed.

Kernels from 15 on and their variants can be stamped where their loop counts the block's tiles (``count``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from kernels.build import CACHE_DIR, cache_key, compile_nvrtc, name_expression
from kernels.chapters import Chapter
from kernels.launch import DTYPES, HEAD_DIM, AttentionKernel, gpu_arch, kernel_constants
from kernels.tools.cli import ToolError, UsageError
from kernels.tools.progress import Progress
from kernels.tools.side_by_side import Cell, SideBySide, print_side_by_side
from kernels.tools.sources import source_hashes
from kernels.tools.timing import time_ms

# The points of the tile loop a warp stamps, in the order it reaches them.
EVENTS = (
    "top",  # the iteration begins
    "issue",  # its K and V tiles have landed (and, in a ping-pong kernel, its turn has come): the first wgmma
    "issued",  # S and P V are issued
    "S landed",  # after the wait for S
    "P V landed",  # after the wait for P V
    "end",  # the softmax and P's packing are done
)
TRACED_BLOCKS = 8  # blocks 0 ... 7 stamp
FIRST_TILE = 256  # the block's tile count (kernel 15 on: count) where the window starts, past the launch's start
TRACED_TILES = 256  # and its length

STAMP_HELPERS = f"""
// Timeline stamps (kernels/tools/timeline.py): the SM's cycle counter at each point of the tile loop, lane 0 of each
// consumer warp, blocks 0 ... TIMELINE_BLOCKS - 1, the block's tiles TIMELINE_FIRST ... + TIMELINE_TILES - 1.
constexpr int TIMELINE_BLOCKS = {TRACED_BLOCKS}, TIMELINE_FIRST = {FIRST_TILE}, TIMELINE_TILES = {TRACED_TILES};
constexpr int TIMELINE_EVENTS = {len(EVENTS)};
__device__ long long timeline_stamps[TIMELINE_BLOCKS * N_WARPS * TIMELINE_TILES * TIMELINE_EVENTS];
__device__ __forceinline__ void timeline_stamp(bool traced, int warp, int count, int event) {{
    if (traced) {{
        const int tile = count - TIMELINE_FIRST;
        timeline_stamps[((blockIdx.x * N_WARPS + warp) * TIMELINE_TILES + tile) * TIMELINE_EVENTS + event] = clock64();
    }}
}}

"""
LOOP_HEAD = "for (int tile = 1; tile < n_tiles; ++tile) {"
COUNT_LINE = re.compile(r"^\s*const (int|unsigned) count = kv_count \+ tile\b.*;\s*$")
TRACED = (
    "const bool timeline_traced = lane == 0 && blockIdx.x < TIMELINE_BLOCKS && count >= TIMELINE_FIRST && "
    "count < TIMELINE_FIRST + TIMELINE_TILES;"
)


def _stamp(event: str, indent: str) -> str:
    return f"{indent}timeline_stamp(timeline_traced, warp_row0 / WARP_Q, count, {EVENTS.index(event)});"


def _loop_span(source: str) -> tuple[int, int]:
    """Where the tile loop's body starts (after its opening brace) and where its closing brace is."""
    head = source.find(LOOP_HEAD)
    if head < 0 or source.find(LOOP_HEAD, head + 1) >= 0:
        raise ValueError(f"not one tile loop `{LOOP_HEAD}`")
    start = head + len(LOOP_HEAD)
    depth = 1
    for at in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[at], 0)
        if depth == 0:
            return start, at
    raise ValueError("the tile loop's braces do not close")


def stamped_source(source: str) -> str:
    """A kernel's source with the timeline stamps in its tile loop, or a ValueError naming what it lacks.

    No stamp goes between the two waits: ptxas moves neither a ``wgmma`` wait nor an exponential across a clock
    read, so one there would keep in place what ptxas otherwise moves across the wait for P V. The stamp after that
    wait reads when the warp left it: when P V landed, or later if the warp reached the wait after that. Even that
    stamp keeps below the wait the exponentials ptxas would start above it (kernel 21's): the table counts the
    exponentials between the waits in both builds' SASS (``exponentials_between_waits``).
    """
    start, end = _loop_span(source)
    body = source[start:end].split("\n")
    out, found = [], set()

    def first(pattern: str, line: str, name: str) -> bool:
        hit = name not in found and re.search(pattern, line) is not None
        if hit:
            found.add(name)
        return hit

    for line in body:
        indent = line[: len(line) - len(line.lstrip())]
        if first(r"^\s*wgmma_fence\(\);", line, "issue"):
            out.append(_stamp("issue", indent))
        out.append(line)
        if "count" not in found and COUNT_LINE.match(line):
            found.add("count")
            out += [f"{indent}{TRACED}", _stamp("top", indent)]
        elif first(r"^\s*issue_products\(last_stage\b", line, "issued"):
            out.append(_stamp("issued", indent))
        elif first(r"^\s*wgmma_wait<1>\(\);", line, "S landed"):
            out.append(_stamp("S landed", indent))
        elif "S landed" in found and first(r"^\s*wgmma_wait<0>\(\);", line, "P V landed"):
            out.append(_stamp("P V landed", indent))
    if missing := {"count", "issue", "issued", "S landed", "P V landed"} - found:
        raise ValueError(f"the tile loop has no place for {', '.join(sorted(missing))}")
    closing_indent = body[-1]  # the closing brace's own indentation, one level out
    out[-1:] = [_stamp("end", closing_indent + "    "), closing_indent]
    stamped = source[:start] + "\n".join(out) + source[end:]
    helpers_at = stamped.find("template <typename T, bool CAUSAL>")
    if helpers_at < 0:
        raise ValueError("no `template <typename T, bool CAUSAL>` to put the stamp helpers before")
    return stamped[:helpers_at] + STAMP_HELPERS.lstrip("\n") + stamped[helpers_at:]


class StampedKernel(AttentionKernel):
    """A kernel built from its stamped source and launched as the original is; ``stamps()`` reads what it wrote."""

    def __init__(self, kernel: AttentionKernel, source: Path) -> None:
        super().__init__(
            source,
            arch=kernel.arch,
            tensor_maps=kernel.tensor_map_box is not None,
            persistent=kernel.persistent,
            packed_gqa=kernel.packed_gqa,
            o_tensor_map=kernel.o_box_rows is not None,
            kv_cache=kernel.kv_cache,
            dynamic_schedule=kernel.dynamic_schedule,
            decode_kernel=kernel.decode is not None,
            plain_prefill=kernel.plain_prefill,
            split_tail=kernel.split_tail,
        )
        self.chapter = kernel.chapter
        self._modules: dict[int, object] = {}

    def _load(self, device_index: int, dtype: torch.dtype, causal: bool, decoding: bool):
        import cupy

        cubin = compile_nvrtc(self.source, self.build_arch(gpu_arch(device_index)), self.instances)
        with cupy.cuda.Device(device_index):
            module = cupy.RawModule(path=str(cubin.path()))
            function = module.get_function(cubin.lowered_names[name_expression(dtype, causal)])
            function.max_dynamic_shared_size_bytes = self.smem_bytes
        self._modules[device_index] = module
        return function

    def _stamp_array(self, device_index: int):
        """The kernel's __device__ array of stamps, as a CuPy view: (block, consumer warp, tile, event)."""
        import cupy

        n_warps = kernel_constants(self.source)["N_WARPS"]  # the consumer warps: the producer warpgroup stamps none
        pointer = self._modules[device_index].get_global("timeline_stamps")
        return cupy.ndarray((TRACED_BLOCKS, n_warps, TRACED_TILES, len(EVENTS)), cupy.int64, pointer)

    def stamps(self, device_index: int) -> np.ndarray:
        """The stamps the last launch wrote: (block, warp, tile, event), 0 where nothing was stamped."""
        import cupy

        with cupy.cuda.Device(device_index):
            return self._stamp_array(device_index).get()

    def clear(self, device_index: int) -> None:
        """Zero the stamps, so that a tile the next launch does not stamp reads 0."""
        import cupy

        with cupy.cuda.Device(device_index):
            self._stamp_array(device_index).fill(0)


def stamped_kernel(chapter: Chapter) -> StampedKernel:
    """The chapter's kernel with its stamps, its source written under CACHE_DIR/timeline (named by its text)."""
    try:
        text = stamped_source(chapter.source.read_text())
    except ValueError as error:
        raise UsageError(f"{chapter.name} cannot be stamped: {error}") from error
    folder = CACHE_DIR / "timeline" / cache_key(text)[:16] / chapter.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / chapter.source.name
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return StampedKernel(chapter.kernel, path)


# --- reading the stamps ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """One kernel's timeline, in SM cycles: medians over the stamped tiles of every traced block and warpgroup."""

    tiles: int  # warpgroup tiles with every stamp
    period: float  # from one iteration's top to the next one's
    phases: dict[str, float]  # from each event to the next, per warp
    issue_spread: float  # from the first warp of a warpgroup to reach its first wgmma to the last
    issue_lag: list[float]  # per warp of a warpgroup (0-3, on sub-partitions 0-3): how long after the first it came
    in_flight: dict[str, float]  # share of the loop's time with 0, 1 or 2 warpgroups' products in flight
    # Per consumer warp of the block (0 ... N_WARPS - 1): the median of each of WARP_PHASES, in cycles.
    warp_phases: list[dict[str, float]] = field(default_factory=list)
    # Between two query tiles (see seam_cycles): what the seam takes beyond two tile periods, and how many were seen.
    seam: float = float("nan")
    seams: int = 0


PHASES = {
    "waiting for K and V (and the turn)": ("top", "issue"),
    "issuing S and P V": ("issue", "issued"),
    "until S has landed": ("issued", "S landed"),
    "from S to the end of the softmax": ("S landed", "end"),
    "of which until P V has landed": ("S landed", "P V landed"),
    "of which after P V has landed": ("P V landed", "end"),
}
NEED_LANDING = ("of which until P V has landed", "of which after P V has landed")  # valid where landing_stamped
# Each warp's own: where a warpgroup's warps part ways. Warp 0 of a warpgroup is late to reach its first wgmma; these
# say in which phase of the tile before it spent the cycles.
WARP_PHASES = {
    "reaches the top after its warpgroup's first": None,  # from the first of its warpgroup's four
    "waiting for K and V": ("top", "issue"),
    "issuing S and P V": ("issue", "issued"),
    "until S has landed": ("issued", "S landed"),
    "from S to the end of the softmax": ("S landed", "end"),
}
# Warp w of a warpgroup runs on the SM's sub-partition w % 4, the producer's copying warp (the block's warp 8) on 0.
WARP_NOTES = {0: " (beside the producer)"}
IN_FLIGHT = ("neither warpgroup", "one warpgroup", "both warpgroups")


def complete(stamps: np.ndarray) -> np.ndarray:
    """(block, warpgroup, tile): whether all four warps of the warpgroup stamped every event of the tile."""
    blocks, warps, tiles, _ = stamps.shape
    by_group = stamps.reshape(blocks, warps // 4, 4, tiles, len(EVENTS))
    return (by_group > 0).all(axis=(2, 4))


def summarize(stamps: np.ndarray) -> Summary:
    """The medians of ``stamps`` (block, warp, tile, event) and each warpgroup's products in flight.

    A warpgroup's products are on the tensor cores from when its last warp issues (``wgmma`` is the warpgroup's) to
    when its first warp returns from the wait for P V; where a warp reaches that wait late, the products landed
    earlier, so the share with none in flight is a lower bound on the tensor cores' idle time within the loop.
    """
    blocks, warps, tiles, _ = stamps.shape
    ok = complete(stamps)
    if not ok.any():
        raise ToolError("no tile was stamped: the kernel ran fewer tiles per block than the window's start")
    at = {event: stamps[..., i].astype(np.float64) for i, event in enumerate(EVENTS)}
    group_of = np.arange(warps) // 4
    per_warp_ok = ok[:, group_of, :]  # (block, warp, tile)
    phases = {name: float(np.median((at[end] - at[start])[per_warp_ok])) for name, (start, end) in PHASES.items()}
    next_ok = per_warp_ok[:, :, :-1] & per_warp_ok[:, :, 1:]
    period = float(np.median((at["top"][:, :, 1:] - at["top"][:, :, :-1])[next_ok]))
    by_group = {event: value.reshape(blocks, warps // 4, 4, tiles) for event, value in at.items()}
    spread = (by_group["issue"].max(axis=2) - by_group["issue"].min(axis=2))[ok]
    lag = by_group["issue"] - by_group["issue"].min(axis=2, keepdims=True)  # (block, warpgroup, warp, tile)
    top_lag = (by_group["top"] - by_group["top"].min(axis=2, keepdims=True)).reshape(blocks, warps, tiles)
    warp_phases = [
        {
            name: float(
                np.median((top_lag if span is None else at[span[1]] - at[span[0]])[:, warp][per_warp_ok[:, warp]])
            )
            for name, span in WARP_PHASES.items()
        }
        for warp in range(warps)
    ]
    seam, seams = seam_cycles(stamps, per_warp_ok, period)
    return Summary(
        tiles=int(ok.sum()),
        period=period,
        phases=phases,
        issue_spread=float(np.median(spread)),
        issue_lag=[float(np.median(lag[:, :, warp, :][ok])) for warp in range(4)],
        in_flight=in_flight_shares(by_group, ok),
        warp_phases=warp_phases,
        seam=seam,
        seams=seams,
    )


def seam_cycles(stamps: np.ndarray, per_warp_ok: np.ndarray, period: float) -> tuple[float, int]:
    """What a warp spends between two query tiles beyond two tile periods (the median, in cycles), and at how many.

    A query tile's first tile runs before the tile loop, so it has no stamps: where a warp stamped tile c and c + 2
    but nothing of c + 1, c + 1 began a query tile, and from the top of c to the top of c + 2 the warp ran the rest of
    tile c, the query tile's end (its last P V, O out) and the next one's start (its first S and softmax). Two tiles
    of the loop take two periods; the rest is the seam's own cost. NaN where the window holds no seam.
    """
    unstamped = (stamps == 0).all(axis=3)  # (block, warp, tile)
    at_seam = per_warp_ok[:, :, :-2] & unstamped[:, :, 1:-1] & per_warp_ok[:, :, 2:]
    if not at_seam.any():
        return float("nan"), 0
    top = stamps[..., EVENTS.index("top")].astype(np.float64)
    spans = (top[:, :, 2:] - top[:, :, :-2])[at_seam]
    return float(np.median(spans) - 2 * period), int(at_seam.sum())


def in_flight_shares(by_group: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, float]:
    """Share of the time both warpgroups are inside stamped tiles during which 0, 1 or 2 have products in flight."""
    totals = np.zeros(3)
    for block in range(ok.shape[0]):
        inside, flight = [], []
        for group in range(ok.shape[1]):
            tiles = np.flatnonzero(ok[block, group])
            if tiles.size == 0:
                break
            top = by_group["top"][block, group].min(axis=0)[tiles]
            end = by_group["end"][block, group].max(axis=0)[tiles]
            issue = by_group["issue"][block, group].max(axis=0)[tiles]
            landed = by_group["P V landed"][block, group].min(axis=0)[tiles]
            inside.append(np.stack([top, end], axis=1))
            flight.append(np.stack([issue, np.maximum(issue, landed)], axis=1))
        if len(inside) < 2:
            continue
        origin = min(span[:, 0].min() for span in inside)
        length = int(max(span[:, 1].max() for span in inside) - origin) + 1
        inside_both = np.ones(length, dtype=bool)
        count = np.zeros(length, dtype=np.int64)
        for spans, flights in zip(inside, flight, strict=True):
            inside_both &= _covered(spans - origin, length) > 0
            count += _covered(flights - origin, length) > 0
        totals += np.bincount(count[inside_both], minlength=3)[:3]
    if totals.sum() == 0:
        return dict.fromkeys(IN_FLIGHT, float("nan"))
    return {name: float(share) for name, share in zip(IN_FLIGHT, totals / totals.sum(), strict=True)}


def _covered(spans: np.ndarray, length: int) -> np.ndarray:
    """How many of the [start, end) spans (cycles from the origin) cover each cycle."""
    edges = np.zeros(length + 1, dtype=np.int64)
    np.add.at(edges, spans[:, 0].astype(np.int64), 1)
    np.add.at(edges, spans[:, 1].astype(np.int64), -1)
    return np.cumsum(edges[:-1])


# --- the command -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeline:
    """One kernel's timeline at one shape, and its stamped build's time and SASS beside its own."""

    name: str
    summary: Summary
    ms: float  # the kernel itself, median of the timed calls
    stamped_ms: float  # its stamped build
    exponentials_between: tuple[int, int]  # MUFU.EX2 between the two waits of the steady path: kernel, stamped
    landing_stamped: bool  # the stamp after the wait for P V is read right after it (landing_stamped)


def steady_path(kernel: AttentionKernel, instance: str) -> list[str]:
    """The SASS lines of one instance's steady tile path (the loop less what a tile with no mask jumps over)."""
    from kernels.tools.loop_anatomy import steady_lines, tile_loop_lines
    from kernels.tools.sass import disassemble

    cubin = compile_nvrtc(kernel.source, "sm_90a", kernel.instances)
    return steady_lines(tile_loop_lines(disassemble(cubin)[cubin.lowered_names[instance]], products=16))


def exponentials_between_waits(steady: list[str]) -> int:
    """The exponentials (MUFU.EX2) a steady tile path issues between its wait for S and its wait for P V."""
    from kernels.tools.loop_anatomy import the_waits

    first, second = the_waits(steady)
    return sum("MUFU.EX2" in line for line in steady[first:second])


def landing_stamped(steady: list[str]) -> bool:
    """Whether a stamped build reads the clock right after its wait for P V: ptxas may sink that read below the
    exponentials that follow the wait (kernels 16 to 20 do), and then it times the softmax, not P V's landing."""
    from kernels.tools.loop_anatomy import the_waits

    _, second = the_waits(steady)
    read = next(i for i in range(second, len(steady)) if "SR_CLOCKLO" in steady[i])
    return not any("MUFU" in line or "FMNMX" in line for line in steady[second:read])


def measure(chapter: Chapter, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, rounds: int) -> Timeline:
    """Time the kernel and its stamped build in interleaved rounds, then read the stamps of one launch."""
    stamped = stamped_kernel(chapter)
    out = torch.empty_like(q)
    runs = {"kernel": [], "stamped": []}
    for _ in range(rounds):
        runs["kernel"] += time_ms(lambda i: chapter.attention(q, k, v, causal=causal, out=out), 3, 10)
        runs["stamped"] += time_ms(lambda i: stamped(q, k, v, causal=causal, out=out), 3, 10)
    device = q.device.index
    stamped.clear(device)
    out.fill_(float("nan"))
    stamped(q, k, v, causal=causal, out=out)
    torch.cuda.synchronize()
    if not torch.isfinite(out).all():
        raise ToolError(f"{chapter.name}: the stamped build wrote non-finite values")
    summary = summarize(stamped.stamps(device))
    paths = [steady_path(kernel, name_expression(q.dtype, causal)) for kernel in (chapter.kernel, stamped)]
    between = tuple(exponentials_between_waits(path) for path in paths)
    ms = statistics.median(runs["kernel"]), statistics.median(runs["stamped"])
    return Timeline(chapter.name, summary, *ms, between, landing_stamped(paths[1]))


def timeline_table(timelines: list[Timeline], title: str) -> SideBySide:
    """The timelines side by side: the period, the phases, how far apart warps start issuing, products in flight."""

    def cells(values: list[float], fmt: str, landing: bool = False) -> list[Cell]:
        """One cell per kernel; "n/a" where the value needs P V's landing and the build did not stamp it, or where
        the window held nothing to measure (NaN)."""
        return [
            Cell("n/a" if (landing and not t.landing_stamped) or np.isnan(value) else fmt.format(value))
            for t, value in zip(timelines, values, strict=True)
        ]

    summaries = [t.summary for t in timelines]
    seam_row = ("between query tiles, beyond two periods", cells([s.seam for s in summaries], "{:,.0f}"))
    # Shown where a window held a query tile's end (files saved before seams were read hold none).
    seam_rows = [seam_row] if any(s.seams for s in summaries) else []
    sections = [
        [("tile period (cycles)", cells([s.period for s in summaries], "{:,.0f}"))] + seam_rows,
        [(name, cells([s.phases[name] for s in summaries], "{:,.0f}", name in NEED_LANDING)) for name in PHASES]
        + [("a warpgroup's warps start issuing, first to last", cells([s.issue_spread for s in summaries], "{:,.0f}"))]
        + [
            (
                f"  its warp {warp} after the first{WARP_NOTES.get(warp, '')}",
                cells([s.issue_lag[warp] for s in summaries], "{:,.0f}"),
            )
            for warp in range(4)
        ],
        [
            (f"products in flight: {name}", cells([s.in_flight[name] for s in summaries], "{:.1%}", True))
            for name in IN_FLIGHT
        ],
        [
            ("ms, the kernel", cells([t.ms for t in timelines], "{:.3f}")),
            ("ms, stamped", cells([t.stamped_ms for t in timelines], "{:.3f}")),
            ("warpgroup tiles stamped", cells([s.tiles for s in summaries], "{:,}")),
            (
                "exponentials between the waits: kernel, stamped",
                [Cell("{}, {}".format(*t.exponentials_between)) for t in timelines],
            ),
        ],
    ]
    caption = (
        "SM cycles, medians over the stamped tiles of blocks 0-7 (each warp's own phases; a warpgroup's products in "
        "flight from its last warp's issue to its first warp's return from the wait for P V, as shares of the loop's "
        "time). n/a: the stamped build reads the clock after the wait for P V only below the exponentials that "
        "follow it, so it does not time P V's landing."
    )
    heads = [t.name for t in timelines]
    return SideBySide(title, heads, [h[:3] for h in heads], sections, caption)


def warps_table(timeline: Timeline, title: str) -> SideBySide:
    """One kernel's phases warp by warp: where each consumer warp of the block spends its tile."""
    warps = timeline.summary.warp_phases
    rows = [(name, [Cell(f"{phases[name]:,.0f}") for phases in warps]) for name in WARP_PHASES]
    caption = (
        "SM cycles, each warp's medians over the stamped tiles of blocks 0-7; warps 0-3 are the first warpgroup, 4-7 "
        "the second, warp w on the SM's sub-partition w % 4."
    )
    heads = [f"warp {warp}" for warp in range(len(warps))]
    return SideBySide(
        f"{title}: {timeline.name}, warp by warp", heads, [f"w{warp}" for warp in range(len(warps))], [rows], caption
    )


def shape_words(shape: dict) -> str:
    """A timeline's shape as its table's title names it."""
    causal = ", causal" if shape["causal"] else ""
    return f"batch {shape['batch']}, seq_len {shape['seq_len']}, heads {shape['heads']}, {shape['dtype']}{causal}"


def timeline_tables(timelines: list[Timeline], shape: dict) -> list[SideBySide]:
    """What `runner.py timeline` prints: the kernels side by side, then each kernel's warps (where they were kept)."""
    words = shape_words(shape)
    warps = [warps_table(t, words) for t in timelines if t.summary.warp_phases]
    return [timeline_table(timelines, f"{words}: the tile loop, stamped"), *warps]


def load_timelines(path: Path) -> tuple[dict, list[SideBySide]]:
    """A file `runner.py timeline --json` saved: its record, and its tables as the command printed them (a file
    saved before each warp's phases were kept has only the first)."""
    record = json.loads(path.read_text())
    timelines = [
        Timeline(
            **(
                entry
                | {"summary": Summary(**entry["summary"]), "exponentials_between": tuple(entry["exponentials_between"])}
            )
        )
        for entry in record["timelines"]
    ]
    return record, timeline_tables(timelines, record["shape"])


def run_timeline(args: argparse.Namespace) -> int:
    """`runner.py timeline`: stamp, run and summarize each kernel named, at one shape."""
    from kernels.tools.ablations import chapter_or_variant

    if not torch.cuda.is_available():
        raise ToolError("No CUDA GPU found: the timeline runs the kernels")
    if gpu_arch(torch.cuda.current_device()) != "sm_90":
        raise ToolError("the timeline stamps Hopper kernels: it needs an sm_90 GPU")
    kernels = [chapter_or_variant(token) for token in args.targets]  # a UsageError names an unknown one
    dtype = DTYPES[args.dtype]
    generator = torch.Generator(device="cuda").manual_seed(0)
    size = (args.batch, args.seq_len, args.heads, HEAD_DIM)
    q, k, v = (torch.randn(size, generator=generator, device="cuda", dtype=dtype) for _ in range(3))
    timelines = []
    with Progress() as progress:
        for chapter in kernels:
            with progress.step(f"stamping {chapter.name}"):
                timelines.append(measure(chapter, q, k, v, args.causal, args.rounds))
    shape = {
        "batch": args.batch,
        "seq_len": args.seq_len,
        "heads": args.heads,
        "dtype": args.dtype,
        "causal": args.causal,
    }
    for each in timeline_tables(timelines, shape):
        if args.markdown:
            print(each.markdown())
        else:
            print_side_by_side(each)
    if args.json:
        record = {
            "command": args.command_line,
            "device": torch.cuda.get_device_name(),
            "sources": source_hashes([chapter.source for chapter in kernels]),
            "shape": shape,
            "window": {"blocks": TRACED_BLOCKS, "first_tile": FIRST_TILE, "tiles": TRACED_TILES},
            "timelines": [asdict(t) for t in timelines],
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0
