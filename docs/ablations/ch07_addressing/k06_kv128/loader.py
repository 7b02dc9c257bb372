"""Ablation of chapter 7: kernel 6's addressing with kernel 8's 128-key tiles."""

from pathlib import Path

import torch

from kernels import AttentionKernel

TITLE = "kernel 6's full-swizzle addressing, 128-key tiles"

BLOCK_Q, BLOCK_KV, HEAD_DIM, N_WARPS, STAGES = 128, 128, 128, 8, 2
KERNEL = AttentionKernel(
    Path(__file__).with_name("flash_attention.cu"),
    block_q=BLOCK_Q,
    n_threads=N_WARPS * 32,
    smem_bytes=(BLOCK_Q + 2 * STAGES * BLOCK_KV) * HEAD_DIM * 2,  # Q, and STAGES tiles each of K and V
)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False, out=None) -> torch.Tensor:
    """softmax(q kᵀ / √128) v: q (batch, seq_len_q, n_heads, 128), k, v (batch, seq_len_k, n_kv_heads, 128)."""
    return KERNEL(q, k, v, causal=causal, out=out)
