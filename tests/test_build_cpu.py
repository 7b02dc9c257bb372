"""The kernels as built, without a GPU: they compile, fit in registers, and their SASS shows each idea."""

import re
import shutil
from collections import Counter

import pytest

from kernels import HEAD_DIM
from kernels.build import ALL_INSTANCES, compile_nvcc, compile_nvrtc, ptxas_resources
from kernels.tools.inspection import sass_counts
from kernels.tools.sass import disassemble, opcodes, resource_usage
from tests.conftest import CHAPTERS

by_number = {c.number: c for c in CHAPTERS}
requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def test_chapters_are_numbered_in_order():
    assert [c.number for c in CHAPTERS] == list(range(1, len(CHAPTERS) + 1))
    assert [c.name for c in CHAPTERS][:5] == [
        "k01_naive",
        "k02_cp_async",
        "k03_ldmatrix",
        "k04_swizzle",
        "k05_pipelining",
    ]
    assert all(c.title and c.source.exists() for c in CHAPTERS)


@requires_nvcc
def test_compiles_with_nvcc_without_spills(chapter):
    """For sm_80 and sm_90, or for the one architecture a chapter is written for (wgmma: sm_90a)."""
    for arch in chapter.kernel.build_archs():
        resources = ptxas_resources(compile_nvcc(chapter.source, arch).log)
        assert len(resources) == len(ALL_INSTANCES)
        for name, used in resources.items():
            assert used.spill_stores == used.spill_loads == used.stack_frame == 0, f"{name} spills at {arch}: {used}"
            assert used.registers <= 255


def test_build_architectures():
    """Every chapter up to the wgmma ones (9 on) runs on Ampere and Hopper; wgmma exists on Hopper alone."""
    wgmma = [c for c in CHAPTERS if "wgmma" in c.source.read_text()]
    assert [c.number for c in wgmma] == list(range(9, len(CHAPTERS) + 1))
    assert all(c.kernel.build_archs() == ("sm_90a",) for c in wgmma)
    assert all(c.kernel.build_archs() == ("sm_80", "sm_90") for c in CHAPTERS if c not in wgmma)
    assert wgmma[0].kernel.build_arch("sm_90") == "sm_90a"
    assert wgmma[0].kernel.runs_on("sm_90") and not wgmma[0].kernel.runs_on("sm_80")
    ampere = [c for c in CHAPTERS if c not in wgmma]
    assert all(c.kernel.runs_on("sm_80") and c.kernel.build_arch("sm_80") == "sm_80" for c in ampere)
    with pytest.raises(ValueError, match="runs on sm_90 GPUs only; this is sm_80"):
        wgmma[0].kernel.build_arch("sm_80")


def test_compiles_with_nvrtc_as_loaded(chapter):
    """The exact path the loader takes at run time: NVRTC, every instance, no spills at sm_90.

    Resources are read from the cubin itself: NVRTC 13.0 leaves the ptxas report out of its log.
    """
    cubin = compile_nvrtc(chapter.source, chapter.kernel.build_arch("sm_90"))
    assert set(cubin.lowered_names) == set(ALL_INSTANCES)
    usage = resource_usage(cubin)
    assert set(usage) == set(cubin.lowered_names.values())
    for name, used in usage.items():
        assert used["STACK"] == used["LOCAL"] == 0, f"{name} uses local memory (spills): {used}"
        assert used["REG"] <= 255


def source_constant(chapter, name):
    """A kernel's ``constexpr int``, a number or an expression of its other constants (1 + STAGES); None if absent."""
    definitions = dict(re.findall(r"constexpr int (\w+) = ([\w\s()+*/-]+);", chapter.source.read_text()))
    if name not in definitions:
        return None
    others = {other: source_constant(chapter, other) for other in re.findall(r"[A-Z_]+", definitions[name])}
    return eval(definitions[name].replace("/", "//"), {"__builtins__": {}}, others)  # C++ integer division


def test_loader_launch_shape_matches_kernel_constants(chapter):
    """Threads (the N_WARPS that compute, and from chapter 12 a warpgroup that only copies), shared memory (tiles,
    8-byte mbarriers from chapter 11 on, alignment slack) and, for TMA, the box of one copy: one plane of a tile."""
    block_q, block_kv = source_constant(chapter, "BLOCK_Q"), source_constant(chapter, "BLOCK_KV")
    n_warps, stages = source_constant(chapter, "N_WARPS"), source_constant(chapter, "STAGES") or 1
    producer_warps = source_constant(chapter, "PRODUCER_WARPS") or 0
    barriers = source_constant(chapter, "N_BARRIERS") or 0
    slack = source_constant(chapter, "SMEM_ALIGN") or 0  # bytes the kernel may skip to align its tiles
    q_tiles = source_constant(chapter, "Q_TILES") or 1  # from chapter 15: two Q buffers and O's
    assert source_constant(chapter, "HEAD_DIM") == HEAD_DIM
    assert chapter.kernel.block_q == block_q
    assert chapter.kernel.n_threads == (n_warps + producer_warps) * 32
    tiles = q_tiles * block_q + 2 * stages * block_kv  # rows of HEAD_DIM 16-bit values
    assert chapter.kernel.smem_bytes == tiles * HEAD_DIM * 2 + barriers * 8 + slack
    takes_tensor_maps = "__grid_constant__ TensorMap" in chapter.source.read_text()
    expected_box = (block_kv, source_constant(chapter, "PLANE")) if takes_tensor_maps else None
    assert chapter.kernel.tensor_map_box == expected_box


