"""Chapter 10: the softmax of one tile overlaps the tensor cores' work on the next."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "overlap: the softmax of tile j - 1 runs while the tensor cores multiply tile j"

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
