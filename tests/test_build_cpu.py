"""The kernels as built, without a GPU: they compile, fit in registers, and their SASS shows each idea."""

import re

import pytest

from kernels import HEAD_DIM, build
from kernels.build import ALL_INSTANCES, compile_nvcc, compile_nvrtc, ptxas_resources
from kernels.tools.inspection import sass_counts
from kernels.tools.sass import resource_usage
from tests.helpers import (
    CHAPTERS,
    deepest_wait,
    requires_nvcc,
    sass_text,
    source_constant,
    tile_loop,
    total,
)


def test_chapters_are_numbered_in_order():
    """Folders k01_* to kNN_*, one per number, each with a title and its kernel."""
    assert [c.number for c in CHAPTERS] == list(range(1, len(CHAPTERS) + 1))
    assert all(c.name.startswith(f"k{c.number:02d}_") and c.title and c.source.exists() for c in CHAPTERS)


@requires_nvcc
def test_compiles_with_nvcc_without_spills(chapter_or_variant):
    """For sm_80 and sm_90, or for the one architecture a kernel is written for (wgmma: sm_90a)."""
    for arch in chapter_or_variant.kernel.build_archs():
        resources = ptxas_resources(compile_nvcc(chapter_or_variant.source, arch).log)
        assert len(resources) == len(ALL_INSTANCES)
        for name, used in resources.items():
            assert used.spill_stores == used.spill_loads == used.stack_frame == 0, f"{name} spills at {arch}: {used}"
            assert used.registers <= 255


# Kernel 6's addressing with 128-key tiles needs every register a thread can have: the room chapter 7 makes.
AT_THE_REGISTER_LIMIT = ("k06_kv128",)


def test_compiles_with_nvrtc_as_loaded(chapter_or_variant):
    """The exact path the loader takes at run time: NVRTC, every instance, for every architecture it is built for,
    no spills. Resources are read from the cubin itself: NVRTC 13.0 leaves the ptxas report out of its log."""
    for arch in chapter_or_variant.kernel.build_archs():
        cubin = compile_nvrtc(chapter_or_variant.source, arch)
        assert set(cubin.lowered_names) == set(ALL_INSTANCES)
        usage = resource_usage(cubin)
        assert set(usage) == set(cubin.lowered_names.values())
        for name, used in usage.items():
            assert used["REG"] <= 255
            if chapter_or_variant.name in AT_THE_REGISTER_LIMIT:
                continue  # at 255 registers: whether a few bytes spill depends on the NVRTC version
            assert used["STACK"] == used["LOCAL"] == 0, f"{name} uses local memory at {arch}: {used}"


def test_build_architectures(sass):
    """The chapters whose SASS holds wgmma (HGMMA) are 9 on, built for Hopper's sm_90a alone; the others run on
    Ampere and Hopper and are built for both."""
    wgmma = [c for c in CHAPTERS if total(sass[c.number], "HGMMA") > 0]
    assert [c.number for c in wgmma] == list(range(9, len(CHAPTERS) + 1))
    assert all(c.kernel.build_archs() == ("sm_90a",) for c in wgmma)
    assert all(c.kernel.build_archs() == ("sm_80", "sm_90") for c in CHAPTERS if c not in wgmma)
    assert wgmma[0].kernel.build_arch("sm_90") == "sm_90a"
    assert wgmma[0].kernel.runs_on("sm_90") and not wgmma[0].kernel.runs_on("sm_80")
    ampere = [c for c in CHAPTERS if c not in wgmma]
    assert all(c.kernel.runs_on("sm_80") and c.kernel.build_arch("sm_80") == "sm_80" for c in ampere)
    with pytest.raises(ValueError, match="runs on sm_90 GPUs only; this is sm_80"):
        wgmma[0].kernel.build_arch("sm_80")


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


def rounds_shared_memory_up_to_1kb(sass: str) -> bool:
    """Whether the kernel computes (-address) % 1024 of a shared address, the bytes to skip to a 1 KB boundary:
    a LOP3 (or its uniform form) that keeps an address's low ten bits."""
    return re.search(r"\bU?LOP3\.LUT U?R\d+, U?R\d+, 0x3ff, U?RZ, 0xc0,", sass) is not None


def test_swizzled_absolute_addresses_get_an_aligned_start(chapter_or_variant):
    """A kernel whose swizzle depends on where shared memory starts rounds that start up to 1 KB itself, in its SASS
    (an __align__ would let the compiler assume the rounding away), and only that kernel's loader reserves the 1 KB
    it may skip (SMEM_ALIGN)."""
    rounds = rounds_shared_memory_up_to_1kb(sass_text(chapter_or_variant))
    assert source_constant(chapter_or_variant, "SMEM_ALIGN") == (1024 if rounds else None)


def test_the_chapters_that_need_aligned_tiles(sass_texts):
    """Every chapter from 7 on: 7 and 8 XOR absolute shared addresses, 9 on let wgmma and TMA swizzle them."""
    rounding = [number for number, text in sass_texts.items() if rounds_shared_memory_up_to_1kb(text)]
    assert rounding == list(range(7, len(CHAPTERS) + 1))


