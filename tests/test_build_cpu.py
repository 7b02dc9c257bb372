"""The kernels as built, without a GPU: they compile, fit in registers, and their SASS shows each idea."""

import hashlib
import re
from pathlib import Path

import pytest

from kernels import HEAD_DIM, build
from kernels.build import ALL_INSTANCES, compile_nvcc, compile_nvrtc, ptxas_resources
from kernels.launch import DECODE_INSTANCES, kernel_constants
from kernels.tools.inspection import sass_counts
from kernels.tools.sass import cuobjdump, resource_usage
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


# Measured variants that keep a few values in local memory, reloaded once per query tile and never in a loop over
# tiles (tests/test_hopper_cpu.py): setup values (docs/less_per_tile.md), and values of the producer's work list,
# whose 24 registers the pairs outgrow (docs/kv_multicast.md). At most this many bytes of stack and of spill stores and
# loads, per instance.
SPILLS_OUTSIDE_THE_LOOP = {
    "k29_half_tile": 96,
    "k29_kv_multicast": 16,
    "k30_q_in_registers": 48,
    "k30_q_early_exponentials": 48,
}


def spill_allowed(kernel: str) -> int:
    """The local memory a kernel may use: none, but for a variant named above."""
    return SPILLS_OUTSIDE_THE_LOOP.get(kernel, 0)


# ptxas's warning that it serialized a kernel's wgmma (each product then waits for the one before): "Potential
# Performance Loss: wgmma.mma_async instructions are serialized due to ...", e.g. for a product issued under a branch.
WGMMA_SERIALIZED = "C7514"


@requires_nvcc
def test_compiles_with_nvcc_without_spills(chapter_or_variant):
    """For sm_80 and sm_90, or for the one architecture a kernel is written for (wgmma: sm_90a), where ptxas keeps
    every product asynchronous."""
    for arch in chapter_or_variant.kernel.build_archs():
        log = compile_nvcc(chapter_or_variant.source, arch).log
        assert WGMMA_SERIALIZED not in log, f"{chapter_or_variant.name}: ptxas serialized its wgmma at {arch}"
        resources = ptxas_resources(log)
        assert len(resources) == len(ALL_INSTANCES)
        for name, used in resources.items():
            allowed = spill_allowed(chapter_or_variant.name)
            assert max(used.spill_stores, used.spill_loads, used.stack_frame) <= allowed, (
                f"{name} spills at {arch}: {used}"
            )
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
            allowed = spill_allowed(chapter_or_variant.name)
            assert used["STACK"] <= allowed and used["LOCAL"] == 0, f"{name} uses local memory at {arch}: {used}"


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


def test_constants_are_read_with_cpp_arithmetic(tmp_path):
    """Integer division truncates toward zero and % keeps the dividend's sign, as in C++; NVRTC agrees."""
    source = tmp_path / "k00_probe" / "flash_attention.cu"
    source.parent.mkdir()
    source.write_text(
        "constexpr int A = -7 / 2, B = -7 % 2;  // a comment; with a semicolon\n"
        "constexpr int C = (A + 1) * 3 <<\n    2;  // wrapped over two lines\n"
        "  constexpr int NOT_AT_FILE_SCOPE = 1;\n"
    )
    constants = kernel_constants(source)
    assert constants == {"A": -3, "B": -1, "C": -24}
    asserts = "".join(f'static_assert({name} == {value}, "{name}");\n' for name, value in constants.items())
    source.write_text(source.read_text() + asserts)
    compile_nvrtc(source, "sm_80", instances=())  # a BuildError if C++ computes another value


@pytest.mark.parametrize("line", ["constexpr int A = sizeof(int);", "constexpr int A = B + 1;", "constexpr int A;"])
def test_a_constant_the_runtime_cannot_read_is_named(tmp_path, line):
    source = tmp_path / "flash_attention.cu"
    source.write_text(line + "\n")
    with pytest.raises(ValueError, match="cannot read constexpr int 'A"):
        kernel_constants(source)


def assert_constants_read_as_compiled(chapter, tmp_path) -> None:
    """The launch shape comes from the .cu: NVRTC, compiling the kernel, asserts each value the runtime read."""
    constants = kernel_constants(chapter.source)
    assert constants["HEAD_DIM"] == HEAD_DIM
    assert (chapter.kernel.block_q, chapter.kernel.n_threads, chapter.kernel.smem_bytes) == (
        constants["BLOCK_Q"],
        constants["N_THREADS"],
        constants["SMEM_BYTES"],
    )
    probe = tmp_path / chapter.name / "flash_attention.cu"
    probe.parent.mkdir()
    asserts = "".join(f'static_assert({name} == {value}, "{name}");\n' for name, value in constants.items())
    probe.write_text(chapter.source.read_text() + "\n" + asserts)
    compile_nvrtc(probe, chapter.kernel.build_arch("sm_90"), instances=())


def test_the_runtime_reads_the_kernels_constants_as_the_compiler_does(chapter_or_variant, tmp_path):
    assert_constants_read_as_compiled(chapter_or_variant, tmp_path)