def needs_aligned_tiles(chapter) -> bool:
    """Whether the kernel's swizzle depends on where shared memory starts: an XOR of absolute addresses, or wgmma."""
    source = chapter.source.read_text()
    return re.search(r"_address \^ ", source) is not None or "wgmma.mma_async" in source


def test_swizzled_absolute_addresses_get_an_aligned_start(chapter):
    """A kernel that XORs absolute shared addresses (7, 8) or lets wgmma and TMA swizzle them (9-12) rounds its
    shared-memory start up to 1 KB itself, and its loader reserves the 1 KB that may skip; the others pay nothing."""
    source = chapter.source.read_text()
    if needs_aligned_tiles(chapter):
        assert source_constant(chapter, "SMEM_ALIGN") == 1024
        assert "return smem + (SMEM_ALIGN - address % SMEM_ALIGN) % SMEM_ALIGN;" in source
        assert re.search(r"T\* q_(smem|buffers) = reinterpret_cast<T\*>\(aligned_smem\(smem\)\);", source)
        assert "__align__(1024)" not in source  # it would let the compiler assume the rounding away
    else:
        assert source_constant(chapter, "SMEM_ALIGN") is None and "aligned_smem" not in source


def test_the_chapters_that_need_aligned_tiles():
    """Every chapter from 7 on."""
    assert [c.number for c in CHAPTERS if needs_aligned_tiles(c)] == list(range(7, len(CHAPTERS) + 1))


def sass_text(chapter) -> str:
    """SASS of the bf16, non-causal instance for an sm_90 GPU."""
    cubin = compile_nvrtc(chapter.source, chapter.kernel.build_arch("sm_90"))
    return disassemble(cubin)[cubin.lowered_names[ALL_INSTANCES[0]]]


def total(counts: Counter, prefix: str) -> int:
    return sum(n for op, n in counts.items() if op == prefix or op.startswith(prefix + "."))


@pytest.fixture(scope="module")
def sass_texts():
    return {c.number: sass_text(c) for c in CHAPTERS}


@pytest.fixture(scope="module")
def sass(sass_texts):
    return {number: opcodes(text) for number, text in sass_texts.items()}


def deepest_wait(sass: str) -> int:
    """The largest N of cp.async.wait_group N (SASS: DEPBAR.LE SB0, N): how many copy groups stay in flight."""
    return max(int(n, 16) for n in re.findall(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", sass))


def test_chapter5_keeps_the_next_tile_in_flight(sass_texts):
    """Kernel 4 waits with at most one group (V) in flight; kernel 5 also keeps tile j + 1's K and V going."""
    assert deepest_wait(sass_texts[4]) == 1
    assert deepest_wait(sass_texts[5]) == 2


BRANCH = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?BRA(?:\.\w+)* (0x[0-9a-f]+)")
ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")


def tile_loop(sass: str) -> Counter:
    """Opcodes of the tile loop: from the target of the longest backward branch to that branch."""
    loops = [(int(target, 16), int(at, 16)) for at, target in BRANCH.findall(sass) if int(target, 16) < int(at, 16)]
    start, end = max(loops, key=lambda loop: loop[1] - loop[0])
    addressed = [(int(at.group(1), 16), line) for line in sass.splitlines() if (at := ADDRESS.search(line))]
    return opcodes("\n".join(line for address, line in addressed if start <= address <= end))


def loop_integer_alu(sass: str) -> int:
    """The tile loop's integer ALU instructions, counted as `runner.py inspect` counts them."""
    return sass_counts(tile_loop(sass))["integer ALU"]


def test_chapter5_stages_cost_no_address_arithmetic(sass_texts):
    """The stage pointers keep the stage out of the swizzled addresses: the loop does no more integer work
    than kernel 4's single-buffer loop (with a stage index, tile % 2, it did 25% more)."""
    assert total(tile_loop(sass_texts[5]), "HMMA") == total(tile_loop(sass_texts[4]), "HMMA") == 128
    assert loop_integer_alu(sass_texts[5]) <= 1.05 * loop_integer_alu(sass_texts[4])


def test_chapter6_folds_the_scale_into_the_exponent(sass):
    """Same number of exponentials, about a hundred fewer multiplies (the log2(e) and scale FMULs)."""
    assert total(sass[6], "MUFU") == total(sass[5], "MUFU")
    assert total(sass[6], "FMUL") < total(sass[5], "FMUL") - 64


def test_chapter7_spends_fewer_integer_instructions(sass, sass_texts):
    """One XOR per column block instead of a LOP3 and a LEA from a per-block register."""
    assert loop_integer_alu(sass_texts[7]) < 0.95 * loop_integer_alu(sass_texts[6])
    assert total(sass[7], "LDSM") == total(sass[6], "LDSM")


def test_chapter8_does_twice_the_math_per_loop_step(sass):
    assert total(sass[8], "HMMA") == 2 * total(sass[7], "HMMA")
