"""The kernels as built, without a GPU: they compile, fit in registers, and their SASS shows each idea."""

import re
import shutil
from collections import Counter

import pytest

from kernels import HEAD_DIM
from kernels.build import ALL_INSTANCES, compile_nvcc, compile_nvrtc, ptxas_resources
from kernels.launch import kernel_constants
from kernels.tools.inspection import sass_counts
from kernels.tools.sass import cuobjdump, disassemble, opcodes, resource_usage
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
    """A kernel's ``constexpr int`` as the runtime reads it (``kernel_constants``); None if the kernel has none."""
    return kernel_constants(chapter.source).get(name)


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
        constants["BLOCK_Q"], constants["N_THREADS"], constants["SMEM_BYTES"])
    probe = tmp_path / chapter.name / "flash_attention.cu"
    probe.parent.mkdir()
    asserts = "".join(f'static_assert({name} == {value}, "{name}");\n' for name, value in constants.items())
    probe.write_text(chapter.source.read_text() + "\n" + asserts)
    compile_nvrtc(probe, chapter.kernel.build_arch("sm_90"), instances=())


def test_the_runtime_reads_the_kernels_constants_as_the_compiler_does(chapter, tmp_path):
    assert_constants_read_as_compiled(chapter, tmp_path)


# "Index : 0x0  Ordinal : 0x9  Offset : 0x1cc  Size : 0x4": the tenth parameter is 4 bytes
PARAMETER = re.compile(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*0x[0-9a-f]+\s+Size\s*:\s*(0x[0-9a-f]+)")


def kernel_attributes(cubin) -> dict[str, dict[str, list[int]]]:
    """Per kernel instance (mangled name), from the cubin's .nv.info: the block size its __launch_bounds__ fixes
    ("max threads", x y z) and its parameters' sizes in bytes, in order ("parameters")."""
    attributes = {}
    for section in re.split(r"^(?=\.\S)", cuobjdump(cubin, "-elf"), flags=re.MULTILINE):
        if name := re.match(r"\.nv\.info\.(\S+)\n", section):
            threads = re.search(r"EIATTR_MAX_THREADS\s+Format:\s+\w+\s+Value:\s+([^\n]+)", section).group(1)
            parameters = PARAMETER.findall(section)
            attributes[name.group(1)] = {
                "max threads": [int(n, 16) for n in threads.split()],
                "parameters": [int(size, 16) for _, size in sorted(parameters, key=lambda p: int(p[0], 16))],
            }
    return attributes


def launch_parameter_sizes(kernel) -> list[int]:
    """What ``AttentionKernel.__call__`` passes: q, k and v (pointers, or 128-byte tensor maps), out, the four
    lengths and head counts, the softmax scale, and for a persistent kernel the batch size."""
    inputs = [128 if kernel.tensor_map_box else 8] * 3
    return [*inputs, 8, 4, 4, 4, 4, 4, *([4] if kernel.persistent else [])]


def assert_binary_takes_the_launch(chapter) -> None:
    """Every instance is compiled for blocks of exactly the threads the launch asks for (__launch_bounds__ of
    N_THREADS), and takes the arguments the launch passes, tensor maps and the batch size included."""
    for arch in chapter.kernel.build_archs():
        attributes = kernel_attributes(compile_nvrtc(chapter.source, arch))
        assert len(attributes) == len(ALL_INSTANCES)
        for name, attribute in attributes.items():
            assert attribute["max threads"] == [chapter.kernel.n_threads, 1, 1], f"{name} at {arch}"
            assert attribute["parameters"] == launch_parameter_sizes(chapter.kernel), f"{name} at {arch}"


def test_the_binary_takes_the_launch_the_runtime_makes(chapter):
    assert_binary_takes_the_launch(chapter)


# The most dynamic shared memory a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin): A100, H100/H200.
MAX_DYNAMIC_SMEM = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}


def test_shared_memory_fits_the_gpus_it_is_built_for(chapter):
    for arch in chapter.kernel.build_archs():
        assert chapter.kernel.smem_bytes <= MAX_DYNAMIC_SMEM[arch.removesuffix("a")], arch


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
