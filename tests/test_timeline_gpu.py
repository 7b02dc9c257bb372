"""The timeline on the GPU: the stamped build computes what the kernel does, and its stamps come in order."""

import numpy as np
import pytest
import torch

from kernels.launch import gpu_arch
from kernels.tools.timeline import EVENTS, FIRST_TILE, TRACED_TILES, complete, stamped_kernel, summarize
from tests.helpers import CHAPTERS, has_gpu, random_qkv, requires_gpu

pytestmark = [
    requires_gpu,
    pytest.mark.skipif(not has_gpu() or gpu_arch(0) != "sm_90", reason="the stamped kernels need a Hopper GPU"),
]


@pytest.mark.parametrize("causal", [False, True])
def test_stamped_kernel_21_matches_kernel_21_and_stamps_in_order(causal):
    kernel21 = next(c for c in CHAPTERS if c.number == 21)
    # Enough key tiles per block to pass the window's start: 2,048 query tiles of 64 key tiles over 132 blocks.
    q, k, v = random_qkv(4, 8192, 8, torch.bfloat16)
    stamped = stamped_kernel(kernel21)
    expected = kernel21.attention(q, k, v, causal=causal)
    stamped(q, k, v, causal=causal)  # loads the module whose stamps clear() zeroes
    stamped.clear(q.device.index)
    out = stamped(q, k, v, causal=causal)
    torch.cuda.synchronize()
    assert torch.equal(out, expected)  # the same arithmetic in another order of issue: the same bits
    stamps = stamped.stamps(q.device.index)
    ok = complete(stamps)
    assert ok.sum() > TRACED_TILES  # most of the window's tiles, in each traced block's two warpgroups
    per_warp = stamps[np.repeat(ok, 4, axis=1)]  # (tiles, events) of the warps of complete warpgroup tiles
    assert (np.diff(per_warp, axis=1) >= 0).all(), "a warp's stamps of one tile out of order"
    summary = summarize(stamps)
    assert 0 < summary.period < 100_000
    assert sum(summary.in_flight.values()) == pytest.approx(1.0)
    assert len(summary.warp_phases) == stamps.shape[1]  # one set of phases per consumer warp, none negative
    assert all(value >= 0 for phases in summary.warp_phases for value in phases.values())
    assert summary.seams > 0 and np.isfinite(summary.seam)  # the window crosses query tiles of 64 key tiles
    assert FIRST_TILE > 0 and len(EVENTS) == stamps.shape[-1]
