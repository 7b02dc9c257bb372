"""The Hopper chapters (9 on) as built, without a GPU: each one's idea in its SASS, and the tensor maps TMA reads."""

import difflib
import itertools
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest
import torch

from kernels import KernelError
from kernels.build import ALL_INSTANCES, compile_nvrtc
from kernels.launch import DECODE_INSTANCES, DECODE_MIN_SPLIT_TILES, AttentionKernel, decode_split_count
from kernels.tma import TensorMapError, tensor_map
from kernels.tma import _encoded as encoded_maps
from kernels.tools.loop_anatomy import (
    PRODUCTS_PER_TILE,
    UNIFORM,
    addressed,
    event_order,
    loops,
    steady_lines,
    tile_counts,
)
from kernels.tools.loop_anatomy import tile_loop_lines as wgmma_loop_lines
from kernels.tools.opcodes import INTEGER_ALU, mnemonic
from kernels.tools.sass import disassemble, opcodes, resource_usage
from tests.helpers import CHAPTERS, between_the_waits, hopper_sass, sass_text, source_constant, total
from tests.test_docs_cpu import PREFILL_AS_BEFORE

by_number = {c.number: c for c in CHAPTERS}
REGISTER_FILE = 65536  # 32-bit registers per SM, shared by the threads of its blocks
REGISTER_STEP = 8  # registers are allocated per thread in multiples of this


def mnemonics(counts: Counter) -> Counter:
    """Counts by mnemonic: LDSM.16.M88.4 as "LDSM", LDSM.16.MT88.4 as "LDSM.MT88" (the transposing load)."""
    grouped = Counter()
    for opcode, n in counts.items():
        grouped[mnemonic(opcode)] += n
    return grouped


def wgmma_loop(sass: str, products: int | None = None) -> Counter:
    """Opcodes of the tile loop (see wgmma_loop_lines)."""
    return opcodes("\n".join(wgmma_loop_lines(sass, products)))


REGISTER = re.compile(r"\bR(\d+)\b")


def instruction(line: str) -> str:
    """A SASS line's instruction as ptxas wrote it, without its address comment and encoding."""
    return line.split("*/", 1)[1].split(";")[0].strip()


def longest_chain(lines: list[str], mnemonic_wanted: str) -> int:
    """The most instructions of one kind (e.g. "FADD") in a row, each reading a register the one before wrote: the
    dependent path through them in straight-line SASS. Any other instruction that writes a register ends its chain."""
    depth, longest = {}, 0
    for line in lines:
        unpredicated = re.sub(r"^@!?U?P\w+\s+", "", instruction(line))
        opcode, _, operands = unpredicated.partition(" ")
        written, *read = operands.split(",")
        if not (destination := REGISTER.findall(written)):
            continue
        if opcode.split(".")[0] == mnemonic_wanted:
            depth[destination[0]] = 1 + max((depth.get(r, 0) for r in REGISTER.findall(",".join(read))), default=0)
            longest = max(longest, depth[destination[0]])
        else:
            depth[destination[0]] = 0
    return longest


def test_chapter9_computes_s_with_wgmma_and_p_v_with_mma_sync(sass):
    """S: eight HGMMA per warpgroup (one per 16 head dims), no ldmatrix for Q or K. P V: kernel 8's mma.sync on
    V's transposed ldmatrix loads, unchanged."""
    k08, k09 = mnemonics(sass[8]), mnemonics(sass[9])
    assert k09["HGMMA"] == 128 // 16
    assert k09["HMMA"] == k08["HMMA"] // 2  # the P V half
    assert k09["LDSM"] == 0 < k08["LDSM"]  # plain ldmatrix loaded Q and K
    assert k09["LDSM.MT88"] == k08["LDSM.MT88"] > 0  # V, transposed on the way


def test_chapter10_runs_both_products_on_wgmma(sass):
    """Eight more HGMMA for P V, and neither mma.sync nor ldmatrix left: wgmma reads V from shared memory."""
    k10 = mnemonics(sass[10])
    assert k10["HGMMA"] == 2 * 128 // 16
    assert k10["HMMA"] == k10["LDSM"] == k10["LDSM.MT88"] == 0


def test_chapter11_copies_with_tma_and_waits_on_mbarriers(sass, sass_texts):
    """No cp.async left; in the loop one thread's four TMA copies (two 64-column planes each of K and V), a wait
    on the stage's mbarrier, and no proxy fence: TMA writes through the proxy wgmma reads through."""
    k10, k11 = mnemonics(sass[10]), mnemonics(sass[11])
    assert k10["LDGSTS"] > 0 and k11["LDGSTS"] == 0
    assert k11["UTMALDG"] > 0
    loop10, loop11 = mnemonics(wgmma_loop(sass_texts[10])), mnemonics(wgmma_loop(sass_texts[11]))
    assert loop11["UTMALDG"] == 2 * 2
    assert any(op.startswith("SYNCS.PHASECHK") for op in wgmma_loop(sass_texts[11]))  # mbarrier.try_wait
    assert loop10["FENCE"] == 1 and loop11["FENCE"] == 0
    assert loop10["BAR"] == loop11["BAR"] == 1  # the one block barrier per tile stays


def test_chapter12_consumers_loop_without_a_block_barrier(sass, sass_texts):
    """The consumers' tile loop has no BAR and issues no copy: it waits on the stage's filled barrier and arrives
    on its free barrier. The producer warpgroup gives registers back, the consumers take them."""
    loop = wgmma_loop(sass_texts[12])
    assert mnemonics(loop)["BAR"] == 0
    assert mnemonics(loop)["UTMALDG"] == 0
    assert any(op.startswith("SYNCS.PHASECHK") for op in loop) and any(op.startswith("SYNCS.ARRIVE") for op in loop)
    k12 = sass[12]
    assert any(op.startswith("USETMAXREG.DEALLOC") for op in k12)
    assert any(op.startswith("USETMAXREG.TRY_ALLOC") for op in k12)
    assert mnemonics(k12)["UTMALDG"] > 0


def test_chapter13_keeps_the_descriptors_in_uniform_registers(sass_texts):
    """Kernel 12 computes each wgmma's descriptors per lane and moves them to uniform registers (R2UR) inside the
    tile loop; kernel 13 makes them before the loop, from a warp index the compiler knows is uniform."""
    loop12, loop13 = mnemonics(wgmma_loop(sass_texts[12])), mnemonics(wgmma_loop(sass_texts[13]))
    assert loop12["HGMMA"] == loop13["HGMMA"] == 2 * 128 // 16
    assert loop12["R2UR"] >= loop12["HGMMA"]  # at least one move per wgmma
    assert loop13["R2UR"] == 0
    assert opcodes(sass_texts[13])["SHFL.IDX"] > opcodes(sass_texts[12])["SHFL.IDX"]  # the warp index, from lane 0


def test_chapter14_waits_for_s_while_p_v_runs(sass_texts):
    """In kernel 14's loop both products are issued, S first, and the first wait leaves one group (P V) in flight:
    WARPGROUP.DEPBAR.LE gsb0, 0x1. Tile 0's S and the last P V are outside the loop, eight HGMMA each. The loop
    frees a stage of K and one of V."""
    loop = wgmma_loop(sass_texts[14])
    assert mnemonics(loop)["HGMMA"] == 2 * 128 // 16
    assert mnemonics(opcodes(sass_texts[14]))["HGMMA"] == 4 * 128 // 16
    waits = [line.split(";")[0].split()[-1] for line in sass_texts[14].splitlines() if "WARPGROUP.DEPBAR" in line]
    assert "0x1" in waits and "0x0" in waits
    assert sum(n for op, n in loop.items() if op.startswith("SYNCS.ARRIVE")) == 2  # K's and V's free barriers