def test_chapter5_keeps_the_next_tile_in_flight(sass_texts):
    """Kernel 4 waits with at most one group (V) in flight; kernel 5 also keeps tile j + 1's K and V going."""
    assert deepest_wait(sass_texts[4]) == 1
    assert deepest_wait(sass_texts[5]) == 2


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


# ---------------------------------------------------------------------------------------------------
# The compile cache: cubins kept on disk, shared by every process, keyed by all that decides them
# ---------------------------------------------------------------------------------------------------

TINY = "template <typename T> __global__ void tiny(T* out) { out[threadIdx.x] = T(1); }\n"
TINY_INSTANCES = ("tiny<int>",)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, and a tiny kernel's source in another: (cache folder, source path)."""
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path / "cache")
    source = tmp_path / "kernel" / "tiny.cu"
    source.parent.mkdir()
    source.write_text(TINY)
    return tmp_path / "cache", source


def counting(monkeypatch, name: str) -> list:
    """Record each call of build's ``name`` (run_nvrtc or run_nvcc), which still compiles."""
    calls, compile_for_real = [], getattr(build, name)

    def compile_and_count(*args):
        calls.append(args)
        return compile_for_real(*args)

    monkeypatch.setattr(build, name, compile_and_count)
    return calls


def compile_uncached_in_memory(source, arch):
    """compile_nvrtc past its in-memory cache, as a new process would call it."""
    return build.compile_nvrtc.__wrapped__(source, arch, TINY_INSTANCES)


def test_a_second_compile_reads_the_cubin_from_disk_without_nvrtc(cache, monkeypatch):
    folder, source = cache
    calls = counting(monkeypatch, "run_nvrtc")
    first = compile_uncached_in_memory(source, "sm_80")
    assert len(calls) == 1 and len(list((folder / "nvrtc").glob("*.json"))) == 1
    assert set(first.lowered_names) == set(TINY_INSTANCES) and first.image
    assert compile_uncached_in_memory(source, "sm_80") == first  # the same image, names and log
    assert len(calls) == 1


def test_a_changed_source_arch_or_option_compiles_again(cache, monkeypatch):
    folder, source = cache
    calls = counting(monkeypatch, "run_nvrtc")
    first = compile_uncached_in_memory(source, "sm_80")
    source.write_text(TINY.replace("T(1)", "T(2)"))
    assert compile_uncached_in_memory(source, "sm_80").image != first.image
    compile_uncached_in_memory(source, "sm_90")
    monkeypatch.setattr(build, "NVRTC_OPTIONS", (*build.NVRTC_OPTIONS, "-DUNUSED=1"))
    compile_uncached_in_memory(source, "sm_90")
    assert len(calls) == 4 and len(list((folder / "nvrtc").glob("*.json"))) == 4


def test_a_torn_cache_file_is_compiled_again(cache, monkeypatch):
    folder, source = cache
    first = compile_uncached_in_memory(source, "sm_80")
    (written,) = (folder / "nvrtc").glob("*.json")
    written.write_text(written.read_text()[:100])  # as if the writer had died halfway (it writes, then renames)
    calls = counting(monkeypatch, "run_nvrtc")
    assert compile_uncached_in_memory(source, "sm_80").image == first.image  # the log differs: ptxas's times
    assert len(calls) == 1


def test_the_key_changes_with_everything_that_decides_the_cubin(cache, monkeypatch):
    """Source text, architecture, instances, NVRTC's version, its options and the CUDA headers."""
    _, source = cache
    keys = {build.nvrtc_key(source, "sm_80", TINY_INSTANCES), build.nvrtc_key(source, "sm_90", TINY_INSTANCES),
            build.nvrtc_key(source, "sm_80", ("tiny<float>",))}
    monkeypatch.setattr(build, "nvrtc_version", lambda: "12.0")
    keys.add(build.nvrtc_key(source, "sm_80", TINY_INSTANCES))
    monkeypatch.setattr(build, "headers_digest", lambda: "other headers")
    keys.add(build.nvrtc_key(source, "sm_80", TINY_INSTANCES))
    monkeypatch.setattr(build, "NVRTC_OPTIONS", ("-std=c++20",))
    keys.add(build.nvrtc_key(source, "sm_80", TINY_INSTANCES))
    source.write_text(TINY + "// a comment\n")
    keys.add(build.nvrtc_key(source, "sm_80", TINY_INSTANCES))
    assert len(keys) == 7
    assert build.cache_key("ab", "c") != build.cache_key("a", "bc")


@requires_nvcc
def test_nvcc_builds_are_kept_on_disk_too(cache, monkeypatch):
    """Keyed by the kernel's text, nvcc's version and its command line."""
    _, source = cache
    source.write_text("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"
                      "template <typename T, bool CAUSAL> __global__ void flash_attention(T* out) { out[0] = T(); }\n")
    calls = counting(monkeypatch, "run_nvcc")
    first = compile_nvcc(source, "sm_80")
    assert compile_nvcc(source, "sm_80") == first and len(calls) == 1
    monkeypatch.setattr(build, "nvcc_version", lambda: "another nvcc")
    assert compile_nvcc(source, "sm_80").image == first.image and len(calls) == 2
