"""Ablation of chapter 5: kernel 5's two stages with kernel 4's block of 64 query rows and 4 warps."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "two stages, 64 query rows and 4 warps"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES = 64, 64, 128, 4, 2
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2,  # Q, and STAGES tiles each of K and V
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
