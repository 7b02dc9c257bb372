"""Running kernels once, and profiling them under Nsight Compute, on a real GPU (skipped without one, or ncu)."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch.nn.attention import SDPBackend

from kernels.launch import gpu_arch
from reference import attention_flops, sdpa_available
from tests.helpers import has_gpu, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
MMA_FLOPS = 2 * 16 * 8 * 16  # one mma.sync.m16n8k16, as one warp executes it: one HMMA.16816
requires_ncu = pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu) on PATH")
pytestmark = requires_gpu


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def cudnn_runs_here() -> bool:
    import torch

    q = torch.zeros(1, 16, 1, 128, dtype=torch.bfloat16, device="cuda")
    return sdpa_available(SDPBackend.CUDNN_ATTENTION, q, causal=False)


def test_run_once_runs_a_chapter_and_torchs_kernels():
    targets = ["1", "fa2", *(["cudnn"] if cudnn_runs_here() else [])]
    shape = ("--batch", "1", "--seq-len", "77", "--heads", "2", "--causal")
    result = run("-m", "kernels.tools.run_once", *targets, *shape)
    assert result.returncode == 0, result.stderr
    assert "ran k01_naive once on (1, 77, 2, 128) bf16, causal" in result.stdout
    assert "ran torch FA2 once" in result.stdout


def test_sanitize_runs_every_chapter_at_its_ragged_shape():
    result = run("scripts/sanitize.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "ran k01_naive once on (2, 333, 2, 128) bf16, causal" in lines
    assert "ran k01_naive once on (2, 333, 2, 128) bf16" in lines


def profiled(tmp_path: Path, *targets: str, batch: int, seq_len: int, heads: int) -> dict:
    """`runner.py profile` of the targets, its JSON record by target name."""
    saved = tmp_path / "profile.json"
    shape = ["--batch", str(batch), "--seq-len", str(seq_len), "--heads", str(heads)]
    result = run("runner.py", "profile", *targets, *shape, "--json", str(saved))
    assert result.returncode == 0, result.stderr
    return {profile["target"]: profile for profile in json.loads(saved.read_text())["profiles"]}


def executed(profile: dict, prefix: str) -> float:
    return sum(n for opcode, n in profile["executed"].items() if opcode.startswith(prefix))


@requires_ncu
def test_profile_counts_exactly_the_tensor_core_instructions_the_math_needs(tmp_path):
    """Full attention at a tile-aligned shape: chapter 8 executes one HMMA.16816 per 4096 FLOPs, none wasted."""
    batch, seq_len, heads = 4, 512, 16
    profiles = profiled(tmp_path, "8", "fa2", batch=batch, seq_len=seq_len, heads=heads)
    ours, fa2 = profiles["k08_kv128"], profiles["torch FA2"]
    assert executed(ours, "HMMA.16816") == attention_flops(batch, seq_len, heads, 128) / MMA_FLOPS
    assert executed(fa2, "HMMA") > 0 and "flash_fwd" in fa2["kernel"]
    for profile in (ours, fa2):
        readings = profile["readings"]
        assert readings["gpu__time_duration.sum"]["value"] > 0
        assert readings["lts__t_bytes.sum"]["value"] >= 4 * batch * seq_len * heads * 128 * 2  # Q, K, V and O once
        total = sum(profile["executed"].values())
        assert math.isclose(total, readings["smsp__inst_executed.sum"]["value"], rel_tol=0.05)


@requires_ncu
@pytest.mark.skipif(not has_gpu() or gpu_arch(0) != "sm_90", reason="wgmma and cuDNN's Hopper kernel: sm_90 only")
def test_profile_shows_wgmma_in_chapter_10_and_cudnn(tmp_path):
    profiles = profiled(tmp_path, "10", "cudnn", batch=4, seq_len=1024, heads=16)
    assert executed(profiles["k10_wgmma_pv"], "HGMMA") > 0 and executed(profiles["k10_wgmma_pv"], "HMMA") == 0
    assert executed(profiles["torch cuDNN"], "HGMMA") > 0
    assert "sdpa" in profiles["torch cuDNN"]["kernel"]
