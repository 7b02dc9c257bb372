"""The read rates on a Hopper GPU: every reader receives every word of K and V exactly once, whatever the grid, and
every one gives a rate."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kernels.launch import gpu_arch
from kernels.tools import read_rate
from kernels.tools.cli import ToolError
from kernels.tools.read_rate import READERS
from kernels.tools.sources import source_hashes
from tests.helpers import has_gpu, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    requires_gpu,
    pytest.mark.skipif(not has_gpu() or gpu_arch(0) != "sm_90", reason="the readers need a Hopper GPU (sm_90)"),
]
# (batch, kv_len, kv_heads): 32 tiles, fewer than the SMs and not a multiple of 5; 27 tiles, 7 items of 4, the last
# one short.
SHAPES = [(2, 1024, 2), (1, 1152, 3)]


def random_kv(batch, kv_len, kv_heads, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(
        torch.randn(batch, kv_len, kv_heads, 128, device="cuda", generator=generator).to(torch.bfloat16)
        for _ in range(2)
    )


def xor_of_words(*tensors):
    """The XOR of every 32-bit word of the tensors, computed on the CPU by NumPy."""
    words = [tensor.cpu().view(torch.int32).numpy().ravel() for tensor in tensors]
    return int(np.bitwise_xor.reduce(np.concatenate(words)).astype(np.uint32))


@pytest.mark.parametrize("grid", [None, 5], ids=["one block per SM", "5 blocks"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, shape)) for shape in SHAPES])
@pytest.mark.parametrize("reader", READERS, ids=[reader.entry(True) for reader in READERS])
def test_every_word_is_received_once(reader, shape, grid):
    """The XOR of the words a reader received equals that of K and V: a tile left out or read twice would change it
    (XOR is order-independent, so the shared-memory swizzle does not)."""
    k, v = random_kv(*shape, seed=sum(shape))
    expected = xor_of_words(k, v)
    assert read_rate.read_xor(reader, k, v, grid=grid) == expected
    assert read_rate.xor_of_words(k) ^ read_rate.xor_of_words(v) == expected


def test_check_readers_passes_and_names_a_reader_that_errs(monkeypatch):
    k, v = random_kv(*SHAPES[0], seed=1)
    read_rate.check_readers(k, v)
    expected = xor_of_words(k, v)
    monkeypatch.setattr(read_rate, "read_xor", lambda reader, k, v: expected ^ (reader is read_rate.CP_ASYNC_ITEMS))
    with pytest.raises(ToolError, match=f"is {expected:#010x}, but {read_rate.CP_ASYNC_ITEMS.name} read"):
        read_rate.check_readers(k, v)


def test_a_quick_timed_run_gives_every_reader_positive_rates():
    k, v = random_kv(4, 4096, 8, seed=3)
    samples = read_rate.measure(k, v, rounds=2, repeats=2, warmup=1)
    assert list(samples) == [reader.name for reader in READERS]
    for name, rates in samples.items():
        assert len(rates) == 2 and all(math.isfinite(rate) and rate > 0 for rate in rates), (name, rates)


def test_the_command_checks_times_and_saves_every_shape(tmp_path):
    path = tmp_path / "read_rate.json"
    command = [sys.executable, str(ROOT / "runner.py"), "read_rate", "--rounds", "1", "--json", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(path.read_text())
    assert data["environment"]["sources"] == source_hashes([ROOT / "peak" / "read_rate.cu"])
    assert [entry["shape"] for entry in data["shapes"]] == list(read_rate.SHAPES)
    for entry in data["shapes"]:
        assert list(entry["rates"]) == [reader.name for reader in READERS]
        assert all(rate["gbps"] > 0 and len(rate["samples"]) == 1 for rate in entry["rates"].values())
    for reader in READERS:
        assert reader.name in result.stdout