def mbarrier_init_counts(sass: str) -> Counter:
    """How many barriers mbarrier.init (SYNCS.EXCH.64) sets up for each arrival count. ptxas stores the barrier's
    initial state, computed from the count: UMOV UR6, count; UIADD3 UR6, -UR6, 0x100000 (NVRTC 13.5), or that
    state shifted into place first, USHF.L.U32 UR4, UR4, 0x1 (NVRTC 13.0). Each uniform register is followed
    through those forms; any other instruction that writes one forgets what it held."""
    counts, states, inits = {}, {}, Counter()
    for line in sass.splitlines():
        if found := re.search(r"\bUMOV (UR\d+), (0x[0-9a-f]+) ;", line):
            states.pop(found[1], None)
            counts[found[1]] = int(found[2], 16)
        elif (found := re.search(r"\bUIADD3 (UR\d+), -(UR\d+), 0x100000, URZ ;", line)) and found[2] in counts:
            states[found[1]] = counts.pop(found[2])
        elif (found := re.search(r"\bUSHF\.L\.U32 (UR\d+), (UR\d+), 0x[0-9a-f]+, URZ ;", line)) and found[2] in states:
            states[found[1]] = states[found[2]]
        elif found := re.search(r"\bSYNCS\.EXCH\.64 URZ, \[[^]]+\], (UR\d+) ;", line):
            inits[states[found[1]]] += 1
        elif found := re.search(r"\*/\s+(?:@!?U?P\w+\s+)?[A-Z0-9.]+ (UR\d+),", line):
            counts.pop(found[1], None)
            states.pop(found[1], None)
    return inits


def arrivals(lines: list[str]) -> list[str]:
    """The consumers' mbarrier.arrive (SYNCS.ARRIVE.TRANS64.A1T0: one arrival, no bytes) among SASS lines."""
    return [line for line in lines if "SYNCS.ARRIVE.TRANS64.A1T0" in line]


def predicated(line: str) -> bool:
    """Whether a SASS instruction runs only where its predicate holds (@P0, @!P2, ...)."""
    return re.search(r"\*/\s+@!?U?P\d", line) is not None


def test_chapter14_frees_a_stage_with_one_lane_per_warp(sass_texts):
    """Kernel 13's consumers free a stage with an arrival from every thread, its free barrier waiting for all 256;
    kernel 14's with one lane of each warp, the free barriers of K and V waiting for N_WARPS arrivals."""
    n_warps, stages = (source_constant(by_number[14], name) for name in ("N_WARPS", "STAGES"))
    assert mbarrier_init_counts(sass_texts[13]) == {1: 1 + stages, n_warps * 32: stages}  # Q, K/V filled; free
    assert mbarrier_init_counts(sass_texts[14]) == {1: 1 + 2 * stages, n_warps: 2 * stages}  # K and V apart
    loop13, loop14 = (arrivals(wgmma_loop_lines(sass_texts[n])) for n in (13, 14))
    assert loop13 and not any(predicated(line) for line in loop13)
    assert loop14 and all(predicated(line) for line in loop14)