# "Index : 0x0  Ordinal : 0x9  Offset : 0x1cc  Size : 0x4": the tenth parameter is 4 bytes
PARAMETER = re.compile(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*0x[0-9a-f]+\s+Size\s*:\s*(0x[0-9a-f]+)")


def kernel_attributes(cubin) -> dict[str, dict[str, list[int]]]:
    """Per kernel instance (mangled name), from the cubin's .nv.info: the block size its __launch_bounds__ fixes
    ("max threads", x y z) and its parameters' sizes in bytes, in order ("parameters")."""
    attributes = {}
    for section in re.split(r"^(?=\.\S)", cuobjdump(cubin, "-elf"), flags=re.MULTILINE):
        if name := re.match(r"\.nv\.info\.(\S+)\n", section):
            # A kernel without __launch_bounds__ (combine_splits) has no MAX_THREADS: None.
            threads = re.search(r"EIATTR_MAX_THREADS\s+Format:\s+\w+\s+Value:\s+([^\n]+)", section)
            parameters = PARAMETER.findall(section)
            attributes[name.group(1)] = {
                "max threads": [int(n, 16) for n in threads.group(1).split()] if threads else None,
                "parameters": [int(size, 16) for _, size in sorted(parameters, key=lambda p: int(p[0], 16))],
            }
    return attributes


def launch_parameter_sizes(kernel) -> list[int]:
    """What ``AttentionKernel.__call__`` passes: q, k and v (pointers, or 128-byte tensor maps), out, the four
    lengths and head counts, the softmax scale, for a persistent kernel the batch size, and for a split-KV kernel
    its split buffers and lengths after out, and the split count; for a dynamic schedule its work counter, and for a
    split tail the tail's two sizes and two scratch buffers last. With an O tensor map, a fourth map follows v's."""
    inputs = [128 if kernel.tensor_map_box else 8] * (4 if kernel.o_box_rows else 3)
    outputs = [8, 8, 8, 8] if kernel.kv_cache else [8]  # o; and o_partial, lse, seq_lens_k
    scalars = [4, 4, 4, 4, 4, *([4] if kernel.persistent else []), *([4] if kernel.kv_cache else [])]
    tail = [4, 4, 8, 8] if kernel.split_tail else []
    return [*inputs, *outputs, *scalars, *([8] if kernel.dynamic_schedule else []), *tail]


def assert_binary_takes_the_launch(chapter) -> None:
    """Every instance is compiled for blocks of exactly the threads the launch asks for (__launch_bounds__ of
    N_THREADS), and takes the arguments the launch passes, tensor maps and the batch size included."""
    for arch in chapter.kernel.build_archs():
        attributes = kernel_attributes(compile_nvrtc(chapter.source, arch))
        assert len(attributes) == len(ALL_INSTANCES)
        for name, attribute in attributes.items():
            assert attribute["max threads"] == [chapter.kernel.n_threads, 1, 1], f"{name} at {arch}"
            assert attribute["parameters"] == launch_parameter_sizes(chapter.kernel), f"{name} at {arch}"


def test_the_binary_takes_the_launch_the_runtime_makes(chapter_or_variant):
    assert_binary_takes_the_launch(chapter_or_variant)


# The most dynamic shared memory a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin): A100, H100/H200.
MAX_DYNAMIC_SMEM = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}


def test_shared_memory_fits_the_gpus_it_is_built_for(chapter_or_variant):
    for arch in chapter_or_variant.kernel.build_archs():
        assert chapter_or_variant.kernel.smem_bytes <= MAX_DYNAMIC_SMEM[arch.removesuffix("a")], arch


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


def test_the_cubin_file_appears_whole_for_a_process_loading_it_at_the_same_time(cache, monkeypatch):
    """Test processes load a new kernel at once: the image is written under another name, then renamed."""
    folder, source = cache
    cubin = compile_uncached_in_memory(source, "sm_80")
    final = folder / f"{hashlib.sha256(cubin.image).hexdigest()[:24]}.cubin"
    seen_while_writing, write_for_real = [], Path.write_bytes

    def write_and_look(path, data):
        seen_while_writing.append((path, final.exists()))
        return write_for_real(path, data)

    monkeypatch.setattr(Path, "write_bytes", write_and_look)
    assert cubin.path() == final and final.read_bytes() == cubin.image
    assert [(path.suffix, exists) for path, exists in seen_while_writing] == [(".tmp", False)]
    assert cubin.path() == final and len(seen_while_writing) == 1  # written once
    assert sorted(p.name for p in folder.glob("*.cubin*")) == [final.name]


def test_the_key_changes_with_everything_that_decides_the_cubin(cache, monkeypatch):
    """Source text, architecture, instances, NVRTC's version, its options and the CUDA headers."""
    _, source = cache
    keys = {
        build.nvrtc_key(source, "sm_80", TINY_INSTANCES),
        build.nvrtc_key(source, "sm_90", TINY_INSTANCES),
        build.nvrtc_key(source, "sm_80", ("tiny<float>",)),
    }
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
    source.write_text(
        "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"
        "template <typename T, bool CAUSAL> __global__ void flash_attention(T* out) { out[0] = T(); }\n"
    )
    calls = counting(monkeypatch, "run_nvcc")
    first = compile_nvcc(source, "sm_80")
    assert compile_nvcc(source, "sm_80") == first and len(calls) == 1
    monkeypatch.setattr(build, "nvcc_version", lambda: "another nvcc")
    assert compile_nvcc(source, "sm_80").image == first.image and len(calls) == 2


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.kernel.decode is not None], ids=lambda c: c.name)
def test_the_decode_kernel_takes_the_launch_the_runtime_makes(chapter):
    """decode_attention is compiled for blocks of DECODE_THREADS and takes what a decoding launch passes: q, k and v
    as pointers, o, o_partial, lse and seq_lens_k, the four lengths and head counts, the scale and the split count."""
    cubin = compile_nvrtc(chapter.source, "sm_90a", chapter.kernel.instances)
    attributes = kernel_attributes(cubin)
    for instance in DECODE_INSTANCES.values():
        attribute = attributes[cubin.lowered_names[instance]]
        assert attribute["max threads"] == [chapter.kernel.decode["DECODE_THREADS"], 1, 1], instance
        assert attribute["parameters"] == [8, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4], instance
