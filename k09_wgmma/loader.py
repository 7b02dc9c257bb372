"""Chapter 9: S = Q·Kᵀ on Hopper's warpgroup matrix multiply (wgmma), both operands read from shared memory."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "S = Q·Kᵀ on wgmma: Hopper's tensor-core instruction, operands straight from shared memory"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES, SMEM_ALIGN = 128, 128, 128, 8, 2, 1024
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    # Q, STAGES tiles each of K and V, and the slack the kernel may skip to start them 1 KB aligned
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2 + SMEM_ALIGN,
    arch="sm_90a",  # wgmma exists on Hopper alone
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ/√128) v on Hopper: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
