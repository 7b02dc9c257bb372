"""The ceilings on the GPU: each kernel computes the product it is timed for, and every benchmark gives a rate."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.launch import gpu_arch
from kernels.tools import peak
from kernels.tools.peak import DRAM_COPY, L2_READ, MATMUL, MMA_SYNC, WGMMA, WGMMA_RS, WGMMA_SS
from tests.helpers import has_gpu, requires_gpu

pytestmark = requires_gpu
ROOT = Path(__file__).resolve().parent.parent
requires_hopper = pytest.mark.skipif(not has_gpu() or gpu_arch(0) != "sm_90", reason="wgmma needs a Hopper GPU (sm_90)")


def random_bf16(*shape, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=generator).to(torch.bfloat16)


def assert_every_tile_is(out, expected):
    """Every (block or warp) tile of ``out`` equals ``expected`` up to fp32 accumulation."""
    assert torch.isfinite(out).all()
    tolerance = 1e-4 * expected.abs().max().item()
    torch.testing.assert_close(out.double(), expected.expand_as(out), rtol=1e-4, atol=tolerance)


def test_mma_sync_computes_its_product():
    """Each warp's sum over its chains is CHAINS * UNROLL * n_steps times A B: every mma counted ran."""
    a, b_t = random_bf16(16, 16, seed=1), random_bf16(8, 16, seed=2)
    n_steps = 3
    out = peak.mma_sync_peak(a, b_t, n_steps)
    assert out.shape[0] == torch.cuda.get_device_properties(0).multi_processor_count * peak.MMA_N_WARPS
    expected = peak.MMA_CHAINS * peak.MMA_UNROLL * n_steps * (a.double() @ b_t.double().T)
    assert_every_tile_is(out, expected)


@requires_hopper
def test_wgmma_from_shared_memory_computes_a_b_transposed():
    """Both operands through descriptors, B K-major: chapter 9's S = Q K^T, in every block."""
    a, b = random_bf16(128, 128, seed=3), random_bf16(128, 128, seed=4)
    out = peak.wgmma_peak("wgmma_smem_smem_peak", a, b, n_batches=3)
    assert_every_tile_is(out, a.double() @ b.double().T)


@requires_hopper
def test_wgmma_from_registers_computes_n_times_p_v():
    """A from registers, B transposed from shared memory: chapter 9's O += P V, once per batch."""
    p, v = random_bf16(128, 128, seed=5), random_bf16(128, 128, seed=6)
    n_batches = 3
    out = peak.wgmma_peak("wgmma_regs_smem_peak", p, v, n_batches)
    assert_every_tile_is(out, n_batches * (p.double() @ v.double()))


def test_l2_read_sums_every_word_it_reads():
    """Each thread's sum is that of its LOADS vectors, n_passes times over (mod 2^32): every load was made."""
    block_bytes = peak.L2_THREADS * peak.L2_LOADS * peak.VECTOR_BYTES
    generator = torch.Generator(device="cuda").manual_seed(7)
    buffer = torch.randint(0, 256, (64 * block_bytes,), dtype=torch.uint8, device="cuda", generator=generator)
    n_passes = 3
    out = peak.l2_read_peak(buffer, n_passes)
    words = buffer.view(torch.int32).long() & 0xFFFFFFFF
    per_thread = words.view(peak.L2_LOADS, out.numel(), 4).sum(dim=(0, 2))
    assert torch.equal(out.long() & 0xFFFFFFFF, (n_passes * per_thread) & 0xFFFFFFFF)


def test_every_benchmark_gives_a_finite_positive_rate():
    benchmarks, notes = peak.all_benchmarks()
    hopper = gpu_arch(0) == "sm_90"
    names = {MMA_SYNC, MATMUL, DRAM_COPY, L2_READ} | ({WGMMA_SS, WGMMA_RS} if hopper else set())
    assert {benchmark.name for benchmark in benchmarks} == names
    assert bool(notes) != hopper
    samples = peak.measure(benchmarks, rounds=2, warmup=1)
    for name, rates in samples.items():
        assert len(rates) == 2 and all(math.isfinite(rate) and rate > 0 for rate in rates), f"{name}: {rates}"
    for benchmark in benchmarks:  # the tensor-core results at full size too: nothing overflows on the way
        if benchmark.name in (MMA_SYNC, WGMMA_SS, WGMMA_RS, MATMUL):
            assert torch.isfinite(benchmark.run()).all(), benchmark.name


def test_command_writes_the_json(tmp_path):
    path = tmp_path / "peak.json"
    command = [sys.executable, str(ROOT / "runner.py"), "peak", "--rounds", "2", "--json", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "fastest possible time at the headline shape" in result.stdout
    data = json.loads(path.read_text())
    props = torch.cuda.get_device_properties(0)
    assert data["environment"]["device"] == f"{props.name} ({props.multi_processor_count} SMs)"
    assert data["environment"]["command"] == f"python runner.py peak --rounds 2 --json {path}"
    assert (WGMMA in data["ceilings"]) == (gpu_arch(0) == "sm_90")
    run = peak.load_peak(path)
    for family in data["ceilings"]:
        assert run.fastest_ms(family) > 0