def test_chapter15_tile_loop_keeps_kernel14s_softmax_waits_and_arrivals(sass_texts):
    """Inside the loop over query tiles, kernel 15's tile loop has kernel 14's exponentials, its two waits for
    wgmma groups and its two arrivals (K's and V's free barriers); the loop over query tiles adds the rest."""
    loop14, loop15 = (wgmma_loop(sass_texts[n], products=2 * 128 // 16) for n in (14, 15))
    for loop in (loop14, loop15):
        assert loop["WARPGROUP.DEPBAR.LE"] == 2
        assert sum(n for op, n in loop.items() if op.startswith("SYNCS.ARRIVE")) == 2
    assert mnemonics(loop15)["MUFU.EX2"] == mnemonics(loop14)["MUFU.EX2"] > 0


def test_chapter15_initialises_every_barrier_and_stages_o_in_its_own_tile(sass):
    """One mbarrier.init (SYNCS.EXCH.64) per barrier, three more than kernel 14 (Q's one becomes a filled and a
    free barrier per buffer); shared memory grows by two tiles, the second Q buffer and O's, and those barriers."""
    k14, k15 = by_number[14], by_number[15]
    assert {n: sass[n]["SYNCS.EXCH.64"] for n in (14, 15)} == {
        n: source_constant(by_number[n], "N_BARRIERS") for n in (14, 15)
    }
    tile_bytes = source_constant(k15, "BLOCK_Q") * source_constant(k15, "HEAD_DIM") * 2
    assert k15.kernel.smem_bytes - k14.kernel.smem_bytes == 2 * tile_bytes + 3 * 8


@pytest.mark.parametrize("q_tiles, n_heads, batch, grid", [(32, 16, 16, 132), (7, 5, 3, 132), (5, 2, 3, 4)])
def test_page15s_figure_deals_the_pairs_as_work_at(figures, work_at, q_tiles, n_heads, batch, grid):
    """The figure's schedule model takes, block by block, the query tiles kernel 15's own work_at deals it."""
    for block, pairs in enumerate(work_at(q_tiles, n_heads, batch, grid)):
        dealt = [(b, head, tile) for pair in pairs for tile, head, b in pair]
        assert figures.pair_schedule.pair_schedule(block, grid, q_tiles, n_heads, batch) == dealt


def test_chapter12_register_hand_over_balances(sass_texts):
    """The block starts with the most registers 384 threads can have, and what the producer warpgroup gives back
    (setmaxnreg.dec: USETMAXREG.DEALLOC) is exactly what the consumers take (setmaxnreg.inc: USETMAXREG.TRY_ALLOC):
    with fewer at launch, setmaxnreg.inc would wait for registers forever."""
    chapter = by_number[12]
    n_threads = chapter.kernel.n_threads
    producer_threads = source_constant(chapter, "PRODUCER_WARPS") * 32
    consumer_threads = source_constant(chapter, "N_WARPS") * 32
    (producer,) = set(re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+) ;", sass_texts[12]))
    (consumer,) = set(re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL U?P\w+, (0x[0-9a-f]+) ;", sass_texts[12]))
    at_launch = REGISTER_FILE // n_threads // REGISTER_STEP * REGISTER_STEP
    cubin = compile_nvrtc(chapter.source, chapter.kernel.build_arch("sm_90"))
    for instance in ALL_INSTANCES:
        assert resource_usage(cubin)[cubin.lowered_names[instance]]["REG"] == at_launch
    assert n_threads == producer_threads + consumer_threads
    assert int(producer, 16) * producer_threads + int(consumer, 16) * consumer_threads == at_launch * n_threads


# ---------------------------------------------------------------------------------------------------
# kernels/tma.py: what the driver is asked to encode, and the errors when it cannot.
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def driver(monkeypatch):
    """cuda-bindings' driver module with cuTensorMapEncodeTiled recording its arguments instead of calling libcuda."""
    driver = pytest.importorskip("cuda.bindings.driver")
    calls = []

    def encode(*args):
        calls.append(args)
        return driver.CUresult.CUDA_SUCCESS, "encoded"

    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", encode)
    monkeypatch.setattr(driver, "calls", calls, raising=False)
    encoded_maps.cache_clear()  # no map kept from a test before, none from this one kept for the next
    yield driver
    encoded_maps.cache_clear()


def values(numbers) -> list[int]:
    """The integers inside a list of cuuint32_t / cuuint64_t."""
    return [int(n) for n in numbers]


def test_tensor_map_dimensions_innermost_first(driver):
    """(batch, seq, heads, 128) is (128, heads, seq, batch) to the driver, strides in bytes, a box of one head."""
    tensor = torch.zeros(3, 200, 5, 128, dtype=torch.float16)
    assert tensor_map(tensor, 128, 64) == "encoded"
    [(dtype, rank, address, dims, strides, box, steps, interleave, swizzle, _, fill)] = driver.calls
    assert dtype == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    assert (rank, address) == (4, tensor.data_ptr())
    assert values(dims) == [128, 5, 200, 3]
    assert values(strides) == [stride * 2 for stride in reversed(tensor.stride()[:3])]
    assert values(box) == [64, 1, 128, 1] and values(steps) == [1, 1, 1, 1]
    assert swizzle == driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert interleave == driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert fill == driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE  # zeros past the end


def test_an_unswizzled_map_takes_whole_rows(driver):
    """Without the swizzle a box row may be a whole 256-byte row of a head; the driver is told no swizzle."""
    tensor = torch.zeros(2, 256, 4, 128, dtype=torch.bfloat16)
    tensor_map(tensor, 128, 128, swizzle=False)
    [(_, _, _, _, _, box, _, _, swizzle, _, _)] = driver.calls
    assert values(box) == [128, 1, 128, 1] and swizzle == driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    tensor_map(tensor, 128, 64)  # half a row, swizzled: another map
    assert len(driver.calls) == 2


def test_a_map_is_encoded_once_per_address_shape_and_box(driver):
    """The maps of a tensor seen before are kept; another address, shape or box is encoded anew."""
    tensor = torch.zeros(2, 256, 4, 128, dtype=torch.bfloat16)
    for _ in range(3):
        tensor_map(tensor, 128, 64)
    assert len(driver.calls) == 1
    tensor_map(tensor, 64, 64, box_heads=2)
    tensor_map(tensor[1:], 128, 64)
    tensor_map(tensor.view(2, 256, 2, 256)[..., :128].contiguous(), 128, 64)
    assert len(driver.calls) == 4


def test_tensor_map_takes_bf16(driver):
    tensor_map(torch.zeros(1, 1, 1, 128, dtype=torch.bfloat16), 128, 64)
    assert driver.calls[0][0] == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16


def test_tensor_map_refuses_a_layout_tma_cannot_read(driver):
    """Strides that are not the contiguous ones, or a box row wider than the 128-byte swizzle."""
    with pytest.raises(ValueError, match="contiguous, 16-byte aligned"):
        tensor_map(torch.zeros(1, 128, 2, 8, dtype=torch.bfloat16).transpose(1, 2), 128, 64)
    with pytest.raises(ValueError, match="at most 128 bytes"):
        tensor_map(torch.zeros(1, 128, 2, 128, dtype=torch.bfloat16), 128, 128)
    with pytest.raises(TypeError, match="bfloat16 or torch.float16"):
        tensor_map(torch.zeros(1, 128, 2, 128), 128, 64)
    assert driver.calls == []


def test_a_refused_map_names_the_driver_error(driver, monkeypatch):
    refused = driver.CUresult.CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", lambda *args: (refused, None))
    with pytest.raises(TensorMapError, match=r"refused dims \(128, 2, 16, 1\).*CUDA_ERROR_INVALID_VALUE"):
        tensor_map(torch.zeros(1, 16, 2, 128, dtype=torch.bfloat16), 128, 64)


def test_without_the_driver_library_the_error_says_so(driver, monkeypatch):
    """cuda-bindings raises a RuntimeError when libcuda cannot be loaded (a machine without an NVIDIA driver)."""

    def no_driver(*args):
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", no_driver)
    with pytest.raises(TensorMapError, match="the CUDA driver could not encode a tensor map: .*driver library"):
        tensor_map(torch.zeros(1, 16, 2, 128, dtype=torch.bfloat16), 128, 64)


def test_without_cuda_bindings_the_error_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(TensorMapError, match="pip install 'cuda-bindings"):
        tensor_map(torch.zeros(1, 16, 2, 128, dtype=torch.bfloat16), 128, 64)


def test_a_tma_chapter_names_itself_when_the_maps_cannot_be_made(monkeypatch):
    """The launch turns a TensorMapError into a KernelError that names the chapter (before anything is launched)."""
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    kernel = AttentionKernel(by_number[11].source, arch="sm_90a", tensor_maps=True)
    q = torch.zeros(1, 16, 2, 128, dtype=torch.bfloat16)
    with pytest.raises(KernelError, match="k11_tma: TMA copies need the CUDA driver's Python bindings"):
        kernel._tensor_maps(q, q, q)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "tile"),
    [(16, 16, (1, 128)), (32, 8, (4, 32)), (12, 4, (3, 42)), (160, 1, (128, 1)), (64, 1, (64, 2))],
)
def test_a_packed_tile_holds_one_groups_heads(heads, kv_heads, tile):
    """Packed chapters put the heads of one K/V group in a tile, at as many positions as fit in BLOCK_Q rows; a
    group larger than a tile takes several. Unpacked chapters keep one head per tile."""
    packed = [c.kernel for c in CHAPTERS if c.kernel.packed_gqa]
    assert packed and all(c.kernel.packed_gqa for c in CHAPTERS if c.number >= 17)
    for kernel in packed:
        assert kernel.packed_tile(heads, kv_heads) == tile
    assert by_number[16].kernel.packed_tile(heads, kv_heads) == (1, 128)


def test_a_packed_q_map_copies_a_groups_heads_in_one_box(driver):
    """Q's box spans the group's heads (the rows of a packed tile); K's and V's stay one head of BLOCK_KV rows."""
    q = torch.zeros(2, 5, 32, 128, dtype=torch.bfloat16)
    k = torch.zeros(2, 300, 8, 128, dtype=torch.bfloat16)
    packed = next(c.kernel for c in CHAPTERS if c.kernel.packed_gqa)
    packed._tensor_maps(q, k, k.clone(), *packed.packed_tile(32, 8)[:1])
    assert [values(call[5]) for call in driver.calls] == [[64, 4, 32, 1], [64, 1, 128, 1], [64, 1, 128, 1]]


# ---------------------------------------------------------------------------------------------------
# The figures of pages 10-12, computed from the kernels' own formulas and schedules.
# ---------------------------------------------------------------------------------------------------


def test_p_fragments_cover_a_warps_block_once(figures):
    """The A registers of 32 lanes are a (16, 16) block of P, each element held once (page 10's figure)."""
    cells = [cell for lane in range(32) for cell in figures.wgmma.a_fragment_cells(lane)]
    assert sorted(cells) == [(row, col) for row in range(16) for col in range(16)]


def test_kernel_10_threads_copy_eight_chunks_each(figures):
    """Page 11's left panel: 256 threads, 8 chunks of a 128-row tile each, a warp's chunks 2 whole rows per step."""
    threads = Counter(figures.tile_copies.cp_async_thread(row, chunk) for row in range(128) for chunk in range(16))
    assert sorted(threads) == list(range(256)) and set(threads.values()) == {8}
    assert {figures.tile_copies.cp_async_thread(row, chunk) // 32 for row in (0, 1) for chunk in range(16)} == {0}


def test_the_producer_schedule_keeps_the_barriers_rules(figures):
    """Page 12's schematic: no stage refilled before both warpgroups freed it, no tile read before its copies
    are in; kernel 11's lockstep starts every tile of both warpgroups at once, kernel 12's finishes no later."""
    bars = figures.warp_specialized.schedule_producer()
    copies = {tile: start for name, tile, start, _ in bars if name == "copies"}
    groups = [
        {tile: (start, start + length) for name, tile, start, length in bars if name == f"warpgroup {g}"}
        for g in range(2)
    ]
    for tile, start in copies.items():
        if tile >= 2:
            assert start >= max(group[tile - 2][1] for group in groups)
        assert all(group[tile][0] >= start + figures.warp_specialized.COPY_TILE for group in groups)
    lockstep = figures.warp_specialized.schedule_lockstep()
    starts = {}
    for name, tile, start, _ in lockstep:
        if name != "copies":
            starts.setdefault(tile, set()).add(start)
    assert all(len(both) == 1 for both in starts.values())
    assert max(start + length for *_, start, length in bars) <= max(start + length for *_, start, length in lockstep)


def test_chapter14_ablation_differs_from_kernel14_only_in_its_descriptors(sass_texts):
    """The variant without chapter 13's descriptors runs kernel 14's loop, S and P V issued back to back, but moves
    a descriptor to uniform registers for every wgmma, as kernel 12 does (docs/ablations/ch14_overlap)."""
    from kernels.tools.ablations import find_ablation

    variant = next(c for c in find_ablation("14").contenders if c.name == "k14_rebuilt_descriptors")
    loop14, loop_variant = mnemonics(wgmma_loop(sass_texts[14])), mnemonics(wgmma_loop(sass_text(variant)))
    assert loop_variant["HGMMA"] == loop14["HGMMA"] == 2 * 128 // 16
    assert loop14["R2UR"] == 0 and loop_variant["R2UR"] >= loop_variant["HGMMA"]


def test_chapter15_runs_kernel14s_tile_loop_inside_a_loop_over_query_tiles(sass_texts):
    """The tile loop is kernel 14's (16 HGMMA, no R2UR); kernel 14's 32 HGMMA all sit inside the loop over the work."""
    inner14, inner15 = (mnemonics(wgmma_loop(sass_texts[n], products=2 * 128 // 16)) for n in (14, 15))
    assert inner14["HGMMA"] == inner15["HGMMA"] == 2 * 128 // 16
    assert inner15["R2UR"] == 0
    assert mnemonics(wgmma_loop(sass_texts[15]))["HGMMA"] == mnemonics(opcodes(sass_texts[15]))["HGMMA"] == 32


def test_chapter15_is_persistent_with_two_q_buffers():
    """One block per SM, the batch size passed last: each instance's mangled name ends in its parameters' types,
    (..., float softmax_scale, int batch_size) where kernel 14's ends at the float. Two Q buffers, and O's tile."""
    assert by_number[15].kernel.persistent and not by_number[14].kernel.persistent
    for number, last in ((14, "f"), (15, "fi")):
        cubin = compile_nvrtc(by_number[number].source, "sm_90a")
        assert all(re.search(rf"iiii{last}$", name) for name in cubin.lowered_names.values()), cubin.lowered_names
    assert source_constant(by_number[15], "Q_TILES") == 3  # two Q buffers and O's


# The kernel's lines from its query-tile count to the end of work_at, in a host function with what they read (the
# launch's sizes, blockIdx and gridDim, the tile sizes), and a loop over the steps that prints what each deals.
HOST_SCHEDULE = """
#include <algorithm>
#include <cstdio>
#include <cstdlib>
using std::min;
struct Dim {{ int x; }};
constexpr int BLOCK_Q = {block_q}, BLOCK_KV = {block_kv};
constexpr bool CAUSAL = false;

void deal(Dim blockIdx, Dim gridDim, int seq_len_q, int seq_len_k, int n_heads, int n_kv_heads, int batch_size) {{
    const int causal_offset = seq_len_k - seq_len_q;
{work_at}
    for (int step = 0;; ++step) {{
        const auto work = work_at(step);
        if (work.finished) break;
        if (!work.skipped) std::printf("%d %d %d %d %d\\n", blockIdx.x, step, work.q0 / BLOCK_Q, work.head, work.batch);
    }}
}}

int main(int argc, char** argv) {{
    const int q_tiles = std::atoi(argv[1]), n_heads = std::atoi(argv[2]), batch = std::atoi(argv[3]);
    const int grid = std::atoi(argv[4]);
    for (int block = 0; block < grid; ++block) {{
        deal(Dim{{block}}, Dim{{grid}}, q_tiles * BLOCK_Q, q_tiles * BLOCK_Q, n_heads, n_heads, batch);
    }}
}}
"""


@pytest.fixture(scope="module")
def work_at(tmp_path_factory):
    """Kernel 15's own work_at, compiled for the host: (q_tiles, n_heads, batch, grid) -> per block, its pairs, each
    the (query tile, head, batch) it computes, in the order the block takes them."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler for the host")
    chapter = by_number[15]
    lines = chapter.source.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("const int q_tiles"))
    end = opening = next(i for i, line in enumerate(lines) if "const auto work_at = [&](int step) {" in line)
    depth = 0
    for end in range(opening, len(lines)):  # to the brace that closes the lambda
        depth += lines[end].count("{") - lines[end].count("}")
        if depth == 0:
            break
    folder = tmp_path_factory.mktemp("work_at")
    source, program = folder / "schedule.cpp", folder / "schedule"
    source.write_text(
        HOST_SCHEDULE.format(
            block_q=source_constant(chapter, "BLOCK_Q"),
            block_kv=source_constant(chapter, "BLOCK_KV"),
            work_at="\n".join(lines[start : end + 1]),
        )
    )
    built = subprocess.run([compiler, "-std=c++17", "-o", str(program), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr

    def schedule(q_tiles: int, n_heads: int, batch: int, grid: int) -> list[list[list[tuple[int, int, int]]]]:
        ran = subprocess.run(
            [str(program), *map(str, (q_tiles, n_heads, batch, grid))], capture_output=True, text=True, check=True
        )
        blocks = [[] for _ in range(grid)]
        for line in ran.stdout.splitlines():
            block, step, tile, head, b = map(int, line.split())
            if step % 2 == 0:  # a pair starts on an even step
                blocks[block].append([])
            blocks[block][-1].append((tile, head, b))
        return blocks

    return schedule


@pytest.mark.parametrize(
    "q_tiles, n_heads, batch, grid",
    [(32, 16, 16, 132), (3, 2, 2, 12), (1, 1, 1, 1), (7, 5, 3, 132), (8, 1, 1, 132), (129, 3, 1, 132)],
)
def test_chapter15_pairs_cover_every_query_tile_once(work_at, q_tiles, n_heads, batch, grid):
    """Every (tile, head, batch) is computed by exactly one block. Causal, the two tiles of a pair run q_tiles + 1
    key tiles together, the longer first; only the middle tile of an odd count is alone."""
    pairs = [pair for block in work_at(q_tiles, n_heads, batch, grid) for pair in block]
    done = [work for pair in pairs for work in pair]
    assert sorted(done) == sorted(itertools.product(range(q_tiles), range(n_heads), range(batch)))
    for pair in pairs:
        assert len({(head, b) for _, head, b in pair}) == 1
        if len(pair) == 2:
            (longer, _, _), (shorter, _, _) = pair
            assert longer > shorter and (longer + 1) + (shorter + 1) == q_tiles + 1
        else:
            assert q_tiles % 2 == 1 and pair[0][0] == q_tiles // 2


def test_chapter16_splits_the_softmax_reductions_into_chains(sass_texts):
    """Kernel 15's tile loop adds a row's 32 probabilities in one dependent chain and takes its max over 16 pairs in
    another; kernel 16 deals them to CHAINS chains joined pairwise, so no path is longer than a chain, the joins
    and the few steps after (the max's two shuffles, the new max, the running sum)."""
    chains = source_constant(by_number[16], "CHAINS")
    joins = chains.bit_length() - 1
    loop15, loop16 = (wgmma_loop_lines(sass_texts[n], products=2 * 128 // 16) for n in (15, 16))
    assert longest_chain(loop15, "FADD") >= 32 - 1
    assert longest_chain(loop15, "FMNMX") >= 16
    assert longest_chain(loop16, "FADD") <= 32 // chains + joins + 1
    assert longest_chain(loop16, "FMNMX") <= 16 // chains + joins + 3
    # The same exponentials and scalings: only the reductions changed, with at most a few more additions.
    ops15, ops16 = (mnemonics(opcodes("\n".join(loop))) for loop in (loop15, loop16))
    assert ops16["MUFU.EX2"] == ops15["MUFU.EX2"] and ops16["FFMA"] == ops15["FFMA"]
    assert ops15["FADD"] < ops16["FADD"] <= ops15["FADD"] + 2 * chains
    assert ops16["HGMMA"] == ops15["HGMMA"] == 2 * 128 // 16


def test_chapter16_is_chapter15_but_for_the_softmax(sass):
    """Kernel 16 changes kernel 15's softmax reductions alone: across the whole kernel every copy, load, store,
    barrier, wait, product and exponential is kernel 15's, as many; only additions, maxima, and the integer and move
    instructions around them differ."""
    reductions = {"FADD", "FMNMX", "MOV", "NOP", *INTEGER_ALU}
    k15, k16 = ({op: n for op, n in mnemonics(sass[n]).items() if op not in reductions} for n in (15, 16))
    assert k16 == k15
    assert mnemonics(sass[16])["FADD"] > mnemonics(sass[15])["FADD"]


def test_split_kv_writes_the_log_sum_exp_with_one_log_per_row():
    """Chapter 18 adds the log-sum-exp: a log2 per row a thread holds (two), where chapter 17 takes none."""
    [split] = [c for c in CHAPTERS if c.slug == "split_kv"]
    assert total(opcodes(sass_text(by_number[split.number - 1])), "MUFU.LG2") == 0
    assert total(opcodes(sass_text(split)), "MUFU.LG2") == 2


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.kernel.packed_gqa], ids=lambda c: c.name)
def test_the_causal_tile_loop_divides_nothing(chapter):
    """A packed tile's positions are row / tile_heads, a division by a number known at run time: ptxas spells it with
    a reciprocal (MUFU.RCP) beside the loop's exponentials, and may not hoist it from under the mask's condition.
    The loop takes the warp's first position from lane 0 instead (one shuffle): it holds no RCP, and chapter 17's
    causal tile loop is chapter 16's but for that shuffle and its use."""
    causal = ALL_INSTANCES[1]
    assert "true" in causal and "bfloat16" in causal

    def causal_loop(c) -> list[str]:
        return wgmma_loop_lines(sass_text(c, causal), products=2 * 128 // 16)

    loop = causal_loop(chapter)
    assert not [line for line in loop if "MUFU.RCP" in line or "I2F" in line]
    if chapter.slug == "packed_gqa":
        assert len(loop) <= len(causal_loop(by_number[chapter.number - 1])) + 2


DECODE_CHAPTERS = [c for c in CHAPTERS if c.kernel.decode is not None]


@pytest.mark.parametrize("chapter", DECODE_CHAPTERS, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype, causal", list(DECODE_INSTANCES))
def test_the_decode_kernel_copies_with_cp_async_and_multiplies_16_row_tiles(chapter, dtype, causal):
    """decode_attention copies K and V with cp.async (LDGSTS) and multiplies with mma.sync (HMMA) and ldmatrix,
    no TMA or wgmma; it spills nothing, and DECODE_BLOCKS_PER_SM blocks fit on one SM in registers and shared
    memory, as its launch bounds promise."""
    cubin = compile_nvrtc(chapter.source, "sm_90a", chapter.kernel.instances)
    name = cubin.lowered_names[DECODE_INSTANCES[dtype, causal]]
    ops = Counter(mnemonic(op) for op in opcodes(disassemble(cubin)[name]).elements())
    assert ops["LDGSTS"] > 0 and ops["HMMA"] > 0 and ops["LDSM"] > 0
    assert ops["UTMALDG"] == ops["HGMMA"] == 0
    usage = resource_usage(cubin)[name]
    decode = chapter.kernel.decode
    assert usage.get("LOCAL", 0) == usage.get("STACK", 0) == 0
    assert decode["DECODE_BLOCKS_PER_SM"] * decode["DECODE_THREADS"] * usage["REG"] <= 65536
    assert decode["DECODE_BLOCKS_PER_SM"] * (decode["DECODE_SMEM_BYTES"] + 1024) <= 228 * 1024


def sass_lines(chapter, instance: str) -> list[str]:
    """An instance's SASS (decode_attention's too), one instruction a line, without the addresses that code moved
    elsewhere shifts."""
    return [re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in hopper_sass(chapter, instance).splitlines()]


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_first_decode_chapter_prefills_with_its_predecessors_kernel_instruction_for_instruction(instance):
    """The chapter that adds a decode kernel leaves the other alone: every flash_attention instance's SASS is the
    chapter before it's, instruction for instruction (addresses aside), so only decode calls can change speed."""
    first = DECODE_CHAPTERS[0]
    assert first.number == PREFILL_AS_BEFORE  # the page that shows no prefill step for it
    before = next(c for c in CHAPTERS if c.number == first.number - 1)
    assert sass_lines(first, instance) == sass_lines(before, instance)


def test_decode_splits_fill_the_gpu_and_keep_their_tiles():
    """A decode call's splits: none when the (sequence, K/V head) pairs already give every SM a block; otherwise as
    many as give each SM one, but never below DECODE_MIN_SPLIT_TILES key tiles a split."""
    assert decode_split_count(units=2048, key_tiles=32, sms=132) == 1
    assert decode_split_count(units=512, key_tiles=128, sms=132) == 1
    assert decode_split_count(units=64, key_tiles=512, sms=132) == 2  # 128 blocks, one to an SM
    assert decode_split_count(units=8, key_tiles=20, sms=132) == 20 // DECODE_MIN_SPLIT_TILES
    assert decode_split_count(units=8, key_tiles=1, sms=132) == 1


@pytest.mark.parametrize("chapter", DECODE_CHAPTERS, ids=lambda c: c.name)
def test_the_decode_kernel_takes_tiles_of_at_most_16_rows(chapter):
    """A call runs the decode kernel when one K/V group's positions fit in DECODE_ROWS rows: one position of up to
    16 heads, or up to 16 positions of one; a taller tile, prefill included, runs the chapter's main kernel."""
    decodes = chapter.kernel.decodes
    assert decodes((3, 1, 32, 128), 8) and decodes((2, 16, 4, 128), 4) and decodes((2, 1, 64, 128), 4)
    assert not decodes((2, 5, 16, 128), 2) and not decodes((2, 1, 68, 128), 4)
    assert not decodes((16, 4096, 16, 128), 16)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel20_runs_its_whole_softmax_after_p_v_has_landed(instance):
    """In kernel 20's steady path ptxas leaves next to nothing between the wait for S (gsb0, 0x1) and the wait for
    P V (0x0): at most one FMNMX and no exponential; all 66 MUFU.EX2 and the other maxima come after the second."""
    [kernel20] = [c for c in CHAPTERS if c.number == 20]
    between, after = between_the_waits(kernel20, instance)
    assert total(between, "MUFU.EX2") == 0 and total(between, "FMNMX") <= 1
    assert total(after, "MUFU.EX2") == 66 and total(after, "FMNMX") >= 64


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel21_runs_the_row_maxima_under_p_v(instance):
    """Chapter 21's fence holds the row maxima between the wait for S and the wait for P V: every FMNMX of the tile
    and the rescales' exponentials come before the second wait, with the fence's one MEMBAR, and none after it;
    the tile's 66 MUFU.EX2 are all still there, split between the two sides."""
    between, after = between_the_waits(by_number[21], instance)
    assert total(between, "FMNMX") >= 64 and total(after, "FMNMX") == 0
    assert total(between, "MUFU.EX2") >= 2 and total(between, "MEMBAR") == 1
    assert total(between, "MUFU.EX2") + total(after, "MUFU.EX2") == 66


# Chapters whose idea lies in the prefill kernel alone (21: its softmax; 23, 25, 26: its tile loop; 27: its epilogue;
# 28, 29: its work list), each with the chapter whose decode_attention it keeps.
DECODE_KEPT_FROM = {21: 20, 23: 22, 25: 24, 26: 24, 27: 26, 28: 27, 29: 28}


@pytest.mark.parametrize("instance", list(DECODE_INSTANCES.values()))
@pytest.mark.parametrize("number", sorted(DECODE_KEPT_FROM))
def test_a_prefill_idea_keeps_the_decode_kernel_before_it(number, instance):
    """A chapter that changes the prefill kernel alone has an earlier chapter's decode_attention, instruction for
    instruction, so decode calls run at that chapter's speed."""
    assert sass_lines(by_number[number], instance) == sass_lines(by_number[DECODE_KEPT_FROM[number]], instance)


PACKED_EXP2 = r"""
// 2^x of a register's two 16-bit values, as a pair of P's fragment holds them: one PTX instruction.
template <int BF16>
__global__ void packed_exp2(const unsigned* x, unsigned* y) {
    unsigned pair;
    if (BF16) {
        asm("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(pair) : "r"(x[threadIdx.x]));
    } else {
        asm("ex2.approx.f16x2 %0, %1;" : "=r"(pair) : "r"(x[threadIdx.x]));
    }
    y[threadIdx.x] = pair;
}
"""


def test_a_packed_exp2_is_two_exponentials_on_hopper(tmp_path):
    """The softmax's exponentials go through MUFU, a narrower pipe than the FMA's. PTX has an exp2 of two 16-bit
    values in one instruction, but on sm_90a ptxas emits it as two MUFU.EX2, one per half, and a PRMT to pack them:
    no fewer MUFU operations than two fp32 exponentials, so the ladder keeps those."""
    source = tmp_path / "packed_exp2.cu"
    source.write_text(PACKED_EXP2)
    instances = ("packed_exp2<0>", "packed_exp2<1>")
    cubin = compile_nvrtc(source, "sm_90a", instances)
    for instance, half in zip(instances, ("F16", "BF16"), strict=True):
        ops = Counter(opcodes(disassemble(cubin)[cubin.lowered_names[instance]]).elements())
        assert ops[f"MUFU.EX2.{half}"] == 2 and sum(n for op, n in ops.items() if op.startswith("MUFU")) == 2, ops
        assert ops["PRMT"] == 1, ops


@pytest.mark.parametrize("instance", [*ALL_INSTANCES, *DECODE_INSTANCES.values()])
def test_kernel22_is_kernel21_but_for_the_producers_thread(instance):
    """Chapter 22 moves the producer's copying thread from the block's thread 256 (warp 8) to 288 (warp 9). In every
    flash_attention instance's SASS that is the one instruction that differs from kernel 21's, the comparison's
    constant; the consumers' code and the decode kernel are kernel 21's, instruction for instruction."""
    before, after = sass_lines(by_number[21], instance), sass_lines(by_number[22], instance)
    assert len(before) == len(after)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    if instance in DECODE_INSTANCES.values():
        assert changed == []
    else:
        [(old, new)] = changed
        assert re.match(r"ISETP\.NE\.AND P\d, PT, R\d+, 0x100, PT", old), old
        assert new.split("/*")[0] == old.split("/*")[0].replace("0x100", "0x120")


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel23_has_nothing_to_wait_for_at_the_loops_top(instance):
    """Kernel 22's steady path starts with two mbarrier waits, K's and the last V's, before any HGMMA. Kernel 23's
    starts with S's eight HGMMA: V's wait comes between S's and P V's, and the next K's barrier is looked at once
    (mbarrier.test_wait, a SYNCS.PHASECHK without TRYWAIT) after the tile's first exponential; K's own wait is off
    the steady path, taken only where that look found the tile not yet landed. The decode kernel is kernel 22's."""
    orders = {n: event_order(steady_lines(wgmma_loop_lines(sass_text(by_number[n], instance), 16))) for n in (22, 23)}
    assert orders[22].startswith("mbarrier wait×2 → HGMMA×16 → wait(≤1)"), orders[22]
    assert orders[23].startswith("HGMMA×8 → mbarrier wait → HGMMA×8 → wait(≤1)"), orders[23]
    assert orders[23].count("mbarrier test") == 1 and "mbarrier test" not in orders[22]
    assert orders[23].index("MUFU.EX2") < orders[23].index("mbarrier test")


def instructions(chapter, instance: str) -> list[str]:
    """An instance's instructions alone, branch targets blanked and NOP padding left out: code that only moved
    compares equal."""
    lines = [line.split(";")[0].split("/*")[0].strip() for line in sass_lines(chapter, instance)]
    target = re.compile(r"\b(BRA|CALL\.REL\.NOINC|BSSY B\d+,) 0x[0-9a-f]+$")
    return [target.sub(r"\1 @", line) for line in lines if line and line != "NOP"]


@pytest.mark.parametrize("instance", [*ALL_INSTANCES, *DECODE_INSTANCES.values()])
def test_kernel24_sleeps_in_the_producers_waits_alone(instance):
    """With its suspend-time hint, the producer's wait sleeps after a failed try (NANOSLEEP.SYNCS for SLEEP_NS) and
    looks once more, where kernel 23's yields and tries again at once. In every flash_attention instance those are
    the only instructions that differ: the YIELD of three retry loops, the producer's waits for a free Q buffer, K
    stage and V stage, becomes a sleep and a look (a SYNCS.PHASECHK without TRYWAIT); the consumers' waits still
    yield and retry. The decode kernel, which has no producer, is kernel 23's."""
    before, after = instructions(by_number[23], instance), instructions(by_number[24], instance)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    removed = [line for op, i, j, _, _ in matcher.get_opcodes() if op != "equal" for line in before[i:j]]
    added = [line for op, _, _, i, j in matcher.get_opcodes() if op != "equal" for line in after[i:j]]
    if instance in DECODE_INSTANCES.values():
        assert removed == added == []
        return
    sleep = source_constant(by_number[24], "SLEEP_NS")
    assert removed == ["YIELD"] * 3, removed
    assert len(added) == 6 and added[::2] == [f"@!P0 NANOSLEEP.SYNCS {sleep:#x}"] * 3, added
    assert all(re.fullmatch(r"@!P0 SYNCS\.PHASECHK\.TRANS64 P0, \[R\d+\+URZ\], R\d+", look) for look in added[1::2])
    assert sum(line == "YIELD" for line in after) > 0  # the consumers' waits


def steady_tile(number: int | str, instance: str) -> list[str]:
    """A Hopper chapter's steady tile path (a chapter by number, a variant by name): its tile loop less the blocks that
    a branch skips in most tiles."""
    from kernels.tools.ablations import chapter_or_variant

    return steady_lines(wgmma_loop_lines(sass_text(chapter_or_variant(str(number)), instance), 16))


def without_exponentials(path: list[str]) -> list[str]:
    """A tile path's products, waits and barriers in their order, the exponentials left out: ptxas may spread those
    differently around the waits."""
    return [event for event in event_order(path).split(" → ") if not event.startswith("MUFU")]


def waits_and_products(number: int | str, instance: str) -> list[str]:
    """The steady tile path's products, waits and barriers in their order (without_exponentials)."""
    return without_exponentials(steady_tile(number, instance))


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel25_shortens_the_steady_path_in_its_additions(instance):
    """Kernel 25's row sums start each chain at its first term, 16 FADD fewer a tile (64 where kernel 24 has 80),
    and its descriptors' offsets are 32-bit additions: fewer uniform instructions. Its exponentials are kernel 24's,
    and so is the order of its products, waits and barrier arrivals, among which ptxas spreads them."""
    before, after = (tile_counts(steady_tile(n, instance)) for n in (24, 25))
    assert before["FADD"] == 80 and after["FADD"] == 64
    assert after[UNIFORM] < before[UNIFORM] and after["total"] <= before["total"] - 16 - 4
    assert after["MUFU.EX2 (exp2)"] == before["MUFU.EX2 (exp2)"] == 66
    assert waits_and_products(25, instance) == waits_and_products(24, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel26_issues_its_products_in_its_turn(instance):
    """Kernel 26's steady path waits for its turn (BAR.SYNC) before S's eight HGMMA, and passes it (BAR.ARV) once
    P V's eight are issued, before it waits for S: FlashAttention-4's order. Kernel 25's has no named barrier."""
    assert "BAR" not in event_order(steady_tile(25, instance))
    order = event_order(steady_tile(26, instance))
    assert order.startswith("BAR.SYNC → HGMMA×8 → mbarrier wait → HGMMA×8 → BAR.ARV → wait(≤1)"), order


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel27_stores_o_through_the_tma_with_kernel26s_tile(instance):
    """Kernel 27 stores each warpgroup's O rows with two TMA stores (one per plane), where kernel 26 has none; its
    steady tile path counts kernel 26's instructions, with the same products, waits and barriers in the same order."""
    k26, k27 = (opcodes(sass_text(by_number[n], instance)) for n in (26, 27))
    assert k26["UTMASTG.4D"] == 0 and k27["UTMASTG.4D"] == 2
    assert tile_counts(steady_tile(27, instance)) == tile_counts(steady_tile(26, instance))
    assert waits_and_products(27, instance) == waits_and_products(26, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel28_changes_the_work_list_not_the_tile(instance):
    """Kernel 28 deals single query tiles where kernel 27 deals pairs: the producer's one atomic ask of the counter
    stays one, and the steady tile path counts kernel 27's instructions (ptxas may spell a register copy as an
    integer IMAD.MOV or a MOV), with the same products, waits and barriers in the same order."""
    k27, k28 = (opcodes(sass_text(by_number[n], instance)) for n in (27, 28))
    assert k27["ATOMG.E.ADD.STRONG.GPU"] == k28["ATOMG.E.ADD.STRONG.GPU"] == 1
    before, after = (tile_counts(steady_tile(n, instance)) for n in (27, 28))
    copies = ("integer ALU", "other")
    assert {kind: n for kind, n in after.items() if kind not in copies} == {
        kind: n for kind, n in before.items() if kind not in copies
    }
    assert waits_and_products(28, instance) == waits_and_products(27, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel29_interleaves_units_only_when_causal(instance):
    """Kernel 29 is kernel 28 where attention is causal, instruction for instruction, and kernel 28 with one unit's
    tiles at a time (its ablation's k28_one_head) where it is not."""
    from kernels.tools.ablations import variant_named

    causal = instance.endswith("true>")
    like = by_number[28] if causal else variant_named("k28_one_head")
    assert sass_lines(by_number[29], instance) == sass_lines(like, instance)


def consumer_lines(chapter, instance: str) -> list[str]:
    """A flash_attention instance's consumer warps' code: from their setmaxnreg to the producer's."""
    lines = sass_lines(chapter, instance)
    start = next(i for i, line in enumerate(lines) if "USETMAXREG.TRY_ALLOC" in line)
    return lines[start : next(i for i, line in enumerate(lines) if "USETMAXREG.DEALLOC" in line)]


def divisions(lines: list[str]) -> int:
    """Integer divisions by a value known at run time: each starts with an I2F.RP."""
    return sum("I2F.RP" in line for line in lines)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_kernel30_divides_before_its_first_query_tile_and_frees_the_staging_rows_under_the_last_p_v(instance):
    """Kernel 29's consumers divide by values known at run time in every query tile: decoding the work item and
    placing their rows. Kernel 30's place their rows once, before their first wait on a Q buffer, and keep one
    division inside, on the path that stores O warp by warp (tile_heads does not divide GROUP_Q). Their wait for the
    staging rows (a 128-thread BAR.SYNC) comes above the last wait for P V, where kernel 29's comes below it. The
    steady tile path is kernel 29's, with one more instruction: ptxas keeps a flag of the tile loop in a predicate and
    re-votes it into a uniform one (VOTEU.ALL) each tile. The products, waits and barriers keep their order."""

    def placed_and_per_tile(lines: list[str]) -> tuple[int, int]:
        first_wait = next(i for i, line in enumerate(lines) if "SYNCS.PHASECHK" in line)
        return divisions(lines[:first_wait]), divisions(lines[first_wait:])

    def staging_wait_first(lines: list[str]) -> bool:
        last_products = lines[max(i for i, line in enumerate(lines) if "HGMMA" in line) :]
        staging = next(i for i, line in enumerate(last_products) if re.search(r"BAR\.SYNC\S* R\d+, 0x80\b", line))
        return staging < next(i for i, line in enumerate(last_products) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line)

    k29, k30 = (consumer_lines(by_number[n], instance) for n in (29, 30))
    assert placed_and_per_tile(k29) == (1, 9) and placed_and_per_tile(k30) == (1, 1)
    assert not staging_wait_first(k29) and staging_wait_first(k30)
    before, after = (Counter(tile_counts(steady_tile(n, instance))) for n in (29, 30))
    assert after - before == Counter({"other": 1, "total": 1}) and not before - after
    assert sum("VOTEU.ALL" in line for line in steady_tile(30, instance)) == 1
    assert waits_and_products(30, instance) == waits_and_products(29, instance)


def tile_loops(sass: str) -> list[list[str]]:
    """Every loop around one tile's products (S's eight HGMMA and P V's eight): its steady path, in code order."""
    lines = addressed(sass)
    products = [address for address, line in lines if "HGMMA" in line]
    return [
        steady_lines([line for address, line in lines if start <= address <= end])
        for start, end in loops(sass)
        if sum(start <= address <= end for address in products) == PRODUCTS_PER_TILE
    ]


def without_addresses(lines: list[str]) -> list[str]:
    """Instructions as ptxas wrote them, less their addresses, branch targets and register numbers."""
    return [re.sub(r"\bR\d+\b|0x[0-9a-f]+", "", instruction(line)).strip() for line in lines]


REMOTE_ARRIVE = "SYNCS.ARRIVE.TRANS64.RED"  # an arrival on a barrier in the other block's shared memory


@pytest.mark.parametrize("instance", ALL_INSTANCES)
@pytest.mark.parametrize(
    "shared, parent, producer_local, uniform_slack",
    [("k29_kv_multicast", 29, True, 0), ("31", 30, False, 4)],
    ids=["k29_kv_multicast", "k31"],
)
def test_the_shared_kv_pairs_blocks_in_full_attention_only(instance, shared, parent, producer_local, uniform_slack):
    """k29_kv_multicast's and chapter 31's full-attention instances copy each K and V tile with one multicast (one
    plane, into both blocks of a pair) and hold the consumers' tile loop twice: alone, with their parent's products,
    waits and barriers in its order and no remote arrival; paired, with the same order and an arrival on the other
    block's free barrier beside each of the two local ones. Causal instances never pair: their tile loop is the
    parent's, instruction for instruction. k29_kv_multicast's producer keeps a few values in local memory
    (tests/test_build_cpu.py); chapter 31's, whose loop is compiled once paired and once alone, none
    (tests/test_inspect_cpu.py)."""
    from kernels.tools.ablations import chapter_or_variant

    sass = sass_text(chapter_or_variant(shared), instance)
    if instance.endswith("true>"):
        paths, parent_paths = tile_loops(sass), tile_loops(sass_text(by_number[parent], instance))
        assert "MULTICAST" not in sass and len(paths) == len(parent_paths) == 1
        assert without_addresses(paths[0]) == without_addresses(parent_paths[0])
        return
    assert_paired_and_alone(sass, parent, instance, producer_local, uniform_slack)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_causal_pairs_share_kv_in_every_instance(instance):
    """Chapter 32's instances, causal as well as full, hold chapter 31's paired and alone tile loops, both in chapter
    30's order, and its two multicast copies; its producer hands a pair's item to the other block with one STAS
    (st.async), and no instance keeps a value in local memory."""
    sass = sass_text(by_number[32], instance)
    assert len(re.findall(r"\bSTAS\b", sass)) == 1
    assert_paired_and_alone(sass, 30, instance, producer_local=False, uniform_slack=4)


def assert_paired_and_alone(sass: str, parent: int, instance: str, producer_local: bool, uniform_slack: int):
    """Two multicast copies, and the consumers' tile loop twice: alone, with the parent's products, waits and
    barriers in its order and its instructions but for a few of the uniform datapath's; paired, with the same order
    and an arrival on the other block's free barrier beside each of the two local ones. Local memory, where the
    producer keeps any, stays out of its loop over key tiles."""
    paths = tile_loops(sass)
    parent_events = [event for event in waits_and_products(parent, instance) if "arrive" not in event]
    assert sass.count("UTMALDG.4D.MULTICAST") == 2 and len(paths) == 2
    # The producer's few values in local memory, where it keeps any, stay out of its loop over key tiles too.
    lines = addressed(sass)
    copies = [address for address, line in lines if "UTMALDG.4D.MULTICAST" in line]
    key_tile_loop = min(
        (loop for loop in loops(sass) if loop[0] <= min(copies) and max(copies) <= loop[1]),
        key=lambda loop: loop[1] - loop[0],
    )
    local = [address for address, line in lines if re.search(r"\b(LDL|STL)\b", line)]
    assert bool(local) == producer_local and not any(
        key_tile_loop[0] <= address <= key_tile_loop[1] for address in local
    )
    assert not any(re.search(r"\b(LDL|STL)\b", line) for path in paths for line in path)
    alone, paired = sorted(paths, key=lambda path: sum(REMOTE_ARRIVE in line for line in path))
    assert [sum(REMOTE_ARRIVE in line for line in path) for path in (alone, paired)] == [0, 2]
    for path in (alone, paired):
        events = [event for event in without_exponentials(path) if "arrive" not in event]
        assert events == parent_events
    # Alone, the same instructions as the parent's but for the uniform datapath's, where ptxas may build the
    # descriptors (their start field masked to the shared-memory offset) a few instructions differently.
    alone_counts, parent_counts = tile_counts(alone), tile_counts(steady_tile(parent, instance))
    assert {row: n for row, n in alone_counts.items() if row not in (UNIFORM, "total")} == {
        row: n for row, n in parent_counts.items() if row not in (UNIFORM, "total")
    }
    assert alone_counts[UNIFORM] <= parent_counts[UNIFORM] + uniform_slack


TURN_TAKEN = re.compile(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x100")  # a consumer warpgroup waits for its turn
TURN_PASSED = re.compile(r"BAR\.ARV R\d+, 0x100")  # and hands it to the other


def products_per_turn(sass: str) -> list[int]:
    """The HGMMA a consumer warpgroup issues in each of its turns on the tensor cores, in code order."""
    counts, count = [], None
    for line in sass.splitlines():
        if TURN_TAKEN.search(line):
            count = 0
        elif TURN_PASSED.search(line) and count is not None:
            counts.append(count)
            count = None
        elif count is not None and "HGMMA" in line:
            count += 1
    return counts


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_next_query_tiles_first_s_goes_with_the_last_p_v(instance):
    """k29_next_query_tile's consumers take four turns on the tensor cores where kernel 29's take three: a block's
    first S alone, the tile loop's S and P V (kernel 29's loop: its products, waits and barriers in the same order),
    a query tile's last P V with the next one's first S, whose wait lets that P V run on (<= 1), and the block's last
    P V alone. (That ptxas serializes none of them, tests/test_build_cpu.py checks for every kernel.)"""
    from kernels.tools.ablations import variant_named

    variant = variant_named("k29_next_query_tile")
    sass, sass29 = sass_text(variant, instance), sass_text(by_number[29], instance)
    assert products_per_turn(sass29) == [8, 16, 8]
    assert products_per_turn(sass) == [8, 16, 16, 8]
    assert len(tile_loops(sass)) == len(tile_loops(sass29)) == 1
    assert waits_and_products("k29_next_query_tile", instance) == waits_and_products(29, instance)
    lines = sass.splitlines()
    seam = [i for i, line in enumerate(lines) if TURN_PASSED.search(line)][2]
    first_wait = next(line for line in lines[seam:] if "WARPGROUP.DEPBAR" in line)
    assert instruction(first_wait) == "WARPGROUP.DEPBAR.LE gsb0, 0x1"


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_next_first_s_goes_out_before_o(instance):
    """k30_o_under_next_s takes kernel 30's turns (a block's first S, the tile loop's S and P V, the last P V), with
    kernel 30's loop of products, waits and barriers, and issues 8 more HGMMA outside the turns: the next query
    tile's first S, after the last P V. The first wait after them lets that S run on (<= 1), and O is staged in
    shared memory (STS) only after that wait."""
    from kernels.tools.ablations import variant_named

    variant = variant_named("k30_o_under_next_s")
    sass, sass30 = sass_text(variant, instance), sass_text(by_number[30], instance)
    assert products_per_turn(sass) == products_per_turn(sass30) == [8, 16, 8]
    assert sass.count("HGMMA") == sass30.count("HGMMA") + 8
    assert waits_and_products("k30_o_under_next_s", instance) == waits_and_products(30, instance)
    lines = sass.splitlines()
    last_p_v = [i for i, line in enumerate(lines) if TURN_PASSED.search(line)][2]
    next_s = [i for i, line in enumerate(lines) if i > last_p_v and "HGMMA" in line]
    assert len(next_s) == 8
    wait = next(i for i in range(next_s[-1], len(lines)) if "WARPGROUP.DEPBAR" in lines[i])
    assert instruction(lines[wait]) == "WARPGROUP.DEPBAR.LE gsb0, 0x1"
    assert not any(" STS" in line for line in lines[last_p_v:wait])
    assert any(" STS" in line for line in lines[wait:])


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_q_in_registers_feeds_every_s_from_registers(instance):
    """k30_q_in_registers loads Q's A fragments with eight LDSM per query tile, none in the tile loop, and every S
    HGMMA takes its A operand from those registers (kernel 30's read both operands through descriptors): in the steady
    tile, the eight S HGMMA name a register before their descriptor, P V's eight still do, and no HGMMA reads two
    descriptors. Its products, waits and barriers keep kernel 30's order, and no value it keeps in local memory
    (tests/test_build_cpu.py) is read or written in the tile loop."""
    from kernels.tools.ablations import variant_named

    sass = sass_text(variant_named("k30_q_in_registers"), instance)
    assert "LDSM" not in sass_text(by_number[30], instance)
    assert sass.count("LDSM.16.M88.4") == 8
    steady = steady_tile("k30_q_in_registers", instance)
    products = [instruction(line) for line in steady if "HGMMA" in line]
    register_a = re.compile(r"^HGMMA\.64x128x16\.F32(\.BF16)? R\d+, R\d+, gdesc\[")
    assert len(products) == 16 and all(register_a.match(product) for product in products), products
    assert sum(".tnspB" in product for product in products) == 8
    assert not any(re.search(r"\b(LDSM|LDL|STL)\b", line) for line in steady)
    assert waits_and_products("k30_q_in_registers", instance) == waits_and_products(30, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_early_exponentials_run_under_p_v(instance):
    """With Q in registers, ptxas writes the exponentials straight into P's registers, which P V reads until its
    wait: between the wait for S and the wait for P V only the two exponentials of the rescale factors run. With the
    first 16 placed above the fence by the source, those 16 and the two run there, Q in shared memory or in
    registers. Every variant keeps the tile's 66 and kernel 30's order of products, waits and barriers."""
    from kernels.tools.ablations import variant_named

    names = ("k30_q_in_registers", "k30_early_exponentials", "k30_q_early_exponentials")
    split = [between_the_waits(variant_named(name), instance) for name in names]
    exponentials = [total(between, "MUFU.EX2") for between, _ in split]
    assert exponentials[0] == 2 and min(exponentials[1:]) >= 2 + 16, exponentials
    assert all(total(between, "MUFU.EX2") + total(after, "MUFU.EX2") == 66 for between, after in split)
    assert all(waits_and_products(name, instance) == waits_and_products(30, instance) for name in names)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_tail_split_merges_its_pieces_outside_the_tile(instance):
    """k29_tail_split's pieces count themselves done with one more atomic than kernel 29 (the work counter's ask is
    the other) and learn which is the last at one BAR.RED.OR; its steady tile path counts kernel 29's instructions, with
    the same products, waits and barriers in the same order, and no descriptor moved into a uniform register (R2UR)
    in it: a decision the compiler cannot see is warp-uniform, before the epilogue, costs that."""
    from kernels.tools.ablations import variant_named

    k29, split = (opcodes(sass_text(kernel, instance)) for kernel in (by_number[29], variant_named("k29_tail_split")))
    assert k29["ATOMG.E.ADD.STRONG.GPU"] == 1 and split["ATOMG.E.ADD.STRONG.GPU"] == 2
    assert k29["BAR.RED.OR.DEFER_BLOCKING"] == 0 and split["BAR.RED.OR.DEFER_BLOCKING"] == 1
    assert tile_counts(steady_tile("k29_tail_split", instance)) == tile_counts(steady_tile(29, instance))
    assert not any("R2UR" in line for line in steady_tile("k29_tail_split", instance))
    assert waits_and_products("k29_tail_split", instance) == waits_and_products(29, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_rescale_vote_skips_os_multiplies_in_the_steady_tile(instance):
    """k29_lazy_rescale's steady tile path, where the warp's vote finds no max moved, is kernel 29's less O's 64 FMUL,
    with one VOTE.ANY more, and the same products, waits and barriers in the same order."""
    k29, lazy = (tile_counts(steady_tile(name, instance)) for name in (29, "k29_lazy_rescale"))
    assert k29["FMUL"] - lazy["FMUL"] == 64
    assert sum("VOTE.ANY" in line for line in steady_tile("k29_lazy_rescale", instance)) == 1
    assert waits_and_products("k29_lazy_rescale", instance) == waits_and_products(29, instance)


@pytest.mark.parametrize("instance", ALL_INSTANCES)
def test_the_half_tile_keeps_its_products_in_flight(instance):
    """k29_half_tile's causal instances hold the eight m64n64 products of a half-wide S, its full-attention instances
    none; and in neither does ptxas serialize the products (each followed by its own wait, as it did with the choice
    of shape inside the loop): the steady tile path has kernel 29's products, waits and barriers in the same order, and
    no access to local memory (the causal instances keep a few setup values there, tests/test_build_cpu.py)."""
    from kernels.tools.ablations import chapter_or_variant

    half_products = sass_text(chapter_or_variant("k29_half_tile"), instance).count("HGMMA.64x64x16.F32")
    assert half_products == (8 if instance.endswith("true>") else 0)
    assert waits_and_products("k29_half_tile", instance) == waits_and_products(29, instance)
    assert not any("LDL" in line or "STL" in line for line in steady_tile("k29_half_tile", instance))
