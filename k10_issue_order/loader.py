"""Chapter 10: the tensor cores start first, the copies go in their shadow."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "issue order: S starts on the tensor cores before the next tile's copies are issued"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES = 128, 128, 128, 8, 2
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2,  # Q, and STAGES tiles each of K and V
    arch="sm_90a",  # wgmma exists on Hopper alone
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v for (batch, seq_len, n_heads, 128) bf16/fp16 tensors on a Hopper GPU."""
    return KERNEL(q, k, v, causal=causal, out=out)
